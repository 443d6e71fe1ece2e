"""What the shape rules answer: plain data, free of libcst, so answers kept in the
cache (classify.memo) load without importing the parser."""

from __future__ import annotations

import builtins
from dataclasses import dataclass

# the head call's signature types live on the ground floor (locate reads the tree's); re-exported here
from ..model import ASSUMED_SIGNATURE as ASSUMED_SIGNATURE
from ..model import HeadSignature as HeadSignature
from ..model import ParamKind as ParamKind
from ..model import SignatureParam as SignatureParam
from ..model import StrEnum


class LogitsKind(StrEnum):
    """How ``compute_logits`` gets its logits; only HEAD, DELEGATE and SUPER can be mirrored."""

    HEAD = "head"  # self.logits_processor(...)
    DELEGATE = "delegate"  # self.<attr>.compute_logits(...)
    SUPER = "super"  # super().compute_logits(...)
    STUB = "stub"
    MANUAL = "manual"  # a shape rule objects


# Tensor methods that write a value through an index (in place or into a copy): after the head they
# mask the logits. One list for the rule that finds the mask in compute_logits and the check that
# finds it in get_top_tokens, so the two cannot drift apart.
MASK_METHODS = ("index_fill_", "masked_fill_", "masked_fill", "index_fill", "fill_", "index_put_", "index_put")


class PostKind(StrEnum):
    """What happens to the logits after the head call; masking wins over the others."""

    D2T_SCATTER = "d2t_scatter"
    MASK = "mask"
    VOCAB = "vocab"  # the vocabulary cut or padded (``logits[..., :n]``, ``F.pad``)
    SOFTCAP = "softcap"
    OTHER = "other"


class TargetMap(StrEnum):
    """How a draft id ``k`` maps to a target id through ``draft_id_to_target_id`` (``d2t``): read off
    the statement that scatters the draft logits (compute_logits) or remaps the draft argmax
    (LocalArgmaxMixin.get_top_tokens); the two select the same tokens only when they map alike."""

    OFFSET = "offset"  # k + d2t[k]: ``new[:, torch.arange(n) + d2t] = logits``; ``top + d2t[top]``
    ABSOLUTE = "absolute"  # d2t[k]: ``new[:, d2t] = logits``; ``d2t[top]``


class TopTokensKind(StrEnum):
    LOCAL_ARGMAX_MIXIN = "local_argmax_mixin"
    SUPER = "super"
    DECORATED = "decorated"  # a call goes through its decorators first: nothing about the body is claimed
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
    # SUPER: the class ``super(Cls, self)`` names, as written (None: zero-argument ``super()``)
    super_class: str | None = None
    post: PostKind | None = None
    pre_transform: bool = False  # statements before the head, or hidden states not the first parameter
    # Provably other than a plain head call: the hidden states are not the first parameter as passed
    # (another expression, or the parameter rebound or changed in place before the head), the head is
    # not self.lm_head (another expression, or a local bound to one). A local bound several times, or
    # a statement that only reads, proves nothing.
    other_hidden: bool = False
    other_head: bool = False
    extra_args: bool = False  # the head call passes more than (head, hidden states), e.g. a bias
    # post D2T_SCATTER: how the scatter maps draft ids, when the statements after the head call do
    # nothing but that scatter (and return the draft logits where d2t is None); else None
    target_map: TargetMap | None = None
    rule_id: str | None = None  # id of the shape rule that objected (None: none did)


@dataclass
class TopTokensShape:
    kind: TopTokensKind
    params: list[Param]
    decorators: tuple[str, ...] = ()  # their code, outermost first
    unbound: str | None = None  # why a call on the drafter cannot run the body as its method, if it cannot
    target_map: TargetMap | None = None  # LOCAL_ARGMAX_MIXIN: how it remaps the draft argmax
    super_class: str | None = None  # SUPER: the class ``super(Cls, self)`` names (None: ``super()``)


# Names that mean the same in every class of every module: ``torch`` (the fix imports it where it is not
# bound) and the builtins. Not the dunder ones: in a method, ``__name__``, ``__file__``, ``__spec__``...
# are the module's own globals before they are builtins.
EVERYWHERE = frozenset({"torch"} | {n for n in vars(builtins) if not n.startswith("__")})


@dataclass(frozen=True)
class FreeNames:
    """What a method's text reads from outside itself, for a copy of it written into another class.

    A copy reads ``run`` (its body's free names) where it is written, when it runs: in another
    class of the same module they are the same module globals. It reads ``defined`` (its
    parameters' defaults and annotations, quoted ones too) when the ``def`` runs, in the class
    body it is written into: another class statement, where a module name may be bound to
    something else; ``defaults`` are those of them its defaults read (what a call gets; an
    annotation changes no value). ``anchored`` says why the text means something else in any
    other class (a private name, ``__class__``, a zero-argument ``super()``...), None when nothing
    does; ``unparsed``, a quoted annotation that quotes no expression (what it reads is not known).
    """

    run: tuple[str, ...]
    defined: tuple[str, ...]
    anchored: str | None
    defaults: tuple[str, ...] = ()
    unparsed: str | None = None

    def movable(self, same_module: bool) -> bool:
        """Whether a copy means the same in another class, of the same module or of another one."""
        if self.anchored is not None or self.unparsed is not None or not EVERYWHERE.issuperset(self.defined):
            return False
        return same_module or EVERYWHERE.issuperset(self.run)
