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
"""

from __future__ import annotations

import ast
import bisect
import functools
from dataclasses import dataclass, field
from typing import Literal

from ..model import PLATFORMS
from .platforms import evaluate, literal_string, string_values
from .prefilter import WATCHED_METHODS, Reduced, physical_lines, reduce_source, whole

# A Literal, not an Enum: facts are cached, and a plain string keeps their entries small and fast to load.
TargetKind = Literal["class", "import", "module", "unknown", "unavailable"]
MethodHow = Literal["def", "async", "conditional", "none", "deleted", "outside"]


@dataclass(frozen=True)
class Target:
    """What a module-level name is bound to.

    kind: ``class`` (a = line of the local class), ``import`` (a = module,
    b = name; ``a.b`` may be a submodule), ``module`` (a = module),
    ``unknown`` (a = code that could not be followed), ``unavailable`` (a = why the name
    cannot be had: its import raises).
    """

    kind: TargetKind
    a: str = ""
    b: str = ""


@dataclass
class MethodFacts:
    name: str
    line: int
    text: str  # the ``def`` with its decorators, as it stands in the file (indented)
    # How the name is bound, when not by a plain ``def`` in the class body: "async" (async def),
    # "conditional" (a def under ``if``/``try`` in the class body), "none" (``= None``),
    # "deleted" (``del`` in the class body: lookup goes on to the bases), "outside" (setattr
    # or an attribute assignment after the class). ``where`` says it in words, for reasons.
    how: MethodHow = "def"
    where: str = ""

    @property
    def code(self) -> str:
        """The ``def`` at column 0, as libcst prints it."""
        return libcst_code(self.text)


@functools.cache
def libcst_code(text: str) -> str:
    """Parse one method's text with libcst (imported here: scans that classify nothing never pay for it)."""
    import libcst as cst

    if text[:1] in (" ", "\t"):  # an indented method: give it back a class, ending its line as the file does
        first = physical_lines(text)[0]
        module = cst.parse_module("class _:" + (first[len(first.rstrip("\r\n")):] or "\n") + text)
        function = module.body[0].body.body[0]
    else:
        module = cst.parse_module(text)
        function = module.body[0]
    return module.code_for_node(function.with_changes(leading_lines=()))


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
        """Classes are collected in source order: a binary search finds one among thousands
        (a 1200-deep chain in one file); the scan is for an order that is not."""
        at = bisect.bisect_left(self.classes, line, key=lambda cls: cls.line)
        if at < len(self.classes) and self.classes[at].line == line:
            return self.classes[at]
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


