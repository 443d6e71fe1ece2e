"""libcst matchers shared by the stages that read methods (classify) and write them (synthesize).

Ground floor: imports nothing of the tool's. Importing ``libcst.matchers`` is the
expensive part of libcst (see ``classify.memo.load_rules``); a matcher only one
rule uses stays next to that rule.
"""

from __future__ import annotations

import libcst.matchers as m

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
