"""A module's classes as facts: bases, the watched methods as written, class-level
annotations, and what ``__init__`` sets."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

from ..model import PLATFORMS
from .ast_tools import (
    FUNCTIONS,
    _is_docstring,
    _strings,
    dotted,
    names_bound,
    self_attribute,
    statement_blocks,
    walk,
    walk_statements,
)
from .fact_types import Assigned, ClassFacts, InitStep, MethodFacts
from .platforms import evaluate, literal_string
from .prefilter import ARGUMENTS_KEPT, WATCHED_METHODS

if TYPE_CHECKING:
    from .facts import _Source

T = TypeVar("T")
Writer = TypeVar("Writer")
_line = attrgetter("line")


def _collect_classes(tree: ast.Module, text: _Source) -> list[ClassFacts]:
    """Module-level classes, including those defined inside module-level ``if``/``try``."""
    classes = []
    bindings = module_bindings(tree)
    for node in walk_statements(tree.body):
        if not isinstance(node, ast.ClassDef):
            continue
        cls = ClassFacts(
            name=node.name,
            line=text.line(node),
            bases=[text.segment(b.value if isinstance(b, ast.Starred) else b) for b in node.bases],
        )
        cls.init_steps = _helper_steps(node, text)
        _collect_members(cls, node.body, text, None, read_init=True)
        cls.decorated_by = _unknown_decorator(node, text, bindings)
        cls.default_rebinds = _default_rebinds(node, text)
        if _differs_by_platform(node.body):
            for platform in PLATFORMS:
                on = ClassFacts(cls.name, cls.line, cls.bases)
                _collect_members(on, node.body, text, None, platform)
                cls.methods_by_platform[platform] = on.methods
        classes.append(cls)
    return classes


REBOUND = "rebound_in_class_body("  # the decorator the facts give ``NAME = value`` in a class body

# Class decorators known to leave compute_logits and get_top_tokens alone (vLLM's torch.compile
# wrappers set __init__, __call__ and a base; the others register or annotate the class), by the
# name the decorator is spelled with, its first part imported from the module named (the end of
# its dotted name: a relative import of it too).
KNOWN_CLASS_DECORATORS = {
    "support_torch_compile": "compilation.decorators",
    "ignore_torch_compile": "compilation.decorators",
    "default_pooling_type": "interfaces_base",
    "CustomOp.register": "custom_op",
    "PluggableLayer.register": "custom_op",
    "dataclass": "dataclasses",
    "dataclasses.dataclass": "dataclasses",
    "runtime_checkable": "typing",
    "typing.runtime_checkable": "typing",
    "final": "typing",
    "typing.final": "typing",
    "total_ordering": "functools",
    "functools.total_ordering": "functools",
}


def module_bindings(tree: ast.Module) -> dict[str, list[str]]:
    """Each name the module's statements bind (under ``if``/``try`` too) -> where each binding gets it:
    the module an import takes it from (relative ones with their dots), "" for any other binding."""
    out: dict[str, list[str]] = {}
    for node in walk_statements(tree.body):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                out.setdefault(alias.asname or alias.name, []).append("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                out.setdefault(alias.asname or alias.name.partition(".")[0], []).append(alias.name)
        else:
            for name in names_bound(node):
                out.setdefault(name, []).append("")
    return out


def _unknown_decorator(node: ast.ClassDef, text: _Source, bindings: dict[str, list[str]]) -> str:
    """``@NAME (line N)`` for the first class decorator not known to leave the watched methods alone: it
    returns what the class name is bound to, and may set or wrap any method (as ``cls.compute_logits =
    ...`` after the class does); "" where there is none. A known name counts only where the module
    imports it (or its module) from where it belongs, once: a local ``def dataclass(cls)`` is no
    dataclass."""
    for decorator in node.decorator_list:
        name = dotted(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
        home = KNOWN_CLASS_DECORATORS.get(name)
        sources = bindings.get(name.partition(".")[0], [])
        if home is None or len(sources) != 1 or not sources[0].removeprefix(".").endswith(home):
            return f"@{text.segment(decorator)} (line {text.line(decorator)})"
    return ""


def _helper_steps(node: ast.ClassDef, text: _Source) -> dict[str, list[InitStep]]:
    """The steps of the methods the class body itself defines, the last ``def`` of a name winning, where they set
    or run something on self: what ``self.m(...)`` in an ``__init__`` runs where the instance's MRO finds ``m``
    here, whichever class's ``__init__`` calls it (the pre-filter keeps those statements of every method)."""
    own = {statement.name: statement for statement in node.body if isinstance(statement, FUNCTIONS)}
    found = {name: _method_steps(function, text) for name, function in own.items() if name != "__init__"}
    return {name: steps for name, steps in found.items() if steps}


