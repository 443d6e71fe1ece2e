"""Evaluate module-level platform conditions the way vLLM evaluates them at run time.

``TYPE_CHECKING`` is false at run time; ``current_platform.is_X()`` is true on X
only; ``device_type`` is ``"cuda"`` on both CUDA and ROCm. Anything else is
unknown (``None``), and the interpreter then keeps both branches.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

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

CURRENT_PLATFORM = m.Name("current_platform") | m.Attribute(attr=m.Name("current_platform"))
TYPE_CHECKING = m.Name("TYPE_CHECKING") | m.Attribute(attr=m.Name("TYPE_CHECKING"))
PLATFORM_CALL = m.Call(func=m.Attribute(value=CURRENT_PLATFORM), args=[])
DEVICE_TYPE_ATTR = m.Attribute(value=CURRENT_PLATFORM, attr=m.Name("device_type"))


def string_values(node: cst.BaseExpression) -> list[str] | None:
    """The strings of a literal str, or of a tuple/list/set of them."""
    if isinstance(node, cst.SimpleString):
        return [node.evaluated_value] if isinstance(node.evaluated_value, str) else None
    if m.matches(node, m.Tuple() | m.List() | m.Set()):
        values = []
        for element in node.elements:  # type: ignore[attr-defined]
            inner = string_values(element.value)
            if inner is None or len(inner) != 1:
                return None
            values.extend(inner)
        return values
    return None


def evaluate(node: cst.BaseExpression, platform: str,
             name: tuple[str, str] | None = None,
             all_names: list[str] | None = None) -> bool | None:
    """Three-valued truth of a condition on ``platform``.

    ``name`` is (parameter, value) inside a module ``__getattr__``.
    """
    if m.matches(node, TYPE_CHECKING):
        return False
    if m.matches(node, PLATFORM_CALL):
        predicate = node.func.attr.value  # type: ignore[attr-defined]
        if predicate in PLATFORM_PREDICATES:
            return platform in PLATFORM_PREDICATES[predicate]
        return None
    if m.matches(node, m.UnaryOperation(operator=m.Not())):
        inner = evaluate(node.expression, platform, name, all_names)  # type: ignore[attr-defined]
        return None if inner is None else not inner
    if isinstance(node, cst.BooleanOperation):
        left = evaluate(node.left, platform, name, all_names)
        right = evaluate(node.right, platform, name, all_names)
        if isinstance(node.operator, cst.And):
            if left is False or right is False:
                return False
            return True if left and right else None
        if left is True or right is True:
            return True
        return False if left is False and right is False else None
    if isinstance(node, cst.Comparison) and len(node.comparisons) == 1:
        return _compare(node, platform, name, all_names)
    return None


def _compare(node: cst.Comparison, platform: str, name: tuple[str, str] | None,
             all_names: list[str] | None) -> bool | None:
    target = node.comparisons[0]
    operator = target.operator
    if m.matches(node.left, DEVICE_TYPE_ATTR):
        subject = DEVICE_TYPE[platform]
    elif name is not None and m.matches(node.left, m.Name(name[0])):
        subject = name[1]  # inside __getattr__(name)
    else:
        return None
    if m.matches(target.comparator, m.Name("__all__")):
        options = all_names
    else:
        options = string_values(target.comparator)
    if options is None:
        return None
    if isinstance(operator, cst.Equal) and len(options) == 1:
        return subject == options[0]
    if isinstance(operator, cst.NotEqual) and len(options) == 1:
        return subject != options[0]
    if isinstance(operator, cst.In):
        return subject in options
    if isinstance(operator, cst.NotIn):
        return subject not in options
    return None
