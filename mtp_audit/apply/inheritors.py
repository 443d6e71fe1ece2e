"""Every class in the tree that would inherit a planned ``get_top_tokens``, drafter or not.

The plan's safety check analyses registered drafters only; a method written
into a shared base also reaches model classes that no speculator holds (the
Transformers backend's ``CausalMixin`` is the base of ``TransformersForCausalLM``
and its variants). A reviewer wants those named. Subclasses are found by
name: a module can only subclass a class whose name (or the name of a
subclass of it), or another name bound to it (``import ... as``, ``Alias = Base``),
appears in a class statement's base list, so only those modules are indexed,
round after round, until no new subclass turns up; the MRO then decides.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from weakref import WeakKeyDictionary

from ..cache.store import SOURCE_LIMIT, read_regular
from ..classify.analysis import Insertion, Overlay
from ..classify.calls import Contract
from ..index.ast_tools import names_bound, walk, walk_statements
from ..model import PLATFORMS, ClassKey, SourceTree
from ..resolve.mro import Hierarchy
from ..scan import Resolution, Scanner
from ..synthesize.answers import planned_overlay
from .families import module_of
from .plan import SAFE


@dataclass(frozen=True)
class Inheritor:
    """``cls`` inherits the ``get_top_tokens`` written into ``base``, with ``result`` on ``platforms``."""

    base: ClassKey
    cls: ClassKey
    file: str
    platforms: tuple[str, ...]
    drafter: str | None  # its architecture (class name when unregistered) if it is a drafter or a delegate
    result: str  # what it ends up with: "supported/mirror", "supported/divergent: why", ...
    delegate: bool = False  # a delegate of ``drafter`` (its own result, not the drafter's)

    @property
    def role(self) -> str:
        """``drafter X``, ``delegate of drafter X``, or ``not a drafter``."""
        if self.drafter is None:
            return "not a drafter"
        return f"{'delegate of ' if self.delegate else ''}drafter {self.drafter}"


# ``super().get_top_tokens`` (``super(Cls, self)`` too) or ``Name.get_top_tokens(self, ...)``: an inherited one
_REACHES_INHERITED = re.compile(
    r"super\([^)]*\)\s*\.\s*get_top_tokens\b|\b\w+\s*\.\s*get_top_tokens\s*\(\s*self\s*[,)]"
)
_CLASS_HEAD = re.compile(rb"class[ \t]+[A-Za-z_]\w*[ \t]*\(")  # a literal start: found fast
_HEAD_CLOSE = re.compile(rb"\)[ \t]*:")  # the end of a class statement's header
_WORD = re.compile(rb"[A-Za-z_]\w*")
# ``X as Y`` (an import or a ``with``): Y may be X under another name. Found from the literal
# ``as``, the word before it read back (a pattern that starts with a word would try every byte).
_AS_ALIAS = re.compile(rb"as[ \t]+([A-Za-z_]\w*)")
_REVERSED_WORD_BEFORE = re.compile(rb"[ \t]+(\w*[A-Za-z_])")  # matched on the bytes before ``as``, reversed
_WORD_REACH = 200  # bytes read back for the word before ``as``
# ``Y = X``, ``Y: T = X``, ``Y = mod.X`` on a line of its own (LF or CRLF): Y may be X under another name
_ASSIGNED = rb"([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=[ \t]*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)[ \t]*(?:#[^\n]*)?\r?(?=\n|\Z)"
# at the top level (groups 1, 2), or the body of a top-level ``if``/``try``/``for``/``with``/... (its
# indented lines, group 3): a class statement the facts know is at the top level or in such a block,
# and reads the names bound there. One pass over the lines that start at column 0.
_TOP_ASSIGNED_OR_BLOCK = re.compile(
    rb"\n(?=[A-Za-z_])(?:"
    + _ASSIGNED
    + rb"|(?:if|elif|else|try|except|finally|for|while|with|async)\b[^\n]*((?:\n[ \t]+[^\n]*|\n[ \t]*(?=\n))+))"
)
_NESTED_ASSIGNED = re.compile(rb"^[ \t]+" + _ASSIGNED, re.M)
_BASES_SPAN = 4000  # bytes of a base list read at most (they are a line or a few)
_BASE_NAMES: WeakKeyDictionary[Scanner, BaseNames] = WeakKeyDictionary()
_PENDING: WeakKeyDictionary[Scanner, Callable[[], BaseNames]] = WeakKeyDictionary()


class BaseNames:
    """Which modules of the tree name a word in a class statement's base list, read once.

    A module can only subclass a class whose name (or the name of a subclass of it),
    or a name some module binds to it, appears in the base list of one of its class
    statements: only those modules need their facts read. Found by text, generously (a
    base list runs to the ``):`` that ends the header; a comment or string in it only
    adds words; any ``X as Y`` or ``Y = X`` line anywhere makes Y a spelling of X), and
    the facts decide.
    """

    def __init__(self, tree_root: Path, package: Path):
        self.modules: dict[bytes, set[str]] = {}
        self.aliases: dict[bytes, set[bytes]] = {}  # name -> names that may be bound to what it is bound to
        for path in _python_files(str(package)):
            try:  # only a regular file: a FIFO would hang the read, /dev/zero behind a symlink fill memory
                data = read_regular(path, SOURCE_LIMIT, follow_symlinks=True)
            except OSError:  # unreadable, or no regular file: it cannot be indexed, and the scan says why
                continue
            for original, alias in _aliases(b"\n" + data):
                if original != alias:
                    self.aliases.setdefault(original, set()).add(alias)
            if b"class" not in data:
                continue
            module = module_of(os.path.relpath(path, tree_root).replace(os.sep, "/"))
            for word in _base_words(data):
                self.modules.setdefault(word, set()).add(module)

    def spellings(self, names: set[str]) -> set[str]:
        """``names`` and every name that may be bound to one of them, through any chain of aliases."""
        found = {name.encode() for name in names}
        fresh = set(found)
        while fresh:
            fresh = {alias for name in fresh for alias in self.aliases.get(name, ())} - found
            found |= fresh
        return {name.decode() for name in found}

    def mentioning(self, names: set[str]) -> list[str]:
        """Modules with a class statement that names one of ``names``, or of their aliases, among its bases."""
        return self.naming(self.spellings(names))

    def naming(self, words: set[str]) -> list[str]:
        """Modules with a class statement that names one of ``words`` among its bases."""
        return sorted({module for word in words for module in self.modules.get(word.encode(), ())})


def _python_files(top: str) -> Iterator[str]:
    """The ``*.py`` paths under ``top``, as ``Path.rglob`` finds them (symlinked folders are not
    entered), without its per-path objects: a whole vLLM package is 3,600 files, read on every fix."""
    for folder, _, names in os.walk(top):
        for name in names:
            if name.endswith(".py"):
                yield os.path.join(folder, name)


def _aliases(data: bytes) -> Iterator[tuple[bytes, bytes]]:
    """(X, Y) for each ``X as Y``, and each ``Y = X`` at the top level or in a top-level block
    (``data`` starts with a newline)."""
    for found in _AS_ALIAS.finditer(data):
        start = found.start()
        if data[start - 1] in b" \t":  # ``as`` is a word of its own, not the end of ``has``
            before = _REVERSED_WORD_BEFORE.match(data[start - 1 : max(0, start - _WORD_REACH) or None : -1])
            if before:
                yield before[1][::-1], found[1]
    for alias, original, block in _TOP_ASSIGNED_OR_BLOCK.findall(data):
        if block:
            yield from ((o, a) for a, o in _NESTED_ASSIGNED.findall(block))
        elif alias:
            yield original, alias


def _base_words(data: bytes) -> set[bytes]:
    words: set[bytes] = set()
    for head in _CLASS_HEAD.finditer(data):
        if data[data.rfind(b"\n", 0, head.start()) + 1 : head.start()].strip():
            continue  # not at the start of a line: not a class statement
        start = head.end()
        close = _HEAD_CLOSE.search(data, start, start + _BASES_SPAN)  # no such match: every word in reach
        words.update(_WORD.findall(data, start, close.start() if close else start + _BASES_SPAN))
    return words


def find_inheritors(scanner: Scanner, resolutions: list[Resolution], insertions: list[Insertion]) -> list[Inheritor]:
    """Every subclass (on any platform) of a class the plan writes into, with what it gets."""
    if not insertions:
        return []
    texts = _base_names(scanner)
    overlay = planned_overlay(insertions, scanner.hierarchies[PLATFORMS[0]])
    drafters = {res.key: (res.entry.arch or res.key.name, False) for res in resolutions}
    for res in resolutions:  # a drafter's delegates serve it: they are part of the drafter
        for analysis in res.analyses.values():
            for delegate in analysis.delegates:
                drafters.setdefault(delegate, (res.entry.arch or res.key.name, True))
    contracts = {res.key: res.contract for res in resolutions}  # a drafter is judged by its callers' calls
    found: list[Inheritor] = []
    for key, reached in _subclasses(scanner, texts, set(overlay)).items():
        for base, platforms in reached.items():
            found.append(
                Inheritor(
                    base,
                    key,
                    scanner.hierarchies[platforms[0]].file_of(key),
                    tuple(platforms),
                    drafters[key][0] if key in drafters else None,
                    _result(scanner, key, platforms, overlay, contracts.get(key)),
                    key in drafters and drafters[key][1],
                )
            )
    return sorted(found, key=lambda i: (i.base.module, i.base.name, i.file, i.cls.line))


def base_names_of(tree: SourceTree) -> BaseNames:
    return BaseNames(tree.root, tree.package_dir or tree.root)


def expect_base_names(scanner: Scanner, pending: Callable[[], BaseNames]) -> None:
    """``pending()`` gives the tree's ``BaseNames`` (read by another process while this one scanned);
    it is asked for only if a search needs it."""
    _PENDING[scanner] = pending


def _base_names(scanner: Scanner) -> BaseNames:
    """The tree's ``BaseNames``, read once per scan: placement, the plan and the fix ask several times."""
    texts = _BASE_NAMES.get(scanner)
    if texts is None:
        pending = _PENDING.pop(scanner, None)
        texts = pending() if pending is not None else base_names_of(scanner.tree)
        _BASE_NAMES[scanner] = texts
    return texts


