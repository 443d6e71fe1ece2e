"""Stage 3b: the code that calls a drafter's ``get_top_tokens``, read statically.

Two generations of callers: V2 speculators (``vllm/v1/worker/gpu/spec_decode/**``)
and V1 proposers (``vllm/v1/spec_decode/**``). For a drafter this module finds
every speculator that can hold it, then follows each speculator's drafting
path through its own MRO (overrides of ``propose`` / ``_generate_draft`` count)
to the calls it makes on the drafter, with their arguments.

Which speculator holds a drafter is decided by code that differs by release:
an ``if``/``elif`` chain on the speculative config (``method ==``,
``use_*()`` predicates, architecture names; read from
``config/speculative.py``), or, from 0.34, a ``SpeculatorConfig`` class that
names its speculator (``speculator_class``), declared by the drafter
(``speculator_config_class``) or chosen by method and refined by
``specialize()``. Conditions are evaluated three-valued against what is known
of the drafter (its architecture, the Hugging Face model types that map to
it, the speculative methods it can be loaded under); a condition that depends
on run-time configuration (layer counts, ``num_speculative_tokens``) is
unknown, and every speculator it may select is a candidate.

Nothing is imported or run: CPython's ``ast`` reads the files.
"""

from __future__ import annotations

import ast
import copy
import functools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cache import EXISTS
from ..index.ast_tools import (
    TRIES,
    absolute_module,
    match_as_if,
    names_bound,
    parent_map,
    statement_blocks,
    statements_within,
    unparse,
    walk,
    walk_statements,
)
from ..index.encoding import NotDecodable, decode_as_imported
from ..index.modules import ModuleIndex, read_failure
from ..model import CallPair, ModelCall, Reach, SourceTree
from .bindings import Bindings, described, names_read
from .model_types import model_types_in, tested_types
from .runner import RunnerChoice

V2_DIR = ("v1", "worker", "gpu", "spec_decode")
V1_DIR = ("v1", "spec_decode")
V1_RUNNER = ("v1", "worker", "gpu_model_runner.py")
SPEC_CONFIG = ("config", "speculative.py")
RUNNER_CONFIG = ("config", "vllm.py")  # VllmConfig: which model runner, V1 or V2
CONTAINERS = (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)  # code may add to them
ENTRY_POINTS = ("propose",)
DRAFTER_ATTRS = ("model", "draft_model")  # self.<attr> holds the drafter in a speculator
WATCHED = ("get_top_tokens", "compute_logits")
INSPECTING_BUILTINS = ("hasattr", "isinstance", "type", "id", "callable")  # look at the drafter, call nothing
METHODS_BY_NAME = (  # name fragment -> speculative methods a drafter of that name is loaded under
    ("eagle3", ("eagle3",)),
    ("eagle", ("eagle", "eagle3")),
    ("dflash", ("dflash",)),
    ("lilicorr", ("dflash",)),
    ("xpress", ("dflash",)),
    ("dspark", ("dspark",)),
    ("medusa", ("medusa",)),
    ("mlpspeculator", ("mlp_speculator",)),
    ("mtp", ("mtp",)),
)
# Files worth parsing: they define or construct speculators, or name their classes.
CALLER_FILE = re.compile(rb"Speculator|Proposer|speculator_class|def propose")
RUNNER_CLASS = re.compile(r"^class\s+\w+\s*\(([^)]*)\)\s*:", re.M)  # the model runner's bases (no keywords)
CALLER_NAME = re.compile(r"(?:Speculator|Proposer)$")
# A line that may construct a speculator or pick its class, outside a ``class`` statement: a
# construction (``XSpeculator(...)``, a factory ``XSpeculator.from_config(...)``), a value that
# starts with a class (``cls = XSpeculator``, ``cls = XSpeculator if c else YProposer``), either arm
# of a conditional, a value of a dict (``{"mtp": XSpeculator}``), what ``partial`` wraps, a lookup by a
# literal name (``getattr(m, "XProposer")``). Only the lines that name one (SPECULATOR_NAME) are tried: a
# thousands-line runner costs a few of them.
SPECULATOR_NAME = re.compile(r"Speculator|Proposer")
CONSTRUCTION_LINE = re.compile(
    r"^(?!\s*class\s).*(?:"
    r"(?:Speculator|Proposer)(?:\s*\(|\s+if\b|\.\w+\s*\(|[\"']\s*\))"
    r"|[=:]\s*[\w.]*(?:Speculator|Proposer)\b"
    r"|\b(?:else|partial\()\s*[\w.]*(?:Speculator|Proposer)\b)",
    re.M,
)
DEF_LINE = re.compile(r"^(\s*)(?:async\s+)?def\s")
DECLARED_CONFIG = re.compile(r"^(\s+)speculator_config_class\s*(?::[^=]*)?=\s*([A-Za-z_][\w.]*)", re.M)


MAX_FACTORY_DEPTH = 8  # factories calling factories: deeper is a cycle
MAX_REEXPORTS = 8  # a class's or function's name imported from module to module: longer is a cycle
TRANSPARENT_WRAPPERS = ("torch.compile",)  # return a callable that calls what they wrap, arguments unchanged
CASTS = ("typing.cast", "typing_extensions.cast")  # cast(T, x) returns x
PROPERTIES = frozenset({"property", "cached_property", "functools.cached_property"})  # read, not handed on
# decorators after which a def bound under another name in a class body is no plain method
BINDERS = PROPERTIES | {"classmethod", "staticmethod"}
ANY_ATTRIBUTE = "\x02"  # what ``setattr(self, name, value)`` stores into: any attribute
HIDDEN_BY_STAR = "\x01"  # an argument value that a ``*``/``**`` argument of a wrapper call hides


