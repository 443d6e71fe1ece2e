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
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..cache import DIRECTORY
from ..index.ast_tools import FUNCTIONS, absolute_module, dotted, walk, walk_statements
from ..index.fact_types import Target
from ..index.interpreter import platform_or_flag
from ..index.modules import ModuleIndex
from ..index.platforms import PLATFORM as CURRENT_PLATFORM
from ..index.platforms import Lookup, evaluate, literal_string
from ..locate import GENERAL, PLATFORM, discover, tree_python_files
from ..model import PLATFORMS, PluginDist, RegistryEntry
from .registry import OTHER_DICT_DRAFTER, SPECULATIVE

REGISTERED = "register_model"  # the registry name of a plugin's entries
MAX_CALL_DEPTH = 8  # helpers calling helpers: deeper chains are not followed
# Outside the speculative dict "Eagle" also names target models; an EAGLE drafter's arch starts with it.
EAGLE_ARCH = re.compile(r"^Eagle|Eagle3")
# Where vLLM's ModelRegistry can be imported from (``from vllm import ModelRegistry as registry``).
REGISTRY_HOMES = {"vllm", "vllm.model_executor.models", "vllm.model_executor.models.registry"}
# The condition of an ``except`` block: whether the ``try`` body raises is not decided.
CAUGHT = ast.Name(id="<the try body raised>")


@dataclass(frozen=True, eq=False)
class Names:
    """What the names of a condition hold when a plugin's function runs, for ``platforms.evaluate``:
    the function's own imports, then its module's bindings as the dispatch interpreter left them on
    each in-tree platform (``import current_platform as cp``, ``_IS_ROCM = current_platform.is_rocm()``).
    On a plugin's platform the interpreter does not run: an alias of current_platform is known, a flag
    is not."""

    bindings: dict[str, dict[str, list[Target]]]  # ModuleFacts.bindings: platform -> name -> targets
    local: dict[str, tuple[str, str]]  # the function's imports

    def on(self, platform: str) -> Lookup:
        module_level = self.bindings.get(platform)

        def lookup(name: str) -> bool | str | None:
            if name in self.local:
                return CURRENT_PLATFORM if self.local[name] == ("vllm.platforms", CURRENT_PLATFORM) else None
            targets = (module_level or self.bindings.get(PLATFORMS[0]) or {}).get(name)
            meaning = platform_or_flag(targets)
            return meaning if meaning == CURRENT_PLATFORM or module_level is not None else None  # a flag: in-tree only

        return lookup


NO_NAMES = Names({}, {})
Guard = tuple[ast.expr, bool, Names]  # a condition a call runs under, whether it holds there, its names


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
        for test, holds, names in self.conditions:
            value = evaluate(test, platform, lookup=names.on(platform))
            if value is None:
                truth = None
            elif value != holds:
                return False
        return truth


@dataclass
class PluginReading:
    """What one plugin registers, the device names of its platforms, what could not be read
    (``skipped``) and what else a user should know (``notes``: an entry point vLLM never calls)."""

    registrations: list[Registration]
    platforms: list[str]
    skipped: list[str]
    notes: list[str] = field(default_factory=list)
    failed: bool = False  # an entry point whose module fails to import: vLLM never calls its function


def read_plugin(index: ModuleIndex, plugin: PluginDist, loaded: set[str] | None = None) -> PluginReading:
    """Follow each entry point's function, and the plugin's own functions it calls (``loaded``: the modules imported
    before, whose top level does not run again)."""
    reader = _Reader(index, plugin, loaded)
    platforms = []
    failed = False
    for group, name, value in plugin.entry_points:
        module, _, function = value.partition(":")
        module, function = module.strip(), function.split("[")[0].strip()
        why = reader.load_failure(module, set())
        if why is not None:  # vLLM: plugin.load() raises, "Failed to load plugin", the function never runs
            reader.notes.append(
                f"plugin {plugin.label}: entry point {name} ({value}) fails to import, so vLLM never calls "
                f"it and its registrations do not apply: {why}"
            )
            failed = True
            continue
        parsed = reader.parsed(module) if module.split(".")[0] in reader.packages else None
        if parsed is not None and function and not _may_bind(parsed[0], function.split(".")[0]):  # Plugin.register
            # vLLM: plugin.load() raises AttributeError, "Failed to load plugin": an earlier same-named one stays
            reader.notes.append(
                f"plugin {plugin.label}: entry point {name} ({value}) names no function of {parsed[1]}, so loading "
                "it raises AttributeError: vLLM never calls it and its registrations do not apply"
            )
            failed = True
            continue
        reader.follow(module, function, group, 0)
        if group == PLATFORM:
            platforms.append(reader.platform_name(module, function, name))
    return PluginReading(reader.registrations, sorted(set(platforms)), reader.skipped, reader.notes, failed)


