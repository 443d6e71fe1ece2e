"""Stage 3c: the registry dicts, and drafter-looking classes where there is no registry."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..index.ast_tools import TRIES, unparse, walk
from ..index.modules import ModuleIndex
from ..index.platforms import literal_string, string_values
from ..locate import REGISTRY, registry_file, tree_python_files
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
    that cannot be read statically (its file, line and text), so that no drafter is dropped unsaid.

    An architecture is reported with the class vLLM's ``ModelRegistry`` holds for it: that is built
    from ``_VLLM_MODELS``, so where a later dict merged into it replaces an entry, the replacement
    counts (and the replaced entry is no drafter of that architecture)."""
    assert index.tree.package_dir is not None
    path = registry_file(index.tree.package_dir) or index.tree.package_dir / REGISTRY
    rel = index.relative(path)
    reader = _ModuleReader(index)
    is_package = path.name == "__init__.py"
    builder = reader.done[REGISTRY_MODULE] = _Builder(reader, REGISTRY_MODULE, rel, is_package)
    builder.run(_parse_registry_module(index, path, rel))
    builder.resolved(SPECULATIVE)
    builder.resolved(ALL_MODELS)
    dicts = builder.dicts
    if SPECULATIVE not in dicts:
        raise UsageError(f"{rel}: no {SPECULATIVE} dict; is this a vLLM tree?")
    speculative = dicts[SPECULATIVE]
    if speculative is None:
        where = builder.unread_imports.get(SPECULATIVE)
        raise UsageError(
            f"{rel}: {SPECULATIVE} is imported from {where}; cannot read the registry"
            if where
            else f"{rel}: {SPECULATIVE} is not a dict literal; mtp-audit reads it statically"
        )
    merged = dicts.get(ALL_MODELS)
    # where _VLLM_MODELS is read whole, it is what ModelRegistry holds: an entry outside it is never loaded
    complete = merged is not None and not merged.gaps and not merged.odd_keys

    def held(arch: str, item: _Item) -> _Item | None:
        """The item vLLM's ModelRegistry holds for ``arch`` (None: none, as far as can be read)."""
        if merged is not None and arch in merged.items:
            return merged.items[arch]
        if complete:
            return None
        return speculative.items.get(arch, item)

    entries: list[RegistryEntry] = []
    notes: list[str] = []
    reported: set[int] = set()
    for arch, item in _checked_items(speculative, rel, SPECULATIVE):
        final = held(arch, item)
        if final is None:
            notes.append(
                f"{SPECULATIVE}[{arch!r}] is not in {ALL_MODELS}, which vLLM's ModelRegistry is built from: "
                "not a drafter vLLM loads"
            )
            continue
        pair = _pair(final, rel, final.origin or SPECULATIVE, strict=final is item)
        if pair is None and id(final) not in reported:
            reported.add(id(final))
            notes.append(_unread_entry(arch, final, final.origin or ALL_MODELS))
        elif pair is not None and id(final) not in reported:
            reported.add(id(final))
            entries.append(RegistryEntry(arch, *pair, SPECULATIVE if final is item else final.origin or ALL_MODELS))
    for name, value in dicts.items():
        if name == SPECULATIVE or value is None:
            continue
        for arch, item in value.items.items():
            if id(item) in reported or held(arch, item) is not item:
                continue
            pair = _pair(item, rel, name, strict=False)
            drafter = OTHER_DICT_DRAFTER.search(arch) or (pair is not None and OTHER_DICT_DRAFTER.search(pair[1]))
            if not drafter:
                continue
            reported.add(id(item))  # a dict spread into a later one is reported once, under its own name
            if pair is None:
                notes.append(_unread_entry(arch, item, item.origin or name))
            else:
                entries.append(RegistryEntry(arch, *pair, item.origin or name))
    gaps = [
        f"{file}:{line}: `{text}`: {why}; {SPECULATIVE} may hold drafters mtp-audit does not see"
        for file, line, text, why in speculative.gaps
    ]
    replaced = [
        f"{file}:{line}: `{text}`: {why}; {ALL_MODELS} may give a drafter another class than mtp-audit sees"
        for file, line, text, why in (merged.gaps_after(speculative) if merged is not None else [])
        if (file, line, text, why) not in speculative.gaps
    ]
    return entries, [*gaps, *replaced, *notes]