class Unknown:
    """The third truth value: depends on run-time configuration."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = Unknown()
Truth = bool | Unknown


@dataclass(frozen=True)
class Drafter:
    """What is known of a drafter when selecting its speculators."""

    arch: str | None
    cls: str
    methods: frozenset[str] | None  # None: any
    model_types: frozenset[str]
    declared_config: str | None  # qualified name of its speculator_config_class


@dataclass
class _Class:
    name: str
    module: str
    file: str
    line: int
    bases: list[str]  # qualified names where resolvable, else the base's code
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]  # defs that are the last binding of their name
    assigns: dict[str, ast.expr]
    # names whose last binding in the class body is another statement (``sample_draft = Base.sample_full``):
    # Python's lookup finds what that statement binds, not a base's def
    rebound: dict[str, ast.stmt] = field(default_factory=dict)
    base_codes: list[str] = field(default_factory=list)  # the bases as written
    unread: str = ""  # a base in the vLLM tree that cannot be read: why (it stands in the MRO for it)

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass
class _Module:
    name: str
    file: str
    tree: ast.Module
    imports: dict[str, str]  # local name -> qualified name
    source: str
    # what each function sees (see ``_scope``), by where it starts: drafting paths ask many times
    scopes: dict[tuple[int, int], dict[str, str]] = field(default_factory=dict)


class CallerIndex:
    """The speculators and proposers of one vLLM tree, their selection and their drafting paths."""

    def __init__(self, index: ModuleIndex, vllm: SourceTree | None = None):
        """``vllm``: the vLLM tree whose callers are read (a plugin directory's: the vLLM it runs with, which
        ``index`` reads as an extra root); the index's own tree by default."""
        self.index = index
        vllm = vllm or index.tree
        self.root = vllm.root
        package = vllm.package_dir
        self.package = package
        self.modules: dict[str, _Module] = {}
        self.classes: dict[str, _Class] = {}
        self._reach: dict[str, Reach] = {}
        self._predicates: dict[str, Truth] = {}
        self._predicate_defs: dict[str, ast.FunctionDef] = {}
        self._literals: dict[str, tuple[str, ...]] = {}
        self._types_of_arch: dict[str, set[str]] = {}  # drafter architecture -> its model types
        self._selector_functions: list | None = None
        self._archs_of_type: dict[str, set[str]] = {}
        self._mros: dict[str, list[str]] = {}
        self._uncreatable: dict[str, str] = {}  # class -> why its class statement raises TypeError (no C3 order)
        self._config_classes: list[_Class] | None = None
        self._functions: dict[str, tuple[_Module, ast.FunctionDef | ast.AsyncFunctionDef]] | None = None
        self._helpers: dict[str, Path] = {}  # module -> file of the caller folders not read yet (see _load)
        self._bound_locals: dict[tuple[str | None, str], frozenset[str]] = {}  # see _local_names
        self._instance_values: dict[tuple[str, ...], dict] = {}  # see _instance_bindings
        self._runs: dict[tuple[str, ...], frozenset] = {}  # see _methods_run
        self._calls_to_bases: dict = {}  # see _base_calls
        self._bindings_of_class: dict[str, list] = {}  # see _class_bindings
        self._stores_of_class: dict[str, list] = {}  # see _class_stores
        self._holders: dict[tuple[str, ...], _DrafterAttributes] = {}  # see _drafter_attributes
        self._holders_by_attrs: dict[frozenset[str], _Holders] = {}  # see _holders_knowing
        self._placed: set[tuple[str, int, int]] = set()  # speculator references selection read (see _unplaced)
        self._value_modules: dict[str, ast.Module | None] = {}  # modules outside the caller files read for a constant
        self._runner: RunnerChoice | None = None  # how the config picks the V1 or V2 model runner
        self._runner_unread = ""  # why the config that picks it cannot be read
        self._v1_runs: dict[Drafter, bool] = {}
        self._runner_modules: set[str] = set()  # the V1 model runner's module and its bases' (see _load_runner_bases)
        self._config_checks: dict[tuple[str, Drafter], Truth] = {}
        if package is None:
            return
        for folder in (V2_DIR, V1_DIR):
            for path in index.python_files(package.joinpath(*folder)):
                self._load(path)
        runner = package.joinpath(*V1_RUNNER)
        if index.kind(runner) == EXISTS:
            self._load(runner, only_constructing=True, base=True)  # its bases are read even if it names no proposer
            self._load_runner_bases(runner)
        self._read_bases()
        self._read_spec_config()
        self._read_runner_choice()

    def _load_runner_bases(self, runner: Path) -> None:
        """The modules of the tree that define the model runner's bases (a mixin that picks the
        proposer), read as caller files: the runner is read for its constructing functions alone."""
        module = self.modules.get(self._module_name(runner))
        if module is None:
            return
        self._runner_modules.add(module.name)
        for header in RUNNER_CLASS.finditer(module.source):
            for base in header.group(1).split(","):
                qualname = _qualified(module.imports, module, base.strip().partition("[")[0])
                home = qualname.rpartition(".")[0]
                path = self._tree_file(home) if home and home not in self.modules else None
                if path is not None:
                    self._load(path)
                if home in self.modules:  # read now, or already as a caller file
                    self._runner_modules.add(home)

    def __getstate__(self) -> dict:
        """Pickled (by a scan worker, for its parent) without the module index: the receiver
        attaches its own (``Scanner.adopt_callers``), and without what is known of functions by their
        ids (``_holders_by_attrs``), which the copy's own nodes do not keep."""
        return {**self.__dict__, "index": None, "_holders_by_attrs": {}}

    @property
    def present(self) -> bool:
        """Whether the vLLM read has callers at all (releases before the speculators have none)."""
        return bool(self.classes)

    # -- reading ------------------------------------------------------------------

    def _module_name(self, path: Path) -> str:
        rel = path.relative_to(self.root).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def _load(self, path: Path, only_constructing: bool = False, helper: bool = False, base: bool = False) -> None:
        """Parse a caller file; a model runner (thousands of lines) only for its imports and the
        functions that construct speculators. A file that names no speculator is kept aside as a
        possible helper module, parsed only when a drafting path calls into it (``helper``: then
        for its functions alone, so that what is a speculator does not depend on which paths ran),
        or when a class of the caller files names a base there (``base``: read whole)."""
        try:
            data = self.index.read_source(path)  # the model files' reader, with its checks
        except OSError as error:
            self.index.read_errors.setdefault(self.index.relative(path), read_failure(error))
            return
        if not (helper or base) and not CALLER_FILE.search(data):
            self._helpers[self._module_name(path)] = path  # decoded only if a drafting path calls into it
            return
        try:
            text = decode_as_imported(data)
        except NotDecodable as error:
            self.index.read_errors.setdefault(self.index.relative(path), str(error))
            return
        try:
            tree = ast.parse(_constructing_parts(text) if only_constructing else text)
        except (SyntaxError, ValueError) as error:
            self.index.read_errors.setdefault(self.index.relative(path), f"syntax error, {error}")
            return
        name = self._module_name(path)
        module = _Module(
            name,
            self.index.relative(path),
            tree,
            _imports(tree, name, path.name == "__init__.py"),
            text,
        )
        self.modules[name] = module
        if helper:
            return
        local_classes = {c.name for c in tree.body if isinstance(c, ast.ClassDef)}
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                cls = _read_class(node, module, local_classes)
                self.classes[cls.qualname] = cls

    def _read_bases(self) -> None:
        """Every base that a class of the caller files names in the vLLM tree, read where it is
        defined (through re-exports; a module outside the caller folders, or a helper module of
        them, parsed for it), so that its methods stand in the MRO where C3 puts them. A base that
        cannot be read stands there as a class that says why (``_Class.unread``); bases outside
        vLLM (``torch``, ``abc``, builtins) end the walk."""
        todo = list(self.classes.values())
        while todo:
            cls = todo.pop()
            bases = []
            for code, base in zip(cls.base_codes, cls.bases):
                before = len(self.classes)
                bases.append(self._base_class(cls, code, base))
                todo += list(self.classes.values())[before:]
            cls.bases = bases

    def _base_class(self, cls: _Class, code: str, qualname: str) -> str:
        """The class a base of ``cls`` is (``qualname`` as its module imports it), followed through
        re-exports; a placeholder naming why where it is in the vLLM tree but cannot be read."""
        assert self.package is not None
        why = ""
        for _ in range(MAX_REEXPORTS):
            if qualname in self.classes or qualname.partition(".")[0] != self.package.name:
                return qualname
            home, _, name = qualname.rpartition(".")
            if home not in self.modules:
                path = self._helpers.pop(home, None) or self._tree_file(home)
                if path is None:
                    why = f"no module {home} in the tree"
                    break
                self._load(path, base=True)
            module = self.modules.get(home)
            if module is None:
                why = f"{self.index.relative(path)} cannot be read or parsed"
                break
            if name not in module.imports:
                if qualname not in self.classes:
                    why = f"{module.file} binds no class {name} the scan reads"
                break
            qualname = module.imports[name]
        else:
            why = "a chain of re-exports too long to follow"
        if qualname in self.classes:
            return qualname
        placeholder = f"{qualname} (unread)"
        if placeholder not in self.classes:
            note = f"{cls.file}:{cls.line}: base `{code}` of {cls.name} cannot be read ({why})"
            home, _, name = qualname.rpartition(".")
            self.classes[placeholder] = _Class(f"{name} (unread)", home, cls.file, cls.line, [], {}, {}, unread=note)
        return placeholder

    def _read_spec_config(self) -> None:
        assert self.package is not None
        path = self.package.joinpath(*SPEC_CONFIG)
        if self.index.kind(path) != EXISTS:
            return
        try:
            tree = ast.parse(self.index.read_bytes(path))
        except (SyntaxError, ValueError, OSError):
            return
        for model_type, archs in model_types_in(tree).items():
            for name in archs:
                self._types_of_arch.setdefault(name, set()).add(model_type)
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self._literals[node.targets[0].id] = tuple(self._literal_strings(node.value))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        self._read_type_rewrites(item)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and (
                        item.name.startswith("use_") or item.name.startswith("uses_")
                    ):
                        self._predicate_defs[item.name] = item

    def _read_runner_choice(self) -> None:
        """The ``VllmConfig`` code that picks the V1 or V2 model runner (``runner.RunnerChoice``), its
        locals assigned once and its module's constant collections of strings read as their values
        (not a local bound to a list or dict: code adds to it)."""
        assert self.package is not None
        path = self.package.joinpath(*RUNNER_CONFIG)
        try:
            tree = ast.parse(self.index.read_bytes(path))
        except FileNotFoundError:
            self._runner_unread = "is missing"
            return
        except OSError as error:
            self._runner_unread = f"cannot be read ({error.strerror or error})"
            return
        except (SyntaxError, ValueError) as error:
            self._runner_unread = f"syntax error, {error}"
            return
        constants = {n: v for n, v in _module_values_of(tree).items() if _string_collection(v) is not None}

        def substituted(function: ast.FunctionDef) -> ast.FunctionDef:
            values = {n: v for n, v in _assigned_once(function).items() if not isinstance(v, CONTAINERS)}
            return _Substituted({**constants, **values}).visit(copy.deepcopy(function))

        self._runner = RunnerChoice.find(tree, substituted)

    def v1_runs(self, drafter: Drafter) -> bool:
        """Whether the V1 model runner may run ``drafter``: unless the config forces V2 for it or
        refuses V1 for it (see ``runner``); where that code cannot be read, it may."""
        if self._runner is None:
            return True
        if drafter not in self._v1_runs:
            forced = self._block_truth(self._runner.switch, drafter) is True
            refused = self._runner.v1_refused(lambda test: self.truth(test, drafter), UNKNOWN)
            self._v1_runs[drafter] = not (forced or refused)
        return self._v1_runs[drafter]

    def _config_check(self, name: str, drafter: Drafter) -> Truth:
        """The truth of ``self.name()``, a check of the runner-choosing config: a list it builds is
        true where an append surely runs, anything else is read as a predicate."""
        assert self._runner is not None
        key = (name, drafter)
        if key not in self._config_checks:
            self._config_checks[key] = UNKNOWN  # a recursive check stays unknown
            built = self._runner.nonempty(name, lambda test: self.truth(test, drafter), UNKNOWN)
            body = self._runner.methods[name].body
            self._config_checks[key] = built if built is not None else self._block_truth(body, drafter)  # type: ignore[assignment]
        return self._config_checks[key]

    def runner_notes(self) -> list[str]:
        """Where the tree has both V1 proposers and V2 speculators but the code that picks the runner
        cannot be read: the V1 proposers then count for every drafter their selection reaches."""
        if not self._runner_unread:
            return []
        v1 = ".".join((self.package.name, *V1_DIR)) if self.package is not None else ""
        callers = [q for q in self.classes if self._is_caller(q)]
        if not any(q.startswith(f"{v1}.") for q in callers) or all(q.startswith(f"{v1}.") for q in callers):
            return []
        return [
            f"{'/'.join(('vllm', *RUNNER_CONFIG))} {self._runner_unread}: which model runner (V1 or V2) each "
            "speculative method runs with is not known, so the V1 proposers count for every drafter they may hold"
        ]

    def _read_type_rewrites(self, function: ast.FunctionDef) -> None:
        """An ``"architectures": [...]`` written in a block that sets ``hf_config.model_type = "T"``,
        or in one that tests ``hf_config.model_type == "T"`` and leaves it where some block
        renames to T: a drafter of model type T is one of those architectures. Each block adds to
        T's (deepseek_mtp's come from blocks of both kinds)."""
        renamed_to = {renamed for node in walk(function) if (renamed := _renamed_type(node)) is not None}
        for block in walk(function):
            if not isinstance(block, ast.If):
                continue
            types, archs = [], []
            for statement in block.body:
                if (renamed := _renamed_type(statement)) is not None:
                    types.append(renamed)
                for node in walk(statement):
                    if isinstance(node, ast.Dict):
                        for key, value in zip(node.keys, node.values):
                            if (
                                isinstance(key, ast.Constant)
                                and key.value == "architectures"
                                and isinstance(value, ast.List)
                            ):
                                archs += [e.value for e in value.elts if isinstance(e, ast.Constant)]
            for model_type in types or [t for t in tested_types(block.test) if t in renamed_to]:
                if archs:
                    self._archs_of_type.setdefault(model_type, set()).update(archs)

    def _literal_strings(self, node: ast.expr) -> Iterator[str]:
        """The strings of ``Literal["a", "b", OtherLiteral]`` (other literals expanded)."""
        if isinstance(node, ast.Subscript) and _dotted(node.value) in ("Literal", "typing.Literal"):
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            for item in items:
                yield from self._literal_strings(item)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value
        elif isinstance(node, ast.Name):
            yield from self._literals.get(node.id, ())

    # -- drafter facts ------------------------------------------------------------------

    def drafter(self, arch: str | None, cls: str, declared_config: str | None) -> Drafter:
        types = frozenset(self._types_of_arch.get(arch or "", set()))
        methods: set[str] = set()
        mtp_types = set(self._literals.get("MTPModelTypes", ()))
        if types & mtp_types:
            methods.add("mtp")
        lowered = f"{arch or ''} {cls}".lower()
        for fragment, names in METHODS_BY_NAME:
            if fragment in lowered:
                methods.update(names)
                break
        return Drafter(arch, cls, frozenset(methods) or None, types, declared_config)

    # -- selection ----------------------------------------------------------------------

    def candidates(self, drafter: Drafter) -> list[tuple[str, str]]:
        """(speculator qualname, how it is chosen) for every speculator that can hold ``drafter``."""
        found: dict[str, str] = {}
        v1 = ".".join((self.package.name, *V1_DIR, "")) if self.package is not None else ""
        for module, function, compact, _, _ in self._selectors():
            for qualname in self._select(compact, drafter)[0]:
                if qualname.startswith(v1) and not self.v1_runs(drafter):
                    continue  # a V1 proposer holds it only under the V1 model runner
                found.setdefault(qualname, f"{module.file}:{function.name}")
        for qualname, how in self._by_config(drafter):
            found.setdefault(qualname, how)
        return sorted(found.items())

    def _constructed(
        self,
        local: dict[str, str],
        module: _Module,
        node: ast.AST,
        class_variables: frozenset[str] = frozenset(),
        values: dict[str, ast.expr] | None = None,
    ) -> list[str]:
        """The speculators ``node`` constructs, or picks into one of ``class_variables`` (locals the
        function calls: ``speculator_cls = MTPSpeculator`` ... ``speculator_cls(vllm_config)``)."""
        out = []
        for sub in walk(node):
            if isinstance(sub, ast.Call):
                made = self._made_by(local, module, sub.func, values or {})
            elif isinstance(sub, ast.Assign) and any(_dotted(t) in class_variables for t in sub.targets):
                made = self._made_by(local, module, sub.value, values or {})
            else:
                continue
            out += [qualname for qualname in made if qualname not in out]
        return out

    def _made_by(
        self, local: dict[str, str], module: _Module, callee: ast.expr, values: dict[str, ast.expr], depth: int = 0
    ) -> list[str]:
        """The speculators that calling ``callee`` constructs: a class, either arm of a choice
        (``a if c else b``, a literal dict looked up by key), the class ``functools.partial`` wraps,
        and what a class- or static-method factory of a speculator class returns (``cls(...)`` its
        class). Each is what Python would call; anything else constructs nothing read here."""
        if depth > MAX_FACTORY_DEPTH:
            return []
        choice = self._choice(local, module, callee, values)
        if choice is not None:
            arms = [choice.body, choice.orelse]
            return list(dict.fromkeys(q for arm in arms for q in self._made_by(local, module, arm, values, depth)))
        if (wrapped := _partial_of(local, module, callee)) is not None:
            return self._made_by(local, module, wrapped, values, depth + 1)
        name = _dotted(callee) if isinstance(callee, (ast.Name, ast.Attribute)) else None
        qualname = self._class_named(local, module, name) if name else self._looked_up(local, module, callee)
        if qualname is not None:
            self._placed.add(_place(qualname, callee))
            return [qualname]
        factory = self._factory(local, module, callee)
        if factory is None:
            return []
        scope, home, function = factory
        returned = [n.value for n in walk(function) if isinstance(n, ast.Return) and n.value is not None]
        made = [
            self._made_by(scope, home, value, {}, depth + 1)  # ``return cls``
            + self._constructed_at(scope, home, value, depth + 1)
            for value in returned
        ]
        if all(found or _is_none(value) for found, value in zip(made, returned)):  # every return read
            self._placed.add(_place(function.name, callee))
        return list(dict.fromkeys(q for found in made for q in found))

    def _looked_up(self, local: dict[str, str], module: _Module, callee: ast.expr) -> str | None:
        """The speculator class a lookup by a literal name gives: ``resolve_obj_by_qualname("pkg.mod.Cls")``
        (vLLM's helper: the module, then the attribute) or ``getattr(module, "Cls")`` of a module the code
        imports; None for anything else."""
        match callee:
            case ast.Call(func=func, args=[ast.Constant(value=str(qualname))], keywords=[]) if (
                _dotted(func) or ""
            ).rpartition(".")[2] == RESOLVE_BY_QUALNAME and "." in qualname:
                head = qualname.partition(".")[0]
                return self._class_named({head: head}, module, qualname)
            case ast.Call(func=ast.Name(id="getattr"), args=[owner, ast.Constant(value=str(name))], keywords=[]) if (
                _dotted(owner) is not None and name.isidentifier()
            ):
                return self._class_named(local, module, f"{_dotted(owner)}.{name}")
        return None

    def _constructed_at(self, local: dict[str, str], module: _Module, node: ast.AST, depth: int) -> list[str]:
        """The speculators the calls in ``node`` construct, factories ``depth`` deep."""
        calls = [sub for sub in walk(node) if isinstance(sub, ast.Call)]
        return list(dict.fromkeys(q for call in calls for q in self._made_by(local, module, call.func, {}, depth)))

    def _factory(
        self, local: dict[str, str], module: _Module, callee: ast.expr
    ) -> tuple[dict[str, str], _Module, ast.FunctionDef | ast.AsyncFunctionDef] | None:
        """``C.make`` where ``C`` is a speculator class and ``make`` a class- or static method of its
        MRO: the names its body sees (``cls`` is ``C``), its module and its definition."""
        if not isinstance(callee, ast.Attribute):
            return None
        owner_name = _dotted(callee.value)
        owner = self._class_named(local, module, owner_name) if owner_name else None
        hit = self._find(self._mro(owner), callee.attr) if owner is not None else None
        if hit is None or hit.owner is None:
            return None
        home = self.modules[self.classes[hit.owner].module]
        function = self.classes[hit.owner].methods[hit.name]
        decorators = {_dotted(d) for d in function.decorator_list}
        if "classmethod" in decorators and function.args.args:
            names = {**_scope(home, function), function.args.args[0].arg: owner}
        elif "staticmethod" in decorators:
            names = _scope(home, function)
        else:
            return None
        return (names, home, function) if self._returns_a_speculator(names, home, function) else None

    def _returns_a_speculator(
        self, names: dict[str, str], module: _Module, function: ast.FunctionDef | ast.AsyncFunctionDef
    ) -> bool:
        """Whether a ``return`` of ``function`` names a speculator class (``cls`` of a class method
        too): only such a method can hand one on (``clamp(x)`` returning ``x`` is no factory)."""
        return any(
            (dotted := _dotted(node)) is not None and self._class_named(names, module, dotted) is not None
            for returned in walk(function)
            if isinstance(returned, ast.Return) and returned.value is not None
            for node in walk(returned.value)
            if isinstance(node, (ast.Name, ast.Attribute))
        )

    def _choice(
        self, local: dict[str, str], module: _Module, node: ast.expr, values: dict[str, ast.expr]
    ) -> ast.IfExp | None:
        """``node`` as the conditional expression it evaluates as: ``a if c else b`` itself, and a
        lookup in a literal dict (``{"mtp": M, "eagle": E}[key]``, ``.get(key, default)``) as
        ``M if key == "mtp" else (E if key == "eagle" else <missing>)``: a missing key gives no class
        (``[key]`` raises, ``.get`` gives its default)."""
        if isinstance(node, ast.IfExp):
            return node
        if isinstance(node, ast.Subscript):
            table, key, missing = node.value, node.slice, ast.Constant(None)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and 1 <= len(node.args) <= 2
            and not node.keywords
        ):
            table, key = node.func.value, node.args[0]
            missing = node.args[1] if len(node.args) == 2 else ast.Constant(None)
        else:
            return None
        literal = self._literal_dict(local, module, table, values)
        if literal is None:
            return None
        entries: dict[str, tuple[ast.expr, ast.expr]] = {}  # a key written twice keeps its last value, as in Python
        for entry, value in zip(literal.keys, literal.values):
            spelled = ast.dump(entry)  # type: ignore[arg-type]
            if spelled in entries:  # the earlier value is never looked up: it hands nothing on
                self._placed.update(self._references_in(local, module, entries[spelled][1]))
            entries[spelled] = entries.get(spelled, (entry, value))[0], value  # type: ignore[assignment]
        chain: ast.expr = missing
        for entry, value in reversed(entries.values()):
            test = ast.Compare(left=key, ops=[ast.Eq()], comparators=[entry])
            chain = ast.IfExp(test=test, body=value, orelse=chain)
        return chain if isinstance(chain, ast.IfExp) else None

    def _references_in(self, local: dict[str, str], module: _Module, node: ast.expr) -> set[tuple[str, int, int]]:
        """Where ``node`` names a speculator class (see ``_place``)."""
        return {
            _place(qualname, reference)
            for reference in walk(node)
            if isinstance(reference, (ast.Name, ast.Attribute))
            and (dotted := _dotted(reference)) is not None
            and (qualname := self._class_named(local, module, dotted)) is not None
        }

    def _literal_dict(
        self, local: dict[str, str], module: _Module, node: ast.expr, values: dict[str, ast.expr]
    ) -> ast.Dict | None:
        """The dict literal ``node`` is (a local or module-level name bound once to one, also
        imported from a module read here); None when it has a ``**`` entry or is no such literal."""
        if isinstance(node, ast.Name) and node.id in values:
            node = values[node.id]
        elif isinstance(node, ast.Name):
            home, _, name = _qualified(local, module, node.id).rpartition(".")
            node = _module_values(self.modules[home]).get(name) if home in self.modules else None
        if isinstance(node, ast.Dict) and all(key is not None for key in node.keys):
            return node
        return None

    def _class_named(self, local: dict[str, str], module: _Module, name: str) -> str | None:
        """The speculator ``name`` stands for: an imported or local class, or one reached through an
        imported module (``speculators.MTPSpeculator`` after ``from . import speculator as speculators``)."""
        qualname = _qualified(local, module, name)
        for _ in range(MAX_REEXPORTS):  # a package's ``__init__`` re-exporting it binds the same class
            if qualname in self.classes:
                return qualname if self._is_caller(qualname) else None
            home, _, name = qualname.rpartition(".")
            imported = self.modules[home].imports if home in self.modules else None
            if imported is None and home in self._helpers:  # a file of the caller folders kept aside
                found = self._function_module(home)
                imported = found.imports if found is not None else None
            if imported is None or name not in imported:
                return None
            qualname = imported[name]
        return None

    def unfollowed(self) -> list[str]:
        """Constructions in the choosing functions named like a speculator (``...Speculator(...)``,
        ``...Proposer(...)``) that are no class of the caller files: the drafters they may hold are
        judged without them, which a user should know."""
        out: list[str] = []
        for module, function, _, local, variables in self._selectors():
            for node in walk(function):
                name = _dotted(node.func) if isinstance(node, ast.Call) else None
                if name and CALLER_NAME.search(name) and self._class_named(local, module, name) is None:
                    note = (
                        f"{module.file}:{node.lineno}: {name}(...) in {function.name} is not a speculator class "
                        "of the caller files; the drafters it may hold are judged without it"
                    )
                    out.append(note)
            out += self._unfollowed_picks(module, function, local, variables)
        out += self._unplaced()
        out += self._spelled_only()
        out += self._unread_configs()
        out += self._proposers_never_chosen()
        return list(dict.fromkeys(out))

    def _unplaced(self) -> list[str]:
        """References to a speculator class of the caller files (or to a class- or static-method
        factory of one) that the selection did not read as a construction or a pick: the class put
        in a dict built by code, handed to a function, returned from a helper, a factory whose
        ``return`` it cannot follow. The class may be constructed there unseen. Inspecting it
        (``isinstance``, a comparison, an annotation, a base, ``super``) hands nothing on."""
        out = []
        named = {cls.name for qualname, cls in self.classes.items() if self._is_caller(qualname)}
        if not named:
            return out
        spelled = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, named))) + r")\b")
        for module in list(self.modules.values()):
            if not spelled.search(module.source):  # a reference spells the class's name (or imports it so)
                continue
            parents: dict[int, ast.AST] | None = None
            for scope, node in _references(module):
                dotted = _dotted(node)
                assert dotted is not None
                owner, _, attr = dotted.rpartition(".")
                qualname = self._class_named(scope, module, dotted)
                if qualname is None and owner and (factory := self._factory(scope, module, node)) is not None:
                    qualname = factory[2].name
                if qualname is None or _place(qualname, node) in self._placed:
                    continue
                parents = parents if parents is not None else parent_map(module.tree)
                if _inspected(parents, node):
                    continue
                statement = _statement_of(parents, node)
                out.append(
                    f"{module.file}:{node.lineno}: `{unparse(statement)}` hands {dotted} on where the "
                    "selection does not read it; the drafters it may hold are judged without it"
                )
        return out

    def _spelled_only(self) -> list[str]:
        """A string that is nothing but the name of a speculator class of the caller files (``"Step3p5MTPProposer"``,
        its dotted path, ``module:Class``), where the selection constructs that class nowhere it reads: a lookup
        by name (``getattr(module, "...")``, ``resolve_obj_by_qualname("...")``) it does not follow may construct
        it. Strings of other text (a log line naming a class), and names of classes other speculators derive from
        (a base is never the one chosen: ``cast(..., "BaseSpeculator")``), are left alone."""
        chosen = {qualname for qualname, _, _ in self._placed}
        chosen |= {self._config_attr(c.qualname, "speculator_class") for c in self._configs()}  # a config's string
        callers = [qualname for qualname in self.classes if self._is_caller(qualname)]
        bases = {base for qualname in callers for base in self._mro(qualname)[1:]}  # a base is never the choice
        unchosen = {
            self.classes[qualname].name: qualname
            for qualname in callers
            if qualname not in chosen and qualname not in bases
        }
        if not unchosen:
            return []
        out = []
        for module in list(self.modules.values()):
            if not any(name in module.source for name in unchosen):
                continue
            exported = {  # ``__all__``'s names; a config's ``speculator_class`` (``_unread_configs`` says so)
                id(n) for s in walk(module.tree) if _binds_any(s, ("__all__", "speculator_class")) for n in walk(s)
            }
            for node in walk(module.tree):
                if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in exported:
                    continue
                spelled = SPELLED_CLASS.fullmatch(node.value.strip())
                qualname = unchosen.get(spelled.group("name")) if spelled else None
                if qualname is not None:
                    out.append(
                        f"{module.file}:{node.lineno}: the string {node.value!r} names {qualname.rpartition('.')[2]}, "
                        "which the selection constructs nowhere it reads (a lookup by name is not followed); the "
                        "drafters it may hold are judged without it"
                    )
        return out

    def _unfollowed_picks(
        self,
        module: _Module,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
        local: dict[str, str],
        variables: frozenset[str],
    ) -> list[str]:
        """Picks into a class variable (one that elsewhere gets a speculator class) of something
        that is no speculator class of the caller files: the speculator constructed from it is not
        followed."""
        picks = [
            (node, target.id, value)
            for node in walk(function)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Name) and target.id in variables
            for value in _branches(node.value)
        ]
        known = {variable for _, variable, value in picks if self._picked(local, module, value)}
        return [
            f"{module.file}:{node.lineno}: {variable} = {unparse(value)} in {function.name} "
            "is not a speculator class of the caller files; the drafters it may hold are judged without it"
            for node, variable, value in picks
            if variable in known and not isinstance(value, ast.Constant) and not self._picked(local, module, value)
        ]

    def _picked(self, local: dict[str, str], module: _Module, value: ast.expr) -> bool:
        return bool(self._made_by(local, module, value, {}))

    def _is_caller(self, qualname: str) -> bool:
        """A speculator or proposer: a class with a drafting entry point in its MRO."""
        return any(
            entry in self.classes[c].methods or entry in self.classes[c].rebound
            for c in self._mro(qualname)
            for entry in ENTRY_POINTS
        )

    def _selectors(
        self,
    ) -> list[tuple[_Module, ast.FunctionDef | ast.AsyncFunctionDef, list[tuple], dict[str, str], frozenset[str]]]:
        """The functions that construct speculators (where the choice among them is made), each with its
        compacted body, the names in its scope and its class variables (``_called_locals``)."""
        if self._selector_functions is None:
            self._selector_functions = []
            for module in list(self.modules.values()):  # naming a class may read a re-exporting package
                if not _may_construct(module.source):
                    continue
                for function in _functions(module.tree):
                    local = _scope(module, function)
                    variables = _called_locals(function)
                    values = _assigned_once(function)
                    if self._constructed(local, module, function, variables, values):
                        compact = self._compact(local, module, function.body, values, variables)
                        self._selector_functions.append((module, function, compact, local, variables))
        return self._selector_functions

    def _compact(
        self,
        local: dict[str, str],
        module: _Module,
        body: list[ast.stmt],
        values: dict[str, ast.expr],
        class_variables: frozenset[str],
    ) -> list[tuple]:
        """The statements of ``body`` that matter for selection: ``if``s around constructions or
        exits, exits (``return``, ``raise``) with what they construct, and constructions (a class
        picked into one of ``class_variables`` counts as constructed where it is picked). A
        ``with`` block runs its body; a ``match`` runs as its ``if``/``elif`` chain; a statement
        that chooses by a conditional expression or a literal dict (``_choice``) as the ``if``/``else``
        it stands for; a ``try`` runs its body and ``else``, and its handlers may run first
        instead (an undecided branch). A local the function assigns once (``method = spec.method``)
        is read in a condition as its value."""
        out: list[tuple] = []
        for statement in body:
            if (split := self._split_choice(local, module, statement, values)) is not None:
                out += self._compact(local, module, [split], values, class_variables)
            elif isinstance(statement, TRIES):
                handlers = [s for handler in statement.handlers for s in handler.body]
                undecided = [ast.If(test=ast.Constant(...), body=handlers, orelse=[])] if handlers else []
                blocks = [*undecided, *statement.body, *statement.orelse, *statement.finalbody]
                out += self._compact(local, module, blocks, values, class_variables)
            elif isinstance(statement, ast.If):
                then = self._compact(local, module, statement.body, values, class_variables)
                orelse = self._compact(local, module, statement.orelse, values, class_variables)
                if then or orelse:
                    test = _Substituted(values).visit(copy.deepcopy(statement.test))
                    test = _Substituted(self._named_collections(local, module, test)).visit(test)
                    out.append(("if", test, then, orelse))
            elif isinstance(statement, (ast.With, ast.AsyncWith)):
                entered = self._constructed(local, module, ast.Tuple([i.context_expr for i in statement.items]))
                out += [("do", entered)] if entered else []
                out += self._compact(local, module, statement.body, values, class_variables)
            elif isinstance(statement, ast.Match):
                out += self._compact(local, module, match_as_if(statement), values, class_variables)
            elif isinstance(statement, (ast.Return, ast.Raise)):
                out.append(("exit", self._constructed(local, module, statement, class_variables, values)))
            elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                built = self._constructed(local, module, statement, class_variables, values)
                if built:
                    out.append(("do", built))
        return out

    def _named_collections(self, local: dict[str, str], module: _Module, test: ast.expr) -> dict[str, ast.expr]:
        """The names ``test`` reads that a module binds once to a literal collection of strings
        (``XPRESS_ARCHITECTURES = frozenset({...})``, imported too): in the test, that literal."""
        out = {}
        for node in walk(test):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                home, _, name = _qualified(local, module, node.id).rpartition(".")
                value = self._module_value(home, name)
                if value is not None and _string_collection(value) is not None:
                    out[node.id] = value
        return out

    def _module_value(self, home: str, name: str) -> ast.expr | None:
        """What module ``home`` binds ``name`` to once at module level (a module outside the caller
        files parsed for it, once)."""
        if home in self.modules:
            return _module_values(self.modules[home]).get(name)
        if home not in self._value_modules:
            located = self.index.locate(home)
            try:
                self._value_modules[home] = ast.parse(self.index.read_bytes(located[0])) if located else None
            except (SyntaxError, ValueError, OSError):
                self._value_modules[home] = None
        tree = self._value_modules[home]
        return _module_values_of(tree).get(name) if tree is not None else None

    def _split_choice(
        self, local: dict[str, str], module: _Module, statement: ast.stmt, values: dict[str, ast.expr]
    ) -> ast.If | None:
        """A simple statement that chooses what it constructs or picks by a conditional expression or
        a literal dict (``_choice``), as the ``if``/``else`` it stands for: the statement with the
        choice replaced by each arm."""
        if isinstance(statement, (ast.If, ast.With, ast.AsyncWith, ast.Match, *TRIES, *INNER_SCOPES)):
            return None
        for node in walk(statement):
            choice = self._choice(local, module, node, values) if isinstance(node, ast.expr) else None
            if choice is not None and any(
                self._made_by(local, module, arm, values) or self._constructed(local, module, arm, values=values)
                for arm in (choice.body, choice.orelse)
            ):
                arms = [[_with_arm(statement, node, arm)] for arm in (choice.body, choice.orelse)]
                return ast.If(test=choice.test, body=arms[0], orelse=arms[1])
        return None

    def _select(self, body: list[tuple], drafter: Drafter) -> tuple[list[str], bool]:
        """Speculators constructed on the paths that ``drafter`` can take through a compacted
        body, and whether every such path leaves it (returns or raises)."""
        out: list[str] = []
        for kind, *rest in body:
            if kind == "if":
                test, then, orelse = rest
                truth = self.truth(test, drafter)
                body_exits = else_exits = False
                if truth is not False:
                    found, body_exits = self._select(then, drafter)
                    out += [q for q in found if q not in out]
                if truth is not True:
                    found, else_exits = self._select(orelse, drafter)
                    out += [q for q in found if q not in out]
                if (truth is True and body_exits) or (truth is False and else_exits) or (body_exits and else_exits):
                    return out, True
            else:
                out += [q for q in rest[0] if q not in out]
                if kind == "exit":
                    return out, True
        return out, False

    def truth(self, node: ast.expr, drafter: Drafter) -> Truth:
        """Three-valued truth of a selection condition for ``drafter``."""
        if isinstance(node, ast.BoolOp):
            values = [self.truth(v, drafter) for v in node.values]
            if isinstance(node.op, ast.And):
                return False if False in values else (True if all(v is True for v in values) else UNKNOWN)
            return True if True in values else (False if all(v is False for v in values) else UNKNOWN)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            value = self.truth(node.operand, drafter)
            return UNKNOWN if value is UNKNOWN else not value
        if isinstance(node, ast.Constant) and isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args:
            if node.func.attr in self._predicate_defs:
                return self._predicate(node.func.attr, drafter)
            if self._runner is not None and _is_self(node.func.value) and node.func.attr in self._runner.methods:
                return self._config_check(node.func.attr, drafter)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            return self._compare(node.left, node.ops[0], node.comparators[0], drafter)
        if (tested := _truth_tested(node)) is not None:  # ``bool(x)``
            return self.truth(tested, drafter)
        if (shared := _shared_with_architectures(node)) is not None:
            names, overlap = shared
            if drafter.arch is None:
                return UNKNOWN
            return (drafter.arch in names) == overlap
        if (each := _each_architecture(node)) is not None:
            variable, element = each
            if drafter.arch is None:
                return UNKNOWN
            one = _Substituted({variable: ast.Constant(drafter.arch)}).visit(copy.deepcopy(element))
            return self.truth(one, drafter)
        if _attr(node) in PRESENT_CONFIGS:  # ``if self.speculative_config:``
            return True
        return UNKNOWN

    def _predicate(self, name: str, drafter: Drafter) -> Truth:
        key = f"{name}\0{drafter}"
        if key not in self._predicates:
            self._predicates[key] = UNKNOWN  # a recursive predicate stays unknown
            self._predicates[key] = self._block_truth(self._predicate_defs[name].body, drafter)
        return self._predicates[key]

    def _block_truth(self, body: list[ast.stmt], drafter: Drafter) -> Truth:
        for index, statement in enumerate(body):
            if isinstance(statement, ast.Return):
                return self.truth(statement.value, drafter) if statement.value is not None else False
            if (
                isinstance(statement, ast.If)
                and statement.body
                and isinstance(statement.body[-1], ast.Return)
                and not statement.orelse
            ):
                condition = self.truth(statement.test, drafter)
                if condition is False:
                    continue
                early = self._block_truth(statement.body, drafter)
                if condition is True:
                    return early
                rest = self._block_truth(body[index + 1 :], drafter)
                return early if early == rest and early is not UNKNOWN else UNKNOWN
            if isinstance(statement, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                return UNKNOWN
        return UNKNOWN

    def _compare(self, left: ast.expr, op: ast.cmpop, right: ast.expr, drafter: Drafter) -> Truth:
        negate = isinstance(op, (ast.NotEq, ast.NotIn, ast.IsNot))
        if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
            if (_attr(left) or _getattr_name(left)) in PRESENT_CONFIGS:
                return negate  # a drafter being analysed has a speculative and a draft model config
            return UNKNOWN
        if isinstance(op, (ast.Eq, ast.NotEq)):
            values = self._strings(right)
        elif isinstance(op, (ast.In, ast.NotIn)):
            values = self._strings(right)
            if isinstance(left, ast.Constant) and isinstance(left.value, str):
                if values is not None:  # ``"A" in ("A", "B")``: an architecture put in by ``any(...)``
                    return (left.value in values) != negate
                if _is_architectures(right):
                    return UNKNOWN if drafter.arch is None else (left.value == drafter.arch) != negate
        else:
            return UNKNOWN
        if values is None:
            return UNKNOWN
        subject = _attr(left)
        if subject == "method":
            truth = _member(drafter.methods, values)
        elif subject == "model_type" or _getattr_name(left) == "model_type":
            truth = self._of_type(drafter, values)
        else:
            return UNKNOWN
        return UNKNOWN if truth is UNKNOWN else truth != negate

    def _of_type(self, drafter: Drafter, values: tuple[str, ...]) -> Truth:
        """Whether the drafter's model type is among ``values``: known where the speculative
        config writes the architectures of that type, else from the types that map to it."""
        answers = []
        for value in values:
            if value in self._archs_of_type and drafter.arch is not None:
                answers.append(drafter.arch in self._archs_of_type[value])
            elif drafter.model_types:
                answers.append(value in drafter.model_types)
            else:
                answers.append(UNKNOWN)
        if True in answers:
            return True
        return False if all(a is False for a in answers) else UNKNOWN

    def _strings(self, node: ast.expr) -> tuple[str, ...] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return (node.value,)
        if (literal := _string_collection(node)) is not None:
            return literal
        if (
            isinstance(node, ast.Call)
            and _dotted(node.func) in ("get_args", "typing.get_args")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id in self._literals
        ):
            return self._literals[node.args[0].id]
        return None

    # -- 0.34-style SpeculatorConfig classes ------------------------------------------------

    def _configs(self) -> list[_Class]:
        if self._config_classes is None:
            self._config_classes = [
                c for c in self.classes.values() if self._config_attr(c.qualname, "speculator_class") is not None
            ]
        return self._config_classes

    def _config_attr(self, qualname: str, attr: str) -> str | None:
        for name in self._mro(qualname):
            cls = self.classes[name]
            value = cls.assigns.get(attr)
            if value is not None:
                return self._string(value, self.modules[cls.module], {}, 0)
        return None

    def _proposers_never_chosen(self) -> list[str]:
        """V1 proposers where neither the model runner nor its bases construct any: the choice is made
        where the scan does not read (another module), and every drafter is judged without them."""
        if self.package is None:
            return []
        v1 = ".".join((self.package.name, *V1_DIR))
        proposers = sorted(
            {self.classes[q].name for q in self.classes if q.startswith(f"{v1}.") and self._is_caller(q)}
        )
        runner = self.package.joinpath(*V1_RUNNER)
        if not proposers or any(module.name in self._runner_modules for module, *_ in self._selectors()):
            return []
        named = f"the V1 proposers ({', '.join(proposers)})"
        where = (
            f"constructs none of {named}, nor do its bases: the choice is made where the scan does not read "
            "(another module the runner calls into)"
            if self._runner_modules
            else f"is missing or cannot be read, so where {named} are chosen is not known"
        )
        return [f"{self.index.relative(runner)} {where}; the drafters they may hold are judged without them"]

    def _unread_configs(self) -> list[str]:
        """Config classes whose ``speculator_class`` is no string the scan can work out: the
        speculator they name is not followed, which a user should know."""
        out = []
        for cls in self.classes.values():
            value = cls.assigns.get("speculator_class")
            literal = isinstance(value, ast.Constant)  # ``None``: no speculator class
            if value is not None and not literal and self._string(value, self.modules[cls.module], {}, 0) is None:
                out.append(
                    f"{cls.file}:{_line(value)}: `{cls.name}.speculator_class = {unparse(value)}` is no string the "
                    "scan can work out; the drafters its speculator may hold are judged without it"
                )
        return out

    def _string(self, node: ast.expr, module: _Module, bound: dict[str, str], depth: int) -> str | None:
        """The string ``node`` evaluates to, worked out as Python would: a literal, an f-string or a
        sum of such, a module-level constant (imported ones too) or a parameter, or the call of a
        module-level function that only returns such an expression (``_builtin("mtp.speculator",
        "MTPSpeculator")``); None for anything else."""
        if depth > MAX_FACTORY_DEPTH:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                formatted = isinstance(value, ast.FormattedValue)
                plain = formatted and value.conversion in (-1, ord("s")) and not value.format_spec  # str() of a str
                parts.append(self._string(value.value if plain else value, module, bound, depth + 1))
            return None if None in parts else "".join(parts)  # type: ignore[arg-type]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self._string(node.left, module, bound, depth + 1)
            right = self._string(node.right, module, bound, depth + 1)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Name):
            if node.id in bound:
                return bound[node.id]
            found = self._top_level_binding(module, node.id, depth)
            if isinstance(found, tuple) and isinstance(found[1], (ast.Assign, ast.AnnAssign)):
                return self._string(found[1].value, found[0], {}, depth + 1) if found[1].value else None
            return None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id not in bound:
            found = self._top_level_binding(module, node.func.id, depth)
            if isinstance(found, tuple) and isinstance(found[1], ast.FunctionDef):
                return self._returned_string(found[0], found[1], node, module, bound, depth)
        return None

    def _returned_string(
        self,
        home: _Module,
        function: ast.FunctionDef,
        call: ast.Call,
        module: _Module,
        bound: dict[str, str],
        depth: int,
    ) -> str | None:
        """What ``function`` of ``home`` (a docstring and one ``return``) returns for ``call``'s arguments,
        read in ``module`` with ``bound`` parameters."""
        body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        arguments = function.args
        if (
            len(body) != 1
            or not isinstance(body[0], ast.Return)
            or body[0].value is None
            or function.decorator_list
            or arguments.vararg
            or arguments.kwarg
            or any(isinstance(a, ast.Starred) for a in call.args)
            or any(k.arg is None for k in call.keywords)
        ):
            return None
        names = [a.arg for a in [*arguments.posonlyargs, *arguments.args]]
        if len(call.args) > len(names):
            return None
        given: dict[str, ast.expr] = dict(zip(names, call.args))
        for keyword in call.keywords:
            if keyword.arg in given or keyword.arg not in [*names, *(a.arg for a in arguments.kwonlyargs)]:
                return None
            given[keyword.arg] = keyword.value
        defaults = dict(zip(names[len(names) - len(arguments.defaults) :], arguments.defaults))
        defaults.update((a.arg, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
        values: dict[str, str] = {}
        for name in [*names, *(a.arg for a in arguments.kwonlyargs)]:
            if name in given:
                value = self._string(given[name], module, bound, depth + 1)
            elif name in defaults:
                value = self._string(defaults[name], home, {}, depth + 1)
            else:
                return None
            if value is None:
                return None
            values[name] = value
        return self._string(body[0].value, home, values, depth + 1)

    def _top_level_binding(self, module: _Module, name: str, depth: int) -> tuple[_Module, ast.stmt] | None:
        """The one statement binding ``name`` at ``module``'s top level (an assignment or a ``def``,
        followed through ``from X import name``), with the module it is in; None where there are
        several, or another kind."""
        for _ in range(MAX_REEXPORTS):
            bound = [(node, _bound_at_top(node)) for node in module.tree.body]
            bindings = [node for node, names in bound if name in names or "*" in names]  # ``import *`` may bind it
            if len(bindings) != 1:
                return None
            binding = bindings[0]
            if not isinstance(binding, ast.ImportFrom):
                return module, binding
            qualname = module.imports.get(name)
            home, _, name = (qualname or "").rpartition(".")
            found = self._function_module(home) if home else None
            if found is None:
                return None
            module = found
        return None

    def _by_config(self, drafter: Drafter) -> list[tuple[str, str]]:
        configs = self._configs()
        if not configs:
            return []
        if drafter.declared_config and drafter.declared_config in self.classes:
            # vLLM uses the declared config as it is: specialize() is for undeclared drafters.
            chosen = [drafter.declared_config]
            how = f"declared by the drafter ({self.classes[drafter.declared_config].name})"
        else:
            chosen = self._specialized(
                c.qualname
                for c in configs
                if "base_method" in c.assigns
                and (drafter.methods is None or self._config_attr(c.qualname, "base_method") in drafter.methods)
            )
            how = "by speculative method"
        out = []
        for config in chosen:
            speculator = self._config_attr(config, "speculator_class")
            if speculator in self.classes:
                out.append((speculator, f"{how}: {self.classes[config].name}"))
        return out

    def _specialized(self, configs: Iterable[str]) -> list[str]:
        """Configs and every config their ``specialize()`` may return (run-time: all count)."""
        out: list[str] = []
        todo = list(configs)
        while todo:
            config = todo.pop()
            if config in out:
                continue
            out.append(config)
            for name in self._mro(config):
                cls = self.classes[name]
                method = cls.methods.get("specialize")
                if method is None:
                    continue
                module = self.modules[cls.module]
                local = _scope(module, method)
                for sub in walk(method):
                    if isinstance(sub, ast.Return) and sub.value is not None:
                        for value in _branches(sub.value):
                            name_ = _dotted(value)
                            target = _qualified(local, module, name_) if name_ else None
                            if target in self.classes:
                                todo.append(target)
                break
        return out

    # -- drafting paths ---------------------------------------------------------------------

    def _mro(self, qualname: str, _seen: frozenset = frozenset()) -> list[str]:
        """C3 over the classes of the caller files; bases outside them end the walk."""
        if qualname in self._mros:
            return self._mros[qualname]
        if qualname not in self.classes or qualname in _seen:
            return []
        self._mros[qualname] = self._linearize(qualname, _seen)
        return self._mros[qualname]

    def _linearize(self, qualname: str, _seen: frozenset) -> list[str]:
        seen = _seen | {qualname}
        sequences = [self._mro(b, seen) for b in self.classes[qualname].bases if b in self.classes]
        sequences = [s for s in sequences if s] + [[b for b in self.classes[qualname].bases if b in self.classes]]
        out = [qualname]
        while any(sequences):
            for sequence in sequences:
                if not sequence:
                    continue
                head = sequence[0]
                if not any(head in s[1:] for s in sequences):
                    break
            else:  # Python raises TypeError at the class statement: said by uncreatable(), each class kept once
                cls = self.classes[qualname]
                bases = ", ".join(base.rsplit(".", 1)[-1] for base in cls.bases)
                self._uncreatable[qualname] = (
                    f"{cls.file}:{cls.line}: class {cls.name} raises TypeError (no consistent method resolution "
                    f"order for its bases {bases})"
                )
                return out + [c for s in sequences for c in s if c not in out]
            out.append(head)
            sequences = [s[1:] if s and s[0] == head else s for s in sequences]
        return out

    def uncreatable(self, qualname: str) -> str | None:
        """Why the class statement of ``qualname``, or of a class in its MRO, raises TypeError (no C3
        order exists): Python never makes the class, so what its methods would call is not known."""
        return next((self._uncreatable[c] for c in self._mro(qualname) if c in self._uncreatable), None)

    def prepare(self) -> None:
        """Follow every speculator's and proposer's drafting path (see ``reach``) and find the choosing
        functions and config classes now, so that forked workers inherit them instead of each redoing them."""
        for qualname in self.classes:
            if self._is_caller(qualname):
                self.reach(qualname)
        self._selectors()
        self._configs()

    def reach(self, qualname: str) -> Reach:
        if qualname not in self._reach:
            self._reach[qualname] = _DraftingPath(self, qualname).reach()
        return self._reach[qualname]

    def _find(self, mro: list[str], name: str, start: int = 0, depth: int = 0) -> _Method | None:
        """The function Python calls for ``name`` looked up in ``mro`` from ``start``: the last
        binding of the name in the first class body that binds it, a def or what an assignment
        binds it to (``_bound_to``); a base that cannot be read on the way makes it unknown. None:
        no class binds it (or binds it to a constant, which is no method)."""
        for index in range(start, len(mro)):
            cls = self.classes[mro[index]]
            if cls.unread:
                return _Method(None, name, f"{cls.unread}; {name} may be defined there")
            if name in cls.methods:
                return _Method(cls.qualname, name)
            if name in cls.rebound:
                return self._bound_to(cls, name, cls.rebound[name], depth)
        return None

    def _bound_to(self, cls: _Class, name: str, statement: ast.stmt, depth: int) -> _Method | None:
        """The function a class-body statement other than a def binds ``name`` to: a method of a
        class of the caller files (``Base.sample_full``), a def above it in the same body
        (``sample_draft = sample_full``) or a module-level function of the caller files; a
        constant binds no method; anything else is a function the scan does not follow."""
        value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(value, ast.Constant):
            return None
        module = self.modules[cls.module]
        dotted = _dotted(value) if isinstance(value, (ast.Name, ast.Attribute)) else None
        unfollowed = _Method(
            None,
            name,
            f"{cls.file}:{statement.lineno}: `{unparse(statement)}` (what {cls.name}.{name} "
            "is, which the scan does not follow)",
        )
        if dotted is None or depth > MAX_FACTORY_DEPTH:
            return unfollowed
        if isinstance(value, ast.Name) and value.id in cls.methods:
            earlier = cls.methods[value.id].lineno < statement.lineno
            return _Method(cls.qualname, value.id) if earlier else unfollowed
        owner, _, attr = dotted.rpartition(".")
        target = self._qualname_in(cls.module, owner) if owner else None
        if target in self.classes:
            found = self._find(self._mro(target), attr, depth=depth + 1)
            plain = found is not None and not found.unfollowed
            return found if plain and not _decorated_as(self._function(found), BINDERS) else unfollowed
        defined = self._function_named(_qualified(module.imports, module, dotted))
        return _Method(None, defined) if defined is not None else unfollowed

    def _function(self, method: _Method) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        return self._definition(_Frame(method.owner, method.name))[0] if not method.unfollowed else None

    def _definition(self, frame: _Frame) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, str]:
        """A frame's function, module and file."""
        if frame.owner is not None:
            home = self.classes[frame.owner]
            return home.methods[frame.name], home.module, home.file
        module, function = self._module_functions()[frame.name]
        return function, module.name, module.file

    def _sites(self, frame: _Frame, mro: list[str]) -> tuple[list[_Site], list[str]]:
        """The calls of a frame's function that a drafting path goes through: calls on the drafter
        (``self.model``, a local alias, a bound method, or a parameter the drafter is handed in),
        calls of the speculator's own methods (on ``self``, through ``super()`` or
        ``super(Cls, self)``, or explicitly, ``Base.method(self, ...)``; ``self(...)`` as its
        ``__call__``; what a name rebound on the instance holds, see ``_python_calls``), module-level
        functions of the caller files that the drafter is handed to, and the speculator's bound
        methods used as values (``run(self._generate_drafts, h)``: called where the scan does not
        look, with arguments it does not know); and the references that none of these follows
        (``FILE:LINE: code``)."""
        function, module, file = self._definition(frame)
        nodes = list(walk(function))
        holding = self._drafter_attributes(mro)
        names = _DrafterNames.of(nodes, frame.drafters, frame.speculators, holding.sure)
        shadowed = _inner_scope_names(function)
        sites: list[_Site] = []
        followed: set[int] = set()  # drafter references that a site follows
        called: set[int] = set()  # what the calls call, as Python finds it (see _bound_method_values)
        home = self.modules[module] if module in self.modules else None
        callables = _bound_once(nodes, function)
        unbound: list[str] = []  # methods of the speculator called here that the scan cannot tell
        for call_node in (node for node in nodes if isinstance(node, ast.Call)):
            for node, store in self._python_calls(call_node, frame, mro, callables, home, function):
                called |= {id(node.func), id(call_node.func)}
                method = names.method_of(node.func)
                if method is not None:
                    args = tuple(
                        [unparse(a) for a in node.args]
                        + [f"{k.arg}={unparse(k.value)}" if k.arg else f"**{unparse(k.value)}" for k in node.keywords]
                    )
                    keywords = tuple(k.arg for k in node.keywords if k.arg)
                    call = ModelCall(method, args, keywords, len(node.args), file, node.lineno)
                    sites.append(_Site(call_node, file, _unshadowed(call, shadowed.get(id(call_node), frozenset()))))
                    followed |= {id(node.func), id(call_node.func)}
                    continue
                callee = self._callee(node, frame, mro, module, names.hands_on(node))
                if isinstance(callee, str):
                    unbound.append(callee)
                elif callee is None and store is not None:
                    unbound.append(store)
                if not isinstance(callee, tuple):
                    continue
                site = self._site_into(callee, node, call_node, file, names)
                if site is None:
                    continue  # a function handed neither the drafter nor the speculator cannot call it
                followed |= {
                    id(arg)
                    for _, arg in _arguments_by_parameter(self._definition(callee[0])[0], node, callee[1])
                    if names.holds(arg)
                }
                sites.append(site)
        methods: dict[str, _Method] = {}
        if frame.owner is not None:  # the speculator's own methods ``self.NAME`` may hand on
            attributes = {n.attr for n in nodes if isinstance(n, ast.Attribute)}
            methods = {name: hit for name in attributes if (hit := self._find(mro, name)) is not None}
        for reference, shown in _bound_method_values(nodes, called, function, methods):
            entered = self._entered(methods[reference.attr], bound=True)
            if isinstance(entered, str):
                unbound.append(entered)
            elif entered is not None and not _decorated_as(self._definition(entered[0])[0], PROPERTIES):
                target, bound_self = entered
                sites.append(
                    _Site(
                        shown,
                        file,
                        callee=_Frame(
                            target.owner,
                            target.name,
                            speculators=self._self_parameter(_Method(target.owner, target.name)),
                        ),
                        receives=_unknown_arguments(self._definition(target)[0], bound_self),
                        callee_locals=self._local_names(target),
                    )
                )
        unfollowed = [
            f"{file}:{shown.lineno}: `{unparse(shown)}`"
            for reference, shown in names.escapes(nodes)
            if id(reference) not in followed
        ]
        return sites, unbound + unfollowed + _uses_of_maybe(nodes, frame.speculators, holding.maybe, file)

    def _site_into(
        self, callee: tuple[_Frame, bool], node: ast.Call, call_node: ast.Call, file: str, names: _DrafterNames
    ) -> _Site | None:
        """The site of ``call_node`` (called as ``node``) going into ``callee``, with what it hands
        on; None for a module-level function handed neither the drafter nor the speculator."""
        target, bound_self = callee
        definition = self._definition(target)[0]
        passed = list(_arguments_by_parameter(definition, node, bound_self))
        handed = tuple(sorted(name for name, arg in passed if names.holds(arg)))
        speculators = tuple(
            sorted(
                {
                    *(
                        name
                        for name, arg in passed
                        if target.owner is None and isinstance(arg, ast.Name) and arg.id in names.speculators
                    ),
                    *(self._self_parameter(_Method(target.owner, target.name)) if bound_self else ()),
                }
            )
        )
        if target.owner is None and not handed and not speculators:
            return None
        return _Site(
            call_node,
            file,
            callee=_Frame(target.owner, target.name, handed, speculators),
            receives=_received(definition, node, bound_self),
            callee_locals=self._local_names(target),
        )

    def _python_calls(
        self,
        call: ast.Call,
        frame: _Frame,
        mro: list[str],
        callables: dict[str, ast.expr],
        home: _Module | None,
        function: ast.FunctionDef | ast.AsyncFunctionDef,
    ) -> list[tuple[ast.Call, str | None]]:
        """Each call Python may make for ``call`` (``_direct_call``; each arm of ``a if c else b``
        called), with, for one that calls what a name rebound on the instance holds, that binding
        as the scan names it when it cannot follow it (None: the call's own, or a binding that
        cannot reach the drafter). ``self.NAME(...)`` calls the class's ``NAME`` and, where a
        method of the speculator's MRO assigns ``self.NAME = VALUE``, VALUE too: an instance
        attribute shadows the class's method."""
        out: list[tuple[ast.Call, str | None]] = []
        expanded: set[str] = set()  # each rebound name once: ``self.f = torch.compile(self.f)``
        todo: list[tuple[ast.Call, _InstanceBinding | None]] = [(call, None)]
        while todo:
            made, binding = todo.pop()
            if binding is not None:
                made = _direct_call(made, {}, binding.scope, binding.module)
            elif home is not None:
                made = _direct_call(made, callables, _scope(home, function), home)
            if isinstance(made.func, ast.IfExp):
                todo += [(_called_as(arm, made), binding) for arm in _branches(made.func)]
                continue
            out.append((made, binding.named if binding is not None and binding.may_draft else None))
            func = made.func
            if frame.owner is None or not (isinstance(func, ast.Attribute) and _is_self(func.value)):
                continue
            if func.attr in expanded or func.attr in self._drafter_attributes(mro).sure:  # runs the drafter
                continue
            expanded.add(func.attr)
            rebinds_method = self._find(mro, func.attr) is not None
            for found in self._instance_bindings(mro).get(func.attr, ()):
                may_draft = rebinds_method or self._may_draft(found.value, mro)
                todo.append((_called_as(found.value, made), replace(found, may_draft=may_draft)))
        return out

    def _instance_bindings(self, mro: list[str]) -> dict[str, list[_InstanceBinding]]:
        """``self.NAME = VALUE`` in the methods Python runs on a speculator of ``mro`` (``self`` their
        first parameter; see ``_methods_run``), by NAME."""
        key = tuple(mro)
        if key not in self._instance_values:
            found: dict[str, list[_InstanceBinding]] = {}
            run = self._methods_run(mro)
            for qualname in mro:
                if any(method.owner == qualname for method in run):  # a base not read runs nothing the scan sees
                    for method, binding in self._class_bindings(qualname):
                        if _Method(qualname, method) in run:
                            found.setdefault(binding.name, []).append(binding)
            self._instance_values[key] = found
        return self._instance_values[key]

    def _methods_run(self, mro: list[str]) -> frozenset[_Method]:
        """The methods Python may run on a speculator of ``mro``: for each name, the one its lookup finds,
        and, transitively, a base's that such a method runs through ``super().NAME(...)``,
        ``super(Cls, self).NAME(...)`` or ``Base.NAME(self, ...)`` (an override that calls its base's method
        runs both; one that does not hides it)."""
        key = tuple(mro)
        if key not in self._runs:
            names = {
                name for qualname in mro for name in (*self.classes[qualname].methods, *self.classes[qualname].rebound)
            }
            todo = [
                hit for name in sorted(names) if (hit := self._find(mro, name)) is not None and hit.owner is not None
            ]
            run = set(todo)
            while todo:
                method = todo.pop()
                frame = _Frame(method.owner, method.name)
                module = self.classes[method.owner].module
                for call in self._base_calls(method):
                    entered = self._callee(call, frame, mro, module, hands_on=False)
                    hit = _Method(entered[0].owner, entered[0].name) if isinstance(entered, tuple) else None
                    if hit is not None and hit.owner is not None and hit not in run:
                        run.add(hit)
                        todo.append(hit)
            self._runs[key] = frozenset(run)
        return self._runs[key]

    def _base_calls(self, method: _Method) -> list[ast.Call]:
        """The calls in ``method`` that may run a base's method on the speculator: ``super(...).NAME(...)``,
        ``Base.NAME(self, ...)``."""
        assert method.owner is not None
        if method not in self._calls_to_bases:
            self._calls_to_bases[method] = [
                node
                for node in walk(self.classes[method.owner].methods[method.name])
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and (
                    (isinstance(node.func.value, ast.Call) and _dotted(node.func.value.func) == "super")
                    or (bool(node.args) and _is_self(node.args[0]) and not _is_self(node.func.value))
                )
            ]
        return self._calls_to_bases[method]

    def _class_bindings(self, qualname: str) -> list[tuple[str, _InstanceBinding]]:
        """(method, binding) for each ``self.NAME = VALUE`` in the methods of class ``qualname`` whose
        first parameter is ``self``; read once per class, shared by the speculators built on it."""
        if qualname not in self._bindings_of_class:
            cls = self.classes[qualname]
            module = self.modules[cls.module]
            out: list[tuple[str, _InstanceBinding]] = []
            for name, method in cls.methods.items():
                positional = [*method.args.posonlyargs, *method.args.args]
                if not positional or positional[0].arg != "self" or _is_static(method):
                    continue
                for statement in statements_within(method):
                    if isinstance(statement, (ast.Assign, ast.AnnAssign)):
                        out += [
                            (name, _InstanceBinding(bound, value, statement, cls.file, module, _scope(module, method)))
                            for bound, value in _self_bindings(statement)
                        ]
            self._bindings_of_class[qualname] = out
        return self._bindings_of_class[qualname]

    def _may_draft(self, value: ast.expr, mro: list[str]) -> bool:
        """Whether ``value`` (code of a method of the speculator) holds the speculator, its drafter or
        one of their methods: calling what it makes may reach the drafter."""
        inner = {id(n.value) for n in walk(value) if isinstance(n, ast.Attribute)}
        return any(
            (_is_self(n) and id(n) not in inner)
            or (
                isinstance(n, ast.Attribute)
                and _is_self(n.value)
                and (n.attr in self._drafter_attributes(mro).sure or self._find(mro, n.attr) is not None)
            )
            for n in walk(value)
        )

    def _drafter_attributes(self, mro: list[str]) -> _DrafterAttributes:
        """The attributes ``self.NAME`` that hold the drafter in a speculator of ``mro``, as Python reads
        them: ``self.model`` / ``self.draft_model``; an attribute that is no method or property of the MRO,
        every store of which, in the methods Python runs on the speculator, puts the drafter there
        (``self._drafter = self.model`` in ``__init__``, ``self.a = self.b = self.model``, an attribute
        that holds it, a local bound once to it); a property returning one in its only statement
        (``@property def drafter(self): return self.model``). One that is stored or returned the drafter
        at some places but may hold another object (rebound elsewhere, one arm of ``a if c else b``) is
        ``maybe``: named where a drafting path uses it, never taken for the drafter nor for another."""
        key = tuple(mro)
        if key in self._holders:
            return self._holders[key]
        values: dict[str, list[_AttributeValue]] = {}
        for value in (*self._property_values(mro), *self._instance_stores(mro)):
            values.setdefault(value.name, []).append(value)
        anywhere = [replace(v, value=None) for v in values.pop(ANY_ATTRIBUTE, [])]  # may store into any of them
        candidates = {
            name: found + anywhere
            for name, found in values.items()
            if name not in DRAFTER_ATTRS and any(_drafter_shaped(v) or _handed_a_value(v) for v in found)
        }
        sure = set(DRAFTER_ATTRS)
        grown = bool(candidates)
        while grown:  # an attribute holding another one, a property returning one: until nothing is added
            holders = self._holders_knowing(frozenset(sure))
            added = {
                name
                for name, found in candidates.items()
                if name not in sure and self._surely(name, found, mro, holders)
            }
            sure |= added
            grown = bool(added)
        holders = self._holders_knowing(frozenset(sure))
        maybe = {
            name: self._other_than_drafter(name, found, mro, holders)
            for name, found in candidates.items()
            if name not in sure and any(holders.may_hold(v) for v in found)
        }
        self._holders[key] = _DrafterAttributes(frozenset(sure), maybe)
        return self._holders[key]

    def _holders_knowing(self, attrs: frozenset[str]) -> _Holders:
        """One ``_Holders`` per set of attributes known to hold the drafter, shared by the speculators."""
        if attrs not in self._holders_by_attrs:
            self._holders_by_attrs[attrs] = _Holders(attrs)
        return self._holders_by_attrs[attrs]

    def _surely(self, name: str, found: list[_AttributeValue], mro: list[str], holders: _Holders) -> bool:
        """Whether every read of ``self.NAME`` gives the drafter: what Python finds first on the class (no
        method, or a one-return property) and every value stored or returned there."""
        looked_up = self._find(mro, name)
        if looked_up is not None and not any(v.returned and v.only for v in found):
            return False
        return all(v.value is not None and holders.surely(v) for v in found if not _none_default(v))

    def _other_than_drafter(self, name: str, found: list[_AttributeValue], mro: list[str], holders: _Holders) -> str:
        """Why ``self.NAME`` may hold another object than the drafter: the first place that may put
        another there (a store, a property's return), or the method the class binds to the name."""
        other = next((v for v in found if not _none_default(v) and not holders.surely(v)), None)
        if other is not None:
            where = f"{other.file}:{other.statement.lineno}: `{unparse(other.statement)}`"
            return f"self.{name} may hold another object than the drafter: {where}"
        looked_up = self._find(mro, name)  # every value is the drafter, but the class binds the name first
        assert looked_up is not None
        if looked_up.unfollowed:
            return f"self.{name} is looked up on the class first ({looked_up.unfollowed})"
        function, _, file = self._definition(_Frame(looked_up.owner, looked_up.name))
        return f"self.{name} is looked up on the class first ({file}:{function.lineno})"

    def _instance_stores(self, mro: list[str]) -> list[_AttributeValue]:
        """What the methods Python runs on a speculator of ``mro`` (see ``_methods_run``) store into ``self.NAME``."""
        run = self._methods_run(mro)
        return [
            value
            for qualname in mro
            for method, value in self._class_stores(qualname)
            if _Method(qualname, method) in run
        ]

    def _class_stores(self, qualname: str) -> list[tuple[str, _AttributeValue]]:
        """(method, value) for each store into ``self.NAME`` in the methods of class ``qualname`` whose
        first parameter is ``self`` (see ``_attribute_stores``); read once per class."""
        if qualname not in self._stores_of_class:
            cls = self.classes[qualname]
            out: list[tuple[str, _AttributeValue]] = []
            for name, method in cls.methods.items():
                positional = [*method.args.posonlyargs, *method.args.args]
                if not positional or positional[0].arg != "self" or _is_static(method):
                    continue
                module = self.modules[cls.module]
                out += [
                    (
                        name,
                        _AttributeValue(
                            attr, _seen_through(_scope(module, method), module, value), statement, method, cls.file
                        ),
                    )
                    for statement in statements_within(method)
                    for attr, value in _attribute_stores(statement)
                ]
            self._stores_of_class[qualname] = out
        return self._stores_of_class[qualname]

    def _property_values(self, mro: list[str]) -> list[_AttributeValue]:
        """What the properties Python finds on a speculator of ``mro`` return, each ``return`` of them
        (``only``: the property's one statement, a docstring aside)."""
        out = []
        for qualname in mro:
            cls = self.classes[qualname]
            for name, method in cls.methods.items():
                if not _decorated_as(method, PROPERTIES) or self._find(mro, name) != _Method(qualname, name):
                    continue
                body = [s for s in method.body if not _is_docstring(s)]
                out += [
                    _AttributeValue(name, s.value, s, method, cls.file, returned=True, only=body == [s])
                    for s in statements_within(method)
                    if isinstance(s, ast.Return) and s.value is not None
                ]
        return out

    def _local_names(self, frame: _Frame) -> frozenset[str]:
        """Names a frame's function binds in its body (a parameter it rebinds too, the parameters of
        its lambdas and nested functions, comprehension targets): what they hold there means nothing
        to its caller."""
        key = (frame.owner, frame.name)
        if key not in self._bound_locals:
            function = self._definition(frame)[0]
            self._bound_locals[key] = frozenset(
                name for statement in function.body for node in walk(statement) for name in _binds(node)
            )
        return self._bound_locals[key]

    def _callee(
        self, call: ast.Call, frame: _Frame, mro: list[str], module: str, hands_on: bool
    ) -> tuple[_Frame, bool] | str | None:
        """The frame a call goes into (a method of the speculator's MRO, or a module-level function
        of the vLLM tree, called or bound as a method), and whether ``self`` is bound (not passed)
        there; a method the scan cannot tell (``_find``): why; None: not followed. A function is
        looked up only where the call ``hands_on`` the drafter or the speculator: no other can
        call the drafter, and its module is not read for nothing."""
        if frame.owner is not None and isinstance(call.func, ast.Attribute):
            receiver, method = call.func.value, call.func.attr
            start: int | None = None
            if _is_self(receiver):
                start = 0
            elif isinstance(receiver, ast.Call) and _dotted(receiver.func) == "super":
                anchor = _dotted(receiver.args[0]) if receiver.args else None
                after = self._qualname_in(module, anchor) if anchor else frame.owner
                start = mro.index(after) + 1 if after in mro else None
            elif call.args and _is_self(call.args[0]):
                name = _dotted(receiver)
                explicit = self._qualname_in(module, name) if name else None
                if explicit in mro:
                    return self._entered(self._find(mro, method, mro.index(explicit)), bound=False)
            if start is not None:
                return self._entered(self._find(mro, method, start), bound=True)
        if frame.owner is not None and _is_self(call.func):  # ``self(...)``: its class's __call__
            return self._entered(self._find(mro, "__call__"), bound=True)
        name = _dotted(call.func) if hands_on else None
        defined = self._function_named(self._qualname_in(module, name)) if name else None
        return (_Frame(None, defined), False) if defined is not None else None

    def _self_parameter(self, hit: _Method) -> tuple[str, ...]:
        """The parameter that receives the speculator in a module-level function bound as its method."""
        if hit.owner is not None:
            return ()
        function = self._module_functions()[hit.name][1]
        positional = [*function.args.posonlyargs, *function.args.args]
        return (positional[0].arg,) if positional else ()

    def _entered(self, hit: _Method | None, bound: bool) -> tuple[_Frame, bool] | str | None:
        """The frame a method lookup's hit runs, and whether ``self`` is bound there (``bound``: looked up
        on the instance; a ``@staticmethod`` binds nothing)."""
        if hit is None or hit.unfollowed:
            return hit.unfollowed if hit else None
        function = self._function(hit)
        assert function is not None
        return _Frame(hit.owner, hit.name), bound and not _is_static(function)

    def _function_named(self, qualname: str) -> str | None:
        """The qualified name of the module-level function of the vLLM tree that ``qualname`` names
        where it is defined (followed through re-exports), its module read now if it was not (see
        ``_function_module``). None: no function the scan can read (outside the tree, not a
        function there, or its module missing or unparsable)."""
        for _ in range(MAX_REEXPORTS):
            home, _, name = qualname.rpartition(".")
            module = self._function_module(home)
            if module is None:
                return None
            if qualname in self._module_functions():
                return qualname
            if name not in module.imports:
                return None
            qualname = module.imports[name]
        return None

    def _function_module(self, name: str) -> _Module | None:
        """Module ``name`` of the vLLM tree, read for its functions alone when a drafting path first
        calls into it: a helper module of the caller folders kept aside, or any other module of the
        tree (``spec_utils`` of ``model_executor/layers``, say)."""
        if name not in self.modules:
            path = self._helpers.pop(name, None) or self._tree_file(name)
            if path is None:
                return None
            self._load(path, helper=True)
            self._functions = None
        return self.modules.get(name)

    def _tree_file(self, module: str) -> Path | None:
        """The file of ``module`` where it is in the vLLM tree read (not a plugin's, nor outside)."""
        assert self.package is not None
        located = self.index.locate(module) if module.partition(".")[0] == self.package.name else None
        return located[0] if located and located[0].is_relative_to(self.root) else None

    def _module_functions(self) -> dict[str, tuple[_Module, ast.FunctionDef | ast.AsyncFunctionDef]]:
        """Module-level functions of the caller files, by qualified name."""
        if self._functions is None:
            self._functions = {
                f"{module.name}.{node.name}": (module, node)
                for module in self.modules.values()
                for node in module.tree.body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            }
        return self._functions

    def _qualname_in(self, module: str, name: str) -> str:
        """The qualified name ``name`` has in ``module`` (one of its imports, or its own)."""
        home = self.modules.get(module)
        return _qualified(home.imports, home, name) if home is not None else name


@dataclass(frozen=True)
class _Method:
    """What a method lookup finds: the def Python runs (``name`` in class ``owner``, or the
    module-level function ``name`` bound as a method when ``owner`` is None), or why the scan
    cannot tell (``unfollowed``: ``FILE:LINE: ...``)."""

    owner: str | None
    name: str
    unfollowed: str = ""


@dataclass(frozen=True)
class _InstanceBinding:
    """``self.NAME = VALUE`` in a method of a speculator: an instance attribute, found before the
    class's ``NAME`` when ``self.NAME`` is looked up."""

    name: str
    value: ast.expr
    statement: ast.stmt
    file: str
    module: _Module = field(compare=False)
    scope: dict[str, str] = field(compare=False)  # the names the method sees
    may_draft: bool = False  # it rebinds a method of the speculator, or holds the speculator or its drafter

    @property
    def named(self) -> str:
        return (
            f"{self.file}:{self.statement.lineno}: `{unparse(self.statement)}` (what self.{self.name} is, "
            "which the scan does not follow)"
        )


@dataclass(frozen=True)
class _AttributeValue:
    """What reading ``self.NAME`` on a speculator may give: what a method stores there, or what a
    property returns (``returned``; ``only``: its one statement); ``value`` None where a store does not
    say what it stores (``self.NAME += 1``, ``for self.NAME in ...``)."""

    name: str
    value: ast.expr | None
    statement: ast.stmt
    function: ast.FunctionDef | ast.AsyncFunctionDef  # the function the value is read in
    file: str
    returned: bool = False
    only: bool = False


@dataclass(frozen=True)
class _DrafterAttributes:
    """The attributes of a speculator that hold its drafter (see ``CallerIndex._drafter_attributes``)."""

    sure: frozenset[str]  # ``self.NAME`` is the drafter wherever it is read
    maybe: dict[str, str]  # NAME -> why it may be another object: named where a drafting path uses it


class _Holders:
    """Whether the values methods of a speculator store or return hold its drafter, given the attributes
    known to hold it; each function read once."""

    def __init__(self, attrs: frozenset[str]):
        self.attrs = attrs
        self._read: dict[int, tuple[_DrafterNames, dict[str, ast.expr]]] = {}

    def names(self, value: _AttributeValue) -> _DrafterNames:
        return self._of(value.function)[0]

    def may_hold(self, value: _AttributeValue) -> bool:
        """Whether ``value`` is the drafter in one case at least, or is made by a call handed it
        (``capture(self.model)``: what that call returns is not known)."""
        if value.value is None:
            return False
        names = self.names(value)
        if isinstance(value.value, ast.Call):
            return any(names.holds(a) for a in (*value.value.args, *(k.value for k in value.value.keywords)))
        return names.holds(value.value)

    def surely(self, value: _AttributeValue) -> bool:
        names, once = self._of(value.function)
        return value.value is not None and _surely_held(value.value, names, once, frozenset())

    def _of(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[_DrafterNames, dict[str, ast.expr]]:
        if id(function) not in self._read:
            nodes = list(walk(function))
            positional = [*function.args.posonlyargs, *function.args.args]
            speculator = (positional[0].arg,) if positional else ()
            self._read[id(function)] = (
                _DrafterNames.of(nodes, (), speculator, self.attrs),
                _bound_once(nodes, function),
            )
        return self._read[id(function)]


@dataclass(frozen=True)
class _Frame:
    """A function on a drafting path: a method of the speculator's MRO (``owner`` its class) or a
    module-level function of the caller files (``owner`` None, ``name`` qualified), with the
    parameters that hold the drafter there."""

    owner: str | None
    name: str
    drafters: tuple[str, ...] = ()
    speculators: tuple[str, ...] = ()  # parameters handed the speculator itself (``greedy(self, h)``)


@dataclass
class _Site:
    """A call in a frame that a drafting path goes through: on the drafter (``call``), or into
    another frame (``callee``) with what each of its parameters receives there, as code of the
    calling frame (None: hidden by ``*``/``**``, or none), and the callee's own locals."""

    node: ast.expr  # the call, or a bound method handed on (see _bound_method_values)
    file: str
    call: ModelCall | None = None
    callee: _Frame | None = None
    receives: dict[str, str | None] = field(default_factory=dict)
    callee_locals: frozenset[str] = frozenset()


class _DraftingPath:
    """One speculator's drafting path: the frames reached from its entry points, and each
    ``get_top_tokens`` call paired with the ``compute_logits`` calls it stands in for, their
    arguments seen from the function where the two paths part (a wrapper's parameters replaced
    by what its call passes)."""

    def __init__(self, index: CallerIndex, qualname: str):
        self.index = index
        self.mro = index._mro(qualname)
        cls = index.classes[qualname]
        self.result = Reach(cls.name, cls.file, cls.line)
        self.sites: dict[_Frame, list[_Site]] = {}
        self.callers: dict[_Frame, list[tuple[_Frame, _Site]]] = {}
        self._reached_walk = _Walk()
        self._pairs_walk = _Walk(node=lambda key: key[:2])  # (frame, node id, top): cut per call site
        self._nearest_walk = _Walk(node=lambda key: key[:2])
        self._parents: dict[_Frame, dict[int, ast.AST]] = {}
        self._bindings: dict[_Frame, Bindings] = {}
        self.entries: list[_Frame] = []  # where its drafting path starts (see _drafting_blind)
        uncreatable = index.uncreatable(qualname)
        if uncreatable is not None:  # never made: no path to follow, and the place named
            self.result.uncreatable = uncreatable
            return
        for entry in ENTRY_POINTS:
            hit = index._find(self.mro, entry)
            if hit is not None and hit.unfollowed:
                self.result.unfollowed.append(hit.unfollowed)
            elif hit is not None:
                self.entries.append(_Frame(hit.owner, hit.name, speculators=index._self_parameter(hit)))
        todo = list(self.entries)
        while todo:
            frame = todo.pop()
            if frame in self.sites:
                continue
            self.sites[frame], unfollowed = index._sites(frame, self.mro)
            self.result.unfollowed += [u for u in unfollowed if u not in self.result.unfollowed]
            for site in self.sites[frame]:
                if site.callee is not None:
                    self.callers.setdefault(site.callee, []).append((frame, site))
                    todo.append(site.callee)

    def reach(self) -> Reach:
        reach = self.result
        for frame, sites in self.sites.items():
            for site in sites:
                call = site.call
                if call is None:
                    continue
                if call.method == "get_top_tokens":
                    reach.pairs = _merged([*reach.pairs, *self._pairs(frame, site.node, call)])
                elif call.method == "compute_logits":
                    if call not in reach.logits:
                        reach.logits.append(call)
                elif call.method not in reach.other:
                    reach.other.append(call.method)
        reach.pairs.sort(key=lambda p: (p.top_tokens.file, p.top_tokens.line))
        reach.logits.sort(key=lambda c: (c.file, c.line))
        if not (reach.pairs or reach.logits or reach.other or reach.unfollowed or reach.uncreatable):
            reach.unfollowed = [self._drafting_blind(entry) for entry in self.entries]
        return reach

    def _drafting_blind(self, entry: _Frame) -> str:
        """A drafting path that calls no method of the drafter the scan sees cannot draft: it goes on
        where the scan does not follow (``self.drafter`` behind a property, a hop it cannot read).
        Named from its entry point, never taken as proof that the drafter is not reached."""
        function, _, file = self.index._definition(entry)
        return (
            f"{file}:{function.lineno}: `{function.name}` (its path calls no method of the drafter that the scan sees)"
        )

    def reached(self, frame: _Frame) -> list[ModelCall]:
        """Every call on the drafter that ``frame`` makes or reaches, its arguments as ``frame`` sees them."""
        return self._reached_walk(frame, lambda: self._reached_now(frame))

    def _reached_now(self, frame: _Frame) -> list[ModelCall]:
        return _distinct(call for site in self.sites.get(frame, []) for call in self._through(site))

    def _through(self, site: _Site) -> list[ModelCall]:
        if site.call is not None:
            return [site.call]
        assert site.callee is not None
        return [_lifted(call, site) for call in self.reached(site.callee)]

    def _pairs(self, frame: _Frame, node: ast.AST, top: ModelCall) -> list[CallPair]:
        """``top`` (a get_top_tokens call reached through ``node`` of ``frame``) with the
        compute_logits calls it stands in for: on every call path up, those on the other side of
        the innermost branch around it that has some (``if``/``else``, the rest of the block after
        a branch that exits, the other arm of ``a if c else b``, the other ``case``s); where no
        path has such a branch, those that the nearest frame going up reaches."""
        replaced = [p for p in self._replaced(frame, node, top) if p.logits]
        return replaced or self._nearest(frame, node, top)

    def _replaced(self, frame: _Frame, node: ast.AST, top: ModelCall) -> list[CallPair]:
        """The pairs found at a branch around ``node`` in ``frame``, else in the frames that call it
        (each function once per argument values: a chain of wrappers is walked in linear time)."""
        top = _guarded(top, self._parents_of(frame), node)
        return self._pairs_walk(
            (frame, id(node), replace(top, through=None)), lambda: self._replaced_now(frame, node, top)
        )

    def _replaced_now(self, frame: _Frame, node: ast.AST, top: ModelCall) -> list[CallPair]:
        for region in _alternatives(self._parents_of(frame), node):
            found = self._logits_in(frame, region, top)
            if found:
                return [self._paired(frame, node, top, found)]
        return _merged(
            pair
            for caller, site in self.callers.get(frame, [])
            for pair in self._replaced(caller, site.node, _lifted(top, site))
        )

    def _logits_in(self, frame: _Frame, region: list[ast.AST], top: ModelCall) -> list[tuple[ast.AST, ModelCall]]:
        """The compute_logits calls that ``region`` of ``frame`` makes or reaches, each with the node
        of ``frame`` it is made or reached through; a callee that reaches ``top`` again (the next step
        of a recursion) is not what ``top`` stands in for, unless nothing else is there."""
        inside = {id(n) for statement in region for n in walk(statement)}
        by_site = [(site, self._logits_through(site)) for site in self.sites[frame] if id(site.node) in inside]
        own = [(site.node, call) for site, calls in by_site if not self._leads_to(site, top) for call in calls]
        return own or [(site.node, call) for site, calls in by_site for call in calls]

    def _logits_through(self, site: _Site) -> list[ModelCall]:
        return [call for call in self._through(site) if call.method == "compute_logits"]

    def _paired(
        self, frame: _Frame, node: ast.AST, top: ModelCall, logits: list[tuple[ast.AST, ModelCall]]
    ) -> CallPair:
        """``top``, reached through ``node`` of ``frame`` (where the two paths part), with the
        compute_logits calls reached through other nodes there: each value with the names it reads
        that a constant is assigned to there replaced by that constant, and each compute_logits call
        with the names both read that may hold other values at the two (``rebound``)."""
        calls = [
            replace(self._bound_values(frame, call, site), rebound=self._rebound(frame, node, top, site, call))
            for site, call in logits
        ]
        return CallPair(self._bound_values(frame, top, node), tuple(_distinct(calls)))

    def _bound_values(self, frame: _Frame, call: ModelCall, node: ast.AST) -> ModelCall:
        """``call``'s values with the names that hold one constant at ``node`` of ``frame`` replaced
        by it: a local every path there assigns that constant last (``_constants_bound``), or a
        parameter ``frame`` still holds there that every call of it on the drafting path gives the
        same constant, as an argument or by leaving its default (``sample_draft(..., spec_step_idx=0)``
        never passed it). Not for an entry point of the path, which vLLM calls with what it likes."""
        bindings = self._bindings_of(frame)
        call = _constants_bound(call, bindings, node)
        sites = self.callers.get(frame, [])
        if frame in self.entries or not sites:
            return call
        constants: dict[str, ast.expr] = {}
        for name in _names_read(call):
            reaching = bindings.at(node, name)
            if not (reaching.decided and reaching.bindings and isinstance(reaching.bindings[0], ast.arguments)):
                continue  # not the parameter as the call passed it
            given = {site.receives.get(name) for _, site in sites}
            value = given.pop() if len(given) == 1 else None
            constant = _literal(value) if value is not None and value != HIDDEN_BY_STAR else None
            if constant is not None:
                constants[name] = constant
        return _with_constants(call, constants)

    def _rebound(
        self, frame: _Frame, top_node: ast.AST, top: ModelCall, site: ast.AST, logits: ModelCall
    ) -> tuple[tuple[str, str], ...]:
        """(name, the statements binding it) for each name the two calls' values read that is not
        bound by the same binding at both nodes of ``frame``."""
        bindings = self._bindings_of(frame)
        file = self.index._definition(frame)[2]
        out = []
        for name in sorted(_names_read(top, longest=True) & _names_read(logits, longest=True)):
            at_top, at_logits = bindings.at(top_node, name), bindings.at(site, name)
            if at_top.same_as(at_logits) or bindings.unchanged_across(top_node, site, name):
                continue
            statements = {id(b): b for b in (*at_top.bindings, *at_logits.bindings) if not isinstance(b, ast.arguments)}
            out.append((name, "; ".join(described(b, file) for b in sorted(statements.values(), key=_line))))
        return tuple(out)

    def _bindings_of(self, frame: _Frame) -> Bindings:
        if frame not in self._bindings:
            self._bindings[frame] = Bindings(self.index._definition(frame)[0])
        return self._bindings[frame]

    def _leads_to(self, site: _Site, top: ModelCall) -> bool:
        """Whether ``site`` goes into a frame that reaches the get_top_tokens call ``top``."""
        return site.callee is not None and any(
            call.method == top.method and (call.file, call.line) == (top.file, top.line)
            for call in self.reached(site.callee)
        )

    def _nearest(self, frame: _Frame, node: ast.AST, top: ModelCall) -> list[CallPair]:
        """``top`` with the compute_logits calls the nearest frame going up reaches (no branch
        parts them: both run on the same path)."""

        def now() -> list[CallPair]:
            found = [(site.node, call) for site in self.sites.get(frame, []) for call in self._logits_through(site)]
            if found or not self.callers.get(frame):
                return [self._paired(frame, node, top, found)]
            out = _merged(
                pair
                for caller, site in self.callers[frame]
                for pair in self._nearest(caller, site.node, _lifted(top, site))
            )
            return out or [CallPair(top, ())]

        return self._nearest_walk((frame, id(node), replace(top, through=None)), now)

    def _parents_of(self, frame: _Frame) -> dict[int, ast.AST]:
        if frame not in self._parents:
            self._parents[frame] = parent_map(self.index._definition(frame)[0])
        return self._parents[frame]


class _Walk:
    """Memoised results of a recursive walk over a graph that may have cycles. A back edge to a
    node still open answers ``cut``; a result computed with such a cut is provisional (it misses
    what lies behind the cut) and is kept only while the node it was cut at stays open, as
    Tarjan's lowlink tells; a result with no cut below it is final."""

    def __init__(self, node=lambda key: key):
        self.cut: list = []  # what a back edge answers: nothing found behind it
        self.node = node  # the graph node of a key (a key may add what the walk carries to it)
        self.final: dict = {}
        self._open: dict = {}  # key -> depth on the stack
        self._lows: list[int] = []  # per open node: the shallowest open node a cut below it reached
        self._provisional: dict = {}  # key -> (result, low, depth)

    def __call__(self, key, compute):
        if key in self.final:
            return self.final[key]
        node = self.node(key)
        if node in self._open or key in self._provisional:
            result, low = (self.cut, self._open[node]) if node in self._open else self._provisional[key][:2]
            self._lows[-1] = min(self._lows[-1], low)
            return result
        depth = len(self._open)
        self._open[node] = depth
        self._lows.append(depth)
        try:
            result = compute()
        finally:
            low = self._lows.pop()
            del self._open[node]
        self._provisional = {k: v for k, v in self._provisional.items() if not v[1] <= depth < v[2]}
        if low >= depth:
            self.final[key] = result
        else:
            self._provisional[key] = (result, low, depth)
            self._lows[-1] = min(self._lows[-1], low)
        return result


class _DrafterNames:
    """What holds the drafter in one function: the speculator's attributes that hold it (``attrs``:
    ``self.model`` / ``self.draft_model`` and those of ``CallerIndex._drafter_attributes``, also as
    ``getattr(self, "model")``, and on a parameter handed the speculator itself), either arm of
    ``a if c else b``, the parameters it is handed in, locals bound to it (plain, annotated,
    ``:=`` or unpacked from a tuple; aliases of aliases too), and locals bound to one of its
    methods (``top = self.model.get_top_tokens``)."""

    def __init__(
        self,
        aliases: set[str],
        bound: dict[str, str],
        bound_values: set[int],
        speculators: set[str],
        attrs: frozenset[str] = frozenset(DRAFTER_ATTRS),
    ):
        self.aliases = aliases
        self.bound = bound
        self.bound_values = bound_values  # ids of the values bound to locals, or stored where the drafter is
        self.speculators = speculators  # names of the speculator: ``self`` and parameters handed it
        self.attrs = attrs

    @classmethod
    def of(
        cls,
        nodes: list[ast.AST],
        parameters: tuple[str, ...],
        speculators: tuple[str, ...] = (),
        attrs: frozenset[str] = frozenset(DRAFTER_ATTRS),
    ) -> _DrafterNames:
        bindings = [
            (target, value)
            for node in nodes
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr))
            for target, value in _local_bindings(node)
        ]
        names = cls({*parameters}, {}, {id(value) for _, value in bindings}, {"self", *speculators}, attrs)
        names.bound_values |= {id(node.value) for node in nodes if names.keeps(node)}
        grown = True
        while grown:
            before = (len(names.aliases), len(names.bound))
            for target, value in bindings:
                if names.holds(value):
                    names.aliases.add(target)
                elif (method := names.method_of(value)) is not None:
                    names.bound[target] = method
            grown = (len(names.aliases), len(names.bound)) != before
        return names

    def keeps(self, node: ast.AST) -> bool:
        """Whether ``node`` stores a value only where the drafter is (``self._drafter = self.model``, an
        attribute that holds it; a local too): no reference is handed on there."""
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            return False
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        attributes = [t for t in targets if not isinstance(t, ast.Name)]
        return bool(attributes) and all(self.holds(t) for t in attributes)

    def hands_on(self, call: ast.Call) -> bool:
        """Whether ``call`` passes the drafter or the speculator as an argument."""
        return any(
            self.holds(arg) or (isinstance(arg, ast.Name) and arg.id in self.speculators)
            for arg in (*call.args, *(k.value for k in call.keywords))
        )

    def holds(self, node: ast.expr) -> bool:
        """Whether ``node`` is the drafter (in one arm of ``a if c else b`` at least)."""
        if isinstance(node, ast.IfExp):
            return any(self.holds(arm) for arm in _branches(node))
        read = _attribute_read(node)
        if read is not None:
            owner, attr = read
            return attr in self.attrs and isinstance(owner, ast.Name) and owner.id in self.speculators
        return isinstance(node, ast.Name) and node.id in self.aliases

    def method_of(self, node: ast.expr) -> str | None:
        """The drafter method ``node`` is, bound (``self.model.get_top_tokens``,
        ``getattr(self.model, "get_top_tokens", None)``, an alias of either)."""
        if isinstance(node, ast.Attribute) and self.holds(node.value):
            return node.attr
        if (named := _getattr_of(node)) is not None and self.holds(named[0]):
            return named[1]
        return self.bound.get(node.id) if isinstance(node, ast.Name) else None

    def escapes(self, nodes: list[ast.AST]) -> Iterator[tuple[ast.expr, ast.expr]]:
        """Drafter references that may lead to its methods unseen, each with the code to show: the
        drafter as a call's argument (the call), stored, returned or put in a container other than
        as a local alias (the statement or container), and one of its logits methods used other
        than called or bound to a local."""
        used = self.bound_values | {id(node.func) for node in nodes if isinstance(node, ast.Call)}
        for node in nodes:
            method = self.method_of(node) if isinstance(node, (ast.Attribute, ast.Call)) else None
            if method is not None:
                if method in WATCHED and id(node) not in used:
                    yield node, node  # type: ignore[misc]
            elif isinstance(node, ast.Call) and _dotted(node.func) not in INSPECTING_BUILTINS:
                yield from ((arg, node) for arg in (*node.args, *(k.value for k in node.keywords)) if self.holds(arg))
            yield from (
                (value, node) for value in _held(node) if id(value) not in self.bound_values and self.holds(value)
            )


