"""Stage 3b: the method resolution order across files, as Python computes it (C3).

Bases are resolved in the defining module on the platform at hand, so a base
bound under ``if TYPE_CHECKING:`` / ``else:`` takes its run-time binding.
Classes outside the tree (``nn.Module``, ``Protocol``) are terminal. A base name
that may be several classes (bound under a condition the tool cannot decide) and
a class statement for which no C3 order exists (Python raises ``TypeError``) are
named in the ``Mro``, never settled by picking one order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import product

from ..index.classes import InitRead, init_values
from ..index.fact_types import ClassFacts, InitStep, MethodFacts
from ..index.modules import ModuleIndex
from ..model import ClassKey
from .names import External, Missing, resolve_expression

MroItem = ClassKey | External
CYCLE = "inheritance cycle through"
MAX_ORDERS = 256  # orders a class may have through undecided bases, at most (each such base multiplies them)


@dataclass
class Mro:
    classes: list[MroItem]
    unresolved: list[str] = field(default_factory=list)  # bases that could not be followed
    unparsed: list[str] = field(default_factory=list)  # modules whose syntax errors stopped them
    # bases that may be one of several classes, each described with its alternatives: the order is one of many
    undecided: list[str] = field(default_factory=list)
    # classes of the order (itself or a base) whose ``class`` statement raises TypeError: no C3 order exists
    uncreatable: list[ClassKey] = field(default_factory=list)


@dataclass(frozen=True)
class MethodHit:
    owner: ClassKey
    method: MethodFacts
    index: int  # position of the owner in the MRO


class Hierarchy:
    """Linearizations and class facts for one platform, memoised."""

    def __init__(self, index: ModuleIndex, platform: str):
        self.index = index
        self.platform = platform
        self._mro: dict[ClassKey, Mro] = {}
        self._orders: dict[ClassKey, list[list[MroItem]]] = {}
        self._active: set[ClassKey] = set()  # classes whose MRO is being computed (cycle check)
        self._init_values: dict[tuple[tuple[MroItem, ...], ClassKey], InitRead[ClassKey]] = {}

    def memoised(self) -> dict[ClassKey, Mro]:
        return self._mro

    def absorb(self, mros: dict[ClassKey, Mro]) -> None:
        """Take in MROs another process computed from the same facts."""
        for key, mro in mros.items():
            self._mro.setdefault(key, mro)

    def class_facts(self, key: ClassKey) -> ClassFacts:
        facts = self.index.facts(key.module)
        assert facts is not None
        cls = facts.class_at(key.line)
        assert cls is not None
        return cls

    def init_values(self, mro: Mro, key: ClassKey) -> InitRead[ClassKey]:
        """What ``key.__init__`` may leave in each ``self.X`` on an instance whose class has this MRO, each value
        with the class whose method assigns it, and the attributes it sets whatever they held
        (``classes.init_values``): a method it runs on self is the one the MRO finds first, a subclass's override
        or a base's, in whatever module."""
        memo = (tuple(mro.classes), key)
        if memo not in self._init_values:
            steps = self.class_facts(key).init_steps.get("__init__", [])
            self._init_values[memo] = init_values((key, steps), lambda name, caller: self._steps_of(mro, name, caller))
        return self._init_values[memo]

    def _steps_of(self, mro: Mro, name: str, caller: ClassKey) -> tuple[ClassKey, list[InitStep]] | str | None:
        """The method ``self.<name>(...)`` written in a method of ``caller`` runs on an instance of this MRO, with its
        steps: the first class of the tree to bind the attribute (``__build`` written in ``Caller`` is
        ``_Caller__build``, as Python mangles it; a class binds ``_Base__build`` by a ``def __build`` when it is
        named ``Base``) by a ``def`` or by a class-body alias of one of its own (``_build = _build_masked``), the
        later of the two where it has both. What that class binds it to instead, where that is something else (it
        runs unread); None where no class of the tree binds it or its body does nothing to self."""
        attribute = _mangled(name, caller.name)
        for item in (item for item in mro.classes if isinstance(item, ClassKey)):
            facts = self.class_facts(item)
            local = _bound_as(facts, item.name, attribute)
            if local is None:
                continue
            alias = facts.class_attrs.get(local)
            if local in facts.defined_methods and facts.defined_methods[local] > facts.class_attr_lines.get(local, 0):
                return (item, facts.init_steps[local]) if local in facts.init_steps else None  # its def binds last
            if alias in facts.defined_methods and facts.defined_methods[alias] < facts.class_attr_lines.get(local, 0):
                # ``_build = _build_masked`` below ``def _build_masked`` (above it, the name is the module's)
                return (item, facts.init_steps[alias]) if alias in facts.init_steps else None
            return alias or local
        return None

    def file_of(self, key: ClassKey) -> str:
        facts = self.index.facts(key.module)
        assert facts is not None
        return facts.path

    def bases(self, key: ClassKey) -> tuple[list[MroItem], list[str], list[str], list[str]]:
        """The bases that resolve; those that do not, with why; the modules that do not parse among the causes;
        the bases that may be several classes, with their alternatives (the first one is listed among the bases,
        so that the order stays usable, and the caller must not take it for the order)."""
        items: list[MroItem] = []
        unresolved: list[str] = []
        unparsed: list[str] = []
        undecided: list[str] = []
        for code, found in self._resolved_bases(key):
            hits = [f for f in found if isinstance(f, (ClassKey, External))]
            unfollowed = [f for f in found if isinstance(f, Missing) and f.undecided]  # may be a class too
            if hits:
                items.append(hits[0])
                if len(hits) + len(unfollowed) > 1 and any(isinstance(hit, ClassKey) for hit in hits):
                    undecided.append(self._alternatives(key, code, [*hits, *unfollowed]))
            else:
                reasons = "; ".join(f.reason for f in found if isinstance(f, Missing))
                unresolved.append(f"{code} ({reasons})" if reasons else code)
                unparsed.extend(f.unparsed for f in found if isinstance(f, Missing) and f.unparsed)
        return items, unresolved, list(dict.fromkeys(unparsed)), undecided

    def _resolved_bases(self, key: ClassKey) -> list[tuple[str, list]]:
        """Each base of ``key`` as written, with what it resolves to on this platform."""
        cls = self.class_facts(key)
        bound = cls.bound_then.get(self.platform)
        return [(code, resolve_expression(self.index, key.module, code, self.platform, bound)) for code in cls.bases]

    def _alternatives(self, key: ClassKey, code: str, hits: list[MroItem | Missing]) -> str:
        """``Base`` (base of ``key``) and the classes it may be, with where each is defined (or why
        the tool cannot tell, for a binding it does not follow)."""
        where = ", ".join(
            f"{hit.name} ({self.file_of(hit)}:{hit.line})"
            if isinstance(hit, ClassKey)
            else hit.name
            if isinstance(hit, External)
            else f"a binding not followed: {hit.reason}"
            for hit in hits
        )
        return f"base {code} of {key.name} ({self.file_of(key)}:{key.line}) may be one of several classes ({where})"

    def orders(self, key: ClassKey) -> list[list[MroItem]]:
        """Every order ``key`` may have at run time: ``mro(key).classes`` alone, unless a base in its
        hierarchy is undecided, then one order per choice among the alternatives (those for which Python
        raises TypeError left out; ``MAX_ORDERS`` at most, in the order of the choices). What a method
        written into a class reaches is the union over them."""
        mro = self.mro(key)
        if not mro.undecided:
            return [mro.classes]
        if key not in self._orders:
            self._active.add(key)
            try:
                self._orders[key] = self._every_order(key)
            finally:
                self._active.discard(key)
        return self._orders[key]

    def _every_order(self, key: ClassKey) -> list[list[MroItem]]:
        choices: list[list[MroItem]] = []
        for _, found in self._resolved_bases(key):
            hits = [f for f in found if isinstance(f, (ClassKey, External))]
            if hits:
                choices.append(list(dict.fromkeys(hits)))
        orders: list[list[MroItem]] = []
        for bases in product(*choices):
            parents = [
                self.orders(base) if isinstance(base, ClassKey) and base not in self._active else [[base]]
                for base in bases
            ]
            for chosen in product(*parents):
                merged = chosen[0] if len(bases) == 1 else _c3_to_object([*map(list, chosen), list(bases)])
                if merged is not None and [key, *merged] not in orders:
                    orders.append([key, *merged])
                if len(orders) == MAX_ORDERS:
                    return orders
        return orders or [self.mro(key).classes]

    def unfollowed_ahead(self, mro: Mro, owner: ClassKey) -> list[str]:
        """The bases in ``mro``'s hierarchy the tool cannot follow that Python may put before ``owner``, each
        named with its ``class`` statement: such a base may define any method, and its own bases are unknown,
        so only what every C3 order keeps places it after ``owner``: a class comes before its bases, and a
        base before the bases listed after it."""
        if not mro.unresolved:
            return []
        successors: dict[object, list[object]] = {}
        unfollowed: dict[tuple[ClassKey, str], str] = {}
        for item in mro.classes:
            if not isinstance(item, ClassKey):
                continue
            written: list[object] = []
            for code, found in self._resolved_bases(item):
                hits = [f for f in found if isinstance(f, (ClassKey, External))]
                if not hits:
                    unfollowed[(item, code)] = self._unfollowed_note(item, code, found)
                written.append(hits[0] if hits else (item, code))
            successors.setdefault(item, []).extend(written)
            for earlier, later in zip(written, written[1:]):
                successors.setdefault(earlier, []).append(later)
        after = _reachable(successors, owner)
        return [note for node, note in unfollowed.items() if node not in after]

    def _unfollowed_note(self, key: ClassKey, code: str, found: list) -> str:
        reasons = "; ".join(f.reason for f in found if isinstance(f, Missing))
        return f"base {code} of {key.name} ({self.file_of(key)}:{key.line}) is not followed ({reasons})"

    def uncreatable_reason(self, key: ClassKey) -> str:
        """Why the ``class`` statement of ``key`` raises, in Python's words, with the statement and its line."""
        bases = ", ".join(self.class_facts(key).bases)
        return (
            f"{self.file_of(key)}:{key.line}: class {key.name}({bases}) raises TypeError: "
            f"cannot create a consistent method resolution order (MRO) for bases {bases}"
        )

    def mro(self, key: ClassKey) -> Mro:
        if key in self._mro:
            return self._mro[key]
        if key in self._active:
            return Mro([key], [f"{CYCLE} {key.name}"])
        self._active.add(key)
        try:
            return self._linearize(key)
        finally:
            self._active.discard(key)

    def _linearize(self, key: ClassKey) -> Mro:
        bases, unresolved, unparsed, undecided = self.bases(key)
        result = Mro([key], unresolved, unparsed, undecided)
        parents = []
        for base in bases:
            if isinstance(base, ClassKey):
                sub = self.mro(base)
                parents.append(list(sub.classes))
                _take_notes(result, sub)
            else:
                parents.append([base])
        if len(bases) == 1:  # single inheritance, by far the most common: C3 gives the base's MRO
            result.classes.extend(parents[0])
            return self._memo(key, result)
        merged = _c3_to_object([*parents, list(bases)])
        if merged is None:  # Python raises TypeError at the class statement: keep each class once, say so
            merged = list(dict.fromkeys(item for sequence in [*parents, bases] for item in sequence))
            result.uncreatable.append(key)
        result.classes.extend(merged)
        return self._memo(key, result)

    def _memo(self, key: ClassKey, result: Mro) -> Mro:
        if not any(u.startswith(CYCLE) for u in result.unresolved):  # a cycle reads differently from each class on it
            self._mro[key] = result
        return result

    def find(
        self, mro: Mro, name: str, start: int = 0, overlay: dict[ClassKey, dict[str, MethodFacts]] | None = None
    ) -> MethodHit | None:
        for position, item in enumerate(mro.classes[start:], start):
            if not isinstance(item, ClassKey):
                continue
            extra = (overlay or {}).get(item, {})
            method = extra.get(name) or self.class_facts(item).methods_on(self.platform).get(name)
            if method is not None and method.how != "deleted":  # ``del`` in a class body: on to the bases
                return MethodHit(item, method, position)
        return None


