"""``scan --format markdown``: a table ready to paste into a pull request."""

from __future__ import annotations

from ..model import ScanResult
from .callers import describe_caller
from .origin import origin
from .table import STATUS_ORDER, location


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: ScanResult) -> str:
    version = result.tree.vllm_version or "unknown version"
    lines = [
        f"### get_top_tokens audit of vLLM {version}",
        "",
        "| status | consistency | arch | class | platforms | where | reason |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for status in STATUS_ORDER:
        for r in (r for r in result.records if r.status == status):
            lines.append(
                "| "
                + " | ".join(
                    _cell(x)
                    for x in (
                        r.status.value,
                        r.consistency.value if r.consistency else "",
                        r.arch or "(unregistered)",
                        f"`{r.cls}`{origin(r)}",
                        ", ".join(r.platforms),
                        f"`{location(r)}`",
                        "; ".join([r.reason, *(describe_caller(c) for c in r.callers)]),
                    )
                )
                + " |"
            )
    for u in result.unresolved:
        lines.append(
            f"| unresolved | | {u.arch or ''} | `{u.cls}` | {', '.join(u.platforms)} | `{u.module}` | "
            f"{_cell(u.reason)} |"
        )
    return "\n".join(lines) + "\n"
