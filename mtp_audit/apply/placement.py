"""Prefer a placement that reaches drafters only, when it is equally correct.

A drafter whose ``compute_logits`` is ``return super().compute_logits(x)``
gets two methods by default: a forwarding one in its own class and the
mirror in the base. When the base has subclasses that are not drafters
(the Transformers backend's ``CausalMixin`` under ``TransformersForCausalLM``
...), the base's body can instead be inlined into the calling class's
method: the same tokens, and only that class's subclasses gain a method.
The swap is kept only if every drafter stays ``mirror``/``equivalent`` and
the new class reaches no class that is not a drafter.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..classify.analysis import Analyzer, Insertion
from ..classify.memo import logits_shape
from ..classify.shape_types import LogitsKind
from ..model import PLATFORMS, ClassKey
from ..resolve.mro import MethodHit, Mro
from ..scan import Resolution, Scanner
from ..synthesize.answers import inlined_super
from .inheritors import Inheritor, find_inheritors
from .plan import Action, Plan, Reanalyses, _blast_radius, _describe


@dataclass(frozen=True)
class Moved:
    """The method went into ``into`` (the base's body inlined), not ``base``, which ``others`` inherit."""

    into: tuple[ClassKey, ...]
    base: ClassKey
    others: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"get_top_tokens goes into {', '.join(k.name for k in self.into)} with the compute_logits of "
            f"{self.base.name} inlined, not into {self.base.name}, whose subclasses "
            f"{', '.join(self.others)} are not drafters"
        )


def _same(a: Insertion, b: Insertion) -> bool:
    """The same method into the same class (drafters see the owner at different MRO positions)."""
    return (a.target, a.source.owner, a.source.method.line) == (b.target, b.source.owner, b.source.method.line)


def _needs(insertion: Insertion, base: Insertion) -> bool:
    """Whether a drafter's planned method is ``base``'s: the same one, or one it inherits from
    ``base``'s class (planned into the drafter with the base as owner, dropped as the base gets it)."""
    return _same(insertion, base) or insertion.source.owner == base.target


def _swap(
    insertions: list[Insertion], base: Insertion, callers: list[Insertion], inlined: list[Insertion]
) -> list[Insertion]:
    """``insertions`` without ``base``, each caller replaced by its inlined form."""
    return [
        next((new for old, new in zip(callers, inlined) if _same(old, i)), i) for i in insertions if not _same(i, base)
    ]


def _super_callers(scanner: Scanner, plan: Plan, base: Insertion) -> list[Insertion]:
    """Planned insertions whose compute_logits is ``super().compute_logits`` reaching ``base``'s."""
    found = []
    for insertion in plan.insertions:
        source = insertion.source.method
        if logits_shape(source.text, source.line, scanner.head_signature).kind != LogitsKind.SUPER:
            continue
        if any(
            _super_reaches(scanner.analyzers[platform], Mro(order), base.target)
            for platform in PLATFORMS
            for order in scanner.hierarchies[platform].orders(insertion.target)
        ):
            found.append(insertion)
    return found


def _super_reaches(analyzer: Analyzer, mro: Mro, base: ClassKey) -> bool:
    """Does the class's own compute_logits, calling super()'s (``super(Cls, self)``'s) in ``mro``, reach ``base``'s?"""
    own = analyzer.h.find(mro, "compute_logits")
    reached = analyzer.super_reached(mro, own, analyzer.shape(own))[0] if own else None
    return reached is not None and reached.owner == base


def prefer_drafter_only(
    scanner: Scanner,
    resolutions: list[Resolution],
    plan: Plan,
    inheritors: list[Inheritor],
    reanalyses: Reanalyses | None = None,
) -> list[Moved]:
    """Move methods off bases that non-drafters inherit where an equal placement exists; say what moved.
    ``reanalyses``: the blast-radius analyses made for the plan (a candidate differs from it in a few classes)."""
    notes: list[Moved] = []
    reanalyses = reanalyses or Reanalyses()
    reaching = {i.base for i in inheritors if not i.drafter}
    for base in [i for i in plan.insertions if i.target in reaching]:
        callers = _super_callers(scanner, plan, base)
        fixed = [o for o in plan.outcomes if o.action == Action.FIX and any(_needs(i, base) for i in o.insertions)]
        if not callers or any(not any(_same(c, i) for c in callers for i in o.insertions) for o in fixed):
            continue  # some drafter needs the base's own method, written there or inherited from there
        texts = [inlined_super(c.source.method.text, base.source.method.text) for c in callers]
        if None in texts:
            continue
        inlined = [
            Insertion(c.target, MethodHit(c.source.owner, replace(c.source.method, text=text), c.source.index))
            for c, text in zip(callers, texts)
        ]
        candidate = _swap(plan.insertions, base, callers, inlined)
        if _blast_radius(scanner, resolutions, candidate, reanalyses):
            continue
        if any(not i.drafter for i in find_inheritors(scanner, resolutions, inlined)):
            continue
        plan.insertions = candidate
        for outcome in plan.outcomes:
            outcome.insertions = _swap(outcome.insertions, base, callers, inlined)
            if outcome.action == Action.FIX:
                outcome.reason = _describe(outcome.insertions, plan.insertions)
        others = sorted({i.cls.name for i in inheritors if i.base == base.target and not i.drafter})
        notes.append(Moved(tuple(c.target for c in callers), base.target, tuple(others)))
    return notes
