"""A module's classes as facts: bases, the watched methods as written, class-level
annotations, and what ``__init__`` sets."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..model import PLATFORMS
from .ast_tools import FUNCTIONS, _is_docstring, _strings, dotted, names_bound, statement_blocks, walk_statements
from .fact_types import Assigned, ClassFacts, MethodFacts
from .platforms import evaluate, literal_string
from .prefilter import WATCHED_METHODS

if TYPE_CHECKING:
    from .facts import _Source


def _collect_classes(tree: ast.Module, text: _Source) -> list[ClassFacts]:
    """Module-level classes, including those defined inside module-level ``if``/``try``."""
    classes = []
    for node in walk_statements(tree.body):
        if not isinstance(node, ast.ClassDef):
            continue
        cls = ClassFacts(
            name=node.name,
            line=text.line(node),
            bases=[text.segment(b.value if isinstance(b, ast.Starred) else b) for b in node.bases],
        )
        _collect_members(cls, node.body, text, None, methods=_own_methods(node))
        cls.default_rebinds = _default_rebinds(node, text)
        if _differs_by_platform(node.body):
            for platform in PLATFORMS:
                on = ClassFacts(cls.name, cls.line, cls.bases)
                _collect_members(on, node.body, text, None, platform)
                cls.methods_by_platform[platform] = on.methods
        classes.append(cls)
    return classes


def _own_methods(node: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The functions the class body itself defines, the last ``def`` of a name winning: what ``self.m(...)`` in
    ``__init__`` runs where no subclass overrides ``m``."""
    return {statement.name: statement for statement in node.body if isinstance(statement, FUNCTIONS)}


def _collect_members(
    cls: ClassFacts,
    body: list[ast.stmt],
    text: _Source,
    under: str | None,
    platform: str | None = None,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> None:
    """The class body's statements in order, later bindings replacing earlier ones, as Python
    runs them; ``under``: the ``if``/``try`` a nested definition depends on; ``platform``: the one
    whose ``current_platform`` conditions are decided (None: only those alike on every platform);
    ``methods``: the body's own functions, which ``__init__`` may run on self (None: ``__init__`` not read)."""
    for statement in body:
        if isinstance(statement, FUNCTIONS):
            cls.defined_methods[statement.name] = text.line(statement)  # under a condition too: it may be defined
            if statement.name in WATCHED_METHODS:
                method = MethodFacts(statement.name, text.line(statement), text.method_text(statement))
                if isinstance(statement, ast.AsyncFunctionDef):
                    method.how, method.where = "async", f"async def (line {method.line})"
                elif under is not None:
                    method.how, method.where = "conditional", f"defined only {under}"
                cls.methods[statement.name] = method
            elif statement.name == "__init__" and under is None and methods is not None:
                cls.init_attrs = _init_attributes(statement, methods, text)
                cls.init_raises = _only_raises(statement)
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and statement.targets[0].id in WATCHED_METHODS
        ):
            name = statement.targets[0].id  # rebound in the class body: a wrapper the mirror rule cannot see into
            value = text.segment(statement.value)
            line = text.line(statement)
            cls.methods[name] = MethodFacts(
                name, line, (f"@rebound_in_class_body({value})\ndef {name}(self, *args, **kwargs):\n    ...\n")
            )
            if isinstance(statement.value, ast.Constant) and statement.value.value is None:
                cls.methods[name].how, cls.methods[name].where = "none", f"{name} = None (line {line})"
            elif name == "get_top_tokens" and value == "compute_logits" and "compute_logits" in cls.methods:
                cls.methods[name].how, cls.methods[name].where = "logits", f"{name} = compute_logits (line {line})"
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    cls.class_attrs[target.id] = (dotted(statement.value) or "") if under is None else ""
        elif isinstance(statement, ast.Delete):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id in WATCHED_METHODS:
                    line = text.line(statement)
                    cls.methods[target.id] = MethodFacts(
                        target.id, line, "", "deleted", f"del {target.id} (line {line})"
                    )
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            cls.annotations[statement.target.id] = text.segment(statement.annotation)
        elif isinstance(statement, ast.If) and (truth := _decided(statement.test, platform)) is not None:
            _collect_members(cls, statement.body if truth else statement.orelse, text, under, platform, methods)
        elif isinstance(statement, (ast.If, ast.Try)):
            test = f"if {text.segment(statement.test)}" if isinstance(statement, ast.If) else "in a try"
            condition = f"under `{test}:` in the class body (line {text.line(statement)})"
            for block in statement_blocks(statement):
                _collect_members(cls, block, text, under or condition, platform)