def _unread_entry(arch: str, item: _Item, name: str) -> str:
    """The warning for a drafter whose value is not a pair the tool can read."""
    return (
        f"{item.file}:{item.line}: {name}[{arch!r}]: `{_short(unparse(item.value))}` is not a (module, class) "
        "string pair mtp-audit can read; this drafter is not audited"
    )


REGISTRY_MODULE = "vllm.model_executor.models.registry"
ALL_MODELS = "_VLLM_MODELS"  # the dict vLLM builds its ModelRegistry from


def _parse_registry_module(index: ModuleIndex, path: Path, rel: str) -> ast.Module:
    """The registry module's tree; a usage error saying why when it cannot be read."""
    try:
        return ast.parse(index.read_bytes(path))
    except OSError as error:
        raise UsageError(f"{rel}: cannot be read ({error.strerror or error}); cannot read the registry") from None
    except (SyntaxError, ValueError) as error:
        # a null byte: a SyntaxError without a line, or a ValueError on older Pythons
        where = f"syntax error at line {error.lineno}" if getattr(error, "lineno", None) else str(error)
        raise UsageError(f"{rel}: {where}; cannot read the registry") from None
    except (RecursionError, MemoryError):
        raise UsageError(f"{rel}: nests too deep to parse; cannot read the registry") from None


class _ModuleReader:
    """The dicts and constants of modules the registry imports them from (``from .x import D``),
    each run once by a builder of its own; a module being run (an import cycle) or that cannot be
    read gives nothing, and says why."""

    def __init__(self, index: ModuleIndex):
        self.index = index
        self.done: dict[str, _Builder | str] = {}

    def builder(self, module: str) -> _Builder | str:
        """The module's builder after its run, or why there is none."""
        if module not in self.done:
            self.done[module] = "part of an import cycle"
            self.done[module] = self._run(module)
        return self.done[module]

    def imported_module(self, module: str, name: str) -> str:
        """The module ``from module import name`` runs: ``module.name`` where that is a submodule of a package."""
        found = self.index.locate(module)
        submodule = f"{module}.{name}"
        return submodule if (found is None or found[1]) and self.index.is_module(submodule) else module

    def run_if_it_changes_dicts(self, module: str) -> None:
        """Run a module of the registry's package now, as its import does, where its top level changes a dict
        (``D["K"] = ...``, ``D.update(...)``, ``D |= ...`` at column 0): such a change reaches dicts another
        module holds (the registry's, a sibling's) even when none of its names is used after the import. Others
        are read only when a name they bind is used."""
        if module in self.done:
            return
        found = self.index.locate(module)
        try:
            data = self.index.read_source(found[0]) if found is not None else b""
        except OSError:
            return  # named where a name of it is used
        if _TOP_LEVEL_DICT_CHANGE.search(data):
            self.builder(module)

    def _run(self, module: str) -> _Builder | str:
        found = self.index.locate(module)
        if found is None:
            return f"{module}, which is not in the tree"
        path, is_package = found
        rel = self.index.relative(path)
        try:
            tree = ast.parse(self.index.read_source(path))
        except OSError as error:
            return f"{rel}, which cannot be read ({error.strerror or error})"
        except (SyntaxError, ValueError) as error:
            return f"{rel}, which does not parse ({error})"
        except (RecursionError, MemoryError):
            return f"{rel}, which nests too deep to parse"
        builder = _Builder(self, module, rel, is_package)
        self.done[module] = builder  # a module importing it back meanwhile sees it as it is so far, as in Python
        builder.run(tree)
        return builder


# A statement at column 0 that may change a dict: a store through a subscript, a changing method, ``|=``.
_TOP_LEVEL_DICT_CHANGE = re.compile(
    rb"^[A-Za-z_][\w.]*(?:\[[^\n]*\]\s*=[^=]|\.(?:update|pop|setdefault|popitem|clear)\(|\s*\|=)", re.MULTILINE
)


@dataclass
class _Item:
    """One entry of a registry dict as written: its key (None when not a string) and value."""

    arch: str | None
    value: ast.expr
    line: int
    nested: _Dict | None = None  # the dict the value is, for a dict of dicts (``_ALL["spec"]``)
    file: str = ""  # the file it is written in (the registry's or a sibling's)
    origin: str | None = None  # the name of the first dict it was bound in