def _held(node: ast.AST) -> list[ast.expr]:
    """The values ``node`` keeps or hands on other than as a call's argument: what a binding
    stores (into any target), a ``return``/``yield`` gives back, a container literal holds."""
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.NamedExpr, ast.Return, ast.Yield)):
        return [node.value] if node.value is not None else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return list(node.elts)
    if isinstance(node, ast.Dict):
        return list(node.values)
    return []


def _local_bindings(node: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """(name, value) for a plain, annotated or ``:=`` binding of one local name, and for each name
    of a tuple unpacked from a tuple of as many values (``drafter, n = self.model, 3``)."""
    if isinstance(node, ast.Assign):
        for target in node.targets:
            if isinstance(target, ast.Name):
                yield target.id, node.value
            elif (
                isinstance(target, (ast.Tuple, ast.List))
                and isinstance(node.value, (ast.Tuple, ast.List))
                and len(target.elts) == len(node.value.elts)
                and not any(isinstance(e, ast.Starred) for e in (*target.elts, *node.value.elts))
            ):
                yield from ((t.id, v) for t, v in zip(target.elts, node.value.elts) if isinstance(t, ast.Name))
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and isinstance(node.target, ast.Name) and node.value:
        yield node.target.id, node.value


def _arguments_by_parameter(
    function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, bound_self: bool
) -> Iterator[tuple[str, ast.expr]]:
    """(parameter, argument) for each argument of ``call`` that a parameter of ``function`` takes
    by position (up to a ``*`` argument) or by keyword."""
    positional = [a.arg for a in (*function.args.posonlyargs, *function.args.args)][int(bound_self) :]
    for name, arg in zip(positional, call.args):
        if isinstance(arg, ast.Starred):
            break
        yield name, arg
    yield from ((k.arg, k.value) for k in call.keywords if k.arg)


def _received(
    function: ast.FunctionDef | ast.AsyncFunctionDef, call: ast.Call, bound_self: bool
) -> dict[str, str | None]:
    """What each parameter of ``function`` receives from ``call``, as code of the caller: the
    argument, or the default it is left; ``HIDDEN_BY_STAR`` where a ``*``/``**`` argument of the call
    hides it; None where it gets nothing."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    hidden = any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords)
    out: dict[str, str | None] = {
        a.arg: HIDDEN_BY_STAR if hidden else None for a in (*positional, *arguments.kwonlyargs)
    }
    if not hidden:
        defaults = zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults)
        kw_defaults = zip(arguments.kwonlyargs, arguments.kw_defaults)
        out.update((a.arg, unparse(d)) for a, d in (*defaults, *kw_defaults) if d is not None)
    if bound_self and positional:
        out[positional[0].arg] = "self"
    out.update((name, unparse(arg)) for name, arg in _arguments_by_parameter(function, call, bound_self))
    return out


INNER_SCOPES = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)  # a comprehension runs as a loop of the function


def _binds(node: ast.AST) -> Iterator[str]:
    """The names ``node`` binds: a stored name, a parameter, a nested function or class."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node.id
    elif isinstance(node, ast.arg):
        yield node.arg
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name


def _inner_scope_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[int, frozenset[str]]:
    """Each node (by id) inside a lambda or nested function of ``function`` -> the names those
    inner scopes bind around it: there they are not the function's own (a lambda's parameter is
    whatever it is called with)."""
    out: dict[int, frozenset[str]] = {}

    def visit(node: ast.AST, names: frozenset[str]) -> None:
        for child in ast.iter_child_nodes(node):
            inner = names
            if isinstance(child, INNER_SCOPES):
                inner = names | {
                    name for n in walk(child) if n is not child or isinstance(n, ast.arg) for name in _binds(n)
                }
            if inner:
                out[id(child)] = inner
            visit(child, inner)

    for statement in function.body:
        visit(statement, frozenset())
    return out


def _unshadowed(call: ModelCall, shadowed: frozenset[str]) -> ModelCall:
    """``call``, made inside a lambda or nested function that binds ``shadowed``:
    an argument that reads one of those names is no value of the function (None)."""
    if not shadowed:
        return call
    values = tuple(None if value is not None and _reads(value) & shadowed else value for value in call.argument_values)
    return replace(call, values=values) if values != call.argument_values else call


def _names_read(call: ModelCall, longest: bool = False) -> frozenset[str]:
    """The names (and attribute chains) a call's argument values read; ``longest``: see ``names_read``."""
    values = [v for v in call.argument_values if v is not None and v != HIDDEN_BY_STAR]
    return frozenset().union(*(_reads(v, longest) for v in values))


def _constants_bound(call: ModelCall, bindings: Bindings, node: ast.AST) -> ModelCall:
    """``call``, reached through ``node``, with each name its values read that every path there last
    binds by ``name = <constant>`` replaced by that constant (``spec_step_idx = 0`` before it)."""
    constants: dict[str, ast.expr] = {}
    for name in _names_read(call):
        reaching = bindings.at(node, name)
        constant = _assigned_constant(reaching.bindings[0]) if reaching.decided and reaching.bindings else None
        if constant is not None:
            constants[name] = constant
    return _with_constants(call, constants)


def _with_constants(call: ModelCall, constants: dict[str, ast.expr]) -> ModelCall:
    """``call`` with each name its values read that ``constants`` binds replaced by that constant."""
    if not constants:
        return call
    values = tuple(
        value
        if value is None or value.startswith("*") or value == HIDDEN_BY_STAR or not _reads(value) & constants.keys()
        else unparse(_Substituted(constants).visit(ast.parse(value, mode="eval")))
        for value in call.argument_values
    )
    return replace(call, values=values)


def _bound_at_top(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds, in the blocks it holds too (``if``/``try``/``with``): any of
    them may be bound there at run time, so such a name is not taken for a constant."""
    return {name for statement in walk_statements([node]) for name in names_bound(statement)}


def _literal(code: str) -> ast.expr | None:
    """``code`` as an expression, where it is a literal (``0``, ``None``, ``(1, 2)``)."""
    try:
        expression = ast.parse(code, mode="eval").body
        ast.literal_eval(expression)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return expression


def _assigned_constant(binding: ast.AST) -> ast.expr | None:
    """The literal a ``name = <literal>`` (annotated too) binding assigns; None for any other binding."""
    if isinstance(binding, ast.Assign) and len(binding.targets) == 1 and isinstance(binding.targets[0], ast.Name):
        value = binding.value
    elif isinstance(binding, ast.AnnAssign) and isinstance(binding.target, ast.Name) and binding.value is not None:
        value = binding.value
    else:
        return None
    try:
        ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return value


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0)


@functools.lru_cache(maxsize=4096)
def _reads(value: str, longest: bool = False) -> frozenset[str]:
    """The names and attribute chains code reads (all of it, when it cannot be parsed)."""
    try:
        tree = ast.parse(value.lstrip("*"), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return frozenset({value})
    return names_read(tree, longest)


def _lifted(call: ModelCall, site: _Site) -> ModelCall:
    """``call``, made in ``site``'s callee, with its argument values as the caller of ``site`` sees
    them (the callee's parameters replaced by what the site passes); None where a value depends on
    the callee's locals or on what a ``*``/``**`` argument hides."""
    items = tuple(site.receives.items())
    values = tuple(_substituted(value, items, site.callee_locals) for value in call.argument_values)
    guards = tuple(
        (lifted, constant)
        for value, constant in call.guards
        if (lifted := _substituted(value, items, site.callee_locals)) is not None
    )
    through = f"`{unparse(site.node)}` ({site.file}:{site.node.lineno})"
    return replace(call, values=values, through=through, guards=guards)


def _guarded(call: ModelCall, parents: dict[int, ast.AST], node: ast.AST) -> ModelCall:
    """``call``, reached through ``node``, with the equality tests that hold where ``node`` runs
    (``if step == 0:`` around it, or ``!=`` in an ``if`` whose ``else`` holds it) added to its guards."""
    guards = list(call.guards)
    child = node
    while (parent := parents.get(id(child))) is not None:
        if isinstance(parent, (ast.If, ast.IfExp)) and child is not parent.test:
            holds = child is parent.body or (isinstance(parent.body, list) and child in parent.body)
            test = parent.test
            if (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq if holds else ast.NotEq)
            ):
                sides = (test.left, test.comparators[0])
                for value, constant in (sides, sides[::-1]):
                    if isinstance(constant, ast.Constant) and not isinstance(value, ast.Constant):
                        guard = (unparse(value), unparse(constant))
                        if guard not in guards:
                            guards.append(guard)
        child = parent
    return replace(call, guards=tuple(guards)) if len(guards) != len(call.guards) else call


def _same(first: ModelCall, second: ModelCall) -> bool:
    """The same call with the same values, whichever wrappers passed them."""
    return replace(first, through=None) == replace(second, through=None)


def _merged(pairs: Iterable[CallPair]) -> list[CallPair]:
    """``pairs`` in order, one per get_top_tokens call with the same values, its compute_logits
    calls joined (the paths of a chain of wrappers are many; their distinct values are few). Where
    the same values come through another wrapper call with compute_logits calls of other values,
    that pair stays apart: its reason names its own call site (a helper serving the first token and
    the loop)."""
    out: dict[tuple[ModelCall, object], CallPair] = {}
    for pair in pairs:
        base = replace(pair.top_tokens, through=None)
        first = out.get((base, None))
        if first is None:
            out[(base, None)] = pair
            continue
        new = [c for c in pair.logits if not any(_same(c, k) for k in first.logits)]
        key = (
            (base, None)
            if not new or pair.top_tokens.through == first.top_tokens.through
            else (base, pair.top_tokens.through)
        )
        known = out.get(key)
        out[key] = (
            pair if known is None else CallPair(known.top_tokens, tuple(_distinct([*known.logits, *pair.logits])))
        )
    return list(out.values())


def _distinct(calls: Iterable[ModelCall]) -> list[ModelCall]:
    """``calls`` in order, each call with the same values once."""
    out: list[ModelCall] = []
    for call in calls:
        if not any(_same(call, known) for known in out):
            out.append(call)
    return out


def _is_static(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A ``@staticmethod``: called on ``self`` it binds nothing; its first parameter takes the first argument."""
    return any(_dotted(d) in ("staticmethod", "builtins.staticmethod") for d in function.decorator_list)


def _decorated_as(function: ast.FunctionDef | ast.AsyncFunctionDef | None, names: frozenset[str]) -> bool:
    return function is not None and any(_dotted(d) in names for d in function.decorator_list)


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


@functools.lru_cache(maxsize=4096)
def _substituted(
    value: str | None, receives: tuple[tuple[str, str | None], ...], local_names: frozenset[str]
) -> str | None:
    """``value``, code of a callee, as its caller sees it: each parameter replaced by what it
    receives (``receives``); None where it reads a local of the callee, ``HIDDEN_BY_STAR`` where it reads
    what a ``*``/``**`` argument of a wrapper call hides."""
    if value is None:
        return None
    if value == HIDDEN_BY_STAR:
        return HIDDEN_BY_STAR
    stars = len(value) - len(value.lstrip("*"))
    try:
        tree = ast.parse(value[stars:], mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return None
    given = dict(receives)
    read = {n.id for n in walk(tree) if isinstance(n, ast.Name)}
    if read & local_names or any(given[name] is None for name in read & given.keys()):
        return None
    if any(given[name] == HIDDEN_BY_STAR for name in read & given.keys()):
        return HIDDEN_BY_STAR
    values = {name: ast.parse(given[name], mode="eval").body for name in read & given.keys()}
    return "*" * stars + unparse(_Substituted(values).visit(tree))  # type: ignore[arg-type]


EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _alternatives(parents: dict[int, ast.AST], node: ast.AST) -> Iterator[list[ast.AST]]:
    """The code that runs instead of ``node`` at each branch around it, innermost first: the other
    arm of an ``if`` (and the rest of the block after it when the arm holding ``node`` exits), of
    ``a if c else b``, the other ``case``s of a ``match``."""
    child = node
    while (parent := parents.get(id(child))) is not None:
        if isinstance(parent, ast.IfExp) and child is not parent.test:
            yield [parent.orelse if child is parent.body else parent.body]
        elif isinstance(parent, ast.If) and child is not parent.test:
            mine, other = (parent.body, parent.orelse) if child in parent.body else (parent.orelse, parent.body)
            yield [*other, *(_following(parents, parent) if isinstance(mine[-1], EXITS) else [])]
        elif isinstance(parent, ast.match_case):
            match = parents[id(parent)]
            yield [s for case in match.cases if case is not parent for s in case.body]  # type: ignore[attr-defined]
        child = parent


def _following(parents: dict[int, ast.AST], statement: ast.AST) -> list[ast.stmt]:
    """The statements after ``statement`` in its block."""
    holder = parents.get(id(statement))
    for block in statement_blocks(holder) if holder is not None else ():
        if statement in block:
            return block[block.index(statement) + 1 :]
    return []


def _called_locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """Names the function both assigns and calls: a class picked into a variable, constructed later."""
    called = {n.func.id for n in walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assigned = {t.id for n in walk(function) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    return frozenset(called & assigned)


def _assigned_once(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Locals the function binds exactly once, by a plain ``name = value``: in a condition after
    it, the name is that value."""
    bound: dict[str, list[ast.expr | None]] = {}
    for node in walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            bound.setdefault(node.targets[0].id, []).append(node.value)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.With, ast.NamedExpr, ast.Assign)):
            for target in walk(node.target if hasattr(node, "target") else node):
                if isinstance(target, ast.Name) and isinstance(target.ctx, ast.Store):
                    bound.setdefault(target.id, []).extend([None, None])  # bound otherwise: not a value
    arguments = function.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    parameters |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    return {
        name: values[0]
        for name, values in bound.items()
        if len(values) == 1 and values[0] is not None and name not in parameters
    }


def _bound_once(nodes: list[ast.AST], function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, ast.expr]:
    """Locals of ``function`` (not parameters) bound once, by a plain, annotated or ``:=`` binding, to their values."""
    bound: dict[str, list[ast.expr]] = {}
    for node in nodes:
        for name, value in (
            _local_bindings(node) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) else ()
        ):
            bound.setdefault(name, []).append(value)
    stored = [n.id for n in nodes if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)]
    arguments = function.args
    parameters = {a.arg for a in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)}
    return {
        name: values[0]
        for name, values in bound.items()
        if len(values) == 1 and stored.count(name) <= 1 and name not in parameters
    }


