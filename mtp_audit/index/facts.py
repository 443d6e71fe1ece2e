"""Stage 2: per-module facts; plain, cacheable data.

For every platform the module-level statements are interpreted as Python
would run them (imports, aliases, ``if`` on the platform, ``raise``), plus the
module ``__getattr__`` for lazily dispatched names. Classes keep only what
resolution and classification need: bases, the two methods, ``__init__``
attributes.

Structure is read with CPython's ``ast`` (a C parser, twenty times faster
than libcst's): nothing here needs concrete syntax. The two watched methods
keep their text as written; libcst parses that text, and only that, when
classification asks for ``MethodFacts.code``.

This module parses and puts the facts together; the parts live beside it: the data in
``fact_types``, class extraction in ``classes``, the per-platform interpreter in
``interpreter``, ``__getattr__`` evaluation in ``module_getattr``, AST helpers in ``ast_tools``.
"""

from __future__ import annotations

import ast
import functools

from ..model import PLATFORMS
from .ast_tools import FUNCTIONS, dotted, walk, walk_statements
from .classes import _assigned_after, _collect_classes
from .fact_types import ModuleFacts, Target
from .interpreter import _NO_ALL, Collection, _Interpreter
from .module_getattr import _evaluate_getattr, _lazy_candidates
from .platforms import PLATFORM_PREDICATES, string_values
from .prefilter import Reduced, physical_lines, reduce_source, whole


