"""Evaluate module-level platform conditions the way vLLM evaluates them at run time.

``TYPE_CHECKING`` is false at run time; ``current_platform.is_X()`` is true on X
only; ``device_type`` is ``"cuda"`` on both CUDA and ROCm. On an out-of-tree
platform (a platform plugin's device name) only ``is_out_of_tree()`` is true and
``device_type`` is unknown. What a module-level name holds comes from a ``lookup``
the caller hands in: ``PLATFORM`` for a name bound to ``current_platform`` (``import
... as cp``), a bool for a flag bound to a decided condition (``_IS_ROCM =
current_platform.is_rocm()``), the strings of a literal collection a name is tested against
(``name in _LAZY``). Inside a module ``__getattr__``, ``local_values`` holds the exact values
its locals are known to hold (its parameter: the name asked for; ``module = _LAZY.get(name)``).
Anything else is unknown (``None``), and the interpreter then keeps both branches.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping

PLATFORM = "current_platform"  # what a ``Lookup`` answers for a name bound to vLLM's current_platform
Lookup = Callable[[str], "bool | str | list[str] | None"]

DEVICE_TYPE = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "cpu": "cpu", "tpu": "tpu"}

PLATFORM_PREDICATES = {
    "is_cuda": {"cuda"},
    "is_rocm": {"rocm"},
    "is_xpu": {"xpu"},
    "is_cpu": {"cpu"},
    "is_tpu": {"tpu"},
    "is_cuda_alike": {"cuda", "rocm"},
    "is_out_of_tree": set(),
}


def _named(node: ast.expr, name: str) -> bool:
    """``name`` or ``anything.name``."""
    return (isinstance(node, ast.Name) and node.id == name) or (isinstance(node, ast.Attribute) and node.attr == name)


def is_type_checking(node: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``: false at run time."""
    return _named(node, "TYPE_CHECKING")


def _platform_attribute(node: ast.expr, lookup: Lookup | None = None) -> str | None:
    """X of ``current_platform.X`` (or of ``cp.X`` where ``cp`` is bound to it)."""
    if not isinstance(node, ast.Attribute):
        return None
    if _named(node.value, PLATFORM):
        return node.attr
    if lookup is not None and isinstance(node.value, ast.Name) and lookup(node.value.id) == PLATFORM:
        return node.attr
    return None


def literal_string(node: ast.AST | None) -> str | None:
    """The value of a string literal, else None."""
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def string_values(node: ast.expr) -> list[str] | None:
    """The strings of a literal str, or of a tuple/list/set of them."""
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else None
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = []
        for element in node.elts:
            inner = string_values(element)
            if inner is None or len(inner) != 1:
                return None
            values.extend(inner)
        return values
    return None


def evaluate(
    node: ast.expr,
    platform: str,
    local_values: Mapping[str, object] | None = None,
    all_names: list[str] | None = None,
    lookup: Lookup | None = None,
) -> bool | None:
    """Three-valued truth of a condition on ``platform``.

    ``local_values``, what ``__getattr__``'s locals hold; ``lookup``, what a module-level name holds
    (see the module's docstring).
    """
    if is_type_checking(node):
        return False
    if isinstance(node, ast.Name) and local_values and node.id in local_values:
        return bool(local_values[node.id])
    if isinstance(node, ast.Name) and lookup is not None:
        held = lookup(node.id)
        return held if isinstance(held, bool) else None
    if isinstance(node, ast.Call) and not node.args and not node.keywords:
        predicate = _platform_attribute(node.func, lookup)
        if predicate is None:
            return None
        if predicate not in PLATFORM_PREDICATES:
            return None
        return platform in PLATFORM_PREDICATES[predicate] if platform in DEVICE_TYPE else predicate == "is_out_of_tree"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = evaluate(node.operand, platform, local_values, all_names, lookup)
        return None if inner is None else not inner
    if isinstance(node, ast.BoolOp):  # Kleene logic: unknown unless the known values decide
        values = [evaluate(v, platform, local_values, all_names, lookup) for v in node.values]
        decisive = isinstance(node.op, ast.Or)
        if decisive in values:
            return decisive
        return (not decisive) if all(v is not None for v in values) else None
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _compare(node, platform, local_values, all_names, lookup)
    return None


def _compare(
    node: ast.Compare,
    platform: str,
    local_values: Mapping[str, object] | None,
    all_names: list[str] | None,
    lookup: Lookup | None,
) -> bool | None:
    operator, comparator = node.ops[0], node.comparators[0]
    subject: object
    if _platform_attribute(node.left, lookup) == "device_type":
        if platform not in DEVICE_TYPE:
            return None  # a plugin platform's device_type is its own
        subject = DEVICE_TYPE[platform]
    elif local_values and isinstance(node.left, ast.Name) and node.left.id in local_values:
        subject = local_values[node.left.id]  # inside __getattr__(name)
    else:
        return None
    if isinstance(operator, (ast.Is, ast.IsNot)):  # against None, True or False: the singletons
        if not (isinstance(comparator, ast.Constant) and any(comparator.value is v for v in (None, True, False))):
            return None
        return (subject is comparator.value) == isinstance(operator, ast.Is)
    if isinstance(comparator, ast.Name) and comparator.id == "__all__":
        options = all_names
    elif isinstance(comparator, ast.Name) and lookup is not None:
        held = lookup(comparator.id)  # a module-level literal of strings (``name in _LAZY``)
        options = held if isinstance(held, list) else None
    else:
        options = string_values(comparator)
    if options is None:
        return None
    if isinstance(operator, ast.Eq) and len(options) == 1:
        return subject == options[0]
    if isinstance(operator, ast.NotEq) and len(options) == 1:
        return subject != options[0]
    if isinstance(operator, ast.In):
        return subject in options
    if isinstance(operator, ast.NotIn):
        return subject not in options
    return None