def _direct_call(call: ast.Call, callables: dict[str, ast.expr], local: dict[str, str], module: _Module) -> ast.Call:
    """The call Python makes for ``call``: through a local bound once to what is called
    (``draft = self.sample_draft; draft(h)``), ``getattr(obj, "name")(...)``,
    ``functools.partial(f, *a, **k)(...)`` (its arguments before the call's) and
    ``torch.compile(f)(...)`` (``TRANSPARENT_WRAPPERS``: ``f`` with the same arguments)."""
    origin = call
    for _ in range(MAX_FACTORY_DEPTH):
        func = call.func
        if isinstance(func, ast.Name) and func.id in callables:
            call = ast.Call(func=callables[func.id], args=call.args, keywords=call.keywords)
        elif (read := _getattr_of(func)) is not None and len(func.args) == 2:  # type: ignore[attr-defined]
            call = ast.Call(
                func=ast.Attribute(value=read[0], attr=read[1], ctx=ast.Load()), args=call.args, keywords=call.keywords
            )
        elif (wrapped := _transparent_of(local, module, func)) is not None:
            call = ast.Call(func=wrapped, args=call.args, keywords=call.keywords)
        elif (wrapped := _partial_of(local, module, func)) is not None:
            partial = func  # type: ignore[assignment]
            args = [*partial.args[1:], *call.args]  # type: ignore[attr-defined]
            call = ast.Call(func=wrapped, args=args, keywords=[*partial.keywords, *call.keywords])  # type: ignore[attr-defined]
        else:
            break
        ast.copy_location(call, origin)
    return call


