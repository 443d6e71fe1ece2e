"""Stage 3c: the registry dicts, and drafter-looking classes where there is no registry."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ..errors import UsageError
from ..index.ast_tools import TRIES, unparse, walk
from ..index.modules import ModuleIndex
from ..index.platforms import literal_string
from ..locate import REGISTRY
from ..model import RegistryEntry

MODELS_PACKAGE = "vllm.model_executor.models"
SPECULATIVE = "_SPECULATIVE_DECODING_MODELS"
# Other registry dicts hold a few drafters too (the Transformers-backend MTP entries).
DRAFTER_NAME = re.compile(r"(MTP|Eagle|DFlash|DSpark|Draft|Medusa|MLPSpeculator)", re.IGNORECASE)
# Outside _SPECULATIVE_DECODING_MODELS "Eagle" also names target models (Eagle2.5-VL).
OTHER_DICT_DRAFTER = re.compile(r"(MTP|DFlash|DSpark|DraftModel|Medusa|MLPSpeculator)")
DRAFTER_FILE = re.compile(r"(_mtp|eagle|dflash|dspark|draft|medusa)", re.IGNORECASE)
# What a plugin scan looks for, in the words the CLI reports it with.
PLUGIN_HEURISTIC = (
    "drafter-named classes (MTP, Eagle, DFlash, DSpark, Draft, Medusa, MLPSpeculator) with "
    "compute_logits or get_top_tokens, in drafter-named files (*_mtp*, *eagle*, *dflash*, "
    "*dspark*, *draft*, *medusa*)"
)


def read_registry(index: ModuleIndex) -> list[RegistryEntry]:
    """The registry's drafter entries (what could not be read is dropped: see ``registry_reading``)."""
    return registry_reading(index)[0]


def registry_reading(index: ModuleIndex) -> tuple[list[RegistryEntry], list[str]]:
    """The registry's drafter entries, and one warning per part of ``_SPECULATIVE_DECODING_MODELS``
    that cannot be read statically (its line and text), so that no drafter is dropped unsaid."""
    assert index.tree.package_dir is not None
    path = index.tree.package_dir / REGISTRY
    rel = index.relative(path)
    try:
        module = ast.parse(index.read_bytes(path))
    except OSError as error:
        raise UsageError(f"{rel}: cannot be read ({error.strerror or error}); cannot read the registry") from None
    except (SyntaxError, ValueError) as error:
        # a null byte: a SyntaxError without a line, or a ValueError on older Pythons
        where = f"syntax error at line {error.lineno}" if getattr(error, "lineno", None) else str(error)
        raise UsageError(f"{rel}: {where}; cannot read the registry") from None
    builder = _Builder()
    for statement in module.body:
        builder.statement(statement)
    dicts = builder.dicts
    if SPECULATIVE not in dicts:
        raise UsageError(f"{rel}: no {SPECULATIVE} dict; is this a vLLM tree?")
    speculative = dicts[SPECULATIVE]
    if speculative is None:
        raise UsageError(f"{rel}: {SPECULATIVE} is not a dict literal; mtp-audit reads it statically")
    reported = {id(item) for item in speculative.items.values()}
    entries = [
        RegistryEntry(arch, mod, cls, SPECULATIVE) for _, arch, mod, cls in _entries(speculative, rel, SPECULATIVE)
    ]
    for name, value in dicts.items():
        if name == SPECULATIVE or value is None:
            continue
        for item, arch, mod, cls in _entries(value, rel, name, strict=False):
            if id(item) not in reported and (OTHER_DICT_DRAFTER.search(arch) or OTHER_DICT_DRAFTER.search(cls)):
                reported.add(id(item))  # a dict spread into a later one is reported once, under its own name
                entries.append(RegistryEntry(arch, mod, cls, name))
    notes = [
        f"{rel}:{line}: `{text}`: {why}; {SPECULATIVE} may hold drafters mtp-audit does not see"
        for line, text, why in speculative.gaps
    ]
    return entries, notes


@dataclass
class _Item:
    """One entry of a registry dict as written: its key (None when not a string) and value."""

    arch: str | None
    value: ast.expr
    line: int


