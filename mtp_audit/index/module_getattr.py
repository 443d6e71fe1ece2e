"""A module's ``__getattr__`` (PEP 562), run symbolically for each name it may serve: how a
lazily dispatched name is bound on one platform."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .ast_tools import _strings
from .fact_types import Target
from .interpreter import _raise_reason
from .platforms import evaluate, literal_string

if TYPE_CHECKING:
    from .interpreter import _Interpreter


def _lazy_candidates(
    getattr_def: ast.FunctionDef | ast.AsyncFunctionDef, all_names: list[str] | None, collections: dict[str, list[str]]
) -> list[str]:
    """The names ``__getattr__`` may serve: those ``__all__`` lists, the strings it holds, and those of a
    module-level literal it tests a name against (``if name in _LAZY:``)."""
    names = list(all_names or [])
    tested = [
        collections.get(node.comparators[0].id, [])
        for node in ast.walk(getattr_def)
        if isinstance(node, ast.Compare) and isinstance(node.comparators[0], ast.Name)
    ]
    for value in [*_strings(getattr_def), *(name for group in tested for name in group)]:
        if value.isidentifier() and value not in names:
            names.append(value)
    return names


def _evaluate_getattr(
    func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, module_state: _Interpreter
) -> list[Target]:
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
                truth = evaluate(test.test, local.platform, name=name, all_names=local.all_names, lookup=local.lookup)
                if truth is None:
                    header = local.text.lines[test.lineno - 1].strip()[:80]
                    return [Target("unknown", f"{header} cannot be decided", str(local.text.line(test)))]
                branch = test.body if truth else test.orelse
                if truth:
                    break
            result = _run_function_body(branch, local, name) if branch else []
            if result:
                return result
            continue
        if isinstance(statement, ast.Try):
            if any(isinstance(node, ast.Return) for node in ast.walk(statement)):
                return [Target("unknown", "a return inside a try in __getattr__")]
            local.attempt(statement)  # as at module level: bindings, each marked with its outcome
            if local.error:
                return [Target("unavailable", local.error)]
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
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "getattr"
        and len(value.args) >= 2
    ):
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