def _take_notes(result: Mro, sub: Mro) -> None:
    """What a base's order says that holds for its subclasses too (each note once)."""
    for mine, theirs in (
        (result.unresolved, sub.unresolved),
        (result.unparsed, sub.unparsed),
        (result.undecided, sub.undecided),
        (result.uncreatable, sub.uncreatable),
    ):
        mine.extend(note for note in theirs if note not in mine)


def _reachable(successors: dict[object, list[object]], start: object) -> set[object]:
    """What ``start`` leads to, itself excluded unless on a cycle."""
    seen: set[object] = set()
    stack = list(successors.get(start, []))
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(successors.get(node, []))
    return seen


def _is_object(item: MroItem) -> bool:
    return isinstance(item, External) and item.name in ("object", "builtins.object")


def _c3_to_object(sequences: list[list[MroItem]]) -> list[MroItem] | None:
    """C3 merge of orders that, as in Python, all end in ``object``: the tool's leave it out (a class outside the
    tree is terminal), so it is put back for the merge, then left out again where no base named it. So
    ``object`` written before another base (``class D(object, Head)``, or ``Base = object`` as a fallback) has no
    order, as in Python: ``TypeError``."""
    named = next((item for sequence in sequences for item in sequence if _is_object(item)), None)
    ending = named or _OBJECT
    merged = _c3(
        [
            [*(ending if _is_object(i) else i for i in s), *([] if s and _is_object(s[-1]) else [ending])]
            for s in sequences
        ]
    )
    if merged is None or named is not None:
        return merged
    return [item for item in merged if item != _OBJECT]


