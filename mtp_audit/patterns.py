"""libcst matchers shared by the stages that read methods (classify) and write them (synthesize).

Ground floor: imports nothing of the tool's. Importing ``libcst.matchers`` is the
expensive part of libcst (see ``classify.memo.load_rules``); a matcher only one
rule uses stays next to that rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m

from .cstnodes import nodes_in_scope

SELF = m.Name("self")
# self.logits_processor(...): the head call whose arguments get_top_tokens takes.
HEAD_CALL = m.Call(func=m.Attribute(value=SELF, attr=m.Name("logits_processor")))
SELF_DELEGATE_CALL = m.Call(
    func=m.Attribute(value=m.Attribute(value=SELF, attr=m.Name()), attr=m.Name("compute_logits"))
)
SUPER_CALL = m.Call(func=m.Attribute(value=m.Call(func=m.Name("super")), attr=m.Name("compute_logits")))


def is_dotted_name(node: cst.CSTNode) -> bool:
    """``Cls`` or ``module.Cls``: a name the method reads from its module when it runs."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return isinstance(node, cst.Name)


# super(Cls, self): the lookup starts after Cls in the MRO of type(self), which the analysis can follow
# when Cls names a class (zero-argument super() starts after the class the method is written in).
CLASS_SUPER = m.Call(
    func=m.Name("super"),
    args=[
        m.Arg(value=m.MatchIfTrue(is_dotted_name), keyword=None, star=""),
        m.Arg(value=SELF, keyword=None, star=""),
    ],
)
FOLLOWED_SUPER = m.Call(func=m.Name("super"), args=[]) | CLASS_SUPER
# Whatever produces the logits of a compute_logits a mirror can be written for.
LOGITS_CALL = HEAD_CALL | SELF_DELEGATE_CALL | SUPER_CALL
ANY_VALUE = m.MatchIfTrue(lambda value: value is not None)


def bound_to_name(value: m.BaseMatcherNode | m.MatchIfTrue = ANY_VALUE) -> m.SimpleStatementLine:
    """``NAME = value`` or ``NAME: T = value``: the same binding (a local's annotation is never evaluated)."""
    return m.SimpleStatementLine(
        body=[
            m.Assign(targets=[m.AssignTarget(target=m.Name())], value=value) | m.AnnAssign(target=m.Name(), value=value)
        ]
    )


def bound_name(statement: cst.SimpleStatementLine) -> str:
    """NAME of a statement ``bound_to_name`` matches."""
    small = statement.body[0]
    target = small.targets[0].target if isinstance(small, cst.Assign) else small.target  # type: ignore[attr-defined]
    return target.value  # type: ignore[attr-defined]


# ``case _:`` or ``case name:``: a case that matches any subject, so no path falls through the ``match``.
IRREFUTABLE_CASE = m.MatchCase(pattern=m.MatchAs(pattern=None), guard=None)


def exhaustive(statement: cst.If | cst.Match) -> bool:
    """One of the arms runs on every path: a final ``else``, an irrefutable last case (the shape rules
    and the mirror read it alike)."""
    if isinstance(statement, cst.Match):
        return m.matches(statement.cases[-1], IRREFUTABLE_CASE)
    node: cst.If | cst.Else | None = statement
    while isinstance(node, cst.If):
        node = node.orelse
    return isinstance(node, cst.Else)


def _plain_concatenation(node: cst.CSTNode) -> bool:
    """``"a" "b"``: a string Python makes a docstring (with an f-string part it is an expression that runs)."""
    return isinstance(node, cst.ConcatenatedString) and all(
        isinstance(part, cst.SimpleString) or _plain_concatenation(part) for part in (node.left, node.right)
    )


DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.MatchIfTrue(_plain_concatenation))])


def has_logits_call(node: cst.CSTNode) -> bool:
    """Whether ``node`` produces logits in its own scope (a head call in a nested function or lambda
    runs only if that is called)."""
    return any(m.matches(c, LOGITS_CALL) for c in nodes_in_scope(node, cst.Call))


def head_index(statements: Sequence[cst.BaseStatement]) -> int | None:
    """Where in ``statements`` the first one that produces logits is."""
    return next((i for i, s in enumerate(statements) if has_logits_call(s)), None)