def _collect_members(
    cls: ClassFacts,
    body: list[ast.stmt],
    text: _Source,
    under: str | None,
    platform: str | None = None,
    read_init: bool = False,
) -> None:
    """The class body's statements in order, later bindings replacing earlier ones, as Python
    runs them; ``under``: the ``if``/``try`` a nested definition depends on; ``platform``: the one
    whose ``current_platform`` conditions are decided (None: only those alike on every platform);
    ``read_init``: whether ``__init__`` is read (once, not per platform)."""
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
            elif statement.name == "__init__" and under is None and read_init:
                cls.init_steps["__init__"] = _method_steps(statement, text)
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
                name, line, (f"@{REBOUND}{value})\ndef {name}(self, *args, **kwargs):\n    ...\n")
            )
            if isinstance(statement.value, ast.Constant) and statement.value.value is None:
                cls.methods[name].how, cls.methods[name].where = "none", f"{name} = None (line {line})"
            elif name == "get_top_tokens" and value == "compute_logits" and "compute_logits" in cls.methods:
                cls.methods[name].how, cls.methods[name].where = "logits", f"{name} = compute_logits (line {line})"
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    cls.class_attrs[target.id] = (dotted(statement.value) or "") if under is None else ""
                    cls.class_attr_lines[target.id] = text.line(statement)
        elif isinstance(statement, ast.Delete):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id in WATCHED_METHODS:
                    line = text.line(statement)
                    cls.methods[target.id] = MethodFacts(
                        target.id, line, "", "deleted", f"del {target.id} (line {line})"
                    )
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            cls.annotations[statement.target.id] = text.segment(statement.annotation)
            if statement.value is not None:  # ``_build: Callable = make_processor`` binds as an assignment does
                name = statement.target.id
                cls.class_attrs[name] = (dotted(statement.value) or "") if under is None else ""
                cls.class_attr_lines[name] = text.line(statement)
        elif isinstance(statement, ast.If) and (truth := _decided(statement.test, platform)) is not None:
            _collect_members(cls, statement.body if truth else statement.orelse, text, under, platform, read_init)
        elif isinstance(statement, (ast.If, ast.Try)):
            test = f"if {text.segment(statement.test)}" if isinstance(statement, ast.If) else "in a try"
            condition = f"under `{test}:` in the class body (line {text.line(statement)})"
            for block in statement_blocks(statement):
                _collect_members(cls, block, text, under or condition, platform)


def _default_rebinds(node: ast.ClassDef, text: _Source) -> dict[str, list[int]]:
    """Where the class body binds a name that a watched method's parameter defaults read (``ClassFacts``)."""
    watched = [f for f in walk_statements(node.body) if isinstance(f, FUNCTIONS) and f.name in WATCHED_METHODS]
    defaults = [d for f in watched for d in [*f.args.defaults, *f.args.kw_defaults] if d is not None]
    read = {n.id for d in defaults for n in walk(d) if isinstance(n, ast.Name)}
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