_OBJECT = External("object")


def _c3(sequences: list[list[MroItem]]) -> list[MroItem] | None:
    """C3 merge; None for an inconsistent hierarchy (no order exists: Python raises TypeError).

    Each sequence is read through a cursor, and how many sequences hold an item in their
    tail is counted, so a merge costs the total length times the number of sequences
    (a 1200-deep chain: 0.4 s for every MRO along it, not hours).
    """
    seqs = [s for s in sequences if s]
    cursors = [0] * len(seqs)
    in_tails = Counter(item for s in seqs for item in s[1:])
    out: list[MroItem] = []
    while True:
        live = [i for i, s in enumerate(seqs) if cursors[i] < len(s)]
        if not live:
            return out
        for i in live:
            head = seqs[i][cursors[i]]
            if not in_tails[head]:
                break
        else:
            return None
        out.append(head)
        for i in live:
            if seqs[i][cursors[i]] == head:
                cursors[i] += 1
                if cursors[i] < len(seqs[i]):
                    in_tails[seqs[i][cursors[i]]] -= 1


def _mangled(name: str, cls: str) -> str:
    """The attribute ``name`` written in class ``cls`` names: ``__x`` is ``_Cls__x`` (Python mangles a private name
    with the class's name stripped of leading underscores; a class named only by underscores mangles nothing)."""
    stripped = cls.lstrip("_")
    return f"_{stripped}{name}" if name.startswith("__") and not name.endswith("__") and stripped else name


def _bound_as(facts: ClassFacts, cls: str, attribute: str) -> str | None:
    """The name under which the body of class ``cls`` binds ``attribute`` (by a ``def`` or an assignment): the
    attribute itself, or ``__x`` where the attribute is ``_Cls__x``; None where it binds it under neither."""
    prefix = f"_{cls.lstrip('_')}"
    private = attribute.removeprefix(prefix) if attribute.startswith(f"{prefix}__") else ""
    for name in (attribute, private):
        bound = name in facts.defined_methods or name in facts.class_attrs
        if name and bound and _mangled(name, cls) == attribute:
            return name
    return None
