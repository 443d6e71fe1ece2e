"""``scan --compare A B``: drafters whose status changed between two releases, per platform."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass

from ..model import ScanResult
from .concise import state_of


@dataclass(frozen=True)
class Change:
    arch: str
    platforms: tuple[str, ...]
    before: str  # "status[/consistency]" or "absent"
    after: str


def _states(result: ScanResult) -> dict[tuple[str, str], str]:
    states = {}
    for record in result.records:
        label = state_of(record)
        for platform in record.platforms:
            states[(record.arch or record.cls, platform)] = label
    return states


def compare_releases(old: ScanResult, new: ScanResult) -> list[Change]:
    before, after = _states(old), _states(new)
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for key in sorted(set(before) | set(after)):
        was, now = before.get(key, "absent"), after.get(key, "absent")
        if was != now:
            grouped.setdefault((key[0], was, now), []).append(key[1])
    return [Change(arch, tuple(platforms), was, now) for (arch, was, now), platforms in sorted(grouped.items())]


def render_compare(
    changes: list[Change], versions: tuple[str, str], fmt: str, console, width: int | None = None
) -> None:
    if fmt == "json":
        payload = {
            "from": versions[0],
            "to": versions[1],
            "changes": [
                {"arch": c.arch, "platforms": list(c.platforms), "before": c.before, "after": c.after} for c in changes
            ],
        }
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    if fmt == "markdown":
        lines = [f"| arch | platforms | {versions[0]} | {versions[1]} |", "| --- | --- | --- | --- |"]
        lines += [f"| {c.arch} | {', '.join(c.platforms)} | {c.before} | {c.after} |" for c in changes]
        sys.stdout.write("\n".join(lines) + "\n")
        return
    if fmt == "concise":
        from .concise import _wrap, platforms_text

        lines = [
            t
            for c in changes
            for t in _wrap(f"{c.arch} [{platforms_text(list(c.platforms))}]: {c.before} -> {c.after}", width)
        ]
        lines.append(f"{len(changes)} change{'s' * (len(changes) != 1)} from vLLM {versions[0]} to {versions[1]}.")
        sys.stdout.write("\n".join(lines) + "\n")
        return
    from rich.table import Table

    table = Table(
        title=f"drafter status, vLLM {versions[0]} -> {versions[1]} ({len(changes)} changes)", title_justify="left"
    )
    for column in ("arch", "platforms", versions[0], versions[1]):
        table.add_column(column, overflow="fold")
    for change in changes:
        table.add_row(change.arch, ",".join(change.platforms), change.before, change.after)
    console.print(table)