def load_plugin(
    index: ModuleIndex, plugin: PluginDist, allowed: tuple[str, ...] | None, loaded: set[str]
) -> PluginReading:
    """The registrations that importing the modules of a plugin's entry points makes (a ``register_model`` call at
    the top level of one of its modules, or in a function called there), as vLLM's ``plugin.load()`` imports them:
    they apply wherever that runs, every platform."""
    reader = _Reader(index, plugin, loaded)
    for _, name, value in plugin.entry_points:
        module = value.partition(":")[0].strip()
        if (allowed is None or name in allowed) and reader.load_failure(module, set()) is None:
            reader.load(module, GENERAL)
    return PluginReading(reader.registrations, [], reader.skipped)


def read_plugins(
    index: ModuleIndex, plugins: tuple[PluginDist, ...], allowed: tuple[str, ...] | None = None
) -> list[PluginReading]:
    """What importing each plugin's entry-point modules registers (``load_plugin``: vLLM loads every entry point
    before it calls any), then one reading per entry point vLLM calls, in the order it calls them. vLLM keeps the
    functions it
    loads in a dict by entry-point name (one per group), filled in discovery order: an entry point of
    a later distribution with the name of an earlier one's replaces it, in its place; one whose module
    fails to import is left out, and the earlier one stays. ``allowed``: the entry-point names
    ``VLLM_PLUGINS`` lets load (None: every one), as vLLM reads it; a note names those it leaves out."""
    called: dict[tuple[str, str], tuple[PluginDist, str, PluginReading]] = {}
    unloaded = []
    left_out = [
        f"{name} ({plugin.label})"
        for plugin in plugins
        for _, name, _ in plugin.entry_points
        if allowed is not None and name not in allowed
    ]
    if left_out:
        loads = (
            f"VLLM_PLUGINS={','.join(allowed)}: vLLM loads only these plugins"
            if any(allowed or ())
            else ("VLLM_PLUGINS is set and empty: vLLM loads no plugin")
        )
        note = f"{loads}; left out: {', '.join(left_out)}"
        unloaded.append(PluginReading([], [], [], [note]))
    loaded: set[str] = set()
    loads = [r for plugin in plugins if (r := load_plugin(index, plugin, allowed, loaded)).registrations or r.skipped]
    for plugin in plugins:
        for group, name, value in plugin.entry_points:
            if allowed is not None and name not in allowed:
                continue
            reading = read_plugin(index, _one_entry_point(plugin, group, name, value), loaded)
            earlier = called.get((group, name))
            if reading.failed:
                unloaded.append(reading)
                continue
            if earlier is not None:
                reading.notes.append(
                    f"plugin {earlier[0].label}: entry point {name} ({earlier[1]}) is shadowed by {plugin.label}'s "
                    f"of the same name ({value}): vLLM calls only the one found last"
                )
            called[(group, name)] = (plugin, value, reading)
    return [*loads, *(reading for _, _, reading in called.values()), *unloaded]


def plugin_warnings(readings: list[PluginReading]) -> list[str]:
    """The readings' notes, each a line of its own for a ``warning:`` on stderr (once: a plugin source
    tree is read from its entry points and again call by call)."""
    skipped = [f"plugin registration not read: {s}" for r in readings for s in r.skipped]
    return list(dict.fromkeys([*skipped, *(note for r in readings for note in r.notes)]))


