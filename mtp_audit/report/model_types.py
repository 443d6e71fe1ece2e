"""``scan --by-model-type``: which drafters each Hugging Face ``model_type`` selects, with their status."""

from __future__ import annotations

import json

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..model import ScanResult
from .concise import state_of, style_of_state

_NOT_JUDGED_STYLE = {"unresolved": "red", "unregistered": "dim"}


def model_type_rows(model_types: dict[str, list[str]], result: ScanResult) -> list[tuple[str, str, list[str]]]:
    """(model_type, arch, sorted "status[/consistency]" labels; ["unresolved"] for a registered architecture
    that resolves to no class on some platform, ["unregistered"] when the registry does not have it)."""
    labels: dict[str, set[str]] = {}
    for record in result.records:
        if record.arch:
            labels.setdefault(record.arch, set()).add(state_of(record))
    for unresolved in result.unresolved:
        if unresolved.arch:
            labels.setdefault(unresolved.arch, set()).add("unresolved")
    return [
        (model_type, arch, sorted(labels.get(arch, {"unregistered"})))
        for model_type, archs in model_types.items()
        for arch in archs
    ]


def render_model_types(rows: list[tuple[str, str, list[str]]], fmt: str) -> str:
    if fmt == "json":
        document: dict[str, list[dict]] = {}
        for model_type, arch, labels in rows:
            document.setdefault(model_type, []).append({"arch": arch, "status": labels})
        return json.dumps({"model_types": document}, indent=2) + "\n"
    if fmt == "markdown":
        lines = ["| model_type | arch | status |", "| --- | --- | --- |"]
        lines += [f"| `{model_type}` | {arch} | {', '.join(labels)} |" for model_type, arch, labels in rows]
        return "\n".join(lines) + "\n"
    grouped: dict[str, list[str]] = {}
    for model_type, arch, labels in rows:
        grouped.setdefault(model_type, []).append(f"{arch} ({', '.join(labels)})")
    return "".join(f"{model_type}: {', '.join(described)}\n" for model_type, described in grouped.items())


def render_model_type_table(rows: list[tuple[str, str, list[str]]], console: Console) -> None:
    """``--format table``: a row per (model_type, drafter architecture), the model_type named once per
    group, each status in its colour."""
    count = len({model_type for model_type, _, _ in rows})
    table = Table(title=f"drafters by model_type ({count} model_types)", title_justify="left")
    # names whole where they fit in a third of the width each; else they wrap (fold), never cut
    for position, heading in enumerate(("model_type", "arch")):
        longest = max((len(row[position]) for row in rows), default=len(heading))
        table.add_column(heading, overflow="fold", min_width=min(longest, console.width // 3 - 4))
    table.add_column("status", overflow="fold")
    previous = None
    for model_type, arch, labels in rows:
        statuses = (f"[{_NOT_JUDGED_STYLE.get(label) or style_of_state(label)}]{escape(label)}[/]" for label in labels)
        table.add_row("" if model_type == previous else escape(model_type), escape(arch), ", ".join(statuses))
        previous = model_type
    console.print(table)