class _InitSteps:
    """What one method does to ``self`` (``InitStep``), read as Python runs it: a statement under
    ``if``/``for``/``while``/``with``/``try`` is nested (the block may not run, or run instead of another); a local
    carries its values to ``self.X = local``, a statement at the level of the body replacing what it held, a nested
    one adding to it; both arms of ``a if c else b`` are candidates; a ``match`` case is a block. ``setattr(self,
    "x", v)`` stores as ``self.x = v`` does, and a target list pairs with a tuple of as many values (else each of
    its attributes of self gets the value, unread). A ``return`` at the level of the body ends the method (what
    follows never runs); one in a block may, so every statement after it is nested too. In a ``def`` nested in the
    method that has no ``self`` parameter of its own, the statements that start by storing on self are read, each
    nested and after all of the method's own (it runs whenever that function is called, after what follows its
    ``def`` too), not those of defs or classes within it; the pre-filter keeps those alone, under ``if
    __closure__:``. Nested classes are not read."""

    def __init__(self, text: _Source):
        self.text = text
        self.steps: list[InitStep] = []
        self.may_have_returned = False  # a ``return`` in a block came before: what follows may not run
        self.late: list[InitStep] = []  # the stores of defs nested in the method: they may run after all of it

    def run(self, body: list[ast.stmt], nested: bool, local: dict[str, list[Assigned]]) -> None:
        for statement in body:
            if isinstance(statement, FUNCTIONS) and not _has_self_parameter(statement):
                self.closure([s for s in walk_statements(statement.body) if _stores_on_self_first(s)])
            elif _is_closure_mark(statement):  # the pre-filter's ``if __closure__:`` (see ``closure``)
                self.closure([s for s in statement.body if _stores_on_self_first(s)])  # type: ignore[attr-defined]
                continue
            if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
                continue
            if isinstance(statement, ast.Return):
                if not nested:  # the method's own body: it ends here
                    return
                self.may_have_returned = True
                continue
            blocks = statement_blocks(statement)
            if blocks:
                for block in blocks:
                    self.run(block, True, local)
            else:
                self.simple(statement, nested or self.may_have_returned, local)

    def closure(self, stores: list[ast.stmt]) -> None:
        """The stores on self of a def nested in the method: each nested, and late; a name they read is not the
        method's local as it stands at the ``def`` (the function reads it when called, or its own), so unread."""
        mine = len(self.steps)
        for statement in stores:
            self.simple(statement, True, {})
        self.late += self.steps[mine:]
        del self.steps[mine:]

    def simple(self, statement: ast.stmt, nested: bool, local: dict[str, list[Assigned]]) -> None:
        called = _self_method_stored(statement)
        if called is not None:  # ``self.head = self._build(c)``: the method runs, then its result is stored
            self.steps.append(InitStep(self.text.line(statement), nested, called=called))
        registered = _registered_name(statement)
        if registered is not None:
            line = self.text.line(statement)
            self.steps.append(InitStep(line, nested, registered, [Assigned("", line, registered)]))
        elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            values = self.values(statement.value, statement, local) if statement.value is not None else []
            for target in targets:
                match target:
                    case ast.Attribute(value=ast.Name(id="self"), attr=attr):
                        self.steps.append(InitStep(self.text.line(statement), nested, attr, values))
                    case ast.Attribute(value=ast.Attribute(value=ast.Name(id="self"), attr=owner), attr=attr):
                        # ``self.logits_processor.logits_as_input = True``: an attribute of what self holds
                        self.steps.append(InitStep(self.text.line(statement), nested, f"{owner}.{attr}", values))
                    case ast.Name(id=name) if values:
                        _bind(local, name, values, nested)
                    case ast.Tuple(elts=elements) | ast.List(elts=elements) if statement.value is not None:
                        self.unpacked(elements, statement.value, statement, nested, local)
        elif isinstance(statement, ast.AugAssign) and self_attribute(statement.target) is not None:
            # ``self.v += extra`` sets ``self.v = self.v + extra``: a value of its own, never a constructed class
            line, attr = self.text.line(statement), self_attribute(statement.target)
            operator = ast.unparse(ast.BinOp(ast.Name("a"), statement.op, ast.Name("b")))[2:-2]
            code = f"self.{attr} {operator} {_first_line(self.text.segment(statement.value))}"
            self.steps.append(InitStep(line, nested, attr, [Assigned("", line, code)]))
        elif (stored := _setattr_on_self(statement)) is not None:
            attr, value = stored
            self.steps.append(InitStep(self.text.line(statement), nested, attr, self.values(value, statement, local)))
        elif (called := _self_method_called(statement)) is not None:
            self.steps.append(InitStep(self.text.line(statement), nested, called=called))

    def unpacked(
        self,
        elements: list[ast.expr],
        value: ast.expr,
        statement: ast.stmt,
        nested: bool,
        local: dict[str, list[Assigned]],
    ) -> None:
        """``self.a, self.b = A(), B()`` pairwise; from any other value, each attribute of self gets it unread."""
        paired = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements)
        paired = paired and not any(isinstance(e, ast.Starred) for e in (*elements, *value.elts))  # type: ignore[union-attr]
        for position, element in enumerate(elements):
            if not (isinstance(element, ast.Attribute) and isinstance(element.value, ast.Name)):
                continue
            if element.value.id != "self":
                continue
            part = value.elts[position] if paired else None  # type: ignore[union-attr]
            values = (
                self.values(part, statement, local)
                if part is not None
                else [Assigned("", self.text.line(statement), _first_line(self.text.segment(value)))]
            )
            self.steps.append(InitStep(self.text.line(statement), nested, element.attr, values))

    def arguments(self, call: ast.Call) -> tuple[tuple[str, str], ...]:
        """A call's arguments as ``Assigned.arguments`` keeps them."""
        positional = [
            ("*", self.text.segment(a.value)) if isinstance(a, ast.Starred) else ("", self.text.segment(a))
            for a in call.args
        ]
        return (*positional, *((k.arg or "**", self.text.segment(k.value)) for k in call.keywords))

    def values(self, value: ast.expr, statement: ast.stmt, local: dict[str, list[Assigned]]) -> list[Assigned]:
        match value:
            case ast.IfExp(body=chosen, orelse=other):
                return _merged(self.values(chosen, statement, local), self.values(other, statement, local))
            case ast.Name(id=name) if name in local:
                return local[name]
            case ast.Call(func=func) if (callee := dotted(func)) is not None:
                # a processor's class under any name where the statement's first row names a processor (kept whole
                # by the pre-filter): ``self.logits_processor = MyHead(...)``
                kept = ARGUMENTS_KEPT.search(callee) or ARGUMENTS_KEPT.search(self.text.first_row(statement))
                arguments = self.arguments(value) if kept else None
                return [Assigned(callee, self.text.line(statement), callee, arguments)]
        return [Assigned("", self.text.line(statement), _first_line(self.text.segment(value)))]


