"""Inline one method into another: ``super().compute_logits(...)`` and private helpers.

Two uses, one rule. A ``compute_logits`` that ends in ``return
super().compute_logits(a, b)`` reads, once the callee is inlined, as one
method whose mirror can live in the calling class alone (its subclasses,
not every subclass of the base). And a ``compute_logits`` that calls a
private helper the fix factored out must, with the helper inlined, be the
old ``compute_logits``. Only the plain case is inlined: arguments that are
the callee's own parameter names, in order, and a callee body that uses no
``super()`` and has a single ``return`` at its end (or, for a helper, none
but its last statement).
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from ..cstnodes import nodes_in_scope, nodes_of, parse_method
from ..patterns import DOCSTRING


class InlineError(Exception):
    """The call cannot be inlined by the plain rule."""


def _params(func: cst.FunctionDef) -> list[str]:
    names = [p.name.value for p in (*func.params.posonly_params, *func.params.params)]
    return names[1:] if names and names[0] == "self" else names


def _body(func: cst.FunctionDef) -> list[cst.BaseStatement]:
    body = list(func.body.body)  # type: ignore[attr-defined]
    return body[1:] if body and m.matches(body[0], DOCSTRING) else body


def _passes_own_names(call: cst.Call, callee: cst.FunctionDef) -> None:
    args = call.args
    if any(a.keyword is not None or a.star for a in args) or [
        a.value.value if isinstance(a.value, cst.Name) else None for a in args
    ] != _params(callee):
        raise InlineError("the call does not pass the callee's own parameter names in order")
    if any(isinstance(n, cst.Call) and m.matches(n.func, m.Name("super")) for n in nodes_of(callee, cst.Call)):
        raise InlineError("the callee calls super()")
    if len(nodes_in_scope(callee.body, cst.Return)) != 1 or not m.matches(
        _body(callee)[-1], m.SimpleStatementLine(body=[m.Return()])
    ):
        raise InlineError("the callee does not end in its only return")


def inline_super(caller_text: str, callee_text: str) -> str:
    """``caller`` with its final ``return super().compute_logits(...)`` replaced by ``callee``'s body."""
    _, caller = parse_method(caller_text)
    _, callee = parse_method(callee_text)
    body = _body(caller)
    last = body[-1] if body else None
    returned = m.SimpleStatementLine(
        body=[
            m.Return(value=m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("compute_logits"))))
        ]
    )
    if last is None or not m.matches(last, returned):
        raise InlineError("compute_logits does not end in `return super().compute_logits(...)`")
    call = last.body[0].value  # type: ignore[attr-defined]
    _passes_own_names(call, callee)
    inlined = [*body[:-1], *_body(callee)]
    inlined[len(body) - 1] = inlined[len(body) - 1].with_changes(leading_lines=last.leading_lines)
    return cst.Module(body=[caller.with_changes(body=caller.body.with_changes(body=inlined))]).code
