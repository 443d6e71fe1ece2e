"""A module's classes as facts: bases, the watched methods as written, class-level
annotations, and what ``__init__`` sets."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..model import PLATFORMS
from .ast_tools import FUNCTIONS, _is_docstring, _strings, dotted, names_bound, statement_blocks, walk_statements
from .fact_types import ClassFacts, MethodFacts
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
        _collect_members(cls, node.body, text, None)
        cls.default_rebinds = _default_rebinds(node, text)
        if _differs_by_platform(node.body):
            for platform in PLATFORMS:
                on = ClassFacts(cls.name, cls.line, cls.bases)
                _collect_members(on, node.body, text, None, platform)
                cls.methods_by_platform[platform] = on.methods
        classes.append(cls)
    return classes


def _collect_members(
    cls: ClassFacts, body: list[ast.stmt], text: _Source, under: str | None, platform: str | None = None
) -> None:
    """The class body's statements in order, later bindings replacing earlier ones, as Python
    runs them; ``under``: the ``if``/``try`` a nested definition depends on; ``platform``: the one
    whose ``current_platform`` conditions are decided (None: only those alike on every platform)."""
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
            elif statement.name == "__init__" and under is None:
                cls.init_attrs = _init_attributes(statement)
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
            _collect_members(cls, statement.body if truth else statement.orelse, text, under, platform)
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


def _init_attributes(init: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, list[str]]:
    """``self.X = Callee(...)`` assignments in ``__init__``, in any nested block but a ``match`` case (the
    pre-filter cuts ``__init__`` to its ``self.`` statements and their blocks: a cut file reads none)."""
    found: dict[str, list[str]] = {}
    for node in walk_statements(init.body, cases=False):
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
