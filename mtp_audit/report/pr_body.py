"""``fix --pr-body FILE``: a pull-request description in vLLM's Purpose / Test Plan / Test Result template."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from ..apply.inheritors import Inheritor
from ..apply.placement import Moved
from ..apply.plan import Action
from ..apply.result import FixResult
from ..errors import UsageError
from ..model import DrafterRecord
from ..outputs import write_output
from ..synthesize.factor import HELPER
from ..templating import counted, template
from ..verify.constants import NUM_STEPS, STEPS_TRIED


@dataclass(frozen=True)
class VerifyReport:
    """A ``verify --json`` file, read and checked: the vLLM version it verified, and one Test Result row
    per result (``drafter``: its architecture, class and module, to match the change's drafters)."""

    path: Path
    version: str | None
    rows: tuple[tuple[tuple[str | None, str, str | None], str], ...]


def read_verify_report(path: Path) -> VerifyReport:
    """Read ``--verify-report`` before anything is written; a file that is not one is a usage error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        version = data.get("vllm_version")
        if version is not None and not isinstance(version, str):
            raise TypeError(f"vllm_version is {type(version).__name__}")
        rows = tuple(((row["arch"], row["class"], row.get("module")), _table_row(row)) for row in data["results"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as error:
        detail = error.strerror if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        raise UsageError(f"--verify-report {path}: not a `mtp-audit verify --json` file ({detail})") from None
    return VerifyReport(path, version, rows)


def _table_row(row: dict) -> str:
    detail = " ".join(str(row["detail"]).split()).replace("|", "/")  # one line: a newline ends a table row
    return (
        f"| `{row['arch']}` | `{row['class']}` | {', '.join(row['platforms'])} | "
        f"{row['tp'] or '-'} | {row['verdict']} | {row['rows']} | {detail} |"
    )


def check_report_version(report: VerifyReport, tree_version: str | None) -> None:
    """A report verified on another vLLM than the tree's says nothing of this change: refused."""
    if report.version and tree_version and report.version != tree_version:
        raise UsageError(
            f"--verify-report {report.path}: verifies vLLM {report.version}, not this tree's {tree_version}; "
            "nothing written"
        )


_PASTE_HERE = (
    "`mtp-audit scan` after the change reports every drafter above `supported`, consistency "
    "`mirror`. Paste the `mtp-audit verify` tables here (get_top_tokens against "
    "compute_logits(...).argmax(-1), float32 and bfloat16, TP 1 and 2, ties and vocabulary padding)."
)


def _verify_results(report: VerifyReport | None, drafters: list[tuple[str | None, str, str]]) -> str:
    """The Test Result: the report's rows of the change's ``drafters`` (architecture, class, module), and
    those it has no row for named, with the paste-here line; without a report, that line alone."""
    if report is None:
        return _PASTE_HERE
    if not drafters:
        return f"{_PASTE_HERE}\n\nThe verify report given ({report.path.name}) is not used: this change adds no method."
    found = [(drafter, text) for drafter, text in report.rows if _same_drafter(drafter, drafters)]
    missing = sorted(
        {
            f"`{arch or cls}` ({cls})"
            for arch, cls, module in drafters
            if not any(_same(d, arch, cls, module) for d, _ in found)
        }
    )
    version = report.version or "(unknown version)"
    if not found:
        return f"{_PASTE_HERE}\n\nThe verify report given ({report.path.name}, vLLM {version}) has no results for them."
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
        *(text for _, text in found),
    ]
    if missing:
        lines += ["", f"Not in the verify report: {', '.join(missing)}. Paste their `mtp-audit verify` tables here."]
    return "\n".join(lines)


def _same_drafter(row: tuple[str | None, str, str | None], drafters: list[tuple[str | None, str, str]]) -> bool:
    return any(_same(row, *drafter) for drafter in drafters)


def _same(row: tuple[str | None, str, str | None], arch: str | None, cls: str, module: str) -> bool:
    """The row is of this drafter: same architecture and class, and module where the row names one."""
    return row[0] == arch and row[1] == cls and row[2] in (None, module)


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
        role = (
            "**not a drafter**" if i.drafter is None else f"{'delegate of ' if i.delegate else ''}drafter `{i.drafter}`"
        )
        lines.append(
            f"- `{i.cls.name}` ({i.file}:{i.cls.line}) from `{i.base.name}`, {role}, "
            f"on {', '.join(i.platforms)}: {i.result}"
        )
    return "\n".join(lines) + "\n"


def left_for_a_human(records: list[DrafterRecord]) -> str:
    """A Markdown list of the findings a sweep leaves (``missing_manual``, ``divergent``), with why."""
    return "\n".join(
        f"- `{r.arch or '(unregistered)'}` ({r.cls}, {r.file}, {', '.join(r.platforms)}): "
        f"{r.consistency.value if r.consistency else r.status.value}: {r.reason}"
        for r in records
    )


def render_pr_body(
    result: FixResult,
    command: str,
    verify_report: VerifyReport | None = None,
    tests: list[str] | None = None,
) -> str:
    """``tests``: test files the change adds, run in the Test Plan; the verify report's rows are those of
    the change's drafters."""
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
    if result.left:  # a sweep's findings that no mirror settles: named, so that the change claims no more
        refused_text += (
            "\nLeft for a human (no mechanical mirror selects the same tokens, or the method there "
            f"diverges):\n\n{left_for_a_human(result.left)}\n"
        )
    commands = [command, "mtp-audit scan --fail-on never --format markdown"]
    if not fixed:  # nothing written: no table, methods or results to claim
        return Template(template("pr_body_empty.md.tmpl")).substitute(
            refused=refused_text, commands="\n".join(commands)
        )
    commands += [f"mtp-audit verify --model {name} --tp 1,2" for name in models]
    commands += [f"pytest -q {test}" for test in tests or []]
    results = _verify_results(verify_report, [(o.record.arch, o.record.cls, o.record.module) for o in fixed])
    return Template(template("pr_body.md.tmpl")).substitute(
        drafters_added=counted(len(models), "speculative-decoding drafter"),  # a row per platform's class
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
