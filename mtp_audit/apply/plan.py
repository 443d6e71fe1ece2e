"""Stage 6a: decide which classes get a ``get_top_tokens``, and check the blast radius.

A method added to a class is inherited by every subclass. Before anything is
written, every registered drafter on every platform is analysed again with
the planned methods overlaid; a plan that would leave any drafter
``divergent`` or ``unproven`` is refused for the drafters that needed it,
with the victim named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..classify.analysis import Analysis, Insertion, Overlay
from ..model import PLATFORMS, ClassKey, Consistency, DrafterRecord, Status, StrEnum, refusal_key
from ..scan import Resolution, Scanner
from ..synthesize.answers import planned_overlay

SAFE = (Consistency.MIRROR, Consistency.EQUIVALENT)


class Action(StrEnum):
    """What ``fix`` does for one requested drafter."""

    FIX = "fix"
    SUPPORTED = "supported"
    SKIPPED = "skipped"  # not_applicable: nothing to write and nothing to refuse
    REFUSED = "refused"


@dataclass
class Outcome:
    record: DrafterRecord
    action: Action
    reason: str
    insertions: list[Insertion] = field(default_factory=list)


@dataclass
class Plan:
    outcomes: list[Outcome]
    insertions: list[Insertion]  # deduplicated, in a stable order


def _analyses(resolutions: list[Resolution], record: DrafterRecord) -> list[Analysis]:
    for res in resolutions:
        if res.entry.arch == record.arch and res.key == record.key and res.entry.source == record.source:
            return [res.analyses[p] for p in record.resolved_on]
    raise KeyError(record.cls)


_ABSENT = object()  # a class the plan writes no method into


class _Reading(dict):
    """A plan's overlay that notes what an analysis reads of it: each class it looks a method up in, with
    the plan's methods there (``_ABSENT``: none). The overlay is read nowhere but there, so under another
    plan that gives those classes the same methods the same analysis gives the same answer. The sentinel
    entry keeps it truthy, as a plan is, for a plan of nothing too (``classes_read``)."""

    def __init__(self, overlay: Overlay) -> None:
        super().__init__(overlay)
        self[_Reading] = {}  # type: ignore[index]
        self.seen: dict[ClassKey, object] = {}

    def get(self, key, default=None):
        found = super().get(key, _ABSENT)
        self.seen[key] = found
        return default if found is _ABSENT else found


class Reanalyses:
    """Each drafter's analysis under the last plan checked, with what it read of that plan: under a plan
    that gives the classes it read the same methods, it is the same analysis, and is not made again
    (``make_plan``'s rounds and ``placement``'s candidates differ from each other in a few classes). So
    is its analysis under a plan of nothing, where ``classes_read`` made one: kept for every plan."""

    def __init__(self) -> None:
        self._last: dict[tuple, tuple[dict[ClassKey, object], Analysis]] = {}
        self._unplanned: dict[tuple, tuple[dict[ClassKey, object], Analysis]] = {}

    def analyze(self, scanner: Scanner, res: Resolution, platform: str, overlay: Overlay) -> Analysis:
        at = (res.entry, res.key, platform)
        for kept in (self._unplanned.get(at), self._last.get(at)):
            if kept is not None and all(overlay.get(key, _ABSENT) == value for key, value in kept[0].items()):
                return kept[1]
        self._last[at] = _analysed(scanner, res, platform, overlay)
        return self._last[at][1]

    def keep_unplanned(self, scanner: Scanner, res: Resolution, platform: str) -> None:
        self._unplanned[res.entry, res.key, platform] = _analysed(scanner, res, platform, {})


def _analysed(
    scanner: Scanner, res: Resolution, platform: str, overlay: Overlay
) -> tuple[dict[ClassKey, object], Analysis]:
    """The drafter's analysis under ``overlay``, and what it read of it."""
    reading = _Reading(overlay)
    return reading.seen, scanner.analyzers[platform].analyze(res.key, reading, contract=res.contract)