@dataclass
class _Dict:
    """A module-level dict as Python builds it: entries by key in insertion order (a later value
    replaces an earlier one in place), and the parts that could not be read (file, line, text, why)."""

    items: dict[str, _Item] = field(default_factory=dict)
    odd_keys: list[_Item] = field(default_factory=list)  # keys that are not strings
    gaps: list[tuple[str, int, str, str]] = field(default_factory=list)
    # each dict merged in (held, so no other dict takes its id) with len(gaps) just after its last merge
    merged_at: list[tuple[_Dict, int]] = field(default_factory=list)

    def merge(self, other: _Dict) -> None:
        """``self.update(other)``: the other's entries, and what could not be read of it."""
        self.items.update(other.items)
        self.odd_keys.extend(other.odd_keys)
        self.gaps.extend(g for g in other.gaps if g not in self.gaps)
        self.merged_at = [(d, at) for d, at in self.merged_at if d is not other] + [(other, len(self.gaps))]

    def gaps_after(self, other: _Dict) -> list[tuple[str, int, str, str]]:
        """The gaps that came after ``other`` was last merged in (all, if it never was): only those may
        replace its entries (a later key wins)."""
        return self.gaps[next((at for d, at in self.merged_at if d is other), 0) :]

    def add(self, item: _Item) -> None:
        if item.arch is None:
            self.odd_keys.append(item)
        else:
            self.items[item.arch] = item

    def named(self, name: str) -> None:
        """Bound to ``name``: entries first bound here come from it."""
        for item in self.items.values():
            if item.origin is None:
                item.origin = name


def _short(text: str) -> str:
    """Source text for a one-line warning."""
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


NOT_A_DICT = "not a dict literal, nor a dict bound earlier in this module"
NOT_FOLLOWED = "a change mtp-audit does not follow"
# Methods that change a dict in ways the builder does not follow.
MUTATORS = frozenset({"pop", "popitem", "clear", "setdefault", "__setitem__", "__delitem__", "__ior__"})
CHANGES = MUTATORS | {"update"}  # every method that changes a dict
BLOCKS = (ast.If, *TRIES, ast.With, ast.For, ast.While, ast.Match)
# Builtins that read a dict given to them and change nothing (``dict(A)`` copies it).
READ_ONLY_CALLS = frozenset(
    {"dict", "len", "list", "tuple", "set", "sorted", "iter", "print", "repr", "str", "isinstance"}
)
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


