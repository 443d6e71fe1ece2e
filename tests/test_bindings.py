"""Which binding a name read in a function comes from (resolve/bindings.py): the call contract compares
two arguments as one value only where every name they read has the same binding at both calls."""

from __future__ import annotations

import ast

from mtp_audit.resolve.bindings import Bindings


def _function(source: str) -> ast.FunctionDef:
    function = ast.parse(source).body[0]
    assert isinstance(function, ast.FunctionDef)
    return function


def test_a_comprehension_binds_its_names_except_in_its_first_iterable() -> None:
    """``[y for x in self.g(x) for y in x]``: the first iterable runs in the function's scope, so its
    ``x`` is the parameter; the second iterable's ``x`` is the comprehension's own."""
    function = _function("def f(self, x):\n    a = [y for x in self.g(x) for y in x]\n")
    comprehension = function.body[0].value  # type: ignore[attr-defined]
    bindings = Bindings(function)
    first = bindings.at(comprehension.generators[0].iter.args[0], "x")
    second = bindings.at(comprehension.generators[1].iter, "x")
    assert first.decided and first.bindings == (function.args,)
    assert second.decided and second.bindings == (comprehension,)


def test_the_assignment_last_on_every_path_is_the_one_a_read_sees() -> None:
    function = _function(
        "def f(self, x, steps):\n    for step in steps:\n        x = self.a(x)\n    x = self.b(x)\n    return x\n"
    )
    bindings = Bindings(function)
    returned = function.body[-1].value  # type: ignore[attr-defined]
    reaching = bindings.at(returned, "x")
    assert reaching.decided and reaching.bindings == (function.body[1],)