def classes_read(scanner: Scanner, resolutions: list[Resolution]) -> Reanalyses:
    """Every drafter analysed on each platform under a plan of nothing, noting the classes it looks a method
    up in: a plan that writes into none of them gets that analysis, the scan's answer, without analysing
    it again (for many small plans of one tree)."""
    reanalyses = Reanalyses()
    for res in resolutions:
        for platform in res.analyses:
            reanalyses.keep_unplanned(scanner, res, platform)
    return reanalyses


def make_plan(
    scanner: Scanner,
    resolutions: list[Resolution],
    records: list[DrafterRecord],
    loosely: frozenset[str] = frozenset(),
    reanalyses: Reanalyses | None = None,
) -> Plan:
    """``reanalyses``: the blast-radius analyses of earlier plans of the same scan (its rounds share one;
    ``classes_read``'s, for many small plans).
    ``loosely``: the records (``refusal_key``) that ``--model`` selected by another name than their own
    architecture or class (a module or folder, a model type): one no speculator calls is skipped, not
    refused, as ``--all`` skips it (``--model deepseek_v4`` takes in the DSpark drafters of its folder),
    and a divergent one is left as supported, not refused."""
    outcomes: list[Outcome] = []
    for record in records:
        if (
            record.status == Status.SUPPORTED
            and record.consistency == Consistency.DIVERGENT
            and refusal_key(record) not in loosely
        ):
            outcomes.append(  # fix writes no method over one there: it would have to decide which is right
                Outcome(record, Action.REFUSED, f"divergent: {record.reason}; fix does not replace a method")
            )
        elif record.status == Status.SUPPORTED:
            outcomes.append(
                Outcome(
                    record,
                    Action.SUPPORTED,
                    f"already supported ({record.consistency.value if record.consistency else 'unknown'})",
                )
            )
        elif record.status == Status.NOT_APPLICABLE and record.uncalled and refusal_key(record) not in loosely:
            outcomes.append(
                Outcome(record, Action.REFUSED, f"not_applicable: {record.reason}")
            )  # asked for, never called
        elif record.status == Status.NOT_APPLICABLE:  # a placeholder or no compute_logits: nothing to refuse
            outcomes.append(Outcome(record, Action.SKIPPED, f"not_applicable: {record.reason}"))
        elif record.status != Status.MISSING_FIXABLE:
            outcomes.append(Outcome(record, Action.REFUSED, f"{record.status.value}: {record.reason}"))
        else:
            insertions: list[Insertion] = []
            for analysis in _analyses(resolutions, record):
                insertions.extend(i for i in analysis.insertions if i not in insertions)
            outcomes.append(Outcome(record, Action.FIX, "", insertions))
    reanalyses = reanalyses or Reanalyses()
    while True:
        active = _deduplicate([i for o in outcomes if o.action == Action.FIX for i in o.insertions])
        conflicts = _blast_radius(scanner, resolutions, active, reanalyses)
        if not conflicts:
            break
        for outcome in outcomes:
            if outcome.action != Action.FIX:
                continue
            blamed = [conflicts[i.target] for i in outcome.insertions if i.target in conflicts]
            if blamed:
                outcome.action = Action.REFUSED
                outcome.reason = "blast radius: " + "; ".join(dict.fromkeys(blamed))
    for outcome in outcomes:
        if outcome.action == Action.FIX:
            outcome.reason = _describe(outcome.insertions, active)
        elif outcome.action == Action.REFUSED and outcome.record.uncalled:
            _skip_if_written_anyway(scanner, outcome, outcomes, active)
    return Plan(outcomes, active)


