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


def _calls(function: ast.FunctionDef) -> dict[str, ast.Call]:
    """The function's ``self.model.<method>(...)`` calls by method name."""
    return {
        node.func.attr: node
        for node in ast.walk(function)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and ast.unparse(node.func.value) == "self.model"
    }


ONE_PATH_CHANGES = {
    "attribute-augmented": ("self.step += 1", "self.step"),
    "attribute-assigned": ("self.step = 0", "self.step"),
    "attribute-by-a-method-of-its-owner": ("self._advance()", "self.step"),
    "attribute-of-a-longer-chain": ("self.step.value = 3", "self.step"),
    "subscript-store": ("h[:, :] = self.norm(h)", "h"),
    "nested-subscript-store": ("h[0][1] = 2", "h"),
    "in-place-tensor-method": ("h.mul_(2)", "h"),
    "container-mutator": ("h.append(2)", "h"),
    "nonlocal-store-where-called": ("bump()", "step"),
}


def _one_path(change: str, read: str) -> ast.FunctionDef:
    return _function(
        "def f(self, h, step):\n"
        "    def bump():\n        nonlocal step\n        step += 1\n\n"
        "    if self.local:\n"
        f"        return self.model.get_top_tokens(h, {read})\n"
        f"    {change}\n"
        f"    return self.model.compute_logits(h, {read})\n"
    )


def test_a_value_changed_on_one_path_is_not_the_same_at_both_calls() -> None:
    """A store into it, an in-place method, an attribute stored or set by its owner's method, a nested
    function's ``nonlocal`` store: the name keeps its binding, its value does not (QA: a mirror was written)."""
    for label, (change, read) in ONE_PATH_CHANGES.items():
        function = _one_path(change, read)
        bindings, calls = Bindings(function), _calls(function)
        top, logits = calls["get_top_tokens"], calls["compute_logits"]
        same = bindings.at(top, read).same_as(bindings.at(logits, read))
        assert not same and not bindings.unchanged_across(top, logits, read), label


def test_a_change_before_the_branch_or_after_both_calls_leaves_them_the_same() -> None:
    """Each arm of the ``if`` reads the value the name had when the ``if`` began: a counter raised after it, in
    the loop around it, changes neither call's value (QA: a safe mirror was refused)."""
    function = _function(
        "def f(self, h, steps):\n"
        "    step = 0\n    self.step = 1\n    h.mul_(2)\n"
        "    while step < steps:\n"
        "        if self.local:\n            self.model.get_top_tokens(h, step, self.step)\n"
        "        else:\n            self.model.compute_logits(h, step, self.step)\n"
        "        step += 1\n        self.step += 1\n        h.mul_(2)\n"
    )
    function.body[-1].body[0].orelse.insert(0, ast.parse("n = h.size(0)").body[0])  # a read on one path: no change
    bindings, calls = Bindings(function), _calls(function)
    for read in ("step", "self.step", "h"):
        assert bindings.unchanged_across(calls["get_top_tokens"], calls["compute_logits"], read), read
