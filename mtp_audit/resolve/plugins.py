"""Out-of-tree plugins: what they add to, or replace in, vLLM's drafter registry.

vLLM loads the functions named by the ``vllm.general_plugins`` entry points on
every platform, and the one named by the ``vllm.platform_plugins`` entry point of
the platform it runs on; a function may call
``ModelRegistry.register_model(arch, "module:Class")`` (or pass the class),
directly or through helpers of its own package, often only on some platforms
(``if current_platform.is_rocm():``). All of it is read statically: entry points
from ``entry_points.txt`` with ``importlib.metadata``, functions with ``ast``,
platform conditions with the evaluator the dispatch interpreter uses; no plugin is
imported.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..index.ast_tools import absolute_module
from ..index.modules import ModuleIndex
from ..index.platforms import evaluate, literal_string
from ..locate import GENERAL, PLATFORM, discover
from ..model import PLATFORMS, PluginDist, RegistryEntry
from .registry import OTHER_DICT_DRAFTER, SPECULATIVE

REGISTERED = "register_model"  # the registry name of a plugin's entries
MAX_CALL_DEPTH = 8  # helpers calling helpers: deeper chains are not followed
# Outside the speculative dict "Eagle" also names target models; an EAGLE drafter's arch starts with it.
EAGLE_ARCH = re.compile(r"^Eagle|Eagle3")
Guard = tuple[ast.expr, bool]  # a condition a call runs under, and whether it holds there


@dataclass(frozen=True)
class Registration:
    """One ``register_model`` call a plugin makes when vLLM loads it."""

    arch: str
    module: str
    cls: str
    plugin: PluginDist
    group: str  # GENERAL or PLATFORM
    file: str
    line: int
    conditions: tuple[Guard, ...] = ()  # the ``if`` tests around the call, and around the calls leading to it

    def applies_on(self, platform: str) -> bool | None:
        """Whether vLLM makes this call on ``platform``; None when a condition cannot be decided."""
        truth: bool | None = True
        for test, holds in self.conditions:
            value = evaluate(test, platform)
            if value is None:
                truth = None
            elif value != holds:
                return False
        return truth


@dataclass
class PluginReading:
    """What one plugin registers, the device names of its platforms, and what could not be read."""

    registrations: list[Registration]
    platforms: list[str]
    skipped: list[str]


def read_plugin(index: ModuleIndex, plugin: PluginDist) -> PluginReading:
    """Follow each entry point's function, and the plugin's own functions it calls."""
    reader = _Reader(index, plugin)
    platforms = []
    for group, name, value in plugin.entry_points:
        module, _, function = value.partition(":")
        function = function.split("[")[0].strip()
        reader.follow(module.strip(), function, group, 0)
        if group == PLATFORM:
            platforms.append(reader.platform_name(module.strip(), function, name))
    return PluginReading(reader.registrations, sorted(set(platforms)), reader.skipped)


class _Reader:
    def __init__(self, index: ModuleIndex, plugin: PluginDist):
        self.index = index
        self.plugin = plugin
        self.packages = {value.split(":")[0].strip().split(".")[0] for _, _, value in plugin.entry_points}
        self.registrations: list[Registration] = []
        self.skipped: list[str] = []
        self.seen: set[tuple[str, str, str]] = set()
        self.trees: dict[str, tuple[ast.Module, str, bool] | None] = {}

    def parsed(self, module: str) -> tuple[ast.Module, str, bool] | None:
        """(tree, file, is_package) of one of the plugin's modules; None if not found or not Python."""
        if module not in self.trees:
            found = self.index.locate(module)
            result = None
            if found is not None:
                path, is_package = found
                try:
                    result = ast.parse(self.index.read_bytes(path)), self.index.relative(path), is_package
                except (SyntaxError, ValueError) as error:
                    self.skipped.append(f"{self.index.relative(path)}: cannot parse ({error})")
            self.trees[module] = result
        return self.trees[module]

    def follow(self, module: str, function: str, group: str, depth: int, conditions: tuple[Guard, ...] = ()) -> None:
        if (module, function, group, conditions) in self.seen or module.split(".")[0] not in self.packages:
            return
        self.seen.add((module, function, group, conditions))
        parsed = self.parsed(module)
        entry_point = depth == 0  # deeper, a call may name a class or a variable: nothing to follow
        if parsed is None:
            if entry_point:
                self.skipped.append(f"{self.plugin.label}: entry point module {module} not found")
            return
        tree, file, is_package = parsed
        definition = _top_level_function(tree, function)
        if definition is None:
            target = _module_binding(tree, module, is_package, function)
            if target is not None and target[1]:
                self.follow(target[0], target[1], group, depth, conditions)  # re-exported from another module
            elif entry_point:
                self.skipped.append(f"{file}: no function {function}, which entry point {module}:{function} names")
            return
        local = _local_bindings(definition, module, is_package)
        guards = _guards(definition.body)
        for call in (n for n in ast.walk(definition) if isinstance(n, ast.Call)):
            where = conditions + guards.get(id(call), ())
            if _is_register_model(call):
                self.register(call, tree, module, is_package, local, group, file, where)
            elif depth < MAX_CALL_DEPTH:
                callee = self.callee(call.func, tree, module, is_package, local)
                if callee is not None:
                    self.follow(*callee, group, depth + 1, where)

    def callee(
        self, func: ast.expr, tree: ast.Module, module: str, is_package: bool, local: dict[str, tuple[str, str]]
    ) -> tuple[str, str] | None:
        """The (module, function) a call names: a function of this module, or one imported."""
        if isinstance(func, ast.Name):
            if func.id in local:
                return local[func.id]
            if _top_level_function(tree, func.id) is not None:
                return module, func.id
            return _module_binding(tree, module, is_package, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):  # helpers.register()
            owner = local.get(func.value.id) or _module_binding(tree, module, is_package, func.value.id)
            if owner is not None:
                submodule = f"{owner[0]}.{owner[1]}" if owner[1] else owner[0]
                return submodule, func.attr
        return None

    def register(
        self,
        call: ast.Call,
        tree: ast.Module,
        module: str,
        is_package: bool,
        local: dict[str, tuple[str, str]],
        group: str,
        file: str,
        conditions: tuple[Guard, ...] = (),
    ) -> None:
        args = list(call.args) + [None] * 2
        arch_node = args[0] or _keyword(call, "model_arch")
        cls_node = args[1] or _keyword(call, "model_cls")
        arch = literal_string(arch_node) if arch_node is not None else None
        target = self.class_target(cls_node, tree, module, is_package, local) if cls_node is not None else None
        if arch is None or target is None:
            self.skipped.append(
                f"{file}:{call.lineno}: register_model with arguments that are not a string "
                "architecture and a 'module:Class' string or an imported class"
            )
            return
        registration = Registration(arch, target[0], target[1], self.plugin, group, file, call.lineno, conditions)
        if registration not in self.registrations:
            self.registrations.append(registration)

    def class_target(
        self, node: ast.expr, tree: ast.Module, module: str, is_package: bool, local: dict[str, tuple[str, str]]
    ) -> tuple[str, str] | None:
        text = literal_string(node)
        if text is not None:  # vLLM refuses a string that is not two parts around one colon
            where, _, name = text.partition(":")
            return (where, name) if where and name and ":" not in name else None
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            if any(isinstance(s, ast.ClassDef) and s.name == node.id for s in tree.body):
                return module, node.id
            return _module_binding(tree, module, is_package, node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):  # models.CustomMTP
            owner = local.get(node.value.id) or _module_binding(tree, module, is_package, node.value.id)
            if owner is not None:
                return (f"{owner[0]}.{owner[1]}" if owner[1] else owner[0]), node.attr
        return None

    def platform_name(self, module: str, function: str, entry_name: str) -> str:
        """The platform's device name: ``device_name`` of the class whose path the function returns."""
        parsed = self.parsed(module)
        definition = _top_level_function(parsed[0], function) if parsed else None
        for node in ast.walk(definition) if definition else ():
            path = literal_string(node.value) if isinstance(node, ast.Return) and node.value else None
            if path and "." in path:
                where, _, name = path.rpartition(".")
                target = self.parsed(where)
                for statement in target[0].body if target else ():
                    if isinstance(statement, ast.ClassDef) and statement.name == name:
                        for attribute in ("device_name", "device_type"):
                            value = _class_constant(statement, attribute)
                            if value:
                                return value
        return entry_name