def _called_as(func: ast.expr, call: ast.Call) -> ast.Call:
    """``call`` with ``func`` called in its place, arguments and place kept."""
    return ast.copy_location(ast.Call(func=func, args=call.args, keywords=call.keywords), call)


def _self_bindings(statement: ast.AST) -> Iterator[tuple[str, ast.expr]]:
    """(NAME, VALUE) for ``self.NAME = VALUE`` (annotated too)."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    else:
        return
    for target in targets:
        if isinstance(target, ast.Attribute) and _is_self(target.value):
            yield target.attr, value


def _attribute_stores(statement: ast.stmt) -> Iterator[tuple[str, ast.expr | None]]:
    """(NAME, VALUE) for each store into ``self.NAME`` that ``statement`` makes: VALUE what a plain or
    annotated binding stores there (chained too, or unpacked from a tuple of as many values, or
    ``setattr(self, "NAME", VALUE)``), None for any other store (``self.NAME += 1``, ``for self.NAME in
    ...``, ``with f() as self.NAME``); NAME is ``ANY_ATTRIBUTE`` for ``setattr`` with a computed name."""
    if isinstance(statement, ast.Expr) and _dotted(getattr(statement.value, "func", None)) == "setattr":
        call = statement.value
        if len(call.args) == 3 and _is_self(call.args[0]):  # type: ignore[attr-defined]
            name = call.args[1]  # type: ignore[attr-defined]
            named = isinstance(name, ast.Constant) and isinstance(name.value, str)
            yield (name.value if named else ANY_ATTRIBUTE), call.args[2]  # type: ignore[attr-defined, union-attr]
        return
    if isinstance(statement, ast.Assign):
        pairs = [pair for target in statement.targets for pair in _stored_pairs(target, statement.value)]
    elif isinstance(statement, ast.AnnAssign):
        pairs = _stored_pairs(statement.target, statement.value) if statement.value is not None else []
    else:
        targets = [getattr(statement, "target", None), *(i.optional_vars for i in getattr(statement, "items", []))]
        pairs = [(node, None) for target in targets if target is not None for node in walk(target)]
    for node, value in pairs:
        if isinstance(node, ast.Attribute) and _is_self(node.value) and isinstance(node.ctx, ast.Store):
            yield node.attr, value


def _stored_pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.AST, ast.expr | None]]:
    """(target, value) for what a binding puts in each of its targets: a tuple unpacked from a tuple of
    as many values pairs them; from anything else, its targets get values not known (None)."""
    if not isinstance(target, (ast.Tuple, ast.List)):
        return [(target, value)]
    if (
        isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts))
    ):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _stored_pairs(t, v)]
    return [(node, None) for node in walk(target)]


def _drafter_shaped(stored: _AttributeValue) -> bool:
    """Whether what ``stored`` puts in the attribute may be the drafter by its form: a local (not a
    parameter), an attribute of the speculator, read directly or by ``getattr``, or ``a if c else b``
    with such an arm (anything else is another object, or makes one)."""
    if stored.value is None:
        return False
    arguments = stored.function.args
    positional = [a.arg for a in (*arguments.posonlyargs, *arguments.args)]
    parameters = {*positional, *(a.arg for a in (*arguments.kwonlyargs, arguments.vararg, arguments.kwarg) if a)}
    owner = positional[0] if positional else None
    return any(
        (isinstance(arm, ast.Name) and arm.id not in parameters)
        or ((read := _attribute_read(arm)) is not None and isinstance(read[0], ast.Name) and read[0].id == owner)
        for arm in _branches(stored.value)
    )


def _none_default(stored: _AttributeValue) -> bool:
    """Whether ``stored`` puts None in the attribute (``self._drafter: nn.Module | None = None`` in ``__init__``):
    a method called on None raises, so every drafter method call that succeeds there is on what else it holds."""
    return stored.value is not None and _is_none(stored.value)


def _handed_a_value(stored: _AttributeValue) -> bool:
    """Whether what ``stored`` puts in the attribute is made by a call with an argument (``capture(self.model)``),
    which may be the drafter itself or hold it."""
    return isinstance(stored.value, ast.Call) and bool(stored.value.args or stored.value.keywords)


def _surely_held(value: ast.expr, names: _DrafterNames, once: dict[str, ast.expr], seen: frozenset[str]) -> bool:
    """Whether ``value`` is the drafter however it evaluates: each arm of ``a if c else b``, a local bound
    once to such a value, or what ``names`` holds directly (``self.model``, an attribute that holds it)."""
    if isinstance(value, ast.IfExp):
        return all(_surely_held(arm, names, once, seen) for arm in _branches(value))
    if isinstance(value, ast.Name):
        bound = once.get(value.id)
        return bound is not None and value.id not in seen and _surely_held(bound, names, once, seen | {value.id})
    return names.holds(value)


def _uses_of_maybe(nodes: list[ast.AST], speculators: tuple[str, ...], maybe: dict[str, str], file: str) -> list[str]:
    """``FILE:LINE: `code` (why)`` for each use, in a function of a drafting path, of an attribute that
    may or may not hold the drafter (``maybe``, with why) that may reach the drafter unseen: one of its
    logits methods read (called or not), or the attribute handed on, stored or returned."""
    if not maybe:
        return []
    names = _DrafterNames.of(nodes, (), speculators, frozenset(maybe))
    calls = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
    shown = [
        calls.get(id(n), n) for n in nodes if isinstance(n, (ast.Attribute, ast.Call)) and names.method_of(n) in WATCHED
    ]
    shown += [node for _, node in names.escapes(nodes) if node not in shown]
    read = {
        attr
        for n in nodes
        if (found := _attribute_read(n)) is not None
        and (attr := found[1]) in maybe
        and isinstance(found[0], ast.Name)
        and found[0].id in names.speculators
    }
    return [f"{file}:{node.lineno}: `{unparse(node)}` ({'; '.join(maybe[a] for a in sorted(read))})" for node in shown]


def _attribute_read(node: ast.AST) -> tuple[ast.expr, str] | None:
    """(owner, NAME) of ``owner.NAME`` or ``getattr(owner, "NAME"[, default])``."""
    return _getattr_of(node) or ((node.value, node.attr) if isinstance(node, ast.Attribute) else None)  # type: ignore[arg-type]


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def _bound_method_values(
    nodes: list[ast.AST], called: set[int], function: ast.FunctionDef | ast.AsyncFunctionDef, methods: Iterable[str]
) -> Iterator[tuple[ast.Attribute, ast.AST]]:
    """Each ``self.NAME`` of a method NAME (in ``methods``) read other than as what a call calls
    (``called``: ids of those) or as the object of another attribute, with the code to show: the call
    it is an argument of (``run(self._generate_drafts, h)``), else the reference. Python hands on the
    bound method: whoever gets it may call it."""
    objects = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # ``self.x`` of ``self.x.y``
    references = [
        n
        for n in nodes
        if isinstance(n, ast.Attribute)
        and n.attr in methods
        and isinstance(n.ctx, ast.Load)
        and _is_self(n.value)
        and id(n) not in called
        and id(n) not in objects
    ]
    parents = parent_map(function) if references else {}
    for node in references:
        holder = parents.get(id(node))
        if isinstance(holder, ast.keyword):
            holder = parents.get(id(holder))
        yield node, holder if isinstance(holder, ast.Call) and holder.func is not node else node


def _unknown_arguments(function: ast.FunctionDef | ast.AsyncFunctionDef, bound_self: bool) -> dict[str, str | None]:
    """What each parameter of a method gets when code the scan does not read calls it: not known
    (None), ``self`` aside."""
    positional = [*function.args.posonlyargs, *function.args.args]
    out: dict[str, str | None] = {a.arg: None for a in (*positional, *function.args.kwonlyargs)}
    if bound_self and positional:
        out[positional[0].arg] = "self"
    return out


def _with_arm(statement: ast.stmt, choice: ast.expr, arm: ast.expr) -> ast.stmt:
    """A copy of ``statement`` in which ``choice`` is ``arm``."""
    return copy.deepcopy(statement, {id(choice): arm})


def _transparent_of(local: dict[str, str], module: _Module, node: ast.expr) -> ast.expr | None:
    """What ``torch.compile(f)`` (a ``TRANSPARENT_WRAPPERS`` call, ``f`` its one positional
    argument) wraps: calling it calls ``f`` with the same arguments."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not isinstance(node.args[0], ast.Starred):
        name = _dotted(node.func)
        if name is not None and _qualified(local, module, name) in TRANSPARENT_WRAPPERS:
            return node.args[0]
    return None


