"""What the shape rules answer: plain data, free of libcst, so answers kept in the
cache (classify.memo) load without importing the parser."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Param:
    name: str
    default: str | None
    kind: str  # "posonly", "pos", "star", "kwonly", "starstar"


@dataclass
class LogitsShape:
    """What ``compute_logits`` does, as far as the mirror rule cares."""

    kind: str  # "head", "delegate", "super", "stub" or "manual"
    rule: str
    reason: str
    line: int | None
    params: list[Param]
    head: str | None = None  # code of the lm_head argument
    hidden: str | None = None  # code of the hidden-states argument
    delegate_attr: str | None = None
    post: str | None = None  # "d2t_scatter", "mask", "softcap", "other" after the head
    pre_transform: bool = False  # hidden states change before reaching the head
    extra_args: bool = False  # the head call passes more than (head, hidden states), e.g. a bias


@dataclass
class TopTokensShape:
    kind: str  # "local_argmax_mixin", "super", "delegate" or "other"
    params: list[Param]
    delegate_attr: str | None = None