def _default_rebinds(node: ast.ClassDef, text: _Source) -> dict[str, list[int]]:
    """Where the class body binds a name that a watched method's parameter defaults read (``ClassFacts``)."""
    watched = [f for f in walk_statements(node.body) if isinstance(f, FUNCTIONS) and f.name in WATCHED_METHODS]
    defaults = [d for f in watched for d in [*f.args.defaults, *f.args.kw_defaults] if d is not None]
    read = {n.id for d in defaults for n in ast.walk(d) if isinstance(n, ast.Name)}
    found: dict[str, list[int]] = {}
    for statement in walk_statements(node.body) if read else ():
        for name in set(names_bound(statement)) & read:
            found.setdefault(name, []).append(text.line(statement))
    return found


OUT_OF_TREE = "out-of-tree"  # any platform plugin's device: only ``is_out_of_tree()`` is true there


def _decided(test: ast.expr, platform: str | None) -> bool | None:
    """A class-body condition's truth on ``platform``, or (None) where it is alike on every platform."""
    return _same_everywhere(test) if platform is None else evaluate(test, platform)


def _differs_by_platform(body: list[ast.stmt]) -> bool:
    """Whether a class body holds an ``if`` that platforms decide differently (``if
    current_platform.is_rocm():``): its methods are then read once per platform too."""
    return any(
        isinstance(statement, ast.If) and len({evaluate(statement.test, platform) for platform in PLATFORMS}) > 1
        for statement in walk_statements(body)
    )


def _same_everywhere(test: ast.expr) -> bool | None:
    """A class-body condition decided alike on every platform, a plugin's included (``TYPE_CHECKING``:
    False at run time); None when it is not known, or differs by platform (class facts are not per
    platform: ``is_out_of_tree()`` is false on the five in-tree ones only)."""
    truths = {evaluate(test, platform) for platform in (*PLATFORMS, OUT_OF_TREE)}
    return truths.pop() if len(truths) == 1 else None


def _assigned_after(tree: ast.Module, classes: list[ClassFacts], text: _Source) -> None:
    """``setattr(Cls, "get_top_tokens", f)`` or ``Cls.get_top_tokens = f`` at module level, after
    the class: the class has the method from then on, whatever its body says."""
    by_name = {cls.name: cls for cls in classes}
    for statement in walk_statements(tree.body):
        target = value = None
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (
                isinstance(call.func, ast.Name)
                and call.func.id == "setattr"
                and len(call.args) == 3
                and isinstance(call.args[0], ast.Name)
                and isinstance(call.args[1], ast.Constant)
            ):
                target, value = (call.args[0].id, call.args[1].value), call.args[2]
        elif (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Attribute)
            and isinstance(statement.targets[0].value, ast.Name)
        ):
            attribute = statement.targets[0]
            target, value = (attribute.value.id, attribute.attr), statement.value
        if target is None or target[1] not in WATCHED_METHODS or target[0] not in by_name:
            continue
        cls, name, line = by_name[target[0]], target[1], text.line(statement)
        if line < cls.line:
            continue
        code = text.segment(value)
        cls.methods[name] = MethodFacts(
            name,
            line,
            f"@assigned_after_class({code})\ndef {name}(self, *args, **kwargs):\n    ...\n",
            "outside",
            f"set after the class to {code} (line {line})",
        )


