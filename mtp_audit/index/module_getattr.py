"""A module's ``__getattr__`` (PEP 562), run symbolically for each name it may serve: how a
lazily dispatched name is bound on one platform.

Besides the module's bindings, the run keeps the exact values its locals hold for the name asked
for, where they follow from literals: the name itself, ``__name__`` and ``__package__``, a read of a
module-level literal collection (``_LAZY.get(name)``, ``_LAZY[name]``, an element of the tuple it
holds), and the strings built from those (``f".{module}"``). So the common lazy export,
``importlib.import_module(f".{_LAZY[name]}", __name__)`` then ``getattr(mod, name)``, is followed
to the submodule that serves each name; anything else keeps its targets unknown.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from .ast_tools import _strings, absolute_module, walk
from .fact_types import Target
from .interpreter import _raise_reason, attribute_of, bound_names
from .platforms import evaluate

if TYPE_CHECKING:
    from .interpreter import Collection, _Interpreter

Values = dict[str, object]  # local name -> the exact value it holds in this run
_UNKNOWN = object()  # a value the run does not know
_IMPORT_MODULE = Target("import", "importlib", "import_module")


def _lazy_candidates(
    getattr_def: ast.FunctionDef | ast.AsyncFunctionDef, all_names: list[str] | None, collections: dict[str, Collection]
) -> list[str]:
    """The names ``__getattr__`` may serve: those ``__all__`` lists, the strings it holds, and those of a
    module-level literal it looks a name up in (``if name in _LAZY:``, ``_LAZY.get(name)``, ``_LAZY[name]``)."""
    names = list(all_names or [])
    looked_up = [collections.get(_looked_up_in(node) or "", ()) for node in walk(getattr_def)]
    for value in [*_strings(getattr_def), *(name for group in looked_up for name in group)]:
        if value.isidentifier() and value not in names:
            names.append(value)
    return names


def _looked_up_in(node: ast.AST) -> str | None:
    """The name of the collection ``node`` looks a key up in: ``k in C``, ``C.get(k)``, ``C[k]``."""
    match node:
        case ast.Compare(ops=[ast.In() | ast.NotIn()], comparators=[ast.Name(id=collection)]):
            return collection
        case ast.Call(func=ast.Attribute(value=ast.Name(id=collection), attr="get")):
            return collection
        case ast.Subscript(value=ast.Name(id=collection)):
            return collection
    return None


def _evaluate_getattr(
    func: ast.FunctionDef | ast.AsyncFunctionDef, name: str, module_state: _Interpreter
) -> list[Target]:
    """Run ``__getattr__(name)`` symbolically on one platform."""
    params = func.args.posonlyargs + func.args.args
    if not params:
        return [Target("unknown", "__getattr__ without parameters")]
    local = module_state.fork()
    facts = local.facts
    package = facts.module if facts.is_package else facts.module.rpartition(".")[0]
    values: Values = {"__name__": facts.module, "__package__": package, params[0].arg: name}
    return _run_function_body(func.body, local, values)


def _run_function_body(statements: list[ast.stmt], local: _Interpreter, values: Values) -> list[Target]:
    for statement in statements:
        if isinstance(statement, ast.If):
            branch: list[ast.stmt] = [statement]
            while len(branch) == 1 and isinstance(branch[0], ast.If):
                test = branch[0]
                truth = evaluate(test.test, local.platform, values, local.all_names, local.lookup)
                if truth is None:
                    header = local.text.lines[test.lineno - 1].strip()[:80]
                    return [Target("unknown", f"{header} cannot be decided", str(local.text.line(test)))]
                branch = test.body if truth else test.orelse
                if truth:
                    break
            result = _run_function_body(branch, local, values) if branch else []
            if result:
                return result
            continue
        if isinstance(statement, ast.Try):
            if any(isinstance(node, ast.Return) for node in walk(statement)):
                return [Target("unknown", "a return inside a try in __getattr__")]
            _forget(values, [statement])
            local.attempt(statement)  # as at module level: bindings, each marked with its outcome
            if local.error:
                return [Target("unavailable", local.error)]
            continue
        if isinstance(statement, ast.Return) and statement.value is not None:
            return _targets(statement.value, local, values)
        if isinstance(statement, ast.Raise):
            reason = _raise_reason(statement, local.text)
            return [Target("unavailable", reason.replace("import raises", "__getattr__ raises"))]
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and _assign(statement, local, values):
            continue
        if isinstance(statement, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
            _forget(values, [statement])
            local.simple(statement)
            if local.error:
                return [Target("unavailable", local.error)]
            continue
        # any other statement (``with``, a loop, ``match``, a nested ``def``, ``global``): not run here
        header = local.text.lines[statement.lineno - 1].strip()[:80]
        nested = isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))  # its returns are its own
        if not nested and any(isinstance(node, ast.Return) for node in walk(statement)):
            return [Target("unknown", f"a return inside `{header}` in __getattr__", str(local.text.line(statement)))]
        _forget(values, [statement])
        local.unfollowed(bound_names([statement]), statement)
    return []


def _forget(values: Values, statements: list[ast.stmt]) -> None:
    """The names the statements bind no longer hold a known value."""
    for name in bound_names(statements):
        values.pop(name, None)


def _assign(statement: ast.Assign, local: _Interpreter, values: Values) -> bool:
    """Run an assignment the module-level interpreter does not follow inside ``__getattr__``: to a name,
    a known value or what ``_targets`` makes of it; to names, the elements of a known tuple; to
    ``globals()[key]`` with a known key (a cache of the name served), that global. False: another kind."""
    value = statement.value
    match statement.targets[0]:
        case ast.Name(id=target):
            known = _value(value, local, values)
            if known is _UNKNOWN:
                values.pop(target, None)
                local.bind(target, _targets(value, local, values))
            else:
                values[target] = known
                local.bind(target, [_constant(known, value, local)])
            return True
        case ast.Tuple(elts=elements) if all(isinstance(e, ast.Name) for e in elements):
            known = _value(value, local, values)
            if not isinstance(known, tuple) or len(known) != len(elements):
                return False
            for element, item in zip(elements, known):
                values[element.id] = item  # type: ignore[attr-defined]
                local.bind(element.id, [_constant(item, value, local)])  # type: ignore[attr-defined]
            return True
        case ast.Subscript(value=ast.Call(func=ast.Name(id="globals"), args=[]), slice=key):
            known = _value(key, local, values)
            if not isinstance(known, str):
                return False
            values.pop(known, None)
            local.bind(known, _targets(value, local, values))
            return True
    return False


def _targets(node: ast.expr, local: _Interpreter, values: Values) -> list[Target]:
    """What ``node`` evaluates to inside ``__getattr__``, as targets."""
    known = _value(node, local, values)
    if known is not _UNKNOWN:
        return [_constant(known, node, local)]
    match node:
        case ast.Call(func=ast.Name(id="getattr"), args=[base, attr, *_]):
            attr_value = _value(attr, local, values)
            if not isinstance(attr_value, str):
                return [Target("unknown", "getattr with a computed name")]
            bases = _targets(base, local, values)  # an unknown one keeps its reason (and line)
            return [target if target.kind == "unknown" else attribute_of(target, attr_value, node) for target in bases]
        case ast.Call(func=function, args=[module, *package], keywords=keywords) if (
            local.expression(function) == [_IMPORT_MODULE]
            and all(k.arg == "package" for k in keywords)
            and len(package) + len(keywords) <= 1
        ):
            imported = _imported(module, [*package, *(k.value for k in keywords)], local, values)
            if imported is None:
                return [Target("unknown", "importlib.import_module with a computed name", str(local.text.line(node)))]
            return [Target("module", imported)]
        case ast.Subscript(value=ast.Dict(keys=keys, values=elements), slice=ast.Name(id=key)) if key in values:
            for candidate, element in zip(keys, elements):
                if isinstance(candidate, ast.Constant) and candidate.value == values[key]:
                    return _targets(element, local, values)
            return [Target("unavailable", f"__getattr__ has no entry for {values[key]}")]
    return local.expression(node)


def _imported(module: ast.expr, package: list[ast.expr], local: _Interpreter, values: Values) -> str | None:
    """The module ``importlib.import_module(module, package)`` imports, where both are known."""
    name = _value(module, local, values)
    anchor = _value(package[0], local, values) if package else None
    if not isinstance(name, str) or not name.strip("."):
        return None
    level = len(name) - len(name.lstrip("."))
    if level and not isinstance(anchor, str):
        return None  # a relative name needs its package (Python raises TypeError without one)
    if level and anchor.count(".") < level - 1:  # type: ignore[union-attr]
        return None  # beyond the top-level package: Python raises ImportError
    return absolute_module(anchor or "", True, level, name[level:])


def _constant(value: object, node: ast.expr, local: _Interpreter) -> Target:
    return Target("constant", repr(value)[:40], str(local.text.line(node)))


def _value(node: ast.expr, local: _Interpreter, values: Values) -> object:
    """The exact value ``node`` has in this run (``_UNKNOWN`` where it does not follow from literals)."""
    match node:
        case ast.Constant(value=constant):
            return constant
        case ast.Name(id=name) if name in values:
            return values[name]
        case ast.JoinedStr(values=parts):
            pieces = [_formatted(part, local, values) for part in parts]
            return _UNKNOWN if _UNKNOWN in pieces else "".join(pieces)  # type: ignore[arg-type]
        case ast.BinOp(left=left, op=ast.Add(), right=right):
            both = _value(left, local, values), _value(right, local, values)
            return both[0] + both[1] if all(isinstance(v, str) for v in both) else _UNKNOWN  # type: ignore[operator]
        case ast.Tuple(elts=elements):
            items = tuple(_value(e, local, values) for e in elements)
            return _UNKNOWN if _UNKNOWN in items else items
        case ast.Call(func=ast.Attribute(value=ast.Name(id=collection), attr="get"), args=[key, *default], keywords=[]):
            mapping, key_value = _mapping(collection, local, values), _value(key, local, values)
            if mapping is None or key_value is _UNKNOWN or len(default) > 1:
                return _UNKNOWN
            fallback = _value(default[0], local, values) if default else None
            try:
                return mapping.get(key_value, fallback)  # type: ignore[arg-type]
            except TypeError:  # an unhashable key (a list): Python raises too, nothing is served
                return _UNKNOWN
        case ast.Subscript(value=ast.Name(id=collection), slice=key) if collection not in values:
            return _item(_mapping(collection, local, values), _value(key, local, values))
        case ast.Subscript(value=container, slice=key):
            return _item(_value(container, local, values), _value(key, local, values))
    return _UNKNOWN


def _item(held: object, key: object) -> object:
    """``held[key]``; ``_UNKNOWN`` where either is not known or the lookup raises (the run does not follow it)."""
    try:
        return held[key]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        return _UNKNOWN


def _formatted(part: ast.expr, local: _Interpreter, values: Values) -> object:
    """One piece of an f-string: its text, or a ``{value}`` of a known string with no conversion or format."""
    match part:
        case ast.Constant(value=str() as text):
            return text
        case ast.FormattedValue(value=inner, conversion=-1, format_spec=None):
            known = _value(inner, local, values)
            return known if isinstance(known, str) else _UNKNOWN
    return _UNKNOWN


def _mapping(name: str, local: _Interpreter, values: Values) -> dict[str, object] | None:
    """The module-level literal dict ``name`` holds, unless a local or a rebinding hides it."""
    if name in values or local.lookup(name) is None:
        return None
    held = local.collections.get(name)
    return held if isinstance(held, dict) else None