def dotted(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


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
        rows = [line.encode() for line in self.lines[first:last + 1]]  # ast columns count UTF-8 bytes
        rows[-1] = rows[-1][:node.end_col_offset]
        rows[0] = rows[0][node.col_offset:]
        return b"".join(rows).decode()

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
    _assigned_after(tree, facts.classes, text)
    getattr_def = next((s for s in tree.body if isinstance(s, FUNCTIONS) and s.name == "__getattr__"), None)
    per_platform = _reads_platform(tree, getattr_def)
    for platform in PLATFORMS if per_platform else PLATFORMS[:1]:
        interpreter = _Interpreter(facts, platform, text)
        interpreter.run(tree.body)
        if interpreter.error:
            facts.import_errors[platform] = interpreter.error
            facts.bindings[platform] = {}
            continue
        bindings = interpreter.state
        if getattr_def is not None:
            for name in _lazy_candidates(getattr_def, interpreter.all_names):
                if name not in bindings:
                    bindings[name] = _evaluate_getattr(getattr_def, name, interpreter)
        facts.bindings[platform] = _share_with_earlier(bindings, facts.bindings)
    if not per_platform:
        first = PLATFORMS[0]
        for platform in PLATFORMS[1:]:
            facts.bindings[platform] = facts.bindings[first]
            if first in facts.import_errors:
                facts.import_errors[platform] = facts.import_errors[first]
    return facts


def _reads_platform(tree: ast.Module, getattr_def: ast.stmt | None) -> bool:
    """Only an ``if`` or ``__getattr__`` reads the platform; without one, every platform binds alike."""
    return getattr_def is not None or any(isinstance(s, ast.If) for s in walk_statements(tree.body))


def _share_with_earlier(bindings: dict[str, list[Target]],
                        earlier: dict[str, dict[str, list[Target]]]) -> dict[str, list[Target]]:
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


def _blocks(statement: ast.stmt) -> list[list[ast.stmt]]:
    blocks = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(statement, attr, None)
        if isinstance(part, list) and part:
            blocks.append(part)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    return blocks


def walk_statements(statements: list[ast.stmt]):
    """Statements in source order, entering if/try/with/for bodies, never defs or classes."""
    for statement in statements:
        yield statement
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            continue
        for block in _blocks(statement):
            yield from walk_statements(block)


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
        _collect_members(cls, node.body, text, None)
        init = text.reduced.inits.get(cls.line)
        if init is not None:  # __init__ was cut out by the pre-filter, which read it
            cls.init_attrs = init.attrs
            cls.init_raises = f"__init__ raises {init.raises}" if init.raises else None
        classes.append(cls)
    return classes


def _collect_members(cls: ClassFacts, body: list[ast.stmt], text: _Source, under: str | None) -> None:
    """The class body's statements in order, later bindings replacing earlier ones, as Python
    runs them; ``under``: the ``if``/``try`` a nested definition depends on."""
    for statement in body:
        if isinstance(statement, FUNCTIONS):
            if statement.name in WATCHED_METHODS:
                method = MethodFacts(statement.name, text.line(statement), text.method_text(statement))
                if isinstance(statement, ast.AsyncFunctionDef):
                    method.how, method.where = "async", f"async def (line {method.line})"
                elif under is not None:
                    method.how, method.where = "conditional", f"defined only {under}"
                cls.methods[statement.name] = method
            elif statement.name == "__init__" and under is None:  # only when the file was parsed whole
                cls.init_attrs = _init_attributes(statement)
                cls.init_raises = _only_raises(statement)
        elif (isinstance(statement, ast.Assign) and len(statement.targets) == 1
              and isinstance(statement.targets[0], ast.Name) and statement.targets[0].id in WATCHED_METHODS):
            name = statement.targets[0].id  # rebound in the class body: a wrapper the mirror rule cannot see into
            value = text.segment(statement.value)
            line = text.line(statement)
            cls.methods[name] = MethodFacts(name, cls.line, (
                f"@rebound_in_class_body({value})\ndef {name}(self, *args, **kwargs):\n    ...\n"))
            if isinstance(statement.value, ast.Constant) and statement.value.value is None:
                cls.methods[name].how, cls.methods[name].where = "none", f"{name} = None (line {line})"
        elif isinstance(statement, ast.Delete):
            for target in statement.targets:
                if isinstance(target, ast.Name) and target.id in WATCHED_METHODS:
                    line = text.line(statement)
                    cls.methods[target.id] = MethodFacts(
                        target.id, line, "", "deleted", f"del {target.id} (line {line})"
                    )
        elif isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            cls.annotations[statement.target.id] = text.segment(statement.annotation)
        elif isinstance(statement, (ast.If, ast.Try)):
            test = f"if {text.segment(statement.test)}" if isinstance(statement, ast.If) else "in a try"
            condition = f"under `{test}:` in the class body (line {text.line(statement)})"
            for block in _blocks(statement):
                _collect_members(cls, block, text, under or condition)


def _assigned_after(tree: ast.Module, classes: list[ClassFacts], text: _Source) -> None:
    """``setattr(Cls, "get_top_tokens", f)`` or ``Cls.get_top_tokens = f`` at module level, after
    the class: the class has the method from then on, whatever its body says."""
    by_name = {cls.name: cls for cls in classes}
    for statement in walk_statements(tree.body):
        target = value = None
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if (isinstance(call.func, ast.Name) and call.func.id == "setattr" and len(call.args) == 3
                    and isinstance(call.args[0], ast.Name) and isinstance(call.args[1], ast.Constant)):
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
            name, line, f"@assigned_after_class({code})\ndef {name}(self, *args, **kwargs):\n    ...\n",
            "outside", f"set after the class to {code} (line {line})")


