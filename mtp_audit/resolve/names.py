"""Stage 3a: follow a name through imports, aliases, re-exports and dispatch.

Resolution is per platform: the same ``from pkg import X`` can land on a
different class definition on ROCm than on CUDA. A reason never names the platform it
was found on (whoever shows it lists the platforms), so that the same failure on every
platform is one unresolved entry, one record, not one per platform.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from ..cache import DIRECTORY
from ..index.fact_types import Target
from ..index.modules import ModuleIndex
from ..model import ClassKey
from .attempts import holding


@dataclass(frozen=True)
class ModuleRef:
    module: str


@dataclass(frozen=True)
class External:
    """Defined outside the scanned tree (torch, transformers, typing, ...): terminal."""

    name: str


@dataclass(frozen=True)
class Missing:
    """No class: ``undecided`` when the tool could not follow the name (not that Python would fail);
    ``unparsed``: the module whose syntax error stops it (importing that module raises SyntaxError)."""

    reason: str
    undecided: bool = False
    unparsed: str | None = None


Resolved = ClassKey | ModuleRef | External | Missing


def resolve_name(
    index: ModuleIndex,
    module: str,
    name: str,
    platform: str,
    _seen: frozenset = frozenset(),
    bound: list[Target] | None = None,
) -> list[Resolved]:
    """What ``name`` in ``module`` is on ``platform``: by its final binding, or by ``bound`` (its binding
    at some earlier statement, such as a class statement whose base it is)."""
    key = (module, name)
    if key in _seen:
        return [Missing(f"import cycle through {module}.{name}")]
    seen = _seen | {key}
    facts = index.facts(module)
    if facts is None:
        head = module.split(".", 1)[0]
        if head != module and index.is_module(head) and not index.is_module(module):
            if index.kind(index.tree.root.joinpath(*module.split("."))) == DIRECTORY:  # a namespace package
                return [
                    Missing(
                        f"{module} is a folder without __init__.py (a namespace package), which defines nothing: "
                        f"importing {name} from it raises ImportError"
                    )
                ]
            return [Missing(f"{module} is no module of the tree: importing {name} from it raises ModuleNotFoundError")]
        return [External(f"{module}.{name}")]
    error = index.import_error(module, platform)
    if error:
        return [Missing(error, unparsed=index.unparsed(module))]
    bindings = facts.bindings.get(platform, {})
    targets = bound if bound is not None else bindings.get(name)
    if targets is None:
        if index.is_module(f"{module}.{name}"):
            return [ModuleRef(f"{module}.{name}")]
        found = _from_stars(index, bindings, name, platform, seen)
        if found:
            return found
        if platform in facts.unlisted:
            return [Missing(f"{facts.path}: {name} is not bound; {facts.unlisted[platform]}", True)]
        unbound_by = facts.unbound.get(platform, {}).get(name)
        if unbound_by is not None:
            return [Missing(f"{facts.path}:{unbound_by}")]
        return [Missing(f"{facts.path}: {name} is not defined{_left_out(index, bindings, name, platform)}")]
    if bound is None:
        found = _from_stars(index, bindings, name, platform, seen, after=name)
        if found:
            return found
    targets, uncaught = holding(index, targets, platform)
    if uncaught:
        return [Missing(f"{facts.path}: {uncaught}")]
    out: list[Resolved] = []
    for target in targets:
        rebound = _last_star_giving(index, target.stars_after, name, platform, seen, scanned_only=True)
        if rebound:
            out.extend(rebound)
        elif target.kind == "class":
            cls = facts.class_at(int(target.a))
            out.append(ClassKey(module, cls.name, cls.line) if cls else Missing(f"{facts.path}: class {name}"))
        elif target.kind == "import":
            sub = f"{target.a}.{target.b}"
            if index.is_module(sub):
                out.append(ModuleRef(sub))
            else:
                out.extend(resolve_name(index, target.a, target.b, platform, seen))
        elif target.kind == "module":
            out.append(ModuleRef(target.a) if index.is_module(target.a) else External(target.a))
        elif target.kind == "unavailable":
            out.append(Missing(f"{facts.path}: {target.a}"))
        elif target.kind == "constant":  # a value, never a class: decided, that platform has none
            out.append(Missing(f"{facts.path}:{target.b}: {name} = {target.a}"))
        elif target.b:  # a statement that binds it in a way not followed (``X = make()``, a loop, ``A, B = pair``)
            out.append(Missing(f"{facts.path}: cannot follow {name} (line {target.b}: {target.a})", undecided=True))
        else:
            out.append(Missing(f"{facts.path}: cannot follow {name} ({target.a})", undecided=True))
    return _dedupe(out)


def deciding_ifs(
    index: ModuleIndex, module: str, name: str, platform: str, _seen: frozenset = frozenset()
) -> list[str]:
    """The ``if`` statements the tool cannot decide that choose what ``name`` in ``module`` is on ``platform``,
    each as ``file:line: if ...:``, following imports: when a name may be several classes, which one Python
    binds depends on them."""
    facts = index.facts(module)
    if facts is None or (module, name) in _seen:
        return []
    targets = facts.bindings.get(platform, {}).get(name, [])
    found = [f"{facts.path}:{choice}" for target in targets for choice in target.under]
    for target in targets:
        if target.kind == "import":
            found.extend(deciding_ifs(index, target.a, target.b, platform, _seen | {(module, name)}))
    return list(dict.fromkeys(found))


def _from_stars(
    index: ModuleIndex,
    bindings: dict[str, list[Target]],
    name: str,
    platform: str,
    seen: frozenset,
    after: str | None = None,
) -> list[Resolved] | None:
    """What the star imports give ``name``, the last that has it winning (each rebinds what the statements
    before bound); with ``after``, only the star imports run after that name's own binding (the bindings keep
    statement order), and only those of scanned modules: whether torch's ``*`` has the name is unknown, so
    the explicit binding stays. None: no star import gives it."""
    keys = list(bindings)
    later = keys[keys.index(after) + 1 :] if after in bindings else keys
    stars = tuple(bindings[key][0].a for key in later if key.startswith("*"))
    return _last_star_giving(index, stars, name, platform, seen, scanned_only=after is not None)


def _last_star_giving(
    index: ModuleIndex, modules: tuple[str, ...], name: str, platform: str, seen: frozenset, scanned_only: bool
) -> list[Resolved] | None:
    """What the last of the star-imported ``modules`` that has ``name`` gives it; ``scanned_only``: only
    modules whose exports are known (one rebinding a name already bound must be known to have it)."""
    for module in reversed(modules):
        if (scanned_only and index.facts(module) is None) or not _exported(index, module, name, platform):
            continue
        found = resolve_name(index, module, name, platform, seen)
        if not all(isinstance(r, Missing) for r in found):
            return found
    return None


def _exported(index: ModuleIndex, module: str, name: str, platform: str) -> bool:
    """Whether ``from module import *`` binds ``name``: the names its ``__all__`` lists, or without one every
    name not starting with ``_``; an ``__all__`` that is not a literal list is taken to list it (as though
    read), and so is any name of a module outside the tree."""
    facts = index.facts(module)
    if facts is None:
        return True
    if platform not in facts.exports:
        return not name.startswith("_")
    listed = facts.exports[platform]
    return listed is None or name in listed


def _left_out(index: ModuleIndex, bindings: dict[str, list[Target]], name: str, platform: str) -> str:
    """Why a star import whose module binds ``name`` does not bring it (empty when none), for the reason."""
    for key in reversed(bindings):
        source = bindings[key][0].a if key.startswith("*") else None
        facts = index.facts(source) if source else None
        if facts is None or name not in facts.bindings.get(platform, {}) or _exported(index, source, name, platform):
            continue
        if platform in facts.exports:
            return f" (from {source} import * leaves it out: not in its __all__)"
        return f" (from {source} import * leaves it out: it starts with _)"
    return ""


def resolve_expression(
    index: ModuleIndex, module: str, code: str, platform: str, bound_then: dict[str, list[Target]] | None = None
) -> list[Resolved]:
    """Resolve a dotted expression such as ``nn.Module`` or ``Generic[T]`` in ``module``; ``bound_then``: names
    bound otherwise where the expression is evaluated than at the end of the module (``ClassFacts.bound_then``)."""
    dotted = code.split("[", 1)[0].strip()
    parts = [p.strip() for p in dotted.split(".")]
    if not parts or not all(p.isidentifier() for p in parts):
        return [Missing(f"cannot follow base {code}")]
    facts = index.facts(module)
    then = (bound_then or {}).get(parts[0])
    bound = then is not None or (facts is not None and parts[0] in facts.bindings.get(platform, {}))
    if not bound and parts[0] in vars(builtins):
        return [External(dotted)]
    current = resolve_name(index, module, parts[0], platform, bound=then)
    for attr in parts[1:]:
        nxt: list[Resolved] = []
        for item in current:
            if isinstance(item, ModuleRef):
                nxt.extend(resolve_name(index, item.module, attr, platform))
            elif isinstance(item, External):
                nxt.append(External(f"{item.name}.{attr}"))
            elif isinstance(item, ClassKey):
                nxt.append(Missing(f"{code}: attribute of class {item.name}"))
            else:
                nxt.append(item)
        current = nxt
    return _dedupe(current)


def _dedupe(items: list[Resolved]) -> list[Resolved]:
    out: list[Resolved] = []
    for item in items:
        if item not in out:
            out.append(item)
    return out