@dataclass
class _Dict:
    """A module-level dict as Python builds it: entries by key in insertion order (a later value
    replaces an earlier one in place), and the parts that could not be read (line, text, why)."""

    items: dict[str, _Item] = field(default_factory=dict)
    odd_keys: list[_Item] = field(default_factory=list)  # keys that are not string literals
    gaps: list[tuple[int, str, str]] = field(default_factory=list)

    def merge(self, other: _Dict) -> None:
        """``self.update(other)``: the other's entries, and what could not be read of it."""
        self.items.update(other.items)
        self.odd_keys.extend(other.odd_keys)
        self.gaps.extend(g for g in other.gaps if g not in self.gaps)

    def add(self, key: ast.expr, value: ast.expr) -> None:
        arch = literal_string(key)
        item = _Item(arch, value, key.lineno)
        if arch is None:
            self.odd_keys.append(item)
        else:
            self.items[arch] = item

    def gap(self, node: ast.AST, why: str, text: str | None = None) -> None:
        """Something the builder cannot follow: it is reported, never dropped unsaid."""
        self.gaps.append((node.lineno, _short(text or unparse(node)), why))


def _short(text: str) -> str:
    """Source text for a one-line warning."""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


NOT_A_DICT = "not a dict literal, nor a dict bound earlier in this module"
NOT_FOLLOWED = "a change mtp-audit does not follow"
# Methods that change a dict in ways the builder does not follow.
MUTATORS = frozenset({"pop", "popitem", "clear", "setdefault", "__setitem__", "__delitem__", "__ior__"})
BLOCKS = (ast.If, *TRIES, ast.With, ast.For, ast.While, ast.Match)


class _Builder:
    """Runs a registry module's top-level statements as Python would, on its dicts only.

    A dict literal (with ``**`` of dicts it knows), ``A | B``, ``A |= B``, ``A[key] = value``,
    ``A.update(...)`` and ``del A[key]`` are followed in order; a name bound to anything else maps
    to None. What cannot be followed is recorded on the dict it touches (``_Dict.gaps``).
    """

    def __init__(self) -> None:
        self.dicts: dict[str, _Dict | None] = {}  # in order of first binding, as the old reader kept them

    def known(self, node: ast.expr) -> _Dict | None:
        """The dict a name refers to (the same object: ``B = A`` makes an alias, as in Python)."""
        return self.dicts.get(node.id) if isinstance(node, ast.Name) else None

    def value(self, node: ast.expr) -> _Dict | None:
        """The dict an expression builds, None when it is not one the builder can read."""
        if isinstance(node, ast.Dict):
            built = _Dict()
            for key, item in zip(node.keys, node.values):
                if key is not None:
                    built.add(key, item)
                else:
                    self.spread(built, item)
            return built
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            left, right = self.value(node.left), self.value(node.right)
            if left is None and right is None:
                return None  # flags or sets, not dicts
            built = _Dict()
            for side, part in ((left, node.left), (right, node.right)):
                if side is None:
                    built.gap(part, NOT_A_DICT)
                else:
                    built.merge(side)
            return built
        return self.known(node)

    def spread(self, into: _Dict, node: ast.expr, statement: ast.AST | None = None) -> None:
        """``into.update(node)`` (``**node`` inside a literal when no statement is given), or a gap."""
        other = self.value(node)
        if other is not None:
            into.merge(other)
        elif statement is None:
            into.gap(node, NOT_A_DICT, f"**{unparse(node)}")
        else:
            into.gap(statement, f"`{_short(unparse(node))}` is {NOT_A_DICT}")

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):  # ``A = B = {...}``: one dict, bound to each target in turn
            built = self.value(node.value)
            for target in node.targets:
                self.assign(target, node.value, built)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self.assign(node.target, node.value, self.value(node.value))
        elif isinstance(node, ast.AugAssign) and self.known(node.target) is not None:
            target = self.known(node.target)
            if isinstance(node.op, ast.BitOr):
                self.spread(target, node.value, node)
            else:
                target.gap(node, NOT_FOLLOWED)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.method_call(node.value)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self.delete(target, node)
        elif isinstance(node, BLOCKS):
            self.in_block(node)

    def assign(self, target: ast.expr, value: ast.expr, built: _Dict | None) -> None:
        """``target = value``, where ``value`` builds ``built`` (evaluated once, as Python does)."""
        if isinstance(target, ast.Name):
            self.dicts[target.id] = built
        elif isinstance(target, ast.Subscript) and self.known(target.value) is not None:
            self.known(target.value).add(target.slice, self.entry_value(value))
        elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):  # unpacking: bound to values not read
            for name in walk(target):
                if isinstance(name, ast.Name):
                    self.dicts[name.id] = None

    def entry_value(self, value: ast.expr) -> ast.expr:
        """``A["NEW"] = A["OLD"]``: the value ``A["OLD"]`` holds now; any other value as written."""
        source = self.known(value.value) if isinstance(value, ast.Subscript) else None
        key = literal_string(value.slice) if source is not None else None  # type: ignore[attr-defined]
        found = source.items.get(key) if source is not None and key is not None else None
        return found.value if found is not None else value

    def method_call(self, call: ast.Call) -> None:
        func = call.func
        owner = self.known(func.value) if isinstance(func, ast.Attribute) else None
        if owner is None:
            return
        if func.attr == "update":
            for argument in call.args:
                self.spread(owner, argument, call)
            for keyword in call.keywords:
                if keyword.arg is None:
                    self.spread(owner, keyword.value, call)
                else:
                    owner.items[keyword.arg] = _Item(keyword.arg, keyword.value, keyword.value.lineno)
        elif func.attr in MUTATORS:
            owner.gap(call, NOT_FOLLOWED)

    def delete(self, target: ast.expr, statement: ast.Delete) -> None:
        owner = self.known(target.value) if isinstance(target, ast.Subscript) else None
        if owner is None:
            return
        arch = literal_string(target.slice)
        if arch is None:
            owner.gap(statement, "a key that is not a string")
        else:
            owner.items.pop(arch, None)

    def in_block(self, block: ast.stmt) -> None:
        """A dict changed under ``if``/``try``/``for``/...: whether it runs is not decided, so not read."""
        kind = type(block).__name__.lower().replace("star", "")
        for node in _simple_statements(block):
            for touched in self.touched(node):
                touched.gap(node, f"inside a module-level `{kind}` block, which mtp-audit does not follow")

    def touched(self, node: ast.stmt) -> list[_Dict]:
        """The known dicts a statement binds or changes."""
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and (func.attr == "update" or func.attr in MUTATORS):
                targets = [func]
        found = []
        for target in targets:
            owner = self.known(target.value if isinstance(target, (ast.Subscript, ast.Attribute)) else target)
            if owner is not None and owner not in found:
                found.append(owner)
        return found