Guards = dict[int, tuple[Guard, ...]]  # id(call) -> the conditions it runs under


def _guards(statements: list[ast.stmt], around: tuple[Guard, ...] = (), found: Guards | None = None) -> Guards:
    """id(call) -> the conditions it runs under in a block: the ``if`` tests around it, and those of
    earlier ``if``s of the block whose branch leaves it (``if not current_platform.is_rocm(): return``)."""
    found = {} if found is None else found
    for statement in statements:
        if isinstance(statement, ast.If):
            _mark(statement.test, around, found)
            _guards(statement.body, (*around, (statement.test, True)), found)
            _guards(statement.orelse, (*around, (statement.test, False)), found)
            if _leaves(statement.body) and not _leaves(statement.orelse):
                around = (*around, (statement.test, False))
            elif _leaves(statement.orelse) and not _leaves(statement.body):
                around = (*around, (statement.test, True))
            continue
        _mark(statement, around, found)  # then the blocks inside it, whose own ifs say more
        for block in ("body", "orelse", "finalbody", "handlers", "cases"):
            inner = getattr(statement, block, None)
            if isinstance(inner, list):
                _guards([s for s in inner if isinstance(s, ast.stmt)], around, found)
                for holder in (s for s in inner if isinstance(s, (ast.ExceptHandler, ast.match_case))):
                    _guards(holder.body, around, found)
    return found


