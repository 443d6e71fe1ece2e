"""The terminal report: a rich table per status."""

from __future__ import annotations

import re
from collections import Counter

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..model import Consistency, DrafterRecord, ScanResult, Status
from ..templating import counted
from .callers import describe_caller
from .origin import origin

STATUS_ORDER = (Status.MISSING_FIXABLE, Status.MISSING_MANUAL, Status.SUPPORTED, Status.NOT_APPLICABLE)
STYLE = {
    Status.MISSING_FIXABLE: "yellow",
    Status.MISSING_MANUAL: "red",
    Status.SUPPORTED: "green",
    Status.NOT_APPLICABLE: "dim",
}
MIN_REASON = 40
CONSISTENCY_STYLE = {
    Consistency.MIRROR: "green",
    Consistency.EQUIVALENT: "green",
    Consistency.UNPROVEN: "yellow",
    Consistency.DIVERGENT: "bold red",
}


def location(record: DrafterRecord) -> str:
    return f"{record.file}:{record.line}"


def split_path(path: str, width: int) -> str:
    """A path on lines of at most ``width``, broken after a ``/`` only (never inside a name)."""
    lines = [""]
    for part in re.split(r"(?<=/)", path):
        if lines[-1] and len(lines[-1]) + len(part) > width:
            lines.append("")
        lines[-1] += part
    return "\n".join(lines)


def _reason(record: DrafterRecord) -> str:
    return "\n".join([record.reason, *(describe_caller(c) for c in record.callers)])


def render_table(result: ScanResult, console: Console) -> None:
    """One table per status. Wide terminals get a column per field; narrower ones put the
    drafter's fields on lines of one column, so that the reason keeps at least a third of
    the width and paths break only after a ``/``; where that column cannot hold a file's name
    (``bailing_moe_v3_mtp.py:231`` at 60 columns), the reason goes below the fields, in the one
    column."""
    version = result.tree.vllm_version or "unknown version"
    console.print(f"[bold]mtp-audit[/] vLLM {version} at {escape(str(result.tree.root))}")
    records = result.records
    longest = {
        "arch": max((len(r.arch or "(unregistered)") for r in records), default=4),
        "class": max((len(r.cls) for r in records), default=5),
        "platforms": max((len(",".join(r.platforms)) for r in records), default=9),
        "file:line": max((len(location(r)) for r in records), default=9),
    }
    # borders and padding: 3 per column and 1; consistency: 10 characters
    wide = sum(longest.values()) + 10 + 3 * 6 + 1 + MIN_REASON <= console.width
    column = min(max(longest["arch"], longest["class"], 24), console.width // 2 - 4)
    name_lengths = [len(location(r).rpartition("/")[2]) for r in records]
    single = not wide and max(name_lengths, default=0) > column  # one column, 4 for its border and padding
    column = console.width - 4 if single else column
    for status in STATUS_ORDER:
        rows = [r for r in records if r.status == status]
        if not rows:
            continue
        table = Table(
            title=f"{status.value} ({len(rows)})",
            title_style=STYLE[status],
            title_justify="left",
            show_lines=not wide,
            expand=True,
        )
        if wide:
            for name, size in longest.items():
                table.add_column(name, no_wrap=True, min_width=size)
        elif single:
            table.add_column("drafter (class) / platforms / file:line / reason", overflow="fold", ratio=1)
        else:
            table.add_column(
                "drafter (class) / platforms / file:line", min_width=column, max_width=column, overflow="fold"
            )
        if status == Status.SUPPORTED and not single:
            table.add_column("consistency", no_wrap=True)
        if not single:
            table.add_column("reason", overflow="fold", ratio=1, min_width=MIN_REASON if wide else 20)
        for r in rows:
            name = r.arch or "(unregistered)"
            c = r.consistency
            consistency = f"[{CONSISTENCY_STYLE[c]}]{c.value}[/]" if status == Status.SUPPORTED and c else ""
            if wide:
                cells = [name, r.cls + origin(r), ",".join(r.platforms), location(r)]
            else:
                text = name + (f"\n({r.cls})" if r.cls != r.arch else "") + origin(r)
                cells = [f"{escape(text)}\n{','.join(r.platforms)}\n{escape(split_path(location(r), column))}"]
            if single:
                cells[0] += "".join(f"\n{part}" for part in (consistency, escape(_reason(r))) if part)
            else:
                cells += [consistency] if status == Status.SUPPORTED else []
                cells.append(escape(_reason(r)))
            table.add_row(*cells)
        console.print(table)
    for u in result.unresolved:
        where = ",".join(u.platforms)
        console.print("[red]unresolved[/] " + escape(f"{u.arch} -> {u.module}.{u.cls} on {where}: {u.reason}"))
    counts = Counter(r.status.value for r in result.records)
    summary = ", ".join(f"{counts[s.value]} {s.value}" for s in STATUS_ORDER if counts[s.value])
    console.print(counted(len(result.records), "record") + (f": {summary}" if summary else ""))
