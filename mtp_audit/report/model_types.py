"""``scan --by-model-type``: which drafters each Hugging Face ``model_type`` selects, with their status."""

from __future__ import annotations

import json

from ..model import ScanResult


def model_type_rows(model_types: dict[str, list[str]], result: ScanResult) -> list[tuple[str, str, list[str]]]:
    """(model_type, arch, sorted "status[/consistency]" labels; ["unresolved"] for a registered architecture
    that resolves to no class on some platform, ["unregistered"] when the registry does not have it)."""
    labels: dict[str, set[str]] = {}
    for record in result.records:
        if record.arch:
            labels.setdefault(record.arch, set()).add(
                record.status.value + (f"/{record.consistency.value}" if record.consistency else "")
            )
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