def _simple_statements(block: ast.stmt):
    """The statements run inside a block, through nested blocks, not into functions or classes."""
    for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(block, field_name, []):
            if isinstance(child, (*BLOCKS, ast.ExceptHandler, ast.match_case)):
                yield from _simple_statements(child)
            elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield child


def _entries(value: _Dict, rel: str, name: str, strict: bool = True):
    """(item, arch, module, class) of each readable entry; in the speculative dict (``strict``) an
    entry that is not a string key and a (module, class) string pair stops the scan."""
    if strict and value.odd_keys:
        raise UsageError(
            f"{rel}: an entry of {name} is not a (module, class) string pair (line {value.odd_keys[0].line})"
        )
    for arch, item in value.items.items():
        pair = [literal_string(e) for e in item.value.elts] if isinstance(item.value, (ast.Tuple, ast.List)) else []
        if len(pair) != 2 or None in pair:
            if strict:
                raise UsageError(f"{rel}: an entry of {name} is not a (module, class) string pair (line {item.line})")
            continue
        module_name, cls = pair
        if not all(part.isidentifier() for part in module_name.split(".")):
            # "..x", "." or "/etc/x" would name files outside the package (or nothing at all)
            raise UsageError(
                f"{rel}: {name}[{arch!r}] names module {module_name!r}, which is not a dotted "
                "module name; mtp-audit reads only modules inside the tree"
            )
        # as vLLM's _resolve_module_name: a full path starts with "vllm.", anything else is under models/
        full = module_name if module_name.startswith("vllm.") else f"{MODELS_PACKAGE}.{module_name}"
        yield item, arch, full, cls


def heuristic_entries(index: ModuleIndex) -> list[RegistryEntry]:
    """Drafters in a plugin tree: classes named like drafters in drafter-named files.

    Heuristic: a file whose name contains _mtp, eagle, dflash, dspark, draft or
    medusa, and a top-level class whose name contains MTP, Eagle, DFlash,
    DSpark, Draft, Medusa or MLPSpeculator. Whether it has ``compute_logits``
    is decided later, through its MRO.
    """
    root = index.tree.root
    entries = []
    try:
        paths = sorted(root.rglob("*.py"))
    except OSError as error:
        raise UsageError(f"{error.filename or root}: cannot be read ({error.strerror or error})") from None
    for path in paths:
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in {"__pycache__", "tests", "test"} for part in rel.parts):
            continue
        if not DRAFTER_FILE.search(path.stem):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        facts = index.facts(module)
        if facts is None or facts.parse_error:
            continue
        for cls in facts.classes:
            if DRAFTER_NAME.search(cls.name) and not cls.name.startswith("_"):
                entries.append(RegistryEntry(None, module, cls.name, "heuristic"))
    return entries
