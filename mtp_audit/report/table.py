"""The terminal report: a rich table per status."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from ..model import Consistency, DrafterRecord, ScanResult, Status
from .origin import origin

STATUS_ORDER = (Status.MISSING_FIXABLE, Status.MISSING_MANUAL, Status.SUPPORTED, Status.NOT_APPLICABLE)
STYLE = {
    Status.MISSING_FIXABLE: "yellow",
    Status.MISSING_MANUAL: "red",
    Status.SUPPORTED: "green",
    Status.NOT_APPLICABLE: "dim",
}
CONSISTENCY_STYLE = {
    Consistency.MIRROR: "green",
    Consistency.EQUIVALENT: "green",
    Consistency.UNPROVEN: "yellow",
    Consistency.DIVERGENT: "bold red",
}


def location(record: DrafterRecord) -> str:
    return f"{record.file}:{record.line}"


def render_table(result: ScanResult, console: Console) -> None:
    version = result.tree.vllm_version or "unknown version"
    console.print(f"[bold]mtp-audit[/] vLLM {version} at {result.tree.root}")
    for status in STATUS_ORDER:
        rows = [r for r in result.records if r.status == status]
        if not rows:
            continue
        table = Table(title=f"{status.value} ({len(rows)})", title_style=STYLE[status], title_justify="left",
                      show_lines=False, expand=True)
        table.add_column("arch", overflow="fold", min_width=12)
        table.add_column("class", overflow="fold", min_width=12)
        table.add_column("platforms", overflow="fold", min_width=9)
        table.add_column("file:line", overflow="fold", min_width=16)
        if status == Status.SUPPORTED:
            table.add_column("consistency")
        table.add_column("reason", overflow="fold", ratio=2, min_width=30)
        for r in rows:
            cells = [r.arch or "(unregistered)", r.cls + origin(r), ",".join(r.platforms), location(r)]
            if status == Status.SUPPORTED:
                c = r.consistency
                cells.append(f"[{CONSISTENCY_STYLE[c]}]{c.value}[/]" if c else "")
            cells.append(r.reason)
            table.add_row(*cells)
        console.print(table)
    for u in result.unresolved:
        console.print(f"[red]unresolved[/] {u.arch} -> {u.module}.{u.cls} on {','.join(u.platforms)}: {u.reason}")
    counts = Counter(r.status.value for r in result.records)
    summary = ", ".join(f"{counts[s.value]} {s.value}" for s in STATUS_ORDER if counts[s.value])
    console.print(f"{len(result.records)} records: {summary}")
