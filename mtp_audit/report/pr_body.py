"""``fix --pr-body FILE``: a pull-request description in vLLM's Purpose / Test Plan / Test Result template."""

from __future__ import annotations

import json
from pathlib import Path
from string import Template

from ..errors import UsageError
from ..fix import FixResult
from ..outputs import write_output
from ..synthesize.mirror import template


def _verify_results(report: Path | None) -> str | None:
    """The Test Result table from a ``verify --json`` file, if one is given."""
    if report is None:
        return None
    try:
        data = json.loads(report.read_text(encoding="utf-8"))
        version = data.get("vllm_version") or "(unknown version)"
        lines = [(f"`mtp-audit verify` on vLLM {version}: get_top_tokens "
                  "against compute_logits(...).argmax(-1); float32 and bfloat16; batch 1, 7, 65; every "
                  "spec_step_idx; ties, vocabulary padding, large magnitudes."), "",
                 "| architecture | class | platforms | TP | result | rows | detail |",
                 "| --- | --- | --- | --- | --- | --- | --- |"]
        for row in data["results"]:
            lines.append(f"| `{row['arch']}` | `{row['class']}` | {', '.join(row['platforms'])} | "
                         f"{row['tp'] or '-'} | {row['verdict']} | {row['rows']} | "
                         f"{str(row['detail']).replace('|', '/')} |")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        detail = error.strerror if isinstance(error, OSError) else f"{type(error).__name__}: {error}"
        raise UsageError(f"--verify-report {report}: not a `mtp-audit verify --json` file ({detail})") from None
    return "\n".join(lines)


def render_pr_body(result: FixResult, command: str, verify_report: Path | None = None) -> str:
    fixed = [o for o in result.plan.outcomes if o.action == "fix"]
    refused = [o for o in result.plan.outcomes if o.action == "refused"]
    drafters = "\n".join(
        f"| `{o.record.arch or '(unregistered)'}` | `{o.record.cls}` | {', '.join(o.record.platforms)} | {o.reason} |"
        for o in fixed
    )
    models = sorted({o.record.arch or o.record.cls for o in fixed})
    refused_text = ("\nNot changed (a mirror would not be safe; a reviewer decides):\n\n" + "\n".join(
        f"- `{o.record.arch}` ({o.record.cls}): {o.reason}" for o in refused) + "\n") if refused else ""
    commands = [command, "mtp-audit scan --fail-on never --format markdown"]
    commands += [f"mtp-audit verify --model {name} --tp 1,2" for name in models]
    results = _verify_results(verify_report) or ("`mtp-audit scan` after the change reports every drafter above `supported`, consistency "
               "`mirror`. Paste the `mtp-audit verify` tables here (get_top_tokens against "
               "compute_logits(...).argmax(-1), float32 and bfloat16, TP 1 and 2, ties and vocabulary padding).")
    return Template(template("pr_body.md.tmpl")).substitute(
        count=len(fixed), drafters=drafters or "| - | - | - | - |",
        files=", ".join(f"`{r.path}`" for r in result.rewrites) or "none", refused=refused_text,
        commands="\n".join(commands), results=results,
    )


def write_pr_body(path: Path, text: str) -> None:
    write_output(path, text, "--pr-body")