def _subclasses(scanner: Scanner, texts: BaseNames, bases: set[ClassKey]) -> dict[ClassKey, dict[ClassKey, list[str]]]:
    """Subclass -> the first of ``bases`` in its MRO (whose method it gets) -> on which platforms; through
    an undecided base, the first in each order it may have.

    Only classes whose base list names a known class or subclass get an MRO computed.
    """
    found: dict[ClassKey, dict[ClassKey, list[str]]] = {}
    names, searched = {b.name for b in bases}, set()
    while names - searched:
        fresh = names - searched
        searched |= fresh
        spelled = texts.spellings(fresh)
        word = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, spelled))) + r")\b")
        for module in texts.naming(spelled):
            facts = scanner.index.facts(module)
            if facts is None or facts.parse_error:
                continue
            for cls in facts.classes:
                key = ClassKey(module, cls.name, cls.line)
                if key in bases or key in found or not any(word.search(b) for b in cls.bases):
                    continue
                reached: dict[ClassKey, list[str]] = {}
                for platform in PLATFORMS:
                    if platform in facts.import_errors:
                        continue
                    hierarchy = scanner.hierarchies[platform]
                    for order in hierarchy.orders(key):  # one, unless a base is undecided
                        nearest = next((c for c in order if c in bases), None)  # the method it really gets
                        if nearest is not None and _own_method_before(hierarchy, order, nearest):
                            continue  # a class before it defines get_top_tokens: nothing is inherited
                        if nearest is not None and platform not in reached.get(nearest, ()):
                            reached.setdefault(nearest, []).append(platform)
                if reached:
                    found[key] = reached
                    names.add(cls.name)
    return found