class _Builder:
    """Runs a registry module's top-level statements as Python would, on its dicts only.

    A dict literal (with ``**`` of dicts it knows), ``dict(...)``, ``A.copy()``, ``A | B``,
    ``A |= B``, ``A[key] = value``, ``A.update(...)``, ``del A[key]``, a dict of dicts'
    ``A["key"]``, names bound to string constants or (module, class) pairs, tuple unpacking and
    ``from .x import A`` are followed in order; a name bound to anything else maps to None. What
    cannot be followed is recorded on the dict it touches (``_Dict.gaps``), a call of a module
    function that changes a dict included.
    """

    def __init__(self, reader: _ModuleReader, module: str, rel: str, is_package: bool = False) -> None:
        self.reader = reader
        self.module = module
        self.rel = rel
        self.is_package = is_package
        self.modules: dict[str, _Builder] = {}  # names bound to a module of the tree (``import x as y``)
        self.all_names: list[str] | None = None  # ``__all__``, where it is a literal
        self.dicts: dict[str, _Dict | None] = {}  # in order of first binding, as the old reader kept them
        self.constants: dict[str, ast.expr] = {}  # names bound to a string or a tuple of strings
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.unread_imports: dict[str, str] = {}  # name -> the module it is imported from, and why unread
        self.lazy: dict[str, tuple[str, str | None]] = {}  # name -> (module, attribute) an import bound, unread yet

    def run(self, module: ast.Module) -> None:
        for statement in module.body:
            self.changes_by_calls(statement)
            self.mutations_in_expressions(statement)
            self.statement(statement)

    def gap(self, into: _Dict, node: ast.AST, why: str, text: str | None = None) -> None:
        """Something the builder cannot follow: it is reported, never dropped unsaid."""
        into.gaps.append((self.rel, node.lineno, _short(text or unparse(node)), why))

    def known(self, node: ast.expr, read_imports: bool = True) -> _Dict | None:
        """The dict a name, or a dict of dicts' ``A["key"]``, refers to (the same object: ``B = A``
        makes an alias, as in Python)."""
        if isinstance(node, ast.Subscript):
            outer = self.known(node.value)
            key = self.key(node.slice) if outer is not None else None
            found = outer.items.get(key) if outer is not None and key is not None else None
            return found.nested if found is not None else None
        if not read_imports and isinstance(node, (ast.Name, ast.Attribute)):
            root = node.value if isinstance(node, ast.Attribute) else node
            if isinstance(root, ast.Name) and root.id in self.lazy:
                return None  # an imported name not read as a dict so far: not read for this
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            self.resolved(node.value.id)
            owner = self.modules.get(node.value.id)
            if owner is not None:  # ``_spec._SPEC_BASE``
                owner.resolved(node.attr)
                return owner.dicts.get(node.attr)
            return None
        if not isinstance(node, ast.Name):
            return None
        self.resolved(node.id)
        return self.dicts.get(node.id)

    def key(self, node: ast.expr) -> str | None:
        """A string key: a literal, a name bound to one, or ``+`` of those."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.key(node.left), self.key(node.right)
            return left + right if left is not None and right is not None else None
        if isinstance(node, ast.Name):
            self.resolved(node.id)
            node = self.constants.get(node.id, node)
        return literal_string(node)

    def item(self, key: str | None, value: ast.expr, line: int) -> _Item:
        """An entry; a value named by a constant is read as the pair it is bound to, a pair of names bound to
        strings as those strings, ``A["K"]`` as the value ``A["K"]`` holds now."""
        value = self.entry_value(value)
        if isinstance(value, ast.Name):
            self.resolved(value.id)
            value = self.constants.get(value.id, value)
        if isinstance(value, (ast.Tuple, ast.List)):
            parts = [self.key(e) for e in value.elts]
            if None not in parts:
                value = ast.copy_location(ast.Tuple([ast.Constant(part) for part in parts], ast.Load()), value)
        nested = (
            self.value(value) if isinstance(value, (ast.Dict, ast.Name, ast.Call, ast.BinOp, ast.Subscript)) else None
        )
        return _Item(key, value, line, nested, file=self.rel)

    def value(self, node: ast.expr) -> _Dict | None:
        """The dict an expression builds, None when it is not one the builder can read."""
        if isinstance(node, ast.Dict):
            built = _Dict()
            for key, item in zip(node.keys, node.values):
                if key is not None:
                    built.add(self.item(self.key(key), item, key.lineno))
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
                    self.gap(built, part, NOT_A_DICT)
                else:
                    built.merge(side)
            return built
        if isinstance(node, ast.Call):
            return self.call_value(node)
        return self.known(node)

    def call_value(self, call: ast.Call) -> _Dict | None:
        """``dict(...)`` and ``A.copy()``: a new dict, as Python makes it; ``A.get("K")``: the dict ``A["K"]``."""
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "get" and call.args and self.known(func.value) is not None:
            found = self.known(func.value).items.get(self.key(call.args[0]) or "")  # type: ignore[union-attr]
            return found.nested if found is not None else None
        if isinstance(func, ast.Attribute) and func.attr == "copy" and not call.args and not call.keywords:
            source = self.known(func.value)
            if source is None:
                return None
            copied = _Dict()
            copied.merge(source)
            return copied
        if not (isinstance(func, ast.Name) and func.id == "dict" and "dict" not in self.functions):
            return None
        if len(call.args) > 1 or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        built = _Dict()
        for argument in call.args:  # ``dict(f())``: not a dict the builder reads, as ``f()`` is not
            if isinstance(argument, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Tuple) and len(e.elts) == 2 for e in argument.elts
            ):
                for pair in argument.elts:  # ``dict([("K", (...)), ...])``
                    built.add(self.item(self.key(pair.elts[0]), pair.elts[1], pair.lineno))  # type: ignore[attr-defined]
                continue
            source = self.value(argument)
            if source is None:
                return None
            built.merge(source)
        self.keywords(built, call)
        return built

    def keywords(self, into: _Dict, call: ast.Call) -> None:
        """``into.update(**x, KEY=value)`` of a call's keywords."""
        for keyword in call.keywords:
            if keyword.arg is None:
                self.spread(into, keyword.value, call)
            else:
                into.add(self.item(keyword.arg, keyword.value, keyword.value.lineno))

    def spread(self, into: _Dict, node: ast.expr, statement: ast.AST | None = None) -> None:
        """``into.update(node)`` (``**node`` inside a literal when no statement is given), or a gap."""
        other = self.value(node)
        if other is not None:
            into.merge(other)
        elif statement is None:
            self.gap(into, node, NOT_A_DICT, f"**{unparse(node)}")
        else:
            self.gap(into, statement, f"`{_short(unparse(node))}` is {NOT_A_DICT}")

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):  # ``A = B = {...}``: one dict, bound to each target in turn
            value = self.popped(node.value) or node.value
            built = self.value(value)
            for target in node.targets:
                self.assign(target, value, built)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            self.assign(node.target, node.value, self.value(node.value))
        elif isinstance(node, ast.AugAssign) and self.known(node.target) is not None:
            target = self.known(node.target)
            if isinstance(node.op, ast.BitOr):
                self.spread(target, node.value, node)
            else:
                self.gap(target, node, NOT_FOLLOWED)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            self.method_call(node.value)
        elif isinstance(node, ast.Delete):
            for target in node.targets:
                self.delete(target, node)
        elif isinstance(node, ast.ImportFrom):
            self.import_from(node)
        elif isinstance(node, ast.Import):
            self.import_modules(node)
        elif isinstance(node, FUNCTIONS):
            self.functions[node.name] = node
            self.rebound(node.name)
        elif isinstance(node, ast.ClassDef):
            self.in_block(node)  # its body runs now; what it changes is not followed
            self.rebound(node.name)
        elif isinstance(node, BLOCKS):
            self.in_block(node)

    def rebound(self, name: str, built: _Dict | None = None) -> None:
        """``name`` now names ``built`` (None: something that is not a dict the builder reads)."""
        self.dicts[name] = built
        self.constants.pop(name, None)
        self.lazy.pop(name, None)
        self.modules.pop(name, None)
        if built is not None:
            built.named(name)

    def assign(self, target: ast.expr, value: ast.expr, built: _Dict | None) -> None:
        """``target = value``, where ``value`` builds ``built`` (evaluated once, as Python does)."""
        if isinstance(target, ast.Name):
            self.rebound(target.id, built)
            if string_values(value) is not None:
                self.constants[target.id] = value
                if target.id == "__all__":
                    self.all_names = string_values(value)
        elif isinstance(target, ast.Subscript) and self.known(target.value) is not None:
            owner, key = self.known(target.value), self.key(target.slice)
            if key is None:
                self.gap(owner, target, "a key that is not a string", f"{unparse(target)} = {unparse(value)}")
            else:
                owner.add(self.item(key, self.entry_value(value), target.lineno))
        elif isinstance(target, (ast.Tuple, ast.List)) and self.unpacks(target, value):
            built_parts = [self.value(part) for part in value.elts]  # type: ignore[attr-defined]  # all, then bind
            constants = [self.constants.get(part.id) if isinstance(part, ast.Name) else None for part in value.elts]  # type: ignore[attr-defined]
            for name, part, built_part, constant in zip(target.elts, value.elts, built_parts, constants):  # type: ignore[attr-defined]
                self.assign(name, constant if constant is not None else part, built_part)
        elif isinstance(target, (ast.Tuple, ast.List, ast.Starred)):  # unpacking: bound to values not read
            for name in walk(target):
                if isinstance(name, ast.Name):
                    self.rebound(name.id)

    @staticmethod
    def unpacks(target: ast.Tuple | ast.List, value: ast.expr) -> bool:
        """``A, B = x, y``: element by element (no starred element on either side)."""
        return (
            isinstance(value, (ast.Tuple, ast.List))
            and len(value.elts) == len(target.elts)
            and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
        )

    def popped(self, value: ast.expr) -> ast.expr | None:
        """``A.pop("K")`` as an assignment's value: the entry leaves ``A`` now, and its value is what is
        assigned; None for any other value."""
        if not self.pops_readably(value):
            return None
        owner, key = self.known(value.func.value), self.key(value.args[0])  # type: ignore[attr-defined]
        found = owner.items.pop(key, None)  # type: ignore[union-attr,arg-type]
        return found.value if found is not None else None

    def entry_value(self, value: ast.expr) -> ast.expr:
        """``A["NEW"] = A["OLD"]``: the value ``A["OLD"]`` holds now; any other value as written."""
        source = self.known(value.value) if isinstance(value, ast.Subscript) else None
        key = self.key(value.slice) if source is not None else None  # type: ignore[attr-defined]
        found = source.items.get(key) if source is not None and key is not None else None
        return found.value if found is not None else value

    def import_from(self, node: ast.ImportFrom) -> None:
        """``from .x import A [as B]``: bound to x's dict or constant A, as x's own statements build it, read
        when first used as one (a registry imports many names that are neither: their modules stay unread);
        ``from . import m`` binds submodule m the same way; ``*`` runs x now and binds what its ``__all__``
        names (all public names where it has none)."""
        module = _absolute(self.module, node, self.is_package)
        if module is None:
            return
        for alias in node.names:
            if alias.name != "*":
                name = alias.asname or alias.name
                self.rebound(name)
                self.lazy[name] = (module, alias.name)
                if f"{module}.".startswith(f"{MODELS_PACKAGE}."):  # the registry's package only: no probes elsewhere
                    self.reader.run_if_it_changes_dicts(self.reader.imported_module(module, alias.name))
                continue
            source = self.reader.builder(module)
            if isinstance(source, _Builder):
                names = (
                    source.all_names
                    if source.all_names is not None
                    else [n for n in (*source.dicts, *source.constants, *source.lazy) if not n.startswith("_")]
                )
                for star in names:
                    self.rebound(star)
                    self.lazy[star] = (module, star)

    def import_modules(self, node: ast.Import) -> None:
        """``import a.b as m``: ``m`` is that module (``m.D`` its dict, read when used); ``import a.b`` binds ``a``."""
        for alias in node.names:
            name = alias.asname or alias.name.split(".")[0]
            self.rebound(name)
            if alias.asname is not None:
                self.lazy[name] = (alias.name, None)

    def resolved(self, name: str) -> None:
        """Read what an import bound ``name`` to, the first time it is used as a dict, constant or module."""
        module, attribute = self.lazy.pop(name, (None, None))
        if module is None:
            return
        submodule = module if attribute is None else f"{module}.{attribute}"
        if self.reader.index.locate(submodule) is not None:  # a module of the tree
            source = self.reader.builder(submodule)
            if isinstance(source, _Builder):
                self.modules[name] = source
            else:
                self.unread_imports[name] = source
            return
        source = self.reader.builder(module)
        if isinstance(source, str):
            self.unread_imports[name] = source
            return
        if attribute in source.lazy:
            source.resolved(attribute)  # re-exported: read where it comes from
        self.dicts[name] = source.dicts.get(attribute)  # type: ignore[arg-type]
        if self.dicts[name] is not None:
            self.dicts[name].named(name)  # type: ignore[union-attr]
        if attribute in source.constants:
            self.constants[name] = source.constants[attribute]  # type: ignore[index]
        if attribute in source.unread_imports:
            self.unread_imports[name] = source.unread_imports[attribute]  # type: ignore[index]

    def mutations_in_expressions(self, statement: ast.stmt) -> None:
        """A change of a known dict inside an expression (``f(SPEC.pop("X"))``): not followed, said so (an
        assignment of ``A.pop("K")`` itself is: ``popped``)."""
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef, *BLOCKS)):
            return
        handled = None  # what ``method_call`` or ``popped`` follows
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            handled = statement.value
        elif isinstance(statement, ast.Assign) and self.pops_readably(statement.value):
            handled = statement.value
        for node in walk(statement):
            if node is handled:
                continue
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CHANGES:
                owner = self.known(node.func.value)
                if owner is not None:
                    self.gap(owner, statement, NOT_FOLLOWED)

    def pops_readably(self, value: ast.expr) -> bool:
        """``A.pop("K")`` of a known dict with a key the builder reads (``popped`` follows it)."""
        return (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == "pop"
            and self.known(value.func.value) is not None
            and len(value.args) == 1
            and not value.keywords
            and self.key(value.args[0]) is not None
        )

    def method_call(self, call: ast.Call) -> None:
        func = call.func
        owner = self.known(func.value) if isinstance(func, ast.Attribute) else None
        if owner is None:
            return
        if func.attr == "update":
            if len(call.args) == 1 and isinstance(call.args[0], (ast.List, ast.Tuple)):
                self.gap(owner, call, NOT_FOLLOWED)
            else:
                for argument in call.args:
                    self.spread(owner, argument, call)
            self.keywords(owner, call)
        elif func.attr in MUTATORS:
            self.gap(owner, call, NOT_FOLLOWED)

    def delete(self, target: ast.expr, statement: ast.Delete) -> None:
        owner = self.known(target.value) if isinstance(target, ast.Subscript) else None
        if owner is None:
            return
        arch = self.key(target.slice)
        if arch is None:
            self.gap(owner, statement, "a key that is not a string")
        else:
            owner.items.pop(arch, None)

    def in_block(self, block: ast.stmt) -> None:
        """A dict changed or a name rebound under ``if``/``try``/``for``/``class``...: whether it runs is not
        decided, so not read. Only the imports at the top of a ``try`` body are taken as run (the names they
        bind are read from the tree when used)."""
        kind = type(block).__name__.lower().replace("star", "").replace("classdef", "class")
        imports = []
        if isinstance(block, TRIES):
            for node in block.body:
                if not isinstance(node, ast.ImportFrom):
                    break
                imports.append(node)
        for node in imports:
            self.import_from(node)
        why = f"inside a module-level `{kind}` block, which mtp-audit does not follow"
        rebinding = [(node, name) for node in _simple_statements(block) for name in _names_bound(node)]
        rebinding += _block_targets(block)
        if isinstance(block, ast.ClassDef):
            rebinding = []  # names bound in a class body are the class's, not the module's
        for node in _simple_statements(block):
            if any(node is i for i in imports):
                continue
            for touched in self.touched(node, rebinding=not isinstance(block, ast.ClassDef)):
                self.gap(touched, node, why)
        for node, name in rebinding:
            if any(node is i for i in imports):
                continue
            if self.dicts.get(name) is not None:  # which dict it names from here on is not known
                self.gap(self.dicts[name], node, f"{name} rebound {why}")
                self.dicts[name] = None
            self.constants.pop(name, None)

    def changes_by_calls(self, statement: ast.stmt) -> None:
        """A function called at top level (directly, as a decorator, or in a class body) that may change a
        known dict: the dicts its body changes by name (through the module functions it calls too), and a
        known dict passed to it, whatever it is (it may change its argument). Not followed, said so."""
        calls = [node for node in walk(statement) if isinstance(node, ast.Call)]
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            calls = [n for d in statement.decorator_list for n in walk(d) if isinstance(n, ast.Call)]
            decorators = [d for d in statement.decorator_list if isinstance(d, ast.Name)]
            for decorator in decorators:
                self.called(decorator.id, decorator, statement)
            if isinstance(statement, ast.ClassDef):
                calls += [
                    n
                    for s in statement.body
                    if not isinstance(s, FUNCTIONS)
                    for n in walk(s)
                    if isinstance(n, ast.Call)
                ]
        for call in calls:
            name = call.func.id if isinstance(call.func, ast.Name) else None
            on_known = isinstance(call.func, ast.Attribute) and self.known(call.func.value, False) is not None
            if name not in READ_ONLY_CALLS and not on_known:  # ``A.update(B)`` does not change B
                for argument in (*call.args, *(k.value for k in call.keywords)):
                    passed = self.known(argument.value if isinstance(argument, ast.Starred) else argument, False)
                    if passed is not None:
                        callee = _short(unparse(call.func))
                        self.gap(passed, call, f"passed to `{callee}`, which may change it: {NOT_FOLLOWED}")
            if name is not None:
                self.called(name, call, statement)

    def called(self, name: str, call: ast.AST, statement: ast.stmt) -> None:
        """The changes a call of module function ``name`` makes to known dicts, through the module functions it
        calls in turn."""
        pending, seen = [name], set()
        while pending:
            function = self.functions.get(pending.pop())
            if function is None or function.name in seen:
                continue
            seen.add(function.name)
            for inner in walk(function):
                if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name):
                    pending.append(inner.func.id)
                if isinstance(inner, ast.stmt):
                    for touched in self.touched(inner):
                        self.gap(
                            touched,
                            call,
                            f"a call of `{name}` (line {self.functions[name].lineno}), which changes it at line "
                            f"{inner.lineno}: {NOT_FOLLOWED}",
                        )

    def touched(self, node: ast.stmt, rebinding: bool = True) -> list[_Dict]:
        """The known dicts a statement changes, or binds (``rebinding``; not in a class body, whose names are
        the class's)."""
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        targets += [
            call.func
            for call in walk(node)
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in CHANGES
        ]  # ``SPEC.update(...)``, ``old = SPEC.pop("K")``
        found = []
        for target in targets:
            if isinstance(target, (ast.Subscript, ast.Attribute)):  # a change of the dict it names
                owner = self.known(target.value)
            else:  # a rebinding: an imported dict is not changed by it
                owner = self.known(target, read_imports=False) if rebinding else None
            if owner is not None and owner not in found:
                found.append(owner)
        return found


