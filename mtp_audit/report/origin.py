"""Where a record's registration comes from, for the human formats (JSON has ``source``/``replaces``)."""

from __future__ import annotations

from ..model import DrafterRecord


def origin(record: DrafterRecord) -> str:
    """``""`` for vLLM's own entries; ``" (from vllm-ascend 0.9.1, replaces DeepSeekMTP)"`` for a plugin's."""
    if record.source == "vllm":
        return ""
    replaces = f", replaces {record.replaces[1]}" if record.replaces else ""
    return f" (from {record.source}{replaces})"
