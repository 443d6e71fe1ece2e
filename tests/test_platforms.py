"""Three-valued truth of platform conditions: True, False, or None when it cannot be known.

An unknown condition makes the interpreter keep both branches, so a wrong
True/False here silently drops a drafter from a platform (or adds one).
"""

from __future__ import annotations

import ast

import pytest

from mtp_audit.index.platforms import evaluate, string_values
from mtp_audit.model import PLATFORMS


def truth(condition: str, name: tuple[str, str] | None = None, all_names: list[str] | None = None) -> dict:
    """Platform -> truth of ``condition``."""
    node = ast.parse(condition, mode="eval").body
    return {p: evaluate(node, p, name, all_names) for p in PLATFORMS}


def holds_on(condition: str, **kwargs) -> set[str] | None:
    """The platforms where ``condition`` is true; None when it is unknown everywhere."""
    values = truth(condition, **kwargs)
    if all(v is None for v in values.values()):
        return None
    assert None not in values.values(), values
    return {p for p, v in values.items() if v}


@pytest.mark.parametrize("condition, platforms", [
    ("TYPE_CHECKING", set()),
    ("typing.TYPE_CHECKING", set()),
    ("not TYPE_CHECKING", set(PLATFORMS)),
    ("current_platform.is_cuda()", {"cuda"}),
    ("vllm.platforms.current_platform.is_rocm()", {"rocm"}),
    ("not current_platform.is_cuda_alike()", {"xpu", "cpu", "tpu"}),
    ("current_platform.is_cuda() or current_platform.is_xpu()", {"cuda", "xpu"}),
    ("current_platform.is_cuda_alike() and not current_platform.is_rocm()", {"cuda"}),
    ("current_platform.device_type == 'cuda'", {"cuda", "rocm"}),
    ("current_platform.device_type != 'cpu'", {"cuda", "rocm", "xpu", "tpu"}),
    ("current_platform.device_type in ('xpu', 'tpu')", {"xpu", "tpu"}),
    ("current_platform.device_type not in {'cuda'}", {"xpu", "cpu", "tpu"}),
])
def test_known_conditions(condition: str, platforms: set[str]) -> None:
    assert holds_on(condition) == platforms


def test_and_or_with_an_unknown_part_are_known_only_where_the_known_part_decides() -> None:
    conjunction = truth("current_platform.is_cuda() and unknown()")
    assert conjunction["cuda"] is None and all(conjunction[p] is False for p in PLATFORMS if p != "cuda")
    disjunction = truth("current_platform.is_cuda() or unknown()")
    assert disjunction["cuda"] is True and all(disjunction[p] is None for p in PLATFORMS if p != "cuda")


@pytest.mark.parametrize("condition", [
    "os.environ.get('X')",
    "current_platform.is_something_new()",
    "current_platform.is_cuda(1)",  # a call with arguments is not the predicate
    "helper.is_cuda()",  # not current_platform
    "not os.environ.get('X')",
    "current_platform.device_type == 3",  # not a string
    "current_platform.device_type != ('cuda', 'xpu')",  # != against several values
    "current_platform.device_type == ('cuda', 'xpu')",
    "current_platform.device_type in ('cuda', ('xpu', 'cpu'))",  # a nested tuple is not a list of strings
    "current_platform.device_type < 'x'",
    "current_platform.device_type in values",
    "sys.platform == 'linux'",
    "name == 'Drafter'",  # outside __getattr__, ``name`` is just a variable
    "current_platform.device_type == 'cuda' == 'x'",
    "some.TYPE_CHECKING_EXTRA",
])
def test_unknown_conditions(condition: str) -> None:
    values = truth(condition)
    assert all(v is None for v in values.values()), values


@pytest.mark.parametrize("condition, asked, expected", [
    ("name == 'Drafter'", "Drafter", True),
    ("name == 'Drafter'", "Other", False),
    ("name != 'Drafter'", "Drafter", False),
    ("not name == 'Drafter'", "Drafter", False),
    ("name in ('A', 'B')", "B", True),
    ("name not in ['A', 'B']", "B", False),
    ("name in __all__", "B", True),
    ("name in __all__", "C", False),
    ("not name in __all__", "C", True),
    ("name in __all__ and name == 'A'", "A", True),
    ("name == 'X' or name in __all__", "B", True),
    ("other == 'Drafter'", "Drafter", None),  # not the __getattr__ parameter
])
def test_conditions_on_the_getattr_parameter(condition: str, asked: str, expected: bool | None) -> None:
    values = truth(condition, name=("name", asked), all_names=["A", "B"])
    assert set(values.values()) == {expected}


def test_the_getattr_parameter_and_a_platform_together() -> None:
    values = truth("name == 'Drafter' and current_platform.is_rocm()", name=("name", "Drafter"))
    assert {p for p, v in values.items() if v} == {"rocm"} and None not in values.values()


def test_all_unknown_without_a_module_all() -> None:
    assert set(truth("name in __all__", name=("name", "A")).values()) == {None}


@pytest.mark.parametrize("text, values", [
    ("'a'", ["a"]), ("('a', 'b')", ["a", "b"]), ("['a']", ["a"]), ("{'a'}", ["a"]),
    ("3", None), ("('a', 3)", None), ("('a', ('b', 'c'))", None), ("x", None),
])
def test_string_values(text: str, values: list[str] | None) -> None:
    assert string_values(ast.parse(text, mode="eval").body) == values