def _mark(node: ast.AST, around: tuple[Guard, ...], found: Guards) -> None:
    """Every call inside ``node`` runs under ``around`` (until a block inside says more)."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        found[id(call)] = around


def _leaves(block: list[ast.stmt]) -> bool:
    """A block that ends by leaving the block around it: what follows runs only when it was not taken."""
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _top_level_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    return next(
        (s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name), None
    )


def _imports(statements, module: str, is_package: bool) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute): ``from m import a as b`` gives b -> (m, a); ``import m.n as x``
    gives x -> (m.n, "")."""
    bound: dict[str, tuple[str, str]] = {}
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            source = absolute_module(module, is_package, node.level, node.module)
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = (source, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bound[alias.asname] = (alias.name, "")
                else:
                    bound[alias.name.split(".")[0]] = (alias.name.split(".")[0], "")
    return bound


def _local_bindings(function: ast.AST, module: str, is_package: bool) -> dict[str, tuple[str, str]]:
    """Imports inside a function (plugins import their models late, when the function runs)."""
    return _imports((n for n in ast.walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))), module, is_package)


def _module_binding(tree: ast.Module, module: str, is_package: bool, name: str) -> tuple[str, str] | None:
    return _imports(_module_level_imports(tree.body), module, is_package).get(name)


