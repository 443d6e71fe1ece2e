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
from libcst.metadata import ScopeProvider

from ..cstnodes import nodes_of
from ..patterns import DOCSTRING, head_index
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


def _own_params(func: cst.FunctionDef) -> list[cst.Param]:
    """Every named parameter, of every kind, in order (``*args`` and ``**kwargs`` included)."""
    params = func.params
    star = [params.star_arg] if isinstance(params.star_arg, cst.Param) else []
    kwargs = [params.star_kwarg] if params.star_kwarg else []
    return [*params.posonly_params, *params.params, *star, *params.kwonly_params, *kwargs]


def _function_locals_read(
    compute_logits: cst.FunctionDef, chain: list[cst.BaseStatement], hidden: str
) -> set[str] | None:
    """Names the chain reads from ``compute_logits``'s own scope (a parameter of any kind, or a local
    bound by any statement: assignment, walrus, ``for``/``with``/``except`` target, import, ``def``),
    which the helper must be passed; None when the chain binds a local other than ``hidden`` (a walrus),
    which the rest of compute_logits could read and would lose, or when a closure reads ``hidden`` from
    compute_logits (``current = lambda: hidden_states`` called in the chain): moved into the helper, the
    chain rebinds the helper's own ``hidden``, which the closure does not see."""
    wrapper = cst.MetadataWrapper(cst.Module(body=[compute_logits]), unsafe_skip_copy=True)
    scopes = wrapper.resolve(ScopeProvider)
    function_scope = scopes[chain[0]]
    in_chain = {id(node) for statement in chain for node in nodes_of(statement, cst.CSTNode)}
    if any(id(a.node) in in_chain and a.name != hidden for a in function_scope.assignments):
        return None
    if any(
        _runs_later(scope, function_scope)
        and any(
            isinstance(access.node, cst.Name)
            and access.node.value == hidden
            and any(r.scope is function_scope for r in access.referents)
            for access in scope.accesses
        )
        for scope in {s for s in scopes.values() if s is not None and s is not function_scope}
    ):
        return None
    return {
        access.node.value
        for scope in {s for s in scopes.values() if s is not None}
        for access in scope.accesses
        if id(access.node) in in_chain
        and isinstance(access.node, cst.Name)
        and any(r.scope is function_scope for r in access.referents)
    }


_EAGER = (cst.ListComp, cst.SetComp, cst.DictComp)  # comprehensions that run where they stand


def _runs_later(scope, function_scope) -> bool:
    """Is ``scope`` (nested in ``function_scope``) a lambda, ``def``, class or generator, or inside one: code
    that may run after the statement that made it, reading the function's variables as they are then?"""
    while scope is not function_scope and scope is not None:
        if not isinstance(getattr(scope, "node", None), _EAGER):
            return True
        scope = scope.parent
    return False


def factor_pre_head(compute_logits: cst.FunctionDef, taken: set[str]) -> Factored | None:
    """The helper and the shortened compute_logits, or None when the block is short or not a plain chain.

    ``taken``: names the class already defines (the helper must not shadow one).
    """
    if HELPER in taken:
        return None
    body = list(compute_logits.body.body)  # type: ignore[attr-defined]
    docstring = body[:1] if body and m.matches(body[0], DOCSTRING) else []
    statements = body[len(docstring) :]
    index = head_index(statements)
    if index is None or index <= MIN_STATEMENTS:
        return None
    own = {p.name.value: p for p in _own_params(compute_logits)}
    params = [name for name, param in own.items() if not _starred(param)]
    hidden = params[1] if len(params) > 1 and params[0] == "self" else None
    start = index
    while start > 0 and _assigned_name(statements[start - 1]) == hidden:
        start -= 1
    chain = statements[start:index]
    if hidden is None or len(chain) < 2:
        return None
    local = _function_locals_read(compute_logits, chain, hidden)
    if local is None:
        return None
    arguments = [n for n in _loaded_names(chain) if n in local and n not in ("self", hidden)] + [hidden]
    last = chain[-1].body[0]  # type: ignore[attr-defined]
    returned = cst.SimpleStatementLine(  # its comments go with it: the leading lines and the end-of-line one
        body=[cst.Return(value=last.value)],
        leading_lines=chain[-1].leading_lines,
        trailing_whitespace=chain[-1].trailing_whitespace,  # type: ignore[attr-defined]
    )
    hidden_param = own[hidden]
    helper = parse_template_statement(
        template(PRE_HEAD),
        params=cst.Parameters(
            params=[
                cst.Param(cst.Name("self")),
                *[_as_helper_param(own.get(name, cst.Param(cst.Name(name)))) for name in arguments],
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


def _as_helper_param(param: cst.Param) -> cst.Param:
    """``param`` as a plain positional parameter of the helper: no default; a ``*args`` or ``**kwargs``
    arrives as the tuple or dict it is, so it loses its star and its per-item annotation."""
    plain = param.with_changes(default=None, equal=cst.MaybeSentinel.DEFAULT, comma=cst.MaybeSentinel.DEFAULT)
    if _starred(param):
        plain = plain.with_changes(
            star=cst.MaybeSentinel.DEFAULT, whitespace_after_star=cst.SimpleWhitespace(""), annotation=None
        )
    return plain


def _starred(param: cst.Param) -> bool:
    return param.star in ("*", "**")
