"""Split a fix into model families: the changes a reviewer takes one at a time.

Families come from the tree, not from a list: two rewritten files belong to
one family when one drafter's fix touches both (a wrapper and its delegate,
a subclass and the base whose method it inherits) or when one architecture
resolves to both on different platforms (the per-platform packages of one
model). The connected groups of files are the families.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .changes import Rewrite
from .plan import Action, Outcome, Plan


@dataclass
class Family:
    """One reviewable change: the drafters it fixes and the files it rewrites."""

    name: str
    outcomes: list[Outcome]
    rewrites: list[Rewrite]

    @property
    def slug(self) -> str:
        """A test-module name from the main drafter's file, without the platform directory:
        ``deepseek_mtp``, ``deepseek_v4_mtp`` for ``deepseek_v4/{nvidia,xpu}/mtp.py``."""
        return self._without_platform_folders(_below_models)

    @property
    def qualified_slug(self) -> str:
        """The slug from the whole module path below the top package (``models_foo_mtp``): what tells
        two families apart whose ``slug`` is one (``foo_mtp.py`` and ``foo/{nvidia,amd}/mtp.py``)."""
        return self._without_platform_folders(lambda path: module_of(path).split(".")[1:])

    def _without_platform_folders(self, parts_of: Callable[[str], list[str]]) -> str:
        """The main file's module parts (``parts_of``) but those its per-platform siblings differ in."""
        parts = parts_of(self.main_file)
        siblings = [parts_of(r.path) for r in self.rewrites]
        siblings = [p for p in siblings if len(p) == len(parts) and p[-1] == parts[-1]]
        kept = [part for i, part in enumerate(parts) if all(s[i] == part for s in siblings)]
        return re.sub(r"\W+", "_", "_".join(kept)).lower()

    @property
    def main_file(self) -> str:
        """The rewritten file of the family's first drafter (its own module, else one it is fixed in)."""
        lead = next(o for o in self.outcomes if o.record.cls == _classes(self.outcomes)[0])
        written = {module: r.path for r in self.rewrites for module in written_modules(r)}
        return written.get(lead.record.module) or next(written[m] for m in _modules(lead) if m in written)

    @property
    def platforms(self) -> list[str]:
        return sorted({p for o in self.outcomes for p in o.record.platforms})


def _below_models(path: str) -> list[str]:
    """Module name parts after the last ``models`` folder, the file's stem (a package's name) last."""
    parts = module_of(path).split(".")
    start = max((i + 1 for i, p in enumerate(parts[:-1]) if p == "models"), default=0)
    return parts[start:]


def written_modules(rewrite: Rewrite) -> tuple[str, ...]:
    """The modules a rewrite writes into: those the plan named (one file may be several, through
    in-tree links, and is written by its own path), else the module its path is."""
    return rewrite.modules or (module_of(rewrite.path),)


def module_of(path: str) -> str:
    """``vllm/a/b.py`` -> ``vllm.a.b``; a package's ``__init__.py`` is the package."""
    parts = path.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class _Groups:
    """Union-find over module names."""

    def __init__(self, members: list[str]):
        self.parent = {m: m for m in members}

    def find(self, member: str) -> str:
        while self.parent[member] != member:
            self.parent[member] = self.parent[self.parent[member]]
            member = self.parent[member]
        return member

    def join(self, members: list[str]) -> None:
        known = [m for m in members if m in self.parent]
        for other in known[1:]:
            self.parent[self.find(other)] = self.find(known[0])


def _modules(outcome: Outcome) -> list[str]:
    """Every module the outcome's fix writes into or inherits a written method from."""
    found: list[str] = []
    for insertion in outcome.insertions:
        for key in (insertion.target, insertion.source.owner):
            if key.module not in found:
                found.append(key.module)
    return found


def _classes(outcomes: list[Outcome]) -> list[str]:
    """The drafter classes, most-registered first."""
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.record.cls] = counts.get(outcome.record.cls, 0) + 1
    return sorted(counts, key=lambda n: (-counts[n], n))


def family_name(outcomes: list[Outcome]) -> str:
    """The drafter classes, most-registered first (``DeepSeekMTP, OpenPanguMTP``)."""
    names = _classes(outcomes)
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def split_families(plan: Plan, rewrites: list[Rewrite]) -> list[Family]:
    """The fix as families, each with its fixed drafters and rewritten files, sorted by name."""
    by_module = {module: r for r in rewrites for module in written_modules(r)}
    groups = _Groups(list(by_module))
    for rewrite in rewrites:  # the modules that are one file change together
        groups.join(list(written_modules(rewrite)))
    fixed = [o for o in plan.outcomes if o.action == Action.FIX]
    by_arch: dict[str, list[str]] = {}
    for outcome in fixed:
        modules = _modules(outcome)
        groups.join(modules)
        by_arch.setdefault(outcome.record.arch or outcome.record.cls, []).extend(modules)
    for modules in by_arch.values():
        groups.join(modules)
    members: dict[str, tuple[list[Outcome], list[Rewrite]]] = {}
    for rewrite in rewrites:
        members.setdefault(groups.find(written_modules(rewrite)[0]), ([], []))[1].append(rewrite)
    for outcome in fixed:
        written = [m for m in _modules(outcome) if m in by_module]
        if not written:
            raise ValueError(f"{outcome.record.cls}: a fix that writes no file")  # plan_fix never keeps one
        members[groups.find(written[0])][0].append(outcome)
    orphans = [r.path for outs, rws in members.values() if not outs for r in rws]
    if orphans:
        raise ValueError(f"rewrites that no fixed drafter needs: {', '.join(orphans)}")
    families = [Family(family_name(outs), outs, sorted(rws, key=lambda r: r.path)) for outs, rws in members.values()]
    names = [f.name for f in families]
    for family in families:  # two families of the same class name: say which architectures
        if names.count(family.name) > 1:
            archs = sorted({o.record.arch or o.record.cls for o in family.outcomes})
            family.name += f" ({', '.join(archs)})"
    return sorted(families, key=lambda f: f.name.lower())