def _absolute(module: str, node: ast.ImportFrom, is_package: bool = False) -> str | None:
    """The module a ``from ... import`` in ``module`` (a package's ``__init__`` when ``is_package``) names."""
    if node.level == 0:
        return node.module
    parts = module.split(".") + ([""] if is_package else [])  # a package is its own first level
    if node.level > len(parts) - 1:
        return None
    base = parts[: len(parts) - node.level]
    return ".".join([*base, *([node.module] if node.module else [])])


def _names_bound(node: ast.stmt) -> list[str]:
    """The names a simple statement binds (assignment targets, imports, ``for``/``with`` targets of its own)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    return [n.id for t in targets for n in walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]


def _block_targets(block: ast.stmt) -> list[tuple[ast.AST, str]]:
    """(node, name) for the names a block binds of its own, outside its simple statements: ``for`` and ``with``
    targets, ``except ... as``, ``:=`` (not in functions or classes it defines)."""
    found: list[tuple[ast.AST, str]] = []
    pending: list[ast.AST] = [block]
    while pending:
        node = pending.pop()
        targets: list[ast.AST] = []
        if isinstance(node, (ast.For, ast.AsyncFor)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        elif isinstance(node, ast.NamedExpr):
            targets = [node.target]
        elif isinstance(node, ast.ExceptHandler) and node.name:
            found.append((node, node.name))
        found += [(node, n.id) for t in targets for n in walk(t) if isinstance(n, ast.Name)]
        pending += [c for c in ast.iter_child_nodes(node) if not isinstance(c, (*FUNCTIONS, ast.ClassDef, ast.Lambda))]
    return found


def _simple_statements(block: ast.stmt):
    """The statements run inside a block, through nested blocks, not into functions or classes."""
    for field_name in ("body", "orelse", "finalbody", "handlers", "cases"):
        for child in getattr(block, field_name, []):
            if isinstance(child, (*BLOCKS, ast.ExceptHandler, ast.match_case)):
                yield from _simple_statements(child)
            elif not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield child


def _checked_items(value: _Dict, rel: str, name: str):
    """(arch, item) of the speculative dict, whose keys must all be strings."""
    if value.odd_keys:
        raise UsageError(
            f"{value.odd_keys[0].file or rel}: an entry of {name} is not a (module, class) string pair "
            f"(line {value.odd_keys[0].line})"
        )
    return value.items.items()


def _pair(item: _Item, rel: str, name: str, strict: bool) -> tuple[str, str] | None:
    """The (full module name, class) an entry names; one that is not a (module, class) string pair
    stops the scan in the speculative dict (``strict``) and is skipped elsewhere."""
    value = item.value
    pair = [literal_string(e) for e in value.elts] if isinstance(value, (ast.Tuple, ast.List)) else []
    if len(pair) != 2 or None in pair:
        if strict:
            raise UsageError(
                f"{item.file or rel}: an entry of {name} is not a (module, class) string pair (line {item.line})"
            )
        return None
    module_name, cls = pair
    if not all(part.isidentifier() for part in module_name.split(".")):
        # "..x", "." or "/etc/x" would name files outside the package (or nothing at all)
        raise UsageError(
            f"{item.file or rel}: {name}[{item.arch!r}] names module {module_name!r}, which is not a dotted "
            "module name; mtp-audit reads only modules inside the tree"
        )
    # as vLLM's _resolve_module_name: a full path starts with "vllm.", anything else is under models/
    return (module_name if module_name.startswith("vllm.") else f"{MODELS_PACKAGE}.{module_name}"), cls


def heuristic_entries(index: ModuleIndex) -> list[RegistryEntry]:
    """Drafters in a plugin tree: classes named like drafters in drafter-named files.

    Heuristic: a module whose name contains _mtp, eagle, dflash, dspark, draft
    or medusa (a package's: its folder's name), and a top-level class whose
    name contains MTP, Eagle, DFlash, DSpark, Draft, Medusa or MLPSpeculator.
    Whether it has ``compute_logits`` is decided later, through its MRO.
    """
    root = index.tree.root
    entries = []
    for path in tree_python_files(root):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not parts or not DRAFTER_FILE.search(parts[-1]):
            continue
        module = ".".join(parts)
        facts = index.facts(module)
        if facts is None or facts.parse_error:
            continue
        for cls in facts.classes:
            if DRAFTER_NAME.search(cls.name) and not cls.name.startswith("_"):
                entries.append(RegistryEntry(None, module, cls.name, "heuristic"))
    return entries