def _is_closure_mark(statement: ast.stmt) -> bool:
    match statement:
        case ast.If(test=ast.Name(id="__closure__")):
            return True
    return False


def _has_self_parameter(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether a def takes a parameter named self (of any kind): ``self`` is then another object there."""
    arguments = function.args
    named = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    return any(argument is not None and argument.arg == "self" for argument in named)


def _stores_on_self_first(statement: ast.stmt) -> bool:
    """Whether a statement starts by storing on self: ``self.x = v`` (its first target), ``self.x: T = v``, a first
    target list naming an attribute of self (``self.a, b = v``), ``setattr(self, ...)``,
    ``self.register_buffer(...)`` / ``self.register_parameter(...)`` (what the pre-filter keeps of a nested def)."""
    match statement:
        case ast.Assign(targets=[ast.Attribute(value=ast.Name(id="self")), *_]):
            return True
        case ast.Assign(targets=[ast.Tuple() | ast.List() as targets, *_]):
            return any(self_attribute(node) is not None for node in walk(targets))
        case ast.AnnAssign(target=ast.Attribute(value=ast.Name(id="self"))):
            return True
        case ast.Expr(value=ast.Call(func=ast.Name(id="setattr"), args=[ast.Name(id="self"), *_])):
            return True
        case ast.Expr(value=ast.Call(func=ast.Attribute(value=ast.Name(id="self"), attr=registers))):
            return registers in ("register_buffer", "register_parameter")
    return False


def _first_line(code: str) -> str:
    """A value's first line, to name it by (the pre-filter may drop a call's arguments below it)."""
    lines = code.splitlines()
    return lines[0].strip()[:80] + (" ..." if len(lines) > 1 else "")


def _setattr_on_self(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """(name, value) of ``setattr(self, "name", value)``, the name a literal; ``owner.name`` of
    ``setattr(self.owner, "name", value)`` (an attribute of what self holds, as ``self.owner.name = value``)."""
    match statement:
        case ast.Expr(
            value=ast.Call(
                func=ast.Name(id="setattr"), args=[ast.Name(id="self"), ast.Constant(value=str(name)), value]
            )
        ):
            return name, value
        case ast.Expr(
            value=ast.Call(
                func=ast.Name(id="setattr"),
                args=[ast.Attribute(value=ast.Name(id="self"), attr=owner), ast.Constant(value=str(name)), value],
            )
        ):
            return f"{owner}.{name}", value
    return None


def _self_method_stored(statement: ast.stmt) -> str | None:
    """M of ``self.X = self.M(...)`` (an annotated one too): a store on self of what a method of self returns."""
    stores = isinstance(statement, (ast.Assign, ast.AnnAssign)) and _stores_on_self_first(statement)
    return _self_method_of(statement.value) if stores else None  # type: ignore[attr-defined]


def _self_method_called(statement: ast.stmt) -> str | None:
    """M of an expression statement ``self.M(...)``."""
    return _self_method_of(statement.value) if isinstance(statement, ast.Expr) else None


def _self_method_of(value: ast.expr | None) -> str | None:
    """M of a call ``self.M(...)``."""
    match value:
        case ast.Call(func=ast.Attribute(value=ast.Name(id="self"), attr=name)):
            return name
    return None


def _bind(
    table: dict[str, list[T]], name: str, values: list[T], nested: bool, line: Callable[[T], int] = _line
) -> None:
    table[name] = _merged(table.get(name, []), values, line) if nested else list(values)


def _merged(first: list[T], second: list[T], line: Callable[[T], int] = _line) -> list[T]:
    """Both, in the order of their lines (the pre-filter lifts a block's statements out of their blocks)."""
    return sorted(first + [value for value in second if value not in first], key=line)


def _method_steps(function: ast.FunctionDef | ast.AsyncFunctionDef, text: _Source) -> list[InitStep]:
    """What a method does to ``self`` (``_InitSteps``; of ``__init__`` and every method that sets or runs something
    on self, the pre-filter keeps what this reads: ``self.`` statements, locals they read, nesting)."""
    reader = _InitSteps(text)
    reader.run(function.body, False, {})
    # as the pre-filter lifts them (a block's in the order of their lines), then the stores of nested defs
    return sorted(reader.steps, key=_line) + sorted(reader.late, key=_line)


@dataclass
class InitRead(Generic[Writer]):
    """What an ``__init__`` may leave in each ``self.X`` (``init_values``): ``values`` with the writer of each value;
    ``replaced``, the attributes a step at the level of its body sets whatever held them before (the others may keep
    what ``super().__init__`` left); ``unread``, one value per helper it runs whose code the reading cannot follow
    (a class body binds its name to something other than one of its own methods): that helper may set any attribute,
    so each attribute not assigned after it may hold what it sets, whose class cannot be told."""

    values: dict[str, list[tuple[Writer, Assigned]]]
    replaced: set[str]
    unread: list[tuple[Writer, Assigned]]

    def sets(self, attr: str) -> bool:
        """Whether this ``__init__`` may assign ``self.<attr>`` (a helper not read may)."""
        return attr in self.values or bool(self.unread)

    def of(self, attr: str) -> list[tuple[Writer, Assigned]]:
        """The values it may leave in ``self.<attr>``."""
        return self.values.get(attr, self.unread)


def init_values(
    init: tuple[Writer, list[InitStep]],
    lookup: Callable[[str, Writer], tuple[Writer, list[InitStep]] | str | None],
) -> InitRead[Writer]:
    """What an ``__init__`` (its writer, the class that defines it, and its steps) may leave in each ``self.X``, with
    the writer of each value, as Python runs it: a step at the level of a body replaces what the attribute held, a
    nested one adds to it; ``self.m(...)`` runs the method ``lookup`` gives for ``m`` called from the writer's
    method (the one the instance's MRO finds first; None: none the facts read, or one that does nothing to self;
    a string: what a class body binds the name to instead of one of its methods, which runs unread), its steps
    nested where the call is."""
    attributes: dict[str, list[tuple[Writer, Assigned]]] = {}
    replaced: set[str] = set()
    unread: list[tuple[Writer, Assigned]] = []
    running: set[tuple[Writer | None, str]] = {(None, "__init__")}  # by the class that defines each (a private name
    # is each class's own: ``Sub.__build`` may run ``Base.__build``)

    def by_line(pair: tuple[Writer, Assigned]) -> int:
        return pair[1].line

    def run(writer: Writer, steps: list[InitStep], nested: bool) -> None:
        for step in steps:
            if step.attr:
                attributes.setdefault(step.attr, list(unread))  # a helper not read that ran before may set it
                if step.values:
                    values = [(writer, value) for value in step.values]
                    _bind(attributes, step.attr, values, nested or step.nested, by_line)
                    if not (nested or step.nested):
                        replaced.add(step.attr)
            elif step.called != "__init__" and (found := lookup(step.called, writer)) is not None:
                if isinstance(found, str):
                    runs = Assigned("", step.line, f"self.{step.called}(...), which runs {found} unread,")
                    unread.append((writer, runs))
                    for attr in attributes:  # it may set each of them, or not
                        _bind(attributes, attr, [(writer, runs)], True, by_line)
                    continue
                key = (found[0], step.called)
                if key in running:
                    continue
                running.add(key)
                run(*found, nested or step.nested)
                running.discard(key)

    run(*init, False)
    return InitRead(attributes, replaced, unread)
