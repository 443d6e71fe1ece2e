"""``index.ast_tools.unparse`` writes code as Python 3.11 and later do, on every supported Python, so a
message quoting code reads the same whichever interpreter runs the tool (.ci/interpreters runs this on 3.10)."""

import ast

import pytest

from mtp_audit.index.ast_tools import unparse

CASES = [
    ("{k: v for k, v in make().items()}", "{k: v for k, v in make().items()}"),
    ("for (k, v) in pairs:\n    pass", "for k, v in pairs:\n    pass"),
    ("(a, b) = c, d", "a, b = (c, d)"),
    ("[(a, b) for (a, b), c in z]", "[(a, b) for (a, b), c in z]"),
    ("f = lambda: (1, 2)", "f = lambda: (1, 2)"),
    ("f = lambda x: x", "f = lambda x: x"),
    ("y = x[(None, *rest)]", "y = x[None, *rest]"),
    ("y = x[1:2, 3]", "y = x[1:2, 3]"),
    ("t = ()", "t = ()"),
    ("t = (1,)", "t = (1,)"),
    ("g((a, b))", "g((a, b))"),
]


@pytest.mark.parametrize(("source", "written"), CASES)
def test_unparse_writes_what_python_3_11_writes(source: str, written: str) -> None:
    assert unparse(ast.parse(source)) == written