def _module_level_imports(statements: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports at module level, through if / try / with blocks, not into functions or classes, in
    source order: a later import of a name replaces an earlier one, as when the module runs."""
    for node in statements:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for block in ("body", "handlers", "orelse", "finalbody"):
                yield from _module_level_imports(getattr(node, block, []))
        elif isinstance(node, ast.ExceptHandler):
            yield from _module_level_imports(node.body)


def _is_register_model(call: ast.Call) -> bool:
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "register_model"):
        return False
    receiver = func.value
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    return name == "ModelRegistry"


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _class_constant(node: ast.ClassDef, name: str) -> str | None:
    for statement in node.body:
        if isinstance(statement, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in statement.targets
        ):
            return literal_string(statement.value)
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.target.id == name
            and statement.value is not None
        ):
            return literal_string(statement.value)
    return None


def registrations_in(index: ModuleIndex, modules: list[str], plugin: PluginDist) -> PluginReading:
    """Every ``register_model`` call anywhere in ``modules`` (a plugin source tree, whose entry
    points may not be declared in it), as a general plugin's."""
    reader = _Reader(index, plugin)
    for module in modules:
        parsed = reader.parsed(module)
        if parsed is None:
            continue
        tree, file, is_package = parsed
        guards = _guards(tree.body)
        for call, function in sorted(_calls_with_function(tree), key=lambda p: (p[0].lineno, p[0].col_offset)):
            if _is_register_model(call):
                local = _local_bindings(function, module, is_package) if function is not None else {}
                reader.register(call, tree, module, is_package, local, GENERAL, file, guards.get(id(call), ()))
    return PluginReading(reader.registrations, [], reader.skipped)


def _calls_with_function(tree: ast.Module):
    """(call, the innermost function around it or None) for every call in a module."""
    pending: list[tuple[ast.AST, ast.AST | None]] = [(tree, None)]
    while pending:
        node, function = pending.pop()
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            if isinstance(child, ast.Call):
                yield child, function
            pending.append((child, inner))


def is_drafter(arch: str, cls: str, drafter_archs: set[str]) -> bool:
    """A registration of a drafter: an architecture vLLM registers as one, or named like one."""
    return arch in drafter_archs or bool(
        OTHER_DICT_DRAFTER.search(arch) or OTHER_DICT_DRAFTER.search(cls) or EAGLE_ARCH.search(arch)
    )


def effective_registry(in_tree: list[RegistryEntry], readings: list[PluginReading]) -> list[RegistryEntry]:
    """In-tree entries, then the plugins' drafter registrations: platform plugins' first (vLLM
    resolves its platform before it loads the general plugins), each phase in plugin order.

    A general plugin's registration applies wherever it loads: every in-tree platform and every
    plugin platform; it replaces the entry it names there. A platform plugin's applies on its
    own platform only (its device name), and the in-tree entry stays on the others. Either is
    narrowed by the platform conditions around the call: where one cannot be decided, both the
    registration and what it would replace are kept."""
    labels = sorted({p for r in readings for p in r.platforms} - set(PLATFORMS))
    everywhere = (*PLATFORMS, *labels)
    drafter_archs = {e.arch for e in in_tree if e.arch and e.registry == SPECULATIVE}
    entries = list(in_tree)
    for phase in (PLATFORM, GENERAL):
        for reading in readings:
            by_arch: dict[str, list[Registration]] = {}
            for registration in reading.registrations:  # a function may register an arch in two branches
                if registration.group == phase:
                    by_arch.setdefault(registration.arch, []).append(registration)
            scope = everywhere if phase == GENERAL else tuple(reading.platforms)
            for arch, alternatives in by_arch.items():
                if is_drafter(arch, alternatives[0].cls, drafter_archs):
                    entries = _register(entries, arch, alternatives, scope)
    return entries


def _register(
    entries: list[RegistryEntry], arch: str, alternatives: list[Registration], scope: tuple[str, ...]
) -> list[RegistryEntry]:
    """``entries`` with ``arch`` registered anew on ``scope``, where the calls' conditions allow:
    what they replace stays where no call is sure to run."""
    replaced = [e for e in entries if e.arch == arch]
    original = next((e for e in replaced if e.source == "vllm"), replaced[0] if replaced else None)
    surely = {p for p in scope if any(r.applies_on(p) for r in alternatives)}  # True, not None
    kept = []
    for entry in entries:
        everywhere_before = entry.scope or PLATFORMS
        remaining = tuple(p for p in everywhere_before if p not in surely)
        if entry.arch != arch or remaining == everywhere_before:
            kept.append(entry)
        elif remaining:
            kept.append(
                RegistryEntry(
                    entry.arch, entry.module, entry.cls, entry.registry, entry.source, entry.replaces, remaining
                )
            )
    replaces = (original.module, original.cls) if original else None
    for registration in alternatives:
        where = tuple(p for p in scope if registration.applies_on(p) is not False)
        if not where:
            continue
        entry = RegistryEntry(
            arch, registration.module, registration.cls, REGISTERED, registration.plugin.label, replaces, where
        )
        if entry not in kept:
            kept.append(entry)
    return kept


def tree_plugin(root: Path) -> PluginDist:
    """The distribution a plugin source tree holds: its dist-info (an unpacked wheel), its
    PKG-INFO (an sdist) or its pyproject.toml; the directory's name when it has none."""
    for dist in discover([root]):
        return dist
    for metadata in [
        root / "PKG-INFO",
        *sorted(root.glob("*.egg-info/PKG-INFO")),
        *sorted(root.glob("*.dist-info/METADATA")),
    ]:
        if metadata.is_file():
            text = metadata.read_text(encoding="utf-8", errors="replace")
            name = re.search(r"^Name:\s*(\S+)", text, re.MULTILINE)
            version = re.search(r"^Version:\s*(\S+)", text, re.MULTILINE)
            if name and version:
                return PluginDist(name.group(1), version.group(1), root, ())
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = {}
        if isinstance(project.get("name"), str):
            return PluginDist(project["name"], str(project.get("version", "(dynamic version)")), root, ())
    return PluginDist(root.name, "(no version)", root, ())


def tree_modules(root: Path, containing: str) -> list[str]:
    """Modules of a plugin tree whose text contains ``containing`` (tests and hidden dirs left out)."""
    modules = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in {"__pycache__", "tests", "test"} for part in rel.parts):
            continue
        try:
            if containing not in path.read_text(encoding="utf-8", errors="replace"):
                continue
        except OSError:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts and all(p.isidentifier() for p in parts):
            modules.append(".".join(parts))
    return modules


def plugin_tree_entries(
    index: ModuleIndex, in_tree: list[RegistryEntry], heuristic: list[RegistryEntry]
) -> tuple[list[RegistryEntry], list[str]]:
    """A plugin source tree's drafters: its registrations (through its entry points when it
    declares them, and every other ``register_model`` call), measured against ``in_tree`` (the
    registry of the vLLM it runs with, empty when none is known); then ``heuristic`` finds in
    files that no registration names."""
    plugin = tree_plugin(index.tree.root)
    readings = [read_plugin(index, plugin)] if plugin.entry_points else []
    anywhere = registrations_in(index, tree_modules(index.tree.root, "register_model"), plugin)
    reached = {(r.file, r.line) for reading in readings for r in reading.registrations}
    anywhere.registrations = [r for r in anywhere.registrations if (r.file, r.line) not in reached]
    readings.append(anywhere)
    entries = [e for e in effective_registry(in_tree, readings) if e.source != "vllm"]
    registered = {e.module for e in entries} | {r.module for reading in readings for r in reading.registrations}
    entries += [e for e in heuristic if e.module not in registered]
    return entries, [s for reading in readings for s in reading.skipped]
