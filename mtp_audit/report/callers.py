"""One short phrase per speculator that can hold a drafter, for the human formats."""

from __future__ import annotations

from pathlib import PurePosixPath

from ..model import CallerRecord


def describe_caller(caller: CallerRecord) -> str:
    """``called by MTPSpeculator (speculator.py:580) as get_top_tokens(hidden_states)``."""
    where = PurePosixPath(caller.file).name
    if caller.get_top_tokens_args is None or caller.line is None:
        return f"not reached by {caller.speculator} ({where}): its drafting path never calls get_top_tokens"
    arguments = ", ".join(caller.get_top_tokens_args)
    text = f"called by {caller.speculator} ({where}:{caller.line}) as get_top_tokens({arguments})"
    if caller.compute_logits_args is not None and caller.compute_logits_args != caller.get_top_tokens_args:
        text += f", compute_logits({', '.join(caller.compute_logits_args)})"
    return text
