"""What the shape rules answer: plain data, free of libcst, so answers kept in the
cache (classify.memo) load without importing the parser."""

from __future__ import annotations

from dataclasses import dataclass

from ..model import StrEnum


class ParamKind(StrEnum):
    POSONLY = "posonly"
    POS = "pos"
    STAR = "star"  # *args
    KWONLY = "kwonly"
    STARSTAR = "starstar"  # **kwargs


class LogitsKind(StrEnum):
    """How ``compute_logits`` gets its logits; only HEAD, DELEGATE and SUPER can be mirrored."""

    HEAD = "head"  # self.logits_processor(...)
    DELEGATE = "delegate"  # self.<attr>.compute_logits(...)
    SUPER = "super"  # super().compute_logits(...)
    STUB = "stub"
    MANUAL = "manual"  # a shape rule objects


class PostKind(StrEnum):
    """What happens to the logits after the head call; masking wins over the others."""

    D2T_SCATTER = "d2t_scatter"
    MASK = "mask"
    VOCAB = "vocab"  # the vocabulary cut or padded (``logits[..., :n]``, ``F.pad``)
    SOFTCAP = "softcap"
    OTHER = "other"


class TopTokensKind(StrEnum):
    LOCAL_ARGMAX_MIXIN = "local_argmax_mixin"
    SUPER = "super"
    OTHER = "other"


@dataclass
class Param:
    name: str
    default: str | None
    kind: ParamKind


@dataclass
class LogitsShape:
    """What ``compute_logits`` does, as far as the mirror rule cares."""

    kind: LogitsKind
    rule: str  # the finding's name, e.g. "by-hand" or "post-mask"
    reason: str
    line: int | None
    params: list[Param]
    head: str | None = None  # code of the lm_head argument
    hidden: str | None = None  # code of the hidden-states argument
    delegate_attr: str | None = None
    post: PostKind | None = None
    pre_transform: bool = False  # hidden states change before reaching the head
    extra_args: bool = False  # the head call passes more than (head, hidden states), e.g. a bias
    rule_id: str | None = None  # id of the shape rule that objected (None: none did)


@dataclass
class TopTokensShape:
    kind: TopTokensKind
    params: list[Param]
