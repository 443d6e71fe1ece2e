"""Stage 2: per-module facts, read with libcst; plain, cacheable data.

For every platform the module-level statements are interpreted as Python
would run them (imports, aliases, ``if`` on the platform, ``raise``), plus the
module ``__getattr__`` for lazily dispatched names. Classes keep only what
resolution and classification need: bases, the two methods, ``__init__``
attributes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import libcst as cst
import libcst.matchers as m

from ..model import PLATFORMS
from .platforms import evaluate, string_values
from .prefilter import WATCHED_METHODS, Reduced, reduce_source, whole


@dataclass(frozen=True)
class Target:
    """What a module-level name is bound to.

    kind: ``class`` (a = line of the local class), ``import`` (a = module,
    b = name; ``a.b`` may be a submodule), ``module`` (a = module),
    ``unknown`` (a = code that could not be followed).
    """

    kind: str
    a: str = ""
    b: str = ""


@dataclass
class MethodFacts:
    name: str
    line: int
    code: str  # the whole ``def``, as written


@dataclass
class ClassFacts:
    name: str
    line: int
    bases: list[str]
    methods: dict[str, MethodFacts] = field(default_factory=dict)
    init_attrs: dict[str, list[str]] = field(default_factory=dict)  # self.X = Callee(...)
    annotations: dict[str, str] = field(default_factory=dict)  # class-level X: Type
    init_raises: str | None = None  # __init__ only raises: a placeholder class


@dataclass
class ModuleFacts:
    module: str
    path: str  # relative to the tree root
    is_package: bool
    classes: list[ClassFacts] = field(default_factory=list)
    bindings: dict[str, dict[str, list[Target]]] = field(default_factory=dict)  # platform -> name
    import_errors: dict[str, str] = field(default_factory=dict)  # platform -> why import fails
    parse_error: str | None = None

    def class_at(self, line: int) -> ClassFacts | None:
        for cls in self.classes:
            if cls.line == line:
                return cls
        return None


def absolute_module(module: str, is_package: bool, relative: int, name: str | None) -> str:
    """Resolve ``from ..x import y`` inside ``module``."""
    if not relative:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if relative > 1:
        base = base[: len(base) - (relative - 1)]
    return ".".join([*base, name] if name else base)


def dotted(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr.value}" if inner else None
    return None


def extract_facts(source: str, module: str, path: str, is_package: bool) -> ModuleFacts:
    facts = ModuleFacts(module=module, path=path, is_package=is_package)
    try:
        reduced = reduce_source(source)
        tree = cst.parse_module(reduced.source)
        positions = LineNumbers(tree, reduced)
    except (SyntaxError, cst.ParserSyntaxError, LineNumberMismatch):
        try:  # the cut misread this file: parse all of it
            reduced = whole(source)
            tree = cst.parse_module(source)
            positions = LineNumbers(tree, reduced)
        except SyntaxError as error:
            facts.parse_error = f"line {error.lineno}: {error.msg}"
            return facts
        except cst.ParserSyntaxError as error:
            facts.parse_error = f"line {error.raw_line}: {error.message}"
            return facts
    facts.classes = _collect_classes(tree, positions, reduced)
    getattr_def = next(
        (s for s in tree.body if m.matches(s, m.FunctionDef(name=m.Name("__getattr__")))),
        None,
    )
    for platform in PLATFORMS:
        interpreter = _Interpreter(facts, platform, positions)
        interpreter.run(tree.body)
        if interpreter.error:
            facts.import_errors[platform] = interpreter.error
            facts.bindings[platform] = {}
            continue
        bindings = interpreter.state
        if getattr_def is not None:
            for name in _lazy_candidates(getattr_def, interpreter.all_names):
                if name not in bindings:
                    bindings[name] = _evaluate_getattr(
                        getattr_def, name, interpreter, positions
                    )
        facts.bindings[platform] = bindings
    return facts


def _cst_blocks(statement: cst.CSTNode) -> list[list]:
    """Statement lists nested in a compound statement (not in defs or classes)."""
    blocks = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(statement, attr, None)
        if isinstance(part, (cst.If, cst.Else, cst.Finally)):
            part = part if isinstance(part, cst.If) else part.body
            blocks.append([part] if isinstance(part, cst.If) else list(part.body))
        elif isinstance(part, cst.BaseSuite):
            blocks.append(list(part.body))
    for handler in getattr(statement, "handlers", ()):
        blocks.append(list(handler.body.body))
    return blocks


def _ast_blocks(statement: ast.AST) -> list[list]:
    blocks = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(statement, attr, None)
        if isinstance(part, list) and part:
            blocks.append(part)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    return blocks


def walk_statements(statements, is_cst: bool = True):
    """Statements in source order, entering if/try/with/for bodies, never defs or classes."""
    blocks = _cst_blocks if is_cst else _ast_blocks
    compound = (cst.FunctionDef, cst.ClassDef) if is_cst else (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    for statement in statements:
        yield statement
        if isinstance(statement, compound):
            continue
        for block in blocks(statement):
            yield from walk_statements(block, is_cst)


def _numbered(statements, is_cst: bool):
    """Module-level classes, their direct methods, and raises at module level or in __getattr__."""
    class_type = cst.ClassDef if is_cst else ast.ClassDef
    func_types = (cst.FunctionDef,) if is_cst else (ast.FunctionDef, ast.AsyncFunctionDef)

    def raises(statement):
        if is_cst:
            if isinstance(statement, cst.SimpleStatementLine):
                yield from (s for s in statement.body if isinstance(s, cst.Raise))
        elif isinstance(statement, ast.Raise):
            yield statement

    for statement in walk_statements(statements, is_cst):
        yield from raises(statement)
        if isinstance(statement, class_type):
            yield statement
            body = statement.body.body if is_cst else statement.body
            for method in (s for s in body if isinstance(s, func_types)):
                yield method
                if (method.name.value if is_cst else method.name) == "__init__":
                    for inner in (method.body.body if is_cst else method.body):
                        yield from raises(inner)
        elif isinstance(statement, func_types) and (statement.name.value if is_cst else statement.name) == "__getattr__":
            yield statement
            body = statement.body.body if is_cst else statement.body
            for inner in walk_statements(body, is_cst):
                yield from raises(inner)


class LineNumberMismatch(Exception):
    """libcst and ast did not see the same statements (never expected)."""


class LineNumbers:
    """Line numbers of classes, methods and raises, taken from CPython's ast.

    libcst's PositionProvider walks every node of a module, which costs more
    than the parse; the few nodes we need are matched, in source order, with
    the same nodes of an ``ast`` parse of the same text.
    """

    def __init__(self, tree: cst.Module, reduced: Reduced):
        theirs = list(_numbered(ast.parse(reduced.source).body, is_cst=False))
        ours = list(_numbered(tree.body, is_cst=True))
        if len(theirs) != len(ours):
            raise LineNumberMismatch(f"{len(ours)} nodes from libcst, {len(theirs)} from ast")
        self._lines = {id(node): reduced.lines[other.lineno - 1] for node, other in zip(ours, theirs)}

    def line(self, node: cst.CSTNode) -> int:
        return self._lines[id(node)]


def _collect_classes(module: cst.Module, positions: LineNumbers, reduced: Reduced) -> list[ClassFacts]:
    """Module-level classes, including those defined inside module-level ``if``/``try``."""
    classes = []
    for node in walk_statements(module.body):
        if not isinstance(node, cst.ClassDef):
            continue
        cls = ClassFacts(
            name=node.name.value,
            line=positions.line(node),
            bases=[module.code_for_node(arg.value) for arg in node.bases if arg.keyword is None],
        )
        for statement in node.body.body:
            if isinstance(statement, cst.FunctionDef):
                name = statement.name.value
                if name in WATCHED_METHODS:
                    cls.methods[name] = MethodFacts(
                        name=name,
                        line=positions.line(statement),
                        code=module.code_for_node(statement.with_changes(leading_lines=())),
                    )
                elif name == "__init__":  # only when the file was parsed whole
                    cls.init_attrs = _init_attributes(statement)
                    cls.init_raises = _only_raises(statement)
            elif m.matches(statement, m.SimpleStatementLine(body=[m.Assign(
                    targets=[m.AssignTarget(target=m.Name("compute_logits") | m.Name("get_top_tokens"))])])):
                assign = statement.body[0]  # rebound in the class body: a wrapper the mirror rule cannot see into
                name = assign.targets[0].target.value
                value = module.code_for_node(assign.value)
                cls.methods[name] = MethodFacts(name=name, line=cls.line, code=(
                    f"@rebound_in_class_body({value})\ndef {name}(self, *args, **kwargs):\n    ...\n"))
            elif m.matches(statement, m.SimpleStatementLine(body=[m.AnnAssign(target=m.Name())])):
                ann = statement.body[0]
                cls.annotations[ann.target.value] = module.code_for_node(ann.annotation.annotation)
        init = reduced.inits.get(cls.line)
        if init is not None:  # __init__ was cut out by the pre-filter, which read it
            cls.init_attrs = init.attrs
            cls.init_raises = f"__init__ raises {init.raises}" if init.raises else None
        classes.append(cls)
    return classes


def _only_raises(init: cst.FunctionDef) -> str | None:
    """``__init__ raises X: message`` when the body is a single raise (a placeholder class)."""
    body = [s for s in init.body.body if not m.matches(s, m.SimpleStatementLine(body=[m.Expr(m.SimpleString())]))]
    if len(body) != 1 or not m.matches(body[0], m.SimpleStatementLine(body=[m.Raise()])):
        return None
    exc = body[0].body[0].exc
    name = (dotted(exc.func) if isinstance(exc, cst.Call) else dotted(exc) if exc else None) or "an exception"
    strings = [str(s.evaluated_value) for s in m.findall(body[0], m.SimpleString()) if isinstance(s, cst.SimpleString)]
    return f"__init__ raises {name}" + (f": {' '.join(strings)}" if strings else "")


REGISTER = m.Expr(value=m.Call(
    func=m.Attribute(value=m.Name("self"), attr=m.Name("register_buffer") | m.Name("register_parameter")),
    args=[m.Arg(value=m.SimpleString()), m.ZeroOrMore()],
))
SELF_ASSIGN = m.Assign(targets=[m.AssignTarget(target=m.Attribute(value=m.Name("self")))]) | m.AnnAssign(
    target=m.Attribute(value=m.Name("self"))
)


def _init_attributes(init: cst.FunctionDef) -> dict[str, list[str]]:
    """``self.X = Callee(...)`` assignments in ``__init__``, in any nested block."""
    found: dict[str, list[str]] = {}
    for statement in walk_statements(init.body.body):
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for node in statement.body:
            if m.matches(node, REGISTER):
                attr = node.value.args[0].value.evaluated_value  # type: ignore[attr-defined]
                bucket = found.setdefault(attr, [])
                if "<other>" not in bucket:
                    bucket.append("<other>")
                continue
            if not m.matches(node, SELF_ASSIGN):
                continue
            target = node.targets[0].target if isinstance(node, cst.Assign) else node.target
            value = node.value
            callee = dotted(value.func) if isinstance(value, cst.Call) else None
            bucket = found.setdefault(target.attr.value, [])
            if callee and callee not in bucket:
                bucket.append(callee)
            elif callee is None and value is not None and "<other>" not in bucket:
                bucket.append("<other>")
    return found


class _Interpreter:
    """Runs module-level statements for one platform, binding names to targets."""

    def __init__(self, facts: ModuleFacts, platform: str, positions):
        self.facts = facts
        self.platform = platform
        self.positions = positions
        self.state: dict[str, list[Target]] = {}
        self.all_names: list[str] | None = None
        self.error: str | None = None

    def fork(self) -> _Interpreter:
        other = _Interpreter(self.facts, self.platform, self.positions)
        other.state = {k: list(v) for k, v in self.state.items()}
        other.all_names = list(self.all_names) if self.all_names is not None else None
        return other

    def run(self, statements) -> None:
        for statement in statements:
            if self.error:
                return
            self.statement(statement)

    def bind(self, name: str, targets: list[Target]) -> None:
        self.state[name] = targets

    def statement(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small_statement(small)
        elif isinstance(node, cst.ClassDef):
            self.bind(node.name.value, [Target("class", str(self.positions.line(node)))])
        elif isinstance(node, cst.If):
            self.conditional(node)
        elif isinstance(node, cst.Try):
            self.run(node.body.body)
        elif isinstance(node, cst.FunctionDef):
            self.state.pop(node.name.value, None)

    def conditional(self, node: cst.If) -> None:
        truth = evaluate(node.test, self.platform, all_names=self.all_names)
        orelse = node.orelse
        if truth is True:
            self.run(node.body.body)
        elif truth is False:
            if isinstance(orelse, cst.If):
                self.conditional(orelse)
            elif isinstance(orelse, cst.Else):
                self.run(orelse.body.body)
        else:  # unknown: both branches may run; keep every binding as an alternative
            taken, skipped = self.fork(), self.fork()
            taken.run(node.body.body)
            if isinstance(orelse, cst.If):
                skipped.conditional(orelse)
            elif isinstance(orelse, cst.Else):
                skipped.run(orelse.body.body)
            self.merge(taken, skipped)

    def merge(self, first: _Interpreter, second: _Interpreter) -> None:
        if first.error and second.error:
            self.error = first.error
            return
        branches = [b for b in (first, second) if not b.error]
        merged: dict[str, list[Target]] = {}
        for branch in branches:
            for name, targets in branch.state.items():
                bucket = merged.setdefault(name, [])
                bucket.extend(t for t in targets if t not in bucket)
        self.state = merged
        self.all_names = branches[0].all_names

    def small_statement(self, node: cst.BaseSmallStatement) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = dotted(alias.name) or ""
                if alias.asname:
                    self.bind(alias.asname.name.value, [Target("module", full)])  # type: ignore[attr-defined]
                else:
                    head = full.split(".")[0]
                    self.bind(head, [Target("module", head)])
        elif isinstance(node, cst.ImportFrom):
            relative = len(node.relative)
            source = absolute_module(
                self.facts.module, self.facts.is_package, relative,
                dotted(node.module) if node.module else None,
            )
            if isinstance(node.names, cst.ImportStar):
                self.bind(f"*{source}", [Target("module", source)])
                return
            for alias in node.names:
                name = alias.name.value  # type: ignore[union-attr]
                local = alias.asname.name.value if alias.asname else name  # type: ignore[union-attr]
                self.bind(local, [Target("import", source, name)])
        elif isinstance(node, (cst.Assign, cst.AnnAssign)):
            value = node.value
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for target in targets:
                if not isinstance(target.target, cst.Name) or value is None:
                    continue
                name = target.target.value
                if name == "__all__":
                    self.all_names = string_values(value) or []
                else:
                    self.bind(name, self.expression(value))
        elif isinstance(node, cst.AugAssign) and m.matches(node.target, m.Name("__all__")):
            self.all_names = (self.all_names or []) + (string_values(node.value) or [])
        elif m.matches(node, m.Expr(value=m.Call(func=m.Attribute(value=m.Name("__all__"))))):
            call = node.value  # type: ignore[attr-defined]
            values = string_values(call.args[0].value) if call.args else None
            self.all_names = (self.all_names or []) + (values or [])
        elif isinstance(node, cst.Raise):
            self.error = _raise_reason(node, self.positions)

    def expression(self, node: cst.BaseExpression) -> list[Target]:
        """What an expression evaluates to, as targets."""
        if isinstance(node, cst.Name):
            return list(self.state.get(node.value, [Target("unknown", node.value)]))
        if isinstance(node, cst.Attribute):
            out = []
            for base in self.expression(node.value):
                if base.kind == "module":
                    out.append(Target("import", base.a, node.attr.value))
                elif base.kind == "import":
                    out.append(Target("import", f"{base.a}.{base.b}", node.attr.value))
                else:
                    out.append(Target("unknown", dotted(node) or "expression"))
            return out
        return [Target("unknown", type(node).__name__)]


def _raise_reason(node: cst.Raise, positions) -> str:
    line = positions.line(node)
    exc = node.exc
    if isinstance(exc, cst.Call):
        name = dotted(exc.func) or "an exception"
        message = next(
            (a.value.evaluated_value for a in exc.args if isinstance(a.value, cst.SimpleString)),
            None,
        )
        if message is None:
            strings = [s for s in m.findall(exc, m.SimpleString()) if isinstance(s, cst.SimpleString)]
            message = " ".join(str(s.evaluated_value) for s in strings) if strings else None
        return f"import raises {name} (line {line})" + (f": {message}" if message else "")
    return f"import raises (line {line})"


def _lazy_candidates(getattr_def: cst.FunctionDef, all_names: list[str] | None) -> list[str]:
    names = list(all_names or [])
    for string in m.findall(getattr_def, m.SimpleString()):
        value = string.evaluated_value  # type: ignore[attr-defined]
        if isinstance(value, str) and value.isidentifier() and value not in names:
            names.append(value)
    return names


def _evaluate_getattr(func: cst.FunctionDef, name: str, module_state: _Interpreter,
                      positions) -> list[Target]:
    """Run ``__getattr__(name)`` symbolically on one platform."""
    params = func.params.params
    if not params:
        return [Target("unknown", "__getattr__ without parameters")]
    local = module_state.fork()
    outcome = _run_function_body(func.body.body, local, (params[0].name.value, name))
    return outcome


def _run_function_body(statements, local: _Interpreter, name: tuple[str, str]) -> list[Target]:
    for statement in statements:
        if isinstance(statement, cst.If):
            branch = statement
            while True:
                truth = evaluate(branch.test, local.platform, name=name, all_names=local.all_names)
                if truth is None:
                    return [Target("unknown", "a condition in __getattr__")]
                if truth:
                    result = _run_function_body(branch.body.body, local, name)
                    if result:
                        return result
                    break
                if isinstance(branch.orelse, cst.If):
                    branch = branch.orelse
                    continue
                if isinstance(branch.orelse, cst.Else):
                    result = _run_function_body(branch.orelse.body.body, local, name)
                    if result:
                        return result
                break
            continue
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Return) and small.value is not None:
                return _return_value(small.value, local, name)
            if isinstance(small, cst.Raise):
                local_reason = _raise_reason(small, local.positions)
                return [Target("unavailable", local_reason.replace("import raises", "__getattr__ raises"))]
            local.small_statement(small)
            if local.error:
                return [Target("unavailable", local.error)]
    return []


def _return_value(value: cst.BaseExpression, local: _Interpreter,
                  name: tuple[str, str]) -> list[Target]:
    if m.matches(value, m.Call(func=m.Name("getattr"))) and len(value.args) >= 2:  # type: ignore[attr-defined]
        base = value.args[0].value  # type: ignore[attr-defined]
        attr = value.args[1].value  # type: ignore[attr-defined]
        if m.matches(attr, m.Name(name[0])):
            attr_value = name[1]
        elif isinstance(attr, cst.SimpleString):
            attr_value = attr.evaluated_value
        else:
            return [Target("unknown", "getattr with a computed name")]
        return local.expression(cst.Attribute(value=base, attr=cst.Name(attr_value)))
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Dict):
        for element in value.value.elements:
            if isinstance(element, cst.DictElement) and m.matches(element.key, m.SimpleString()):
                if element.key.evaluated_value == name[1]:  # type: ignore[attr-defined]
                    return local.expression(element.value)
        return [Target("unavailable", f"__getattr__ has no entry for {name[1]}")]
    return local.expression(value)