class _Source:
    """The text that was parsed, its real line numbers, and segments of it."""

    def __init__(self, reduced: Reduced):
        self.reduced = reduced

    @functools.cached_property
    def lines(self) -> list[str]:
        """Split only for modules whose classes have a watched method or a base to read."""
        return physical_lines(self.reduced.source)

    def line(self, node: ast.stmt | ast.expr) -> int:
        return self.reduced.lines[node.lineno - 1]

    def segment(self, node: ast.expr) -> str:
        """The text of ``node`` (``ast.get_source_segment`` splits the whole source on every call)."""
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        rows = [line.encode() for line in self.lines[first : last + 1]]  # ast columns count UTF-8 bytes
        rows[-1] = rows[-1][: node.end_col_offset]
        rows[0] = rows[0][node.col_offset :]
        return b"".join(rows).decode()

    def first_row(self, node: ast.stmt) -> str:
        """The parsed text's row where ``node`` starts."""
        return self.lines[node.lineno - 1]

    def method_text(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
        """From the first decorator through the comment lines that follow the body:
        libcst decides by indentation which of those belong to the method."""
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
        end = node.end_lineno or node.lineno
        while end < len(self.lines) and (not self.lines[end].strip() or self.lines[end].lstrip().startswith("#")):
            end += 1
        return "".join(self.lines[first:end])


def _parse(source: str, path: str, check_whole: bool = True) -> tuple[ast.Module, _Source]:
    """Parse the pre-filtered source; if the cut misread the file, all of it.

    What the cut drops (other methods, module-level functions) must compile too: a
    syntax error anywhere is the file's error, as it is for Python importing it.
    ``compile`` checks that without building the Python AST objects of the whole file;
    ``check_whole=False`` leaves that check to the caller (``check_syntax``), which must
    make it before the facts are used for anything that lasts.
    """
    reduced = reduce_source(source)
    try:
        tree = ast.parse(reduced.source)
    except SyntaxError:
        return ast.parse(source), _Source(whole(source))
    if check_whole and reduced.source != source:
        compile(source, path, "exec", dont_inherit=True)
    return tree, _Source(reduced)


def check_syntax(source: str, path: str) -> str | None:
    """The ``parse_error`` the whole file's facts would carry; None when it compiles."""
    try:
        compile(source, path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return _parse_error(error)
    return None


def _parse_error(error: Exception) -> str:
    if isinstance(error, (RecursionError, MemoryError)):  # nesting beyond what CPython's parser takes
        return f"too deeply nested for CPython to compile ({type(error).__name__})"
    line = getattr(error, "lineno", None)  # ValueError: a null byte in the source
    return f"line {line}: {error.msg}" if line else str(error)


def extract_facts(source: str, module: str, path: str, is_package: bool, check_whole: bool = True) -> ModuleFacts:
    facts = ModuleFacts(module=module, path=path, is_package=is_package)
    try:
        tree, text = _parse(source, path, check_whole)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        facts.parse_error = _parse_error(error)
        return facts
    facts.classes = _collect_classes(tree, text)
    facts.factories = _factories(tree)
    _assigned_after(tree, facts.classes, text)
    getattr_def = next((s for s in tree.body if isinstance(s, FUNCTIONS) and s.name == "__getattr__"), None)
    per_platform = _reads_platform(tree, getattr_def)
    facts.getattr_line = text.line(getattr_def) if getattr_def is not None else None
    collections = _literal_collections(tree) if getattr_def is not None else {}
    for platform in PLATFORMS if per_platform else PLATFORMS[:1]:
        interpreter = _Interpreter(facts, platform, text)
        interpreter.run(tree.body)
        if interpreter.maybe_bound:
            facts.bound_otherwise[platform] = sorted(interpreter.maybe_bound)
        if interpreter.error:
            facts.import_errors[platform] = interpreter.error
            facts.bindings[platform] = {}
            continue
        bindings = interpreter.state
        if interpreter.exports != _NO_ALL:
            facts.exports[platform] = interpreter.exports  # type: ignore[assignment]
        _keep_bases_then(facts, platform, interpreter.bases_then, bindings)
        if getattr_def is not None:
            interpreter.collections = collections
            bindings, facts.served[platform] = _with_lazy(bindings, getattr_def, interpreter)
            _note_unlisted(facts, platform, getattr_def, interpreter)
        facts.bindings[platform] = _share_with_earlier(bindings, facts.bindings)
        unbound = {name: why for name, why in interpreter.unbound.items() if name not in bindings}
        if unbound:
            facts.unbound[platform] = unbound
    if not per_platform:
        first = PLATFORMS[0]
        for platform in PLATFORMS[1:]:
            facts.bindings[platform] = facts.bindings[first]
            if first in facts.import_errors:
                facts.import_errors[platform] = facts.import_errors[first]
            if first in facts.exports:
                facts.exports[platform] = facts.exports[first]
            if first in facts.served:
                facts.served[platform] = facts.served[first]
            if first in facts.unbound:
                facts.unbound[platform] = facts.unbound[first]
            if first in facts.bound_otherwise:
                facts.bound_otherwise[platform] = facts.bound_otherwise[first]
            for cls in facts.classes:
                if first in cls.bound_then:
                    cls.bound_then[platform] = cls.bound_then[first]
    return facts


def _factories(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level functions whose body is one ``return Cls(...)`` (either arm of a conditional expression
    too), undecorated: the callees, what a call of the factory gives (``ModuleFacts.factories``)."""
    found: dict[str, list[str]] = {}
    for statement in walk_statements(tree.body):
        if not isinstance(statement, FUNCTIONS):
            continue
        match statement:
            case ast.FunctionDef(body=[ast.Return(value=ast.expr() as value)], decorator_list=[]):
                callees = _callees(value)
            case _:
                callees = None
        if callees:
            found[statement.name] = callees
        else:
            found.pop(statement.name, None)
    return found


def _callees(value: ast.expr) -> list[str] | None:
    """The dotted callees ``value`` calls, a conditional expression's arms each; None where one is no such call."""
    match value:
        case ast.IfExp(body=chosen, orelse=other):
            first, second = _callees(chosen), _callees(other)
            return None if first is None or second is None else first + [c for c in second if c not in first]
        case ast.Call(func=func) if (callee := dotted(func)) is not None:
            return [callee]
    return None


def _with_lazy(
    bindings: dict[str, list[Target]], getattr_def: ast.stmt, interpreter: _Interpreter
) -> tuple[dict[str, list[Target]], list[str]]:
    """``(bindings, served)``: ``bindings`` with the names that ``__getattr__`` gives put first (Python asks
    it only for a name the module lacks, never bound or deleted, so any star import rebinds them, as if it
    ran after), and those names."""
    lazy = {
        name: _evaluate_getattr(getattr_def, name, interpreter)
        for name in _lazy_candidates(getattr_def, interpreter.all_names, interpreter.collections)
        if name not in bindings or _deleted(bindings[name])
    }
    if not lazy:
        return bindings, []
    return {**lazy, **{name: targets for name, targets in bindings.items() if name not in lazy}}, list(lazy)


def _deleted(targets: list[Target]) -> bool:
    """Unbound by ``del`` (the only binding that is unavailable under every ``try`` outcome)."""
    return all(t.kind == "unavailable" and not t.when for t in targets)


def _note_unlisted(facts: ModuleFacts, platform: str, getattr_def: ast.stmt, interpreter: _Interpreter) -> None:
    """Where ``__getattr__`` may serve a name the tool did not list (its test cannot be decided, or it serves
    any name), say why: a name not bound is then not known to be undefined."""
    served = _evaluate_getattr(getattr_def, "", interpreter)  # "": never a name it lists
    if any(t.kind != "unavailable" for t in served):
        undecided = next((t for t in served if t.kind == "unknown" and t.b), None)
        why = f"line {undecided.b}: {undecided.a}" if undecided else f"line {interpreter.text.line(getattr_def)}"
        facts.unlisted[platform] = f"its __getattr__ may serve it ({why})"


def _literal_collections(tree: ast.Module) -> dict[str, Collection]:
    """Module-level names bound once, to a literal set, list or tuple of strings or a dict of strings to
    literals, and never changed: what ``__getattr__`` looks a name up in (``if name in _LAZY:``,
    ``_LAZY.get(name)``). A name assigned again anywhere (``|=`` included), given an item
    (``_LAZY[k] = v``) or a method call other than a read (``_LAZY.add(...)``) holds other values."""
    found: dict[str, Collection] = {}
    for statement in tree.body:
        if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None:
            continue
        held = _literal_collection(statement.value)
        for target in statement.targets if isinstance(statement, ast.Assign) else [statement.target]:
            if isinstance(target, ast.Name) and held is not None:
                found[target.id] = held
    if not found:
        return found
    stores: dict[str, int] = {}
    for node in walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and node.id in found:
            stores[node.id] = stores.get(node.id, 0) + 1
        elif (changed := _changed_in_place(node)) in found:
            stores[changed] = 2  # it may change
    return {name: held for name, held in found.items() if stores.get(name, 0) == 1}


def _literal_collection(value: ast.expr) -> Collection | None:
    """The strings of a literal set, list or tuple of strings, or a dict literal of string keys whose
    values are literals (``ast.literal_eval``); None for anything else."""
    if isinstance(value, (ast.Set, ast.List, ast.Tuple)):
        return string_values(value)
    if not isinstance(value, ast.Dict) or any(k is None for k in value.keys):
        return None
    keys = string_values(ast.List(value.keys))  # type: ignore[arg-type]
    try:
        elements = [ast.literal_eval(element) for element in value.values]
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return dict(zip(keys, elements)) if keys is not None else None


_READS = frozenset({"get", "keys", "values", "items", "copy", "count", "index"})  # methods that change nothing


def _changed_in_place(node: ast.AST) -> str | None:
    """The name whose value ``node`` may change in place: ``C.add(...)``, ``C.attr = v``, ``C[k] = v``."""
    match node:
        case ast.Attribute(value=ast.Name(id=name), attr=attr) if attr not in _READS or not isinstance(
            node.ctx, ast.Load
        ):
            return name
        case ast.Subscript(value=ast.Name(id=name), ctx=ast.Store() | ast.Del()):
            return name
    return None


def _keep_bases_then(
    facts: ModuleFacts, platform: str, bases_then: dict[int, dict[str, list[Target]]], final: dict[str, list[Target]]
) -> None:
    """Record on each class the base bindings of its statement's time that the final bindings do not
    tell (almost never: the facts stay as small as before)."""
    stars = any(key.startswith("*") for key in final)
    for line, then in bases_then.items():
        changed = {name: t for name, t in then.items() if final.get(name) != t or (stars and _star_after(final, name))}
        cls = facts.class_at(line) if changed else None
        if cls is not None:
            cls.bound_then[platform] = changed


def _star_after(final: dict[str, list[Target]], name: str) -> bool:
    """Whether a star import ran after ``name`` was bound: it may rebind the name, but not what a class
    statement before it already evaluated."""
    for key in reversed(final):
        if key == name:
            return False
        if key.startswith("*"):
            return True
    return False


def _reads_platform(tree: ast.Module, getattr_def: ast.stmt | None) -> bool:
    """Only an ``if``, a ``match``, ``__getattr__``, or a name bound to (or an ``assert`` of) a conditional
    expression or a platform predicate (``_IS_ROCM = current_platform.is_rocm()``) reads the platform;
    without one, every platform binds alike."""
    if getattr_def is not None:
        return True
    for statement in walk_statements(tree.body):
        if isinstance(statement, (ast.If, ast.Match)):
            return True
        value = statement.value if isinstance(statement, (ast.Assign, ast.AnnAssign)) else None
        if isinstance(statement, ast.Assert):
            value = statement.test
        if value is not None and any(_platform_dependent(node) for node in walk(value)):
            return True
    return False


def _platform_dependent(node: ast.AST) -> bool:
    return isinstance(node, ast.IfExp) or (
        isinstance(node, ast.Attribute) and (node.attr in PLATFORM_PREDICATES or node.attr == "device_type")
    )


def _share_with_earlier(
    bindings: dict[str, list[Target]], earlier: dict[str, dict[str, list[Target]]]
) -> dict[str, list[Target]]:
    """``bindings``, reusing an earlier platform's equal dict or lists: the same objects are
    pickled once, which makes facts five times smaller to cache and to hand between processes."""
    items = list(bindings.items())
    for other in earlier.values():
        if list(other.items()) == items:  # in order: star imports are tried in binding order
            return other
    if earlier:
        other = next(iter(earlier.values()))
        for name, targets in bindings.items():
            if other.get(name) == targets:
                bindings[name] = other[name]
    return bindings