def _skip_if_written_anyway(
    scanner: Scanner, outcome: Outcome, outcomes: list[Outcome], active: list[Insertion]
) -> None:
    """An uncalled drafter whose class gets the method in this run for another architecture (one class
    registered twice, or a base fixed for a drafter that is called): the method is not dead code, so
    asking for it is no refusal; it is skipped, saying so."""
    record = outcome.record
    reach = {c for p in record.resolved_on for order in scanner.hierarchies[p].orders(record.key) for c in order}
    written = [i for i in active if i.target in reach]
    if not written:
        return
    users = [
        o.record.arch or o.record.cls
        for o in outcomes
        if o.action == Action.FIX and any(i.target in reach for i in o.insertions)
    ]
    outcome.action = Action.SKIPPED
    outcome.reason += (
        f"; it gets the get_top_tokens written into {', '.join(dict.fromkeys(i.target.name for i in written))} "
        f"for {', '.join(dict.fromkeys(users))}, whose speculators call it"
    )


def _describe(insertions: list[Insertion], active: list[Insertion]) -> str:
    written = list(dict.fromkeys(i.target.name for i in insertions if i in active))
    inherited = list(dict.fromkeys(i.source.owner.name for i in insertions if i not in active))
    parts = [f"get_top_tokens added to {', '.join(written)}"] if written else []
    if inherited:
        parts.append(f"inherited from {', '.join(inherited)} (fixed in the same run)")
    return "; ".join(parts)


def _deduplicate(insertions: list[Insertion]) -> list[Insertion]:
    """One method per class; a drafter that inherits compute_logits from a class that is
    itself getting the mirror needs no copy of its own."""
    by_target: dict[ClassKey, Insertion] = {}
    for insertion in insertions:
        by_target.setdefault(insertion.target, insertion)
    owners = {i.target for i in by_target.values() if i.source.owner == i.target}
    return [i for i in by_target.values() if i.source.owner == i.target or i.source.owner not in owners]


def _same_answer(before: Analysis, after: Analysis) -> bool:
    """Whether the planned methods leave a drafter's answer as it was: the same consistency, reached through the same
    get_top_tokens for the same reason. One that takes over the get_top_tokens the drafter used (written into a base
    that comes first in its MRO) changes what it selects, whatever it is called."""
    found = before.get_top_tokens, after.get_top_tokens
    owners = tuple(hit.owner if hit is not None else None for hit in found)
    return before.consistency == after.consistency and owners[0] == owners[1] and before.reason == after.reason


def _blast_radius(
    scanner: Scanner,
    resolutions: list[Resolution],
    insertions: list[Insertion],
    reanalyses: Reanalyses,
) -> dict[ClassKey, str]:
    """Planned class -> why it may not get the method (the drafters it would make unsafe)."""
    if not insertions:
        return {}
    overlay = planned_overlay(insertions, scanner.hierarchies[PLATFORMS[0]])
    victims: dict[ClassKey, dict[tuple, list[str]]] = {}
    for res in resolutions:
        for platform, before in res.analyses.items():
            after = reanalyses.analyze(scanner, res, platform, overlay)
            if after.status != Status.SUPPORTED or after.consistency in SAFE:
                continue
            if before.status == Status.SUPPORTED and _same_answer(before, after):
                continue  # already so before the fix, with the same methods: not ours to block on
            hierarchy = scanner.hierarchies[platform]
            # the classes whose methods the drafter's answer reads: its own MRO's, and each delegate's MRO's
            reach = {c for key in (res.key, *after.delegates) for order in hierarchy.orders(key) for c in order}
            for target in (k for k in overlay if k in reach):
                victim = (res.entry.arch or res.key.name, res.key, after.consistency, after.reason)
                victims.setdefault(target, {}).setdefault(victim, []).append(platform)
    conflicts = {}
    for target, found in victims.items():
        parts = []
        for (arch, key, consistency, reason), platforms in found.items():
            where = f"{scanner.hierarchies[platforms[0]].file_of(key)}:{key.line}"
            parts.append(
                f"adding get_top_tokens to {target.name} would make {arch} ({key.name}, {where}) "
                f"{consistency.value if consistency else 'inconsistent'} on {','.join(sorted(platforms))}: "
                f"{reason}"
            )
        conflicts[target] = "; ".join(parts)
    return conflicts
