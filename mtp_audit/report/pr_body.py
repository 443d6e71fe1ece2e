"""``fix --pr-body FILE``: a pull-request description in vLLM's Purpose / Test Plan / Test Result template."""

from __future__ import annotations

import json
from pathlib import Path
from string import Template

from ..apply.inheritors import Inheritor
from ..apply.placement import Moved
from ..apply.plan import Action
from ..apply.result import FixResult
from ..errors import UsageError
from ..outputs import write_output
from ..synthesize.factor import HELPER
from ..templating import template
from ..verify.constants import NUM_STEPS, STEPS_TRIED


def _verify_results(report: Path | None, classes: set[str] | None = None) -> str | None:
    """The Test Result table from a ``verify --json`` file, if one is given (rows of ``classes`` only,
    when given)."""
    if report is None:
        return None
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        rows = data["results"]
        version = data.get("vllm_version") or "(unknown version)"
        lines = [
            (
                f"`mtp-audit verify` on vLLM {version}: get_top_tokens "
                "against compute_logits(...).argmax(-1); float32 and bfloat16; batch 1, 7, 65; "
                f"spec_step_idx 0 to {STEPS_TRIED - 1} over {NUM_STEPS} MTP layers (steps past the last "
                "layer as the drafter wraps them); ties, vocabulary padding, large magnitudes."
            ),
            "",
            "| architecture | class | platforms | TP | result | rows | detail |",
            "| --- | --- | --- | --- | --- | --- | --- |",
        ]
        for row in rows:
            if classes is not None and row["class"] not in classes:
                continue
            lines.append(
                f"| `{row['arch']}` | `{row['class']}` | {', '.join(row['platforms'])} | "
                f"{row['tp'] or '-'} | {row['verdict']} | {row['rows']} | "
                f"{str(row['detail']).replace('|', '/')} |"
            )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        detail = error.strerror if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        raise UsageError(f"--verify-report {report}: not a `mtp-audit verify --json` file ({detail})") from None
    return "\n".join(lines)


def reviewer_notes(inheritors: list[Inheritor], notes: list[Moved], factored: list[str]) -> str:
    """Every class that inherits a written method, drafters and non-drafters apart; placements moved
    off a base that non-drafters inherit; the classes whose pre-head block went into a helper."""
    lines = [""] + [f"Placement: {note}." for note in notes] if notes else []
    if factored:
        lines += [
            "",
            (
                f"In {', '.join(factored)} the hidden-state transform before the head moves "
                f"into a private `{HELPER}` helper that `compute_logits` and `get_top_tokens` both call; with "
                "the helper inlined, `compute_logits` is its old self (checked on the AST before writing)."
            ),
        ]
    if not inheritors:
        return "\n".join(lines) + "\n" if lines else ""
    lines += ["", "Classes that inherit a written `get_top_tokens` (blast radius over the whole tree):", ""]
    for i in inheritors:
        role = f"drafter `{i.drafter}`" if i.drafter else "**not a drafter**"
        lines.append(
            f"- `{i.cls.name}` ({i.file}:{i.cls.line}) from `{i.base.name}`, {role}, "
            f"on {', '.join(i.platforms)}: {i.result}"
        )
    return "\n".join(lines) + "\n"


def render_pr_body(
    result: FixResult,
    command: str,
    verify_report: Path | None = None,
    tests: list[str] | None = None,
    own_rows_only: bool = False,
) -> str:
    """``tests``: test files the change adds, run in the Test Plan; ``own_rows_only``: the verify
    report's rows of this change's drafters only (one patch of a series)."""
    fixed = [o for o in result.plan.outcomes if o.action == Action.FIX]
    refused = [o for o in result.plan.outcomes if o.action == Action.REFUSED]
    drafters = "\n".join(
        f"| `{o.record.arch or '(unregistered)'}` | `{o.record.cls}` | {', '.join(o.record.platforms)} | {o.reason} |"
        for o in fixed
    )
    models = sorted({o.record.arch or o.record.cls for o in fixed})
    refused_text = (
        (
            "\nNot changed (a mirror would not be safe; a reviewer decides):\n\n"
            + "\n".join(f"- `{o.record.arch}` ({o.record.cls}): {o.reason}" for o in refused)
            + "\n"
        )
        if refused
        else ""
    )
    commands = [command, "mtp-audit scan --fail-on never --format markdown"]
    commands += [f"mtp-audit verify --model {name} --tp 1,2" for name in models]
    commands += [f"pytest -q {test}" for test in tests or []]
    classes = {o.record.cls for o in fixed} if own_rows_only else None
    results = _verify_results(verify_report, classes) or (
        "`mtp-audit scan` after the change reports every drafter above `supported`, consistency "
        "`mirror`. Paste the `mtp-audit verify` tables here (get_top_tokens against "
        "compute_logits(...).argmax(-1), float32 and bfloat16, TP 1 and 2, ties and vocabulary padding)."
    )
    return Template(template("pr_body.md.tmpl")).substitute(
        count=len(fixed),
        drafters=drafters or "| - | - | - | - |",
        files=", ".join(f"`{r.path}`" for r in result.rewrites) or "none",
        refused=refused_text,
        blast_radius=reviewer_notes(
            result.inheritors,
            result.placement_notes,
            [f"`{c}` ({r.path})" for r in result.rewrites for c in r.factored],
        ),
        commands="\n".join(commands),
        results=results,
    )


def write_pr_body(path: Path, text: str) -> None:
    write_output(path, text, "--pr-body")