def _own_method_before(hierarchy: Hierarchy, order: list, base: ClassKey) -> bool:
    """Whether a class before ``base`` in ``order`` defines a ``get_top_tokens`` of its own that reaches no
    inherited one (``super().get_top_tokens(...)``, ``Base.get_top_tokens(self, ...)`` may reach ``base``'s; the
    processor's ``self.logits_processor.get_top_tokens(...)`` does not): the class keeps that method, whatever is
    written into ``base``."""
    for cls in order:
        if cls == base:
            return False
        facts = hierarchy.class_facts(cls) if isinstance(cls, ClassKey) else None
        if facts is not None and "get_top_tokens" in facts.defined_methods:
            method = facts.methods.get("get_top_tokens")
            return method is None or not _REACHES_INHERITED.search(method.text)
    return False


def _result(
    scanner: Scanner, key: ClassKey, platforms: list[str], overlay: Overlay, contract: Contract | None = None
) -> str:
    """What the class's record would say with the plan written (a drafter's as its callers call it)."""
    results = []
    for platform in platforms:
        after = scanner.analyzers[platform].analyze(key, overlay, contract=contract)
        label = after.status.value + (f"/{after.consistency.value}" if after.consistency else "")
        if after.consistency not in SAFE:
            label += f": {after.reason}"
        if label not in results:
            results.append(label)
    return "; ".join(results)