def _seen_through(local: dict[str, str], module: _Module, value: ast.expr | None) -> ast.expr | None:
    """What a stored ``value`` is for the attributes read on it: ``typing.cast(T, x)`` returns ``x``, and
    ``torch.compile(m)`` (``TRANSPARENT_WRAPPERS``) forwards attribute reads to ``m``."""
    while isinstance(value, ast.Call):
        name = _dotted(value.func)
        cast = name is not None and len(value.args) == 2 and _qualified(local, module, name) in CASTS
        inner = value.args[1] if cast else _transparent_of(local, module, value)
        if inner is None or isinstance(inner, ast.Starred):
            break
        value = inner
    return value


def _partial_of(local: dict[str, str], module: _Module, node: ast.expr) -> ast.expr | None:
    """What ``functools.partial(f, ...)`` (or an imported ``partial``) wraps: calling it calls ``f``."""
    if isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
        name = _dotted(node.func)
        if name is not None and _qualified(local, module, name) == "functools.partial":
            return node.args[0]
    return None


@functools.lru_cache(maxsize=256)
def _module_values_of(tree: ast.Module) -> dict[str, ast.expr]:
    bound: dict[str, list[ast.expr]] = {}
    for statement in tree.body:
        for name, value in _local_bindings(statement):
            bound.setdefault(name, []).append(value)
    return {name: values[0] for name, values in bound.items() if len(values) == 1}


