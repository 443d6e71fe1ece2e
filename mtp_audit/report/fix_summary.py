"""The table printed at the end of ``fix``: fixed, already supported, refused (with reasons)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..fix import FixResult

ACTION_STYLE = {"fix": "green", "supported": "dim", "refused": "red"}


def render_fix_summary(result: FixResult, console: Console, written: bool) -> None:
    fixed_label = "fixed" if written else "would fix"
    table = Table(title="mtp-audit fix", title_justify="left", expand=True)
    table.add_column("outcome")
    table.add_column("arch", overflow="fold")
    table.add_column("class", overflow="fold")
    table.add_column("platforms", overflow="fold")
    table.add_column("detail", overflow="fold", ratio=2)
    for outcome in result.plan.outcomes:
        label = {"fix": fixed_label, "supported": "already supported", "refused": "refused"}[outcome.action]
        r = outcome.record
        table.add_row(f"[{ACTION_STYLE[outcome.action]}]{label}[/]", r.arch or "(unregistered)", r.cls,
                      ",".join(r.platforms), outcome.reason)
    console.print(table)
    for rewrite in result.rewrites:
        verb = "wrote" if written else "would write"
        extra = " and `import torch`" if rewrite.added_import else ""
        console.print(f"{verb} {rewrite.path}: get_top_tokens in {', '.join(rewrite.classes)}{extra}")
    if not result.rewrites:
        console.print("no file needs a change")
    for note in result.placement_notes:
        console.print(f"placement: {escape(str(note))}", highlight=False)
    for inheritor in result.inheritors:
        role = f"drafter {inheritor.drafter}" if inheritor.drafter else "[yellow]not a drafter[/]"
        console.print(f"blast radius: {inheritor.cls.name} ({inheritor.file}:{inheritor.cls.line}, {role}) inherits "
                      f"get_top_tokens from {inheritor.base.name} on {','.join(inheritor.platforms)}: "
                      f"{escape(inheritor.result)}", highlight=False)