@dataclass
class _Scope:
    """A function being read: its module's tree, the names it can see and the conditions it runs under."""

    tree: ast.Module
    module: str
    is_package: bool
    file: str
    local: dict[str, tuple[str, str]]
    nested: dict[str, ast.FunctionDef | ast.AsyncFunctionDef]  # functions it defines, followed when called
    names: Names


def _one_entry_point(plugin: PluginDist, group: str, name: str, value: str) -> PluginDist:
    """``plugin`` with one of its entry points, still owning the packages all of them name (one entry
    point's code may call into another's package: it is the same distribution's code)."""
    named = (v.split(":")[0].strip().split(".")[0] for _, _, v in plugin.entry_points)
    return replace(plugin, entry_points=((group, name, value),), packages=(*plugin.packages, *named))


class _Reader:
    def __init__(self, index: ModuleIndex, plugin: PluginDist, loaded: set[str] | None = None):
        self.index = index
        self.plugin = plugin
        # Its own code: the packages its entry points name, and the others it ships (top_level.txt).
        self.packages = {value.split(":")[0].strip().split(".")[0] for _, _, value in plugin.entry_points}
        self.packages |= set(plugin.packages)
        self.registrations: list[Registration] = []
        self.skipped: list[str] = []
        self.notes: list[str] = []
        self.active: set[tuple[str, str]] = set()  # the functions being followed: a cycle ends
        self.trees: dict[str, tuple[ast.Module, str, bool] | None] = {}
        self.unparsed: dict[str, str] = {}  # module -> why it cannot be parsed
        # the plugins' modules imported so far in the process vLLM runs (Python runs each once)
        self.loaded: set[str] = set() if loaded is None else loaded

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
                    self.unparsed[module] = f"{self.index.relative(path)}: cannot parse ({error})"
            self.trees[module] = result
        return self.trees[module]

    def parsed_or_skipped(self, module: str) -> tuple[ast.Module, str, bool] | None:
        """``parsed``, saying in ``skipped`` when the module does not parse."""
        parsed = self.parsed(module)
        if parsed is None and module in self.unparsed and self.unparsed[module] not in self.skipped:
            self.skipped.append(self.unparsed[module])
        return parsed

    def may_import_otherwise(self, module: str) -> bool:
        """Whether something other than a ``.py`` file may be ``module`` where the index looks: a directory
        (a namespace package) or another file of that name (a compiled extension, bytecode)."""
        *parents, last = module.split(".")
        for root in (self.index.tree.root, *self.index.tree.extra_roots):
            folder = root.joinpath(*parents)
            if self.index.kind(folder / last) == DIRECTORY:
                return True
            if any(name.startswith(f"{last}.") for name, _ in self.index.listing(folder)):
                return True
        return False

    def load_failure(self, module: str, seen: set[str]) -> str | None:
        """Why importing ``module`` raises, as far as the plugin's own modules tell: it or a parent
        package is missing or does not parse, or so is a module of the plugin it imports at top level
        (outside ``try``, ``if`` and functions). None when nothing says it fails."""
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            name = ".".join(parts[:end])
            if name in seen or name.split(".")[0] not in self.packages:
                continue
            seen.add(name)
            parsed = self.parsed(name)
            if parsed is None:
                if name in self.unparsed:
                    return self.unparsed[name]
                if self.may_import_otherwise(name):  # a namespace package, a compiled extension
                    return None
                return f"no module {name} in the plugin"
            tree, file, is_package = parsed
            for statement in tree.body:
                for imported in _imported_modules(statement, name, is_package, self.index.is_module):
                    why = self.load_failure(imported, seen)
                    if why is not None:
                        return f"{file}:{statement.lineno} imports {imported}; {why}"
        return None

    def follow(self, module: str, function: str, group: str, depth: int, conditions: tuple[Guard, ...] = ()) -> None:
        if module.split(".")[0] not in self.packages:
            self.outside(module, function)
            return
        if (module, function) in self.active:
            return
        parsed = self.parsed_or_skipped(module)
        entry_point = depth == 0  # deeper, a call may name a class or a variable: nothing to follow
        if parsed is None:
            if entry_point and module not in self.unparsed:
                self.skipped.append(f"{self.plugin.label}: entry point module {module} not found")
            return
        tree, file, is_package = parsed
        self.active.add((module, function))
        definition = _top_level_function(tree, function)
        if definition is None:
            target = _module_binding(tree, module, is_package, function)
            if target is not None and target[1]:
                self.follow(target[0], target[1], group, depth, conditions)  # re-exported from another module
            elif entry_point:
                self.skipped.append(f"{file}: no function {function}, which entry point {module}:{function} names")
        else:
            facts = self.index.facts(module)
            local = _local_bindings(definition, module, is_package)
            names = Names(facts.bindings if facts else {}, local)
            scope = _Scope(tree, module, is_package, file, local, _nested_functions(definition.body), names)
            self.run(definition.name, definition.body, scope, group, depth, conditions)
        self.active.discard((module, function))

    def load(self, module: str, group: str, conditions: tuple[Guard, ...] = ()) -> None:
        """What importing ``module`` runs of the plugin's own code (``plugin.load()`` imports the entry point's
        module before vLLM calls any function): each package on its path, then the module, each once, its top
        level in order (``run``): the plugin's modules it imports, ``register_model`` calls and the plugin's
        functions they call, under the conditions of the import and of the statements around them."""
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            name = ".".join(parts[:end])
            if name in self.loaded or name.split(".")[0] not in self.packages:
                continue
            self.loaded.add(name)
            parsed = self.parsed(name)
            if parsed is None:
                continue
            tree, file, is_package = parsed
            facts = self.index.facts(name)
            names = Names(facts.bindings if facts else {}, {})
            scope = _Scope(tree, name, is_package, file, {}, _nested_functions(tree.body), names)
            self.run("<module>", tree.body, scope, group, 1, conditions)

    def outside(self, module: str, function: str) -> None:
        """A call into a package that is not the plugin's is not followed; say so when that module
        registers models (another package of the distribution that no top_level.txt names)."""
        found = self.index.locate(module) if module.split(".")[0] != "vllm" else None
        if found is not None and b"register_model" in self.index.read_bytes(found[0]):
            note = (
                f"{self.index.relative(found[0])}: {module}.{function}() is called, but {module.split('.')[0]} "
                f"is not a package of {self.plugin.label} (its entry points' or its top_level.txt's): not followed"
            )
            if note not in self.skipped:
                self.skipped.append(note)

    def run(
        self,
        name: str,
        body: list[ast.stmt],
        scope: _Scope,
        group: str,
        depth: int,
        conditions: tuple[Guard, ...],
    ) -> None:
        """The calls of a function's body (``name``'s; a module's top level, ``<module>``), in the order they run:
        registrations, and the plugin's functions it calls (its own nested ones included), followed under the
        conditions of the call."""
        guards = _guards(body)
        for call in _steps_in_order(body):
            where = conditions + tuple((test, holds, scope.names) for test, holds in guards.get(id(call), ()))
            if isinstance(call, (ast.Import, ast.ImportFrom)):  # what it runs of the plugin's modules runs here
                for imported in _imported_modules(call, scope.module, scope.is_package, self.index.is_module):
                    self.load(imported, group, where)
                continue
            if (imported := _imported_by_name(call)) is not None:
                self.load(imported, group, where)
                continue
            kind = self.registry_call(call, scope)
            if kind is True:
                self.register(call, scope.tree, scope.module, scope.is_package, scope.local, group, scope.file, where)
            elif kind is None:
                self.skipped.append(f"{scope.file}:{call.lineno}: {_unfollowed(call)}")
            elif depth >= MAX_CALL_DEPTH:
                continue
            elif isinstance(call.func, ast.Name) and call.func.id in scope.nested:
                nested = scope.nested[call.func.id]
                key = (scope.module, f"{name}.{nested.name}:{nested.lineno}")
                if key not in self.active:
                    self.active.add(key)
                    inner = _Scope(
                        scope.tree,
                        scope.module,
                        scope.is_package,
                        scope.file,
                        {**scope.local, **_local_bindings(nested, scope.module, scope.is_package)},
                        {**scope.nested, **_nested_functions(nested.body)},
                        scope.names,
                    )
                    self.run(nested.name, nested.body, inner, group, depth + 1, where)
                    self.active.discard(key)
            else:
                callee = self.callee(call.func, scope.tree, scope.module, scope.is_package, scope.local)
                if callee is not None:
                    self.follow(*callee, group, depth + 1, where)

    def registry_call(self, call: ast.Call, scope: _Scope) -> bool | None:
        """True for ``ModelRegistry.register_model(...)`` (vLLM's registry under any name it is imported
        as); None for another ``X.register_model(...)``, which the reader cannot follow; else False."""
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "register_model"):
            return False
        receiver = func.value
        if isinstance(receiver, ast.Attribute) and receiver.attr == "ModelRegistry":
            return True
        if isinstance(receiver, ast.Name):
            bound = scope.local.get(receiver.id) or _module_binding(
                scope.tree, scope.module, scope.is_package, receiver.id
            )
            if receiver.id == "ModelRegistry" or (bound and bound[1] == "ModelRegistry" and bound[0] in REGISTRY_HOMES):
                return True
        return None

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
        self.registrations.append(
            Registration(arch, target[0], target[1], self.plugin, group, file, call.lineno, conditions)
        )

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
        for node in walk(definition) if definition else ():
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


