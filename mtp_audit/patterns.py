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
# Whatever produces the logits of a compute_logits a mirror can be written for.
LOGITS_CALL = HEAD_CALL | SELF_DELEGATE_CALL | SUPER_CALL
DOCSTRING = m.SimpleStatementLine(body=[m.Expr(value=m.SimpleString() | m.ConcatenatedString())])


def has_logits_call(node: cst.CSTNode) -> bool:
    """Whether ``node`` produces logits in its own scope (a head call in a nested function or lambda
    runs only if that is called)."""
    return any(m.matches(c, LOGITS_CALL) for c in nodes_in_scope(node, cst.Call))


def head_index(statements: Sequence[cst.BaseStatement]) -> int | None:
    """Where in ``statements`` the first one that produces logits is."""
    return next((i for i, s in enumerate(statements) if has_logits_call(s)), None)
