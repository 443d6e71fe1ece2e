"""Which outcome of a module-level ``try`` happens on a platform.

``try: from .fast.mtp import X`` / ``except ImportError: from .slow.mtp import X``: the facts
keep the bindings of every outcome (``index.fact_types.TryOutcome``); here the body's imports
are followed through their import chains (``ImportChains.first_raise``), in order, and the
first that raises decides which handler runs, by the exception it raises, as Python would.
"""

from __future__ import annotations

from ..index.fact_types import Target, TryOutcome
from ..index.interpreter import catches, raised_name
from ..index.modules import ModuleIndex

UNCAUGHT = -1  # ``TryOutcome.handler`` when no handler catches: the module raises


def holding(index: ModuleIndex, targets: list[Target], platform: str) -> tuple[list[Target], str | None]:
    """The targets whose ``try`` outcomes can happen on ``platform``; and, when none can, why
    (a raise no handler catches), else None."""
    kept = [t for t in targets if all(_can_happen(index, o, platform) for o in t.when)]
    if kept or not any(t.when for t in targets):
        return kept, None
    outcome = next(o for t in targets for o in t.when if not _can_happen(index, o, platform))
    return [], _uncaught(index, outcome, platform)


def _can_happen(index: ModuleIndex, outcome: TryOutcome, platform: str) -> bool:
    return (outcome.failed_at, outcome.handler) in possible(index, outcome, platform)


def possible(index: ModuleIndex, outcome: TryOutcome, platform: str) -> set[tuple[int, int]]:
    """The (failed statement, handler) pairs that can happen: (-1, -1) when no import raises;
    a handler number, or ``UNCAUGHT``, for the first statement whose import raises."""
    for statement, modules in enumerate(outcome.imports):
        reason = _first_raise(index, modules, platform)
        if reason is None:
            continue
        raised = raised_name(reason)
        pairs = set()
        for number, names in enumerate(outcome.handlers):
            caught = catches(names, raised)
            if caught is not False:
                pairs.add((statement, number))
            if caught:
                return pairs
        return pairs | {(statement, UNCAUGHT)}
    return {(-1, -1)}


def _first_raise(index: ModuleIndex, modules: tuple[str, ...], platform: str) -> str | None:
    for module in modules:
        if index.is_module(module):
            reason = index.chains.first_raise(module, platform)
            if reason is not None:
                return reason
    return None


def _uncaught(index: ModuleIndex, outcome: TryOutcome, platform: str) -> str:
    """Why a ``try``'s module raises on ``platform``: an import of its body raises what no handler catches."""
    for statement, modules in enumerate(outcome.imports):
        reason = _first_raise(index, modules, platform)
        if reason is not None:
            return f"line {outcome.lines[statement]} imports what raises and no handler catches: {reason}"
    return "a try outcome that cannot happen"