def name_clashes(scanner: Scanner, bases: list[ClassKey], name: str) -> dict[ClassKey, str]:
    """Class of ``bases`` -> where it, a class of the tree that inherits from it (on any platform), or
    a class of the tree in either's MRO binds ``name`` itself, and what the added method would do
    there, in words; classes where none does are left out.

    A method ``name`` added to a base, and called as ``self.name(...)`` by its ``compute_logits``,
    reaches such a class's instances as that class's own ``name``, not the one added: its
    inherited ``compute_logits`` changes silently (``fix --factor-pre-head``'s helper). A class after
    the base in the MRO (a base of it, a mixin listed after it) loses its own ``name`` the other way:
    the added method overrides it for every caller, that class's own code included.
    """
    texts = _base_names(scanner)
    parsed: dict[str, ast.Module | None] = {}
    clashes: dict[ClassKey, str] = {}
    for base in bases:
        for key in [base, *_subclasses(scanner, texts, {base})]:
            ahead, behind = _around(scanner, key, base)
            for owner in [*ahead, *behind]:
                file = scanner.hierarchies[PLATFORMS[0]].file_of(owner)
                if file not in parsed:
                    try:
                        parsed[file] = ast.parse((scanner.tree.root / file).read_bytes())
                    except (OSError, SyntaxError, ValueError):  # its facts were read: the file changed since
                        parsed[file] = None
                tree = parsed[file]
                node = next((c for c in _class_nodes(tree) if (c.name, c.lineno) == (owner.name, owner.line)), None)
                line = _binding_line(node, name) if node else None
                if tree is None or node is None or line is not None:
                    how = f"binds {name} (line {line})" if line is not None else "cannot be read again"
                    who = (
                        "it"
                        if key == base
                        else f"its subclass {key.name} ({scanner.hierarchies[PLATFORMS[0]].file_of(key)}:{key.line})"
                    )
                    via = "" if owner == key else f" through {owner.name} ({file}:{owner.line}), which"
                    if owner in behind:
                        clashes[base] = (
                            f"{who} inherits from {owner.name} ({file}:{owner.line}), which {how}: a {name} added to "
                            f"{base.name} would override that one for every caller, {owner.name}'s own code included"
                        )
                    else:
                        clashes[base] = f"{who}{via} {how}, and {base.name}.compute_logits would call that one there"
                    break
            if base in clashes:
                break
    return clashes


def _around(scanner: Scanner, key: ClassKey, base: ClassKey) -> tuple[list[ClassKey], list[ClassKey]]:
    """The tree's classes that ``key``'s MRO puts before ``base`` on any platform, in any order it may
    have (``key`` itself and its mixins), and those it puts after ``base`` (``base``'s own bases, a mixin
    listed after it)."""
    ahead, behind = [key], []
    for platform in PLATFORMS:
        for classes in scanner.hierarchies[platform].orders(key):
            if base in classes:
                at = classes.index(base)
                ahead += [c for c in classes[:at] if isinstance(c, ClassKey) and c not in ahead]
                behind += [c for c in classes[at + 1 :] if isinstance(c, ClassKey) and c not in behind]
    return ahead, [c for c in behind if c not in ahead]


def _class_nodes(tree: ast.Module | None) -> list[ast.ClassDef]:
    """The classes the facts know (at the top level, or under an ``if`` or ``try`` there)."""
    return [n for n in walk_statements(tree.body) if isinstance(n, ast.ClassDef)] if tree else []


def _binding_line(cls: ast.ClassDef, name: str) -> int | None:
    """Where the class binds ``name``: a ``def``, an assignment or an import in its body (an ``if``,
    ``for``, ``with`` or ``try`` there included), or ``<anything>.name = ...`` in one of its methods;
    None when it does not."""
    for node in walk(cls):
        if isinstance(node, ast.Attribute) and node.attr == name and _stored(node):
            return node.lineno
    for statement in walk_statements(cls.body):
        if name in names_bound(statement):
            return statement.lineno
    return None


def _stored(node: ast.Attribute) -> bool:
    return isinstance(node.ctx, ast.Store)
