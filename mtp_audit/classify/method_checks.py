"""Checks on a method's text that are not compute_logits shape rules (those are ``shapes``):
the shape of a ``get_top_tokens``, the layout-blind fingerprint two methods are compared by,
whether a get_top_tokens hands the head its hidden states untouched, and whether a method
uses nothing but what a mirror written elsewhere would have. ``memo`` caches their answers.
"""

from __future__ import annotations

import ast
import builtins
import textwrap

import libcst as cst
import libcst.matchers as m

from ..cstnodes import nodes_of, parse_method
from ..patterns import SELF
from .shape_types import TopTokensKind, TopTokensShape
from .shapes import _decompose, params_of

LOCAL_ARGMAX_REMAP = m.BinaryOperation(operator=m.Add(), right=m.Subscript())


def analyze_get_top_tokens(code: str, first_line: int) -> TopTokensShape:
    body, func = _decompose(code, first_line)
    params = params_of(func)
    text = "\n".join(body.code(s) for s in body.statements)
    statements = body.statements
    names = {p.name for p in params}
    passthrough = m.Arg(value=m.MatchIfTrue(lambda v: isinstance(v, cst.Name) and v.value in names))
    if len(statements) == 1 and m.matches(
        statements[0],
        m.SimpleStatementLine(
            body=[
                m.Return(
                    value=m.Call(
                        func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("get_top_tokens")),
                        args=[m.ZeroOrMore(passthrough)],
                    )
                )
            ]
        ),
    ):
        return TopTokensShape(TopTokensKind.SUPER, params)  # forwards its own parameters, unchanged
    head = m.Call(
        func=m.Attribute(value=m.Attribute(value=SELF, attr=m.Name("logits_processor")), attr=m.Name("get_top_tokens")),
        args=[
            m.Arg(value=m.Attribute(value=SELF, attr=m.Name("lm_head"))),
            m.Arg(value=m.Name(params[0].name) if params else m.DoNotCare()),
        ],
    )
    nodes = [n for s in statements for n in nodes_of(s, (cst.Call, cst.BinaryOperation))]
    if (
        "draft_id_to_target_id" in text
        and any(m.matches(n, head) for n in nodes)
        and any(m.matches(n, LOCAL_ARGMAX_REMAP) for n in nodes)
    ):
        return TopTokensShape(TopTokensKind.LOCAL_ARGMAX_MIXIN, params)
    return TopTokensShape(TopTokensKind.OTHER, params)


def normalize(code: str) -> str:
    """A layout-, comment- and docstring-blind fingerprint of a method's logic."""
    func = ast.parse(textwrap.dedent(code)).body[0]
    assert isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
    body = func.body
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    func.body = _returns_collapsed(body) or [ast.Pass()]
    func.name = "_"
    func.returns = None
    func.decorator_list = []
    return ast.dump(func, include_attributes=False)


def _assigned_name(statement: ast.stmt) -> str | None:
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    return None


def _arms_assign(statement: ast.If, name: str) -> bool:
    """Every arm of an if/elif/else chain ends in ``name = ...``."""
    node: ast.stmt = statement
    while isinstance(node, ast.If):
        if not node.body or _assigned_name(node.body[-1]) != name:
            return False
        if not node.orelse:
            return False
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        return _assigned_name(node.orelse[-1]) == name
    return False


def _returning_arms(statement: ast.If) -> ast.If:
    statement.body = [*statement.body[:-1], ast.Return(value=statement.body[-1].value)]  # type: ignore[attr-defined]
    if len(statement.orelse) == 1 and isinstance(statement.orelse[0], ast.If):
        statement.orelse = [_returning_arms(statement.orelse[0])]
    else:
        statement.orelse = [*statement.orelse[:-1], ast.Return(value=statement.orelse[-1].value)]  # type: ignore[attr-defined]
    return statement


def _returns_collapsed(body: list[ast.stmt]) -> list[ast.stmt]:
    """``x = call; return x`` is ``return call``, at the end of the body and of every ``if`` arm;
    an ``if`` whose every arm assigns ``x``, then ``return x``, returns from each arm."""
    body = list(body)
    returned = (
        body[-1].value.id
        if body and isinstance(body[-1], ast.Return) and isinstance(body[-1].value, ast.Name)
        else None
    )
    if returned and len(body) >= 2 and _assigned_name(body[-2]) == returned:
        body = [*body[:-2], ast.Return(value=body[-2].value)]  # type: ignore[attr-defined]
    elif returned and len(body) >= 2 and isinstance(body[-2], ast.If) and _arms_assign(body[-2], returned):
        body = [*body[:-2], _returning_arms(body[-2])]
    for statement in body:
        if isinstance(statement, ast.If):
            statement.body = _returns_collapsed(statement.body)
            statement.orelse = _returns_collapsed(statement.orelse)
    return body


def returns_plain_head(code: str, hidden: str) -> bool:
    """A get_top_tokens that ends in ``return ....get_top_tokens(HEAD, <hidden>)``, with ``hidden``
    (its first parameter) never reassigned: the hidden states reach the head untransformed."""
    _, func = parse_method(code)
    body = list(func.body.body)
    call = m.Call(func=m.Attribute(attr=m.Name("get_top_tokens")), args=[m.Arg(), m.Arg(value=m.Name(hidden))])
    if not body or not m.matches(body[-1], m.SimpleStatementLine(body=[m.Return(value=call)])):
        return False
    reassigned = m.AssignTarget(target=m.Name(hidden)) | m.AugAssign(target=m.Name(hidden))
    return not any(m.matches(n, reassigned) for n in nodes_of(func.body, (cst.AssignTarget, cst.AugAssign)))


_BUILTINS = frozenset(vars(builtins))


def self_contained(code: str) -> bool:
    """True when a method uses only self, its parameters, its locals, builtins and ``torch`` (in the
    annotations of its parameters too)."""
    _, func = parse_method(code)
    nodes = nodes_of(func, (cst.Name, cst.Attribute, cst.Arg, cst.AssignTarget, cst.Call, cst.Param))
    if any(isinstance(n, cst.Call) and m.matches(n.func, m.Name("super")) for n in nodes):
        return False
    known = {"self", "torch"} | _BUILTINS
    known |= {n.name.value for n in nodes if isinstance(n, cst.Param)}
    known |= {n.target.value for n in nodes if isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Name)}
    not_free = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
    not_free |= {id(n.keyword) for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
    not_free |= {id(n.name) for n in nodes if isinstance(n, cst.Param)}
    not_free |= _return_annotation_names(func)
    return all(n.value in known or id(n) in not_free for n in nodes if isinstance(n, cst.Name) and n is not func.name)


def _return_annotation_names(func: cst.FunctionDef) -> set[int]:
    """The mirror writes its own return annotation (``-> torch.Tensor``). The parameters' annotations
    it copies, and the ``def`` evaluates them in the module it is written into."""
    return {id(n) for n in nodes_of(func.returns, cst.Name)} if func.returns else set()
