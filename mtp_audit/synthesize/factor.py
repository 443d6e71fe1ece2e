"""``fix --factor-pre-head``: share a long pre-head block through one private helper.

When the statements before the head call end in a chain that rewrites the
hidden states (``hidden_states = ...`` more than ``MIN_STATEMENTS`` times in
all before the head), the chain moves into ``_pre_head(self, <locals it
reads>, hidden_states)``, which returns the last value; ``compute_logits``
calls it in the chain's place, and ``get_top_tokens`` mirrors the shortened
``compute_logits``. It is vLLM's own shape (``deepseek_v4/amd/mtp.py``).
With the helper inlined, the new ``compute_logits`` is the old one: the
rewrite gate checks exactly that.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.helpers import parse_template_statement

from ..cstnodes import nodes_of
from ..patterns import DOCSTRING, LOGITS_CALL
from ..templating import PRE_HEAD, defined_name, template

HELPER = defined_name(PRE_HEAD)
MIN_STATEMENTS = 3  # factor only blocks longer than this: a two-line pre-head reads better copied


@dataclass
class Factored:
    compute_logits: cst.FunctionDef
    helper: cst.FunctionDef


def _assigned_name(statement: cst.BaseStatement) -> str | None:
    """``NAME`` of a ``NAME = expr`` statement line."""
    if m.matches(statement, m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])):
        return statement.body[0].targets[0].target.value  # type: ignore[attr-defined]
    return None


def _loaded_names(nodes: list[cst.BaseStatement]) -> list[str]:
    """Names read in ``nodes``, in order of first appearance (attribute names excluded)."""
    found: list[str] = []
    for statement in nodes:
        for name in nodes_of(statement, cst.Name):
            if name.value not in found:
                found.append(name.value)
    return found


def _param_names(func: cst.FunctionDef) -> list[str]:
    return [p.name.value for p in (*func.params.posonly_params, *func.params.params, *func.params.kwonly_params)]


def factor_pre_head(compute_logits: cst.FunctionDef, taken: set[str]) -> Factored | None:
    """The helper and the shortened compute_logits, or None when the block is short or not a plain chain.

    ``taken``: names the class already defines (the helper must not shadow one).
    """
    if HELPER in taken:
        return None
    body = list(compute_logits.body.body)  # type: ignore[attr-defined]
    docstring = body[:1] if body and m.matches(body[0], DOCSTRING) else []
    statements = body[len(docstring) :]
    index = next(
        (i for i, s in enumerate(statements) if any(m.matches(c, LOGITS_CALL) for c in nodes_of(s, cst.Call))), None
    )
    if index is None or index <= MIN_STATEMENTS:
        return None
    params = _param_names(compute_logits)
    hidden = params[1] if len(params) > 1 and params[0] == "self" else None
    start = index
    while start > 0 and _assigned_name(statements[start - 1]) == hidden:
        start -= 1
    chain = statements[start:index]
    if hidden is None or len(chain) < 2:
        return None
    local = set(params) | {n for s in statements[:start] for n in [_assigned_name(s)] if n}
    if any(not _assigned_name(s) and nodes_of(s, cst.Assign) for s in statements[:start]):
        return None  # tuple or attribute targets before the chain: its locals are not all known
    arguments = [n for n in _loaded_names(chain) if n in local and n not in ("self", hidden)] + [hidden]
    last = chain[-1].body[0]  # type: ignore[attr-defined]
    returned = cst.SimpleStatementLine(body=[cst.Return(value=last.value)], leading_lines=chain[-1].leading_lines)
    own = {p.name.value: p for p in compute_logits.params.params}
    hidden_param = own[hidden]
    helper = parse_template_statement(
        template(PRE_HEAD),
        params=cst.Parameters(
            params=[
                cst.Param(cst.Name("self")),
                *[
                    own.get(name, cst.Param(cst.Name(name))).with_changes(
                        default=None, equal=cst.MaybeSentinel.DEFAULT, comma=cst.MaybeSentinel.DEFAULT
                    )
                    for name in arguments
                ],
            ]
        ),
        returns=hidden_param.annotation.annotation if hidden_param.annotation else cst.Name("_"),
        body=cst.IndentedBlock(body=[*chain[:-1], returned]),
    )
    assert isinstance(helper, cst.FunctionDef)
    if hidden_param.annotation is None:
        helper = helper.with_changes(returns=None)
    call = cst.parse_statement(f"{hidden} = self.{HELPER}({', '.join(arguments)})")
    shortened = [*docstring, *statements[:start], call, *statements[index:]]
    new = compute_logits.with_changes(body=compute_logits.body.with_changes(body=shortened))
    return Factored(new, helper)
