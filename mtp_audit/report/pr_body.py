"""``fix --pr-body FILE``: a pull-request description in vLLM's Purpose / Test Plan / Test Result template."""

from __future__ import annotations

from pathlib import Path
from string import Template

from ..fix import FixResult
from ..synthesize.mirror import template


def render_pr_body(result: FixResult, command: str) -> str:
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
    results = ("`mtp-audit scan` after the change reports every drafter above `supported`, consistency "
               "`mirror`. Paste the `mtp-audit verify` tables here (get_top_tokens against "
               "compute_logits(...).argmax(-1), float32 and bfloat16, TP 1 and 2, ties and vocabulary padding).")
    return Template(template("pr_body.md.tmpl")).substitute(
        count=len(fixed), drafters=drafters or "| - | - | - | - |",
        files=", ".join(f"`{r.path}`" for r in result.rewrites) or "none", refused=refused_text,
        commands="\n".join(commands), results=results,
    )


def write_pr_body(path: Path, result: FixResult, command: str) -> None:
    path.write_text(render_pr_body(result, command), encoding="utf-8")