def _module_values(module: _Module) -> dict[str, ast.expr]:
    """Module-level names bound once by a plain assignment, to their values."""
    return _module_values_of(module.tree)


class _Substituted(ast.NodeTransformer):
    """A condition with each local assigned once replaced by its value (not substituted again)."""

    def __init__(self, values: dict[str, ast.expr]):
        self.values = values

    def visit_Name(self, node: ast.Name) -> ast.expr:
        value = self.values.get(node.id)
        return copy.deepcopy(value) if value is not None and isinstance(node.ctx, ast.Load) else node


def _member(known: frozenset[str] | None, values: tuple[str, ...]) -> Truth:
    if known is None:
        return UNKNOWN
    hits = known & set(values)
    if not hits:
        return False
    return True if hits == known else UNKNOWN


PRESENT_CONFIGS = ("speculative_config", "draft_model_config")  # what a drafter being analysed always has
COLLECTION_CALLS = ("set", "frozenset", "tuple", "list")  # built from one iterable, same members


def _string_collection(node: ast.expr) -> tuple[str, ...] | None:
    """The strings of a literal tuple, list or set of strings, also wrapped in ``frozenset(...)`` etc."""
    if isinstance(node, ast.Call) and _dotted(node.func) in COLLECTION_CALLS and len(node.args) == 1:
        node = node.args[0]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return tuple(items) if len(items) == len(node.elts) else None
    return None