def _only_raises(init: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """``__init__ raises X: message`` when the body is a single raise (a placeholder class)."""
    body = [s for s in init.body if not _is_docstring(s)]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return None
    exc = body[0].exc
    name = (dotted(exc.func) if isinstance(exc, ast.Call) else dotted(exc)) or "an exception"
    strings = _strings(body[0])
    return f"__init__ raises {name}" + (f": {' '.join(strings)}" if strings else "")


def _registered_name(node: ast.stmt) -> str | None:
    """X of ``self.register_buffer("X", ...)`` / ``self.register_parameter("X", ...)``."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
        return None
    call = node.value
    if dotted(call.func) not in ("self.register_buffer", "self.register_parameter") or not call.args:
        return None
    return literal_string(call.args[0])


class _InitValues:
    """What ``__init__`` leaves in each ``self.X``, read as Python runs it: a statement at the level of the
    function's own body replaces what the attribute (or local) held; one under ``if``/``for``/``while``/``with``/
    ``try`` adds to it (the block may not run, or run instead of another); ``self.m(...)`` runs ``m`` of the
    class there; a local carries its values to ``self.X = local``; both arms of ``a if c else b`` are candidates.
    Statements in a ``match`` case or a nested ``def``/``class`` are not read (the pre-filter drops them)."""

    def __init__(self, methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], text: _Source):
        self.methods = methods
        self.text = text
        self.attributes: dict[str, list[Assigned]] = {}
        self.running: set[str] = set()

    def run(self, body: list[ast.stmt], nested: bool, local: dict[str, list[Assigned]]) -> None:
        for statement in body:
            if isinstance(statement, (*FUNCTIONS, ast.ClassDef, ast.Match)):
                continue
            blocks = statement_blocks(statement, cases=False)
            if blocks:
                for block in blocks:
                    self.run(block, True, local)
            else:
                self.simple(statement, nested, local)

    def simple(self, statement: ast.stmt, nested: bool, local: dict[str, list[Assigned]]) -> None:
        registered = _registered_name(statement)
        if registered is not None:
            _bind(self.attributes, registered, [Assigned("", self.text.line(statement), registered)], nested)
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            values = self.values(statement.value, statement, local) if statement.value is not None else []
            for target in targets:
                match target:
                    case ast.Attribute(value=ast.Name(id="self"), attr=attr):
                        self.attributes.setdefault(attr, [])
                        if values:
                            _bind(self.attributes, attr, values, nested)
                    case ast.Name(id=name) if values:
                        _bind(local, name, values, nested)
        elif (called := _self_method_called(statement)) in self.methods and called not in self.running:
            self.running.add(called)
            self.run(self.methods[called].body, nested, {})
            self.running.discard(called)

    def values(self, value: ast.expr, statement: ast.stmt, local: dict[str, list[Assigned]]) -> list[Assigned]:
        match value:
            case ast.IfExp(body=chosen, orelse=other):
                return _merged(self.values(chosen, statement, local), self.values(other, statement, local))
            case ast.Name(id=name) if name in local:
                return local[name]
            case ast.Call(func=func) if (callee := dotted(func)) is not None:
                return [Assigned(callee, self.text.line(statement), callee)]
        return [Assigned("", self.text.line(statement), _first_line(self.text.segment(value)))]


def _first_line(code: str) -> str:
    """A value's first line, to name it by (the pre-filter may drop a call's arguments below it)."""
    lines = code.splitlines()
    return lines[0].strip()[:80] + (" ..." if len(lines) > 1 else "")


def _self_method_called(statement: ast.stmt) -> str | None:
    """M of an expression statement ``self.M(...)``."""
    match statement:
        case ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Name(id="self"), attr=name))):
            return name
    return None


def _bind(table: dict[str, list[Assigned]], name: str, values: list[Assigned], nested: bool) -> None:
    table[name] = _merged(table.get(name, []), values) if nested else list(values)


def _merged(first: list[Assigned], second: list[Assigned]) -> list[Assigned]:
    """Both, in the order of their lines (the pre-filter lifts a block's statements out of their blocks)."""
    return sorted(first + [value for value in second if value not in first], key=lambda value: value.line)


def _init_attributes(
    init: ast.FunctionDef | ast.AsyncFunctionDef,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    text: _Source,
) -> dict[str, list[Assigned]]:
    """What ``__init__`` may leave in each ``self.X`` (``_InitValues``; the pre-filter keeps of ``__init__`` and
    the methods it calls on self what this reads: ``self.`` statements, locals they read, nesting)."""
    values = _InitValues(methods, text)
    values.running.add("__init__")
    values.run(init.body, False, {})
    return values.attributes