def _strings(node: ast.AST) -> list[str]:
    """String literals inside ``node``, outside f-strings."""
    if isinstance(node, ast.JoinedStr):
        return []
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child)]


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


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


def _init_attributes(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[str]]:
    """``self.X = Callee(...)`` assignments in ``__init__``, in any nested block."""
    found: dict[str, list[str]] = {}
    for node in walk_statements(init.body):
        registered = _registered_name(node)
        if registered is not None:
            bucket = found.setdefault(registered, [])
            if "<other>" not in bucket:
                bucket.append("<other>")
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
            continue
        callee = dotted(value.func) if isinstance(value, ast.Call) else None
        bucket = found.setdefault(target.attr, [])
        if callee and callee not in bucket:
            bucket.append(callee)
        elif callee is None and value is not None and "<other>" not in bucket:
            bucket.append("<other>")
    return found


def _is_all(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "__all__"


class _Interpreter:
    """Runs module-level statements for one platform, binding names to targets."""

    def __init__(self, facts: ModuleFacts, platform: str, text: _Source):
        self.facts = facts
        self.platform = platform
        self.text = text
        self.state: dict[str, list[Target]] = {}
        self.all_names: list[str] | None = None
        self.error: str | None = None

    def fork(self) -> _Interpreter:
        other = _Interpreter(self.facts, self.platform, self.text)
        other.state = {k: list(v) for k, v in self.state.items()}
        other.all_names = list(self.all_names) if self.all_names is not None else None
        return other

    def run(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.error:
                return
            self.statement(statement)

    def bind(self, name: str, targets: list[Target]) -> None:
        self.state[name] = targets

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.ClassDef):
            self.bind(node.name, [Target("class", str(self.text.line(node)))])
        elif isinstance(node, ast.If):
            self.conditional(node)
        elif isinstance(node, ast.Try):
            self.run(node.body)
        elif isinstance(node, FUNCTIONS):
            self.state.pop(node.name, None)
        else:
            self.simple(node)

    def conditional(self, node: ast.If) -> None:
        truth = evaluate(node.test, self.platform, all_names=self.all_names)
        if truth is True:
            self.run(node.body)
        elif truth is False:
            self.run(node.orelse)  # an ``elif`` is an ``if`` alone in ``orelse``
        else:  # unknown: both branches may run; keep every binding as an alternative
            taken, skipped = self.fork(), self.fork()
            taken.run(node.body)
            skipped.run(node.orelse)
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

    def simple(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.bind(alias.asname, [Target("module", alias.name)])
                else:
                    head = alias.name.split(".")[0]
                    self.bind(head, [Target("module", head)])
        elif isinstance(node, ast.ImportFrom):
            source = absolute_module(self.facts.module, self.facts.is_package, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    self.bind(f"*{source}", [Target("module", source)])
                    return
                self.bind(alias.asname or alias.name, [Target("import", source, alias.name)])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            for target in targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "__all__":
                    self.all_names = string_values(node.value) or []
                else:
                    self.bind(target.id, self.expression(node.value))
        elif isinstance(node, ast.AugAssign) and _is_all(node.target):
            self.all_names = (self.all_names or []) + (string_values(node.value) or [])
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
              and isinstance(node.value.func, ast.Attribute) and _is_all(node.value.func.value)):
            call = node.value  # __all__.extend([...]) / __all__.append("...")
            values = string_values(call.args[0]) if call.args else None
            self.all_names = (self.all_names or []) + (values or [])
        elif isinstance(node, ast.Raise):
            self.error = _raise_reason(node, self.text)

    def expression(self, node: ast.expr) -> list[Target]:
        """What an expression evaluates to, as targets."""
        if isinstance(node, ast.Name):
            return list(self.state.get(node.id, [Target("unknown", node.id)]))
        if isinstance(node, ast.Attribute):
            out = []
            for base in self.expression(node.value):
                if base.kind == "module":
                    out.append(Target("import", base.a, node.attr))
                elif base.kind == "import":
                    out.append(Target("import", f"{base.a}.{base.b}", node.attr))
                else:
                    out.append(Target("unknown", dotted(node) or "expression"))
            return out
        if isinstance(node, ast.Constant):
            return [Target("unknown", repr(node.value)[:40])]
        return [Target("unknown", type(node).__name__)]


def _raise_reason(node: ast.Raise, text: _Source) -> str:
    line = text.line(node)
    exc = node.exc
    if isinstance(exc, ast.Call):
        name = dotted(exc.func) or "an exception"
        arguments = [*exc.args, *(k.value for k in exc.keywords)]
        message = next((text for a in arguments if (text := literal_string(a)) is not None), None)
        if message is None:
            strings = _strings(exc)
            message = " ".join(strings) if strings else None
        return f"import raises {name} (line {line})" + (f": {message}" if message else "")
    return f"import raises (line {line})"


def _lazy_candidates(getattr_def: ast.FunctionDef | ast.AsyncFunctionDef, all_names: list[str] | None) -> list[str]:
    names = list(all_names or [])
    for value in _strings(getattr_def):
        if value.isidentifier() and value not in names:
            names.append(value)
    return names


def _evaluate_getattr(func: ast.FunctionDef | ast.AsyncFunctionDef, name: str,
                      module_state: _Interpreter) -> list[Target]:
    """Run ``__getattr__(name)`` symbolically on one platform."""
    params = func.args.posonlyargs + func.args.args
    if not params:
        return [Target("unknown", "__getattr__ without parameters")]
    local = module_state.fork()
    return _run_function_body(func.body, local, (params[0].arg, name))


def _run_function_body(statements: list[ast.stmt], local: _Interpreter, name: tuple[str, str]) -> list[Target]:
    for statement in statements:
        if isinstance(statement, ast.If):
            branch: list[ast.stmt] = [statement]
            while len(branch) == 1 and isinstance(branch[0], ast.If):
                test = branch[0]
                truth = evaluate(test.test, local.platform, name=name, all_names=local.all_names)
                if truth is None:
                    return [Target("unknown", "a condition in __getattr__")]
                branch = test.body if truth else test.orelse
                if truth:
                    break
            result = _run_function_body(branch, local, name) if branch else []
            if result:
                return result
            continue
        if isinstance(statement, ast.Return) and statement.value is not None:
            return _return_value(statement.value, local, name)
        if isinstance(statement, ast.Raise):
            reason = _raise_reason(statement, local.text)
            return [Target("unavailable", reason.replace("import raises", "__getattr__ raises"))]
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
            local.simple(statement)
            if local.error:
                return [Target("unavailable", local.error)]
    return []


def _return_value(value: ast.expr, local: _Interpreter, name: tuple[str, str]) -> list[Target]:
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "getattr" \
            and len(value.args) >= 2:
        base, attr = value.args[0], value.args[1]
        attr_value = name[1] if isinstance(attr, ast.Name) and attr.id == name[0] else literal_string(attr)
        if attr_value is None:
            return [Target("unknown", "getattr with a computed name")]
        return local.expression(ast.Attribute(value=base, attr=attr_value, ctx=ast.Load()))
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Dict):
        for key, element in zip(value.value.keys, value.value.values):
            if isinstance(key, ast.Constant) and key.value == name[1]:
                return local.expression(element)
        return [Target("unavailable", f"__getattr__ has no entry for {name[1]}")]
    return local.expression(value)