def _is_architectures(node: ast.expr) -> bool:
    """The draft's architectures: ``X.architectures``, also ``X.architectures or []`` or ``set(X.architectures)``."""
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return _is_architectures(node.values[0])
    if isinstance(node, ast.Call) and _dotted(node.func) in COLLECTION_CALLS and len(node.args) == 1:
        return _is_architectures(node.args[0])
    return _attr(node) == "architectures"


def _truth_tested(node: ast.expr) -> ast.expr | None:
    """``x`` of ``bool(x)``: the same truth."""
    if isinstance(node, ast.Call) and _dotted(node.func) == "bool" and len(node.args) == 1 and not node.keywords:
        return node.args[0]
    return None


def _shared_with_architectures(node: ast.expr) -> tuple[tuple[str, ...], bool] | None:
    """A set of names tested against the draft's architectures: (names, True) for an overlap
    (``S.intersection(archs)``, ``S & archs``, either way round), (names, False) for ``S.isdisjoint(archs)``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitAnd):
        pair, overlap = (node.left, node.right), True
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("intersection", "isdisjoint")
        and len(node.args) == 1
        and not node.keywords
    ):
        pair, overlap = (node.func.value, node.args[0]), node.func.attr == "intersection"
    else:
        return None
    for names, other in (pair, pair[::-1]):
        literal = _string_collection(names)
        if literal is not None and _is_architectures(other):
            return literal, overlap
    return None


def _each_architecture(node: ast.expr) -> tuple[str, ast.expr] | None:
    """``any(TEST for v in archs)`` / ``all(...)`` over the draft's architectures: (v, TEST), which
    for the one architecture of a drafter is TEST with v that architecture."""
    if not (
        isinstance(node, ast.Call)
        and _dotted(node.func) in ("any", "all")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.GeneratorExp)
    ):
        return None
    generator = node.args[0]
    if len(generator.generators) != 1:
        return None
    loop = generator.generators[0]
    if loop.ifs or loop.is_async or not isinstance(loop.target, ast.Name) or not _is_architectures(loop.iter):
        return None
    return loop.target.id, generator.elt


def _attr(node: ast.expr) -> str | None:
    return node.attr if isinstance(node, ast.Attribute) else None


def _renamed_type(node: ast.AST) -> str | None:
    """``T`` of ``hf_config.model_type = "T"``."""
    if (
        isinstance(node, ast.Assign)
        and any(_attr(t) == "model_type" for t in node.targets)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return node.value.value
    return None


def _getattr_of(node: ast.expr) -> tuple[ast.expr, str] | None:
    """``getattr(x, "name"[, default])`` -> (x, name): an attribute read under another spelling."""
    name = _getattr_name(node)
    return (node.args[0], name) if name is not None else None  # type: ignore[attr-defined]


def _getattr_name(node: ast.expr) -> str | None:
    """``getattr(x, "name", default)`` -> ``name``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) >= 2
        and isinstance(node.args[1], ast.Constant)
    ):
        return node.args[1].value if isinstance(node.args[1].value, str) else None
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    if isinstance(node, ast.Subscript):
        return _dotted(node.value)
    return None


def _branches(node: ast.expr) -> Iterator[ast.expr]:
    """The values an expression may take: both arms of ``a if c else b``, each arm's own."""
    if isinstance(node, ast.IfExp):
        yield from _branches(node.body)
        yield from _branches(node.orelse)
    else:
        yield node


def _imports(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Names bound by the module's top-level imports (under ``if`` too) -> qualified names."""
    out: dict[str, str] = {}
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.If, ast.Try)):
            todo += (
                node.body
                + node.orelse
                + getattr(node, "finalbody", [])
                + [s for h in getattr(node, "handlers", []) for s in h.body]
            )
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(_bound(node, module, is_package))
    return out


def _constructing_parts(source: str) -> str:
    """The top-level statements of ``source`` but its classes and functions (imports, under ``try``
    and ``if`` too, and module-level names: a dict of proposers), and every function whose text
    constructs a speculator: all that selection reads, at a fraction of the parse. Every other line
    is left blank (line numbers stay those of the file); a kept method is put under a ``class``
    line of its own."""
    lines = source.split("\n")  # as _continued_lines numbers them (a form feed ends no line here)
    continued = _continued_lines(source)
    keep = [""] * len(lines)
    index = 0
    while index < len(lines):
        line = lines[index]
        match = DEF_LINE.match(line)
        if line.startswith(("import ", "from ")):
            end = _statement_end(lines, index)
            keep[index:end] = lines[index:end]
            index = end
        elif (
            line[:1].strip()
            and index not in continued  # not a line of a string (or brackets) some statement started above
            and not line.startswith(("#", "@", "class ", "def ", "async def "))
            and not match
        ):
            end = _block_end(lines, index, 0, continued)  # the statement with its block, a string's lines
            keep[index:end] = lines[index:end]
            index = end
        elif match:
            end = _block_end(lines, index, len(match.group(1)), continued)
            if _may_construct("\n".join(lines[index:end])):
                keep[index:end] = lines[index:end]
                if match.group(1) and not keep[index - 1]:  # else it goes on the class of the method kept above
                    keep[index - 1] = f"class {CUT_CLASS}:"
            index = end
        else:
            index += 1
    return "\n".join(keep) + "\n"


CUT_CLASS = "_Cut"  # holds a method kept from the model runner, at its own indentation


def _block_end(lines: list[str], start: int, indent: int, continued: frozenset[int]) -> int:
    """The line after the function defined at ``start``: the first line of code indented no more
    than its ``def`` that does not continue a statement (in brackets, a multi-line string, after a
    backslash); blank and comment-only lines, at any column, stay in the block."""
    end = start + 1
    while end < len(lines) and (
        end in continued
        or not lines[end].strip()
        or lines[end].lstrip().startswith("#")
        or _indent(lines[end]) > indent
    ):
        end += 1
    return end


STRING_OR_COMMENT = re.compile(
    r"#[^\n]*"
    r"|[rRbBuUfF]{0,2}(?:\"\"\"(?:\\.|[^\\])*?(?:\"\"\"|\Z)|'''(?:\\.|[^\\])*?(?:'''|\Z))"
    r"|\"(?:\\.|[^\"\\\n])*\"?|'(?:\\.|[^'\\\n])*'?",
    re.S,
)


def _continued_lines(source: str) -> frozenset[int]:
    """Indexes of the lines that continue a statement begun on an earlier line: inside a
    multi-line string, inside brackets, or after a backslash. Read from the text (strings and
    comments first, then brackets), so a runner newer than this Python still cuts."""
    out: set[int] = set()
    counted = [0, 0]  # the lines before this offset

    def blanked(string: re.Match) -> str:
        """A string as one placeholder on as many lines; the lines after its first continue it."""
        text = string.group()
        if text[0] == "#":
            return ""
        lines = text.count("\n")
        if lines:
            counted[:] = [string.start(), counted[1] + source.count("\n", counted[0], string.start())]
            out.update(range(counted[1] + 1, counted[1] + 1 + lines))
        return "s" + "\n" * lines

    code = STRING_OR_COMMENT.sub(blanked, source)
    depth, joined = 0, False
    for number, line in enumerate(code.split("\n")):
        if depth > 0 or joined:
            out.add(number)
        depth += line.count("(") + line.count("[") + line.count("{")
        depth = max(0, depth - line.count(")") - line.count("]") - line.count("}"))
        joined = line.endswith("\\")
    return frozenset(out)


def _may_construct(text: str) -> bool:
    """Whether ``text`` has a line that may construct a speculator or pick its class
    (``CONSTRUCTION_LINE``): a safe over-approximation of what ``_constructed`` reads, to skip
    the parse of what cannot select."""
    end = 0
    for hit in SPECULATOR_NAME.finditer(text):
        if hit.start() < end:
            continue  # a line already tried
        start = text.rfind("\n", 0, hit.start()) + 1
        end = text.find("\n", hit.end())
        end = len(text) if end < 0 else end
        if CONSTRUCTION_LINE.match(text, start, end):
            return True
    return False


def _statement_end(lines: list[str], start: int) -> int:
    """The line after the import statement starting at ``start``; its comments do not count (an
    import holds no string, so a ``#`` always starts one)."""
    depth, index = 0, start
    while index < len(lines):
        code = lines[index].partition("#")[0]
        depth += code.count("(") - code.count(")")
        index += 1
        if depth <= 0 and not code.rstrip().endswith("\\"):
            break
    return index


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _qualified(local: dict[str, str], module: _Module, name: str) -> str:
    """What a (dotted) name in ``module`` stands for: an imported or local name, or one reached
    through an imported module (``speculators.MTPSpeculator`` after ``import ... as speculators``)."""
    head, dot, rest = name.partition(".")
    if dot and head in local:
        return f"{local[head]}.{rest}"
    return local.get(name, f"{module.name}.{name}")


def _scope(module: _Module, function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict[str, str]:
    """The names a function of ``module`` sees: the module's imports, then its own."""
    where = (function.lineno, function.col_offset)
    if where not in module.scopes:
        module.scopes[where] = {**module.imports, **_local_imports(statements_within(function), module)}
    return module.scopes[where]


def _local_imports(nodes: Iterable[ast.AST], module: _Module) -> dict[str, str]:
    """Names bound by the imports among a function's nodes (vLLM imports speculators lazily),
    relative ones (``from .mtp import X``) resolved against ``module``."""
    out: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(_bound(node, module.name, module.file.endswith("__init__.py")))
    return out


def _bound(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> qualified name for one import statement in ``module``."""
    if isinstance(node, ast.Import):  # ``import a.b as m`` binds m to a.b; ``import a.b`` binds a to a
        return {
            alias.asname or alias.name.partition(".")[0]: alias.name if alias.asname else alias.name.partition(".")[0]
            for alias in node.names
        }
    base = absolute_module(module, is_package, node.level, node.module)
    return {alias.asname or alias.name: f"{base}.{alias.name}" for alias in node.names}


def _read_class(node: ast.ClassDef, module: _Module, local_classes: set[str]) -> _Class:
    """A class statement of ``module``: its bases by qualified name, and each name its body binds
    by the last statement that binds it (a def, or the assignment that Python's lookup finds
    instead of a base's def; a ``del`` leaves the name to the bases)."""
    codes = [_dotted(b) or unparse(b) for b in node.bases]
    last: dict[str, ast.stmt] = {}
    for statement in node.body:
        for name in _class_names(statement):
            last[name] = statement
        if isinstance(statement, ast.Delete):
            for target in statement.targets:
                last.pop(target.id if isinstance(target, ast.Name) else "", None)
    return _Class(
        node.name,
        module.name,
        module.file,
        node.lineno,
        [_base_qualname(module, local_classes, code) for code in codes],
        {name: s for name, s in last.items() if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))},
        {
            t.id: s.value
            for s in node.body
            if isinstance(s, (ast.Assign, ast.AnnAssign)) and s.value
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
            if isinstance(t, ast.Name)
        },
        {name: s for name, s in last.items() if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))},
        codes,
    )


def _class_names(node: ast.AST) -> Iterator[str]:
    """The names a class-body statement binds in the class's namespace: a def or class statement's
    own name, an import's, the stored names of anything else (not inside a lambda or comprehension,
    which have scopes of their own); an annotation without a value (``_drafter: nn.Module``) binds nothing."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.AnnAssign) and node.value is None:
        return
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from (alias.asname or alias.name.partition(".")[0] for alias in node.names)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node.id
    elif not isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        for child in ast.iter_child_nodes(node):
            yield from _class_names(child)


def _base_qualname(module: _Module, local_classes: set[str], code: str) -> str:
    """The qualified name of a base as ``module`` binds it (``nn.Module`` through ``from torch import
    nn``); a name it neither defines nor imports (a builtin) as written."""
    if code in local_classes:
        return f"{module.name}.{code}"
    head, dot, rest = code.partition(".")
    if head in module.imports:
        return f"{module.imports[head]}{dot}{rest}"
    return code


# vLLM's lookup of an object by its dotted name (``vllm.utils...resolve_obj_by_qualname``)
RESOLVE_BY_QUALNAME = "resolve_obj_by_qualname"
# A string that only names a class: ``Name``, ``pkg.module.Name``, ``pkg.module:Name``
SPELLED_CLASS = re.compile(r"(?:(?P<path>[A-Za-z_][\w.]*)[.:])?(?P<name>[A-Za-z_]\w*)")


def _binds_any(statement: ast.AST, names: tuple[str, ...]) -> bool:
    """An assignment (``+=``, annotated) to one of ``names``."""
    assigns = isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign))
    return assigns and not set(names_bound(statement)).isdisjoint(names)  # type: ignore[arg-type]


def _place(qualname: str, node: ast.expr) -> tuple[str, int, int]:
    """Where a reference to ``qualname`` is (copies of a statement that selection reads keep it)."""
    return qualname, node.lineno, node.col_offset


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _references(module: _Module) -> Iterator[tuple[dict[str, str], ast.expr]]:
    """Each whole dotted name a module reads (``speculators.MTPSpeculator.from_config``, not its
    parts), with the names in scope there (a function's own imports included)."""
    for statement in module.tree.body:
        parts = statement.body if isinstance(statement, ast.ClassDef) else [statement]
        for part in parts:
            is_function = isinstance(part, (ast.FunctionDef, ast.AsyncFunctionDef))
            scope = _scope(module, part) if is_function else module.imports
            nodes = list(walk(part))
            inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
            inner |= {id(n) for annotation in _annotations(nodes) for n in walk(annotation)}
            for node in nodes:
                if (
                    isinstance(node, (ast.Name, ast.Attribute))
                    and isinstance(node.ctx, ast.Load)
                    and id(node) not in inner
                    and _dotted(node) is not None
                ):
                    yield scope, node


def _annotations(nodes: Iterable[ast.AST]) -> Iterator[ast.expr]:
    """The annotations among ``nodes`` (a walk): of parameters, of returns, of annotated assignments."""
    for sub in nodes:
        if isinstance(sub, ast.arg) and sub.annotation is not None:
            yield sub.annotation
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and sub.returns is not None:
            yield sub.returns
        elif isinstance(sub, ast.AnnAssign):
            yield sub.annotation


INSPECTORS = (*INSPECTING_BUILTINS, "issubclass", "super")


def _inspected(parents: dict[int, ast.AST], node: ast.expr) -> bool:
    """Whether a class reference only looks at the class: a base or keyword of a class statement, a
    decorator, an operand of a comparison, an argument of ``isinstance`` and kin."""
    child: ast.AST = node
    parent = parents.get(id(node))
    while isinstance(parent, ast.Tuple):  # isinstance(x, (A, B))
        child, parent = parent, parents.get(id(parent))
    if isinstance(parent, ast.Call) and child is not parent.func:
        return _dotted(parent.func) in INSPECTORS
    return isinstance(parent, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.Compare))


def _statement_of(parents: dict[int, ast.AST], node: ast.AST) -> ast.AST:
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node


def _functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module-level functions and methods of module-level classes."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        elif isinstance(node, ast.ClassDef):
            yield from (f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)))


def declared_config(source: str, class_name: str, class_line: int) -> str | None:
    """The name a class assigns to ``speculator_config_class`` in its body, read from its text."""
    lines = source.splitlines()
    start = class_line - 1
    if start >= len(lines):
        return None
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    match = DECLARED_CONFIG.search("\n".join(lines[start + 1 : end]))
    return match.group(2) if match else None