Condition = tuple[ast.expr, bool]  # a test, and whether it holds where a call runs
Guards = dict[int, tuple[Condition, ...]]  # id(call) -> the conditions it runs under


def _guards(statements: list[ast.stmt], around: tuple[Condition, ...] = (), found: Guards | None = None) -> Guards:
    """id(call) -> the conditions it runs under in a block: the ``if`` tests around it, those of
    earlier ``if``s of the block whose branch leaves it (``if not current_platform.is_rocm(): return``),
    and ``CAUGHT`` in an ``except`` block (it runs only when the ``try`` body raises)."""
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
                for holder in (s for s in inner if isinstance(s, ast.ExceptHandler)):
                    _guards(holder.body, (*around, (CAUGHT, True)), found)
                for holder in (s for s in inner if isinstance(s, ast.match_case)):
                    _guards(holder.body, around, found)
    return found


def _mark(node: ast.AST, around: tuple[Condition, ...], found: Guards) -> None:
    """Every call (and import) inside ``node`` runs under ``around`` (until a block inside says more)."""
    for call in (n for n in walk(node) if isinstance(n, (ast.Call, ast.Import, ast.ImportFrom))):
        found[id(call)] = around


def _leaves(block: list[ast.stmt]) -> bool:
    """A block that ends by leaving the block around it: what follows runs only when it was not taken."""
    return bool(block) and isinstance(block[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _imported_by_name(call: ast.Call) -> str | None:
    """M of ``importlib.import_module("M")`` (or ``import_module("M")``), M a literal absolute name."""
    name = dotted(call.func)
    if name not in ("importlib.import_module", "import_module") or len(call.args) != 1:
        return None
    module = literal_string(call.args[0])
    return module if module and not module.startswith(".") else None


def _steps_in_order(statements: list[ast.stmt]) -> list[ast.Call | ast.Import | ast.ImportFrom]:
    """``_calls_in_order``, with the ``import`` statements among them: what an import runs runs where it stands."""
    imports = [s for s in walk_statements(statements) if isinstance(s, (ast.Import, ast.ImportFrom))]
    return sorted([*_calls_in_order(statements), *imports], key=lambda node: (node.lineno, node.col_offset))


def _calls_in_order(statements: list[ast.stmt]) -> list[ast.Call]:
    """The calls a block makes, in source order (as they run, one statement after another), leaving
    out the bodies of the functions and lambdas it defines: those run only when called (a ``def``
    runs its decorators and defaults)."""
    calls = []
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop()
        if isinstance(node, FUNCTIONS):
            pending += [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]
            continue
        if isinstance(node, ast.Call):
            calls.append(node)
        pending += [child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.Lambda)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _nested_functions(statements: list[ast.stmt]) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions a block defines (in its ``if``/``try``/... blocks too, not inside other functions)."""
    found = {}
    pending: list[ast.AST] = list(statements)
    while pending:
        node = pending.pop(0)
        if isinstance(node, FUNCTIONS):
            found[node.name] = node
        elif not isinstance(node, (ast.expr, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _imported_modules(statement: ast.stmt, module: str, is_package: bool, is_module) -> list[str]:
    """The modules a top-level import statement imports (``from p import m``: p, and p.m when it is a
    module), in order; [] for another statement."""
    if isinstance(statement, ast.Import):
        return [alias.name for alias in statement.names]
    if not isinstance(statement, ast.ImportFrom):
        return []
    source = absolute_module(module, is_package, statement.level, statement.module)
    return [source] + [f"{source}.{a.name}" for a in statement.names if is_module(f"{source}.{a.name}")]


def _may_bind(tree: ast.Module, name: str) -> bool:
    """Whether running the module's top level may bind ``name`` (False only where nothing could: no
    def, class, assignment, import or loop binds it, and no star import, ``globals()``, ``exec`` or
    module ``__getattr__`` may, and no function declares it ``global``)."""
    if any(isinstance(node, ast.Global) and name in node.names for node in ast.walk(tree)):
        return True
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in (name, "__getattr__"):
                return True
            pending.extend([*node.decorator_list, *getattr(node, "bases", [])])
            continue
        if isinstance(node, ast.alias) and (node.name == "*" or (node.asname or node.name.split(".")[0]) == name):
            return True
        if isinstance(node, ast.Name) and (
            (node.id == name and isinstance(node.ctx, ast.Store)) or node.id in ("globals", "exec", "vars")
        ):
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


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
    return _imports((n for n in walk(function) if isinstance(n, (ast.Import, ast.ImportFrom))), module, is_package)


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


def _unfollowed(call: ast.Call) -> str:
    """A ``register_model`` call on something that is not followed to vLLM's ModelRegistry."""
    return f"{dotted(call.func) or '(...).register_model'}(...) is not followed to vLLM's ModelRegistry"


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
        parsed = reader.parsed_or_skipped(module)
        if parsed is None:
            continue
        tree, file, is_package = parsed
        guards = _guards(tree.body)
        facts = index.facts(module)
        for call, function in sorted(_calls_with_function(tree), key=lambda p: (p[0].lineno, p[0].col_offset)):
            local = _local_bindings(function, module, is_package) if function is not None else {}
            names = Names(facts.bindings if facts else {}, local)
            scope = _Scope(tree, module, is_package, file, local, {}, names)
            kind = reader.registry_call(call, scope)
            if kind is True:
                where = tuple((test, holds, names) for test, holds in guards.get(id(call), ()))
                reader.register(call, tree, module, is_package, local, GENERAL, file, where)
            elif kind is None:
                reader.skipped.append(f"{file}:{call.lineno}: {_unfollowed(call)}")
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
    """In-tree entries, then the plugins' drafter registrations, made one after another as vLLM makes
    them: platform plugins' first (vLLM resolves its platform before it loads the general plugins),
    each phase in reading order, each reading's calls in the order they run. ``register_model`` of an
    architecture replaces what it was (a later call wins), per platform.

    In-tree entries apply on every platform, plugin platforms included. A general plugin's
    registration applies wherever it loads: every in-tree platform and every plugin platform. A
    platform plugin's applies on its own platform only (its device name). Either is narrowed by the
    platform conditions around the call: where one cannot be decided, both the registration and what
    it would replace are kept."""
    labels = sorted({p for r in readings for p in r.platforms} - set(PLATFORMS))
    everywhere = (*PLATFORMS, *labels)
    drafter_archs = {e.arch for e in in_tree if e.arch and e.registry == SPECULATIVE}
    calls = [
        (registration, everywhere if phase == GENERAL else tuple(reading.platforms))
        for phase in (PLATFORM, GENERAL)
        for reading in readings
        for registration in reading.registrations
        if registration.group == phase
    ]
    drafters = {r.arch for r, _ in calls if is_drafter(r.arch, r.cls, drafter_archs)}
    calls = [(r, scope) for r, scope in calls if r.arch in drafters]
    possible: dict[tuple[str, str], list[RegistryEntry]] = {}  # in effect there
    for e in in_tree:
        if e.arch in drafters:
            for p in everywhere:
                possible.setdefault((e.arch, p), []).append(e)
    replaces: dict[RegistryEntry, tuple[str, str] | None] = {}
    made: dict[tuple[str, str, str, str], RegistryEntry] = {}  # one entry per (arch, class, plugin)
    for registration, scope in calls:
        arch = registration.arch
        entry = made.setdefault(
            (arch, registration.module, registration.cls, registration.plugin.label),
            RegistryEntry(arch, registration.module, registration.cls, REGISTERED, registration.plugin.label),
        )
        prior = []  # what it may replace, where it may run
        for platform in scope:
            applies = registration.applies_on(platform)
            before = possible.setdefault((arch, platform), [])
            if applies is not False:
                prior += [e for e in before if e != entry and e not in prior]
            if applies is True:
                possible[(arch, platform)] = [entry]
            elif applies is None and entry not in before:
                before.append(entry)
        replaces[entry] = replaces.get(entry) or _replaced(arch, in_tree, prior)
    entries = []
    for entry in in_tree:
        where = tuple(p for p in everywhere if entry.arch not in drafters or entry in possible[(entry.arch, p)])
        entries += [entry] if where == PLATFORMS else [replace(entry, scope=where)] if where else []
    for entry in made.values():
        where = tuple(p for p in everywhere if entry in possible.get((entry.arch, p), []))
        if where:
            entries.append(replace(entry, replaces=replaces[entry], scope=where))
    return entries


def _replaced(arch: str, in_tree: list[RegistryEntry], before: list[RegistryEntry]) -> tuple[str, str] | None:
    """What a registration replaces: vLLM's own entry of the architecture, else the plugin
    registration in effect before it."""
    original = next((e for e in in_tree if e.arch == arch), before[0] if before else None)
    return (original.module, original.cls) if original else None


def _top_packages(dist: PluginDist) -> set[str]:
    """The top-level packages a distribution holds: its ``top_level.txt``, and those its entry points
    name (a wheel without that file still names its own package there)."""
    return {*dist.packages, *(value.partition(":")[0].split(".")[0] for _, _, value in dist.entry_points)}


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
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # the same parser, before it joined the standard library
            import tomli as tomllib

        try:
            project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            project = {}
        if isinstance(project.get("name"), str):
            return PluginDist(project["name"], str(project.get("version", "(dynamic version)")), root, ())
    return PluginDist(root.name, "(no version)", root, ())


def tree_modules(index: ModuleIndex, containing: str) -> list[str]:
    """Modules of a plugin tree whose text contains ``containing`` (tests and hidden dirs left out)."""
    root = index.tree.root
    modules = []
    for path in tree_python_files(root):
        rel = path.relative_to(root)
        try:  # the index's reader: not a FIFO (it would hang), not a symlink out of the tree
            if containing.encode() not in index.read_source(path):
                continue
        except OSError:  # named where the index reads it as a module, if ever
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
    dists = discover([index.tree.root])  # a ``pip install --target`` folder may hold several
    plugin = dists[0] if dists else tree_plugin(index.tree.root)
    readings = [read_plugin(index, dist) for dist in dists or [plugin] if dist.entry_points]
    reached = {(r.file, r.line) for reading in readings for r in reading.registrations}
    by_owner: dict[PluginDist, list[str]] = {}
    for module in tree_modules(index, "register_model"):  # each credited to the distribution it is in
        owner = next((d for d in dists if module.split(".", 1)[0] in _top_packages(d)), plugin)
        by_owner.setdefault(owner, []).append(module)
    for owner, modules in by_owner.items():
        anywhere = registrations_in(index, modules, owner)
        anywhere.registrations = [r for r in anywhere.registrations if (r.file, r.line) not in reached]
        readings.append(anywhere)
    entries = [e for e in effective_registry(in_tree, readings) if e.source != "vllm"]
    registered = {e.module for e in entries} | {r.module for reading in readings for r in reading.registrations}
    entries += [e for e in heuristic if e.module not in registered]
    return entries, plugin_warnings(readings)
