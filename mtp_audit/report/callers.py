"""One short phrase per speculator that can hold a drafter, for the human formats."""

from __future__ import annotations

from pathlib import PurePosixPath

from ..model import CallerRecord


def describe_caller(caller: CallerRecord) -> str:
    """``called by MTPSpeculator (mtp/speculator.py:580) as get_top_tokens(hidden_states)``."""
    where = _short(caller.file)
    if caller.get_top_tokens_args is None or caller.line is None:
        return f"not reached by {caller.speculator} ({where}): its drafting path never calls get_top_tokens"
    arguments = ", ".join(caller.get_top_tokens_args)
    text = f"called by {caller.speculator} ({where}:{caller.line}) as get_top_tokens({arguments})"
    if caller.compute_logits_args is not None and caller.compute_logits_args != caller.get_top_tokens_args:
        text += f", compute_logits({', '.join(caller.compute_logits_args)})"
    return text


def _short(file: str) -> str:
    """The file from its ``spec_decode`` folder on (``mtp/speculator.py``: vLLM 0.34 has a
    ``speculator.py`` in each speculator's folder), else its name."""
    parts = PurePosixPath(file).parts
    if "spec_decode" in parts[:-1]:
        last = len(parts) - 1 - parts[::-1].index("spec_decode")
        return "/".join(parts[last + 1 :])
    return parts[-1] if parts else file
