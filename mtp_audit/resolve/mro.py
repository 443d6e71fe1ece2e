"""Stage 3b: the method resolution order across files, as Python computes it (C3).

Bases are resolved in the defining module on the platform at hand, so a base
bound under ``if TYPE_CHECKING:`` / ``else:`` takes its run-time binding.
Classes outside the tree (``nn.Module``, ``Protocol``) are terminal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..index.facts import ClassFacts, MethodFacts
from ..index.modules import ModuleIndex
from ..model import ClassKey
from .names import External, Missing, resolve_expression

MroItem = ClassKey | External
CYCLE = "inheritance cycle through"


@dataclass
class Mro:
    classes: list[MroItem]
    unresolved: list[str] = field(default_factory=list)  # bases that could not be followed


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

    def file_of(self, key: ClassKey) -> str:
        facts = self.index.facts(key.module)
        assert facts is not None
        return facts.path

    def bases(self, key: ClassKey) -> tuple[list[MroItem], list[str]]:
        items: list[MroItem] = []
        unresolved: list[str] = []
        for code in self.class_facts(key).bases:
            found = resolve_expression(self.index, key.module, code, self.platform)
            hits = [f for f in found if isinstance(f, (ClassKey, External))]
            if hits:
                items.append(hits[0])
            else:
                reasons = "; ".join(f.reason for f in found if isinstance(f, Missing))
                unresolved.append(f"{code} ({reasons})" if reasons else code)
        return items, unresolved

    def mro(self, key: ClassKey, _stack: tuple = ()) -> Mro:
        if key in self._mro:
            return self._mro[key]
        if key in _stack:
            return Mro([key], [f"{CYCLE} {key.name}"])
        bases, unresolved = self.bases(key)
        parents = []
        for base in bases:
            if isinstance(base, ClassKey):
                sub = self.mro(base, (*_stack, key))
                parents.append(list(sub.classes))
                unresolved.extend(u for u in sub.unresolved if u not in unresolved)
            else:
                parents.append([base])
        result = Mro([key, *_c3([*parents, list(bases)])], unresolved)
        if not any(u.startswith(CYCLE) for u in unresolved):  # a cycle reads differently from each class on it
            self._mro[key] = result
        return result

    def find(self, mro: Mro, name: str, start: int = 0,
             overlay: dict[ClassKey, dict[str, MethodFacts]] | None = None) -> MethodHit | None:
        for position, item in enumerate(mro.classes[start:], start):
            if not isinstance(item, ClassKey):
                continue
            extra = (overlay or {}).get(item, {})
            method = extra.get(name) or self.class_facts(item).methods.get(name)
            if method is not None:
                return MethodHit(item, method, position)
        return None


def _c3(sequences: list[list[MroItem]]) -> list[MroItem]:
    """C3 merge; falls back to depth-first order for an inconsistent hierarchy."""
    seqs = [list(s) for s in sequences if s]
    out: list[MroItem] = []
    while seqs:
        for seq in seqs:
            head = seq[0]
            if not any(head in s[1:] for s in seqs):
                break
        else:
            for seq in seqs:  # Python would raise TypeError; keep a usable order
                for item in seq:
                    if item not in out:
                        out.append(item)
            return out
        out.append(head)
        seqs = [[x for x in s if x != head] for s in seqs]
        seqs = [s for s in seqs if s]
    return out
