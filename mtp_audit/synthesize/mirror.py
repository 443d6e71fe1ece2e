"""Stage 5: build ``get_top_tokens`` as the mirror of a ``compute_logits``.

The method's shape comes from ``templates/``; the statements before the head
call are the original nodes (asserts, comments and all); only the head call
itself changes, as CONTRACT.md's mirror rule says.
"""

from __future__ import annotations

import collections
import functools
import re

import libcst as cst
import libcst.matchers as m
from libcst.helpers import parse_template_statement

from ..cstnodes import nodes_of, one_statement_per_line, parse_method
from ..patterns import DOCSTRING, HEAD_CALL, LOGITS_CALL, bound_to_name, exhaustive, head_index
from ..templating import template


class MirrorError(Exception):
    """compute_logits does not have a shape the mirror rule covers."""


# A function type comment (PEP 484) right below the ``def``: the mirror's own annotations replace it (both: a
# type checker's "duplicate type signatures" error)
FUNCTION_TYPE_COMMENT = re.compile(r"#\s*type:\s*\(")
# A type checker's pragma on the head call's line: the get_top_tokens call takes the same arguments, so it is
# the new call's too (a linter's ``noqa`` is about the line as written: a one-line arm, ``a; b``, its length)
TYPE_IGNORE = re.compile(r"#\s*(?:type|pyright)\s*:\s*ignore\b")


def _statements(func: cst.FunctionDef) -> list[cst.BaseStatement]:
    """The body without its docstring or a function type comment, one statement per line (as the shape rules
    read it)."""
    statements = one_statement_per_line(func.body.body)
    if statements and m.matches(statements[0], DOCSTRING):
        statements = statements[1:]
    if statements and func.body.body and statements[0] is func.body.body[0]:  # the comment is the def's
        lines = statements[0].leading_lines
        if lines and lines[0].comment is not None and FUNCTION_TYPE_COMMENT.match(lines[0].comment.value):
            statements = [statements[0].with_changes(leading_lines=lines[1:]), *statements[1:]]
    return statements


def _top_tokens_call(call: cst.Call) -> cst.Call:
    func = call.func
    if m.matches(call, HEAD_CALL):
        return call.with_changes(func=cst.Attribute(value=func, attr=cst.Name("get_top_tokens")))
    assert isinstance(func, cst.Attribute)
    return call.with_changes(func=func.with_changes(attr=cst.Name("get_top_tokens")))


def mirror_function(compute_logits: cst.FunctionDef) -> cst.FunctionDef:
    """The unformatted mirror; raises MirrorError when no mirror can be derived."""
    body = cst.IndentedBlock(body=_mirror_block(_statements(compute_logits)))
    return _method(compute_logits, body)


def _method(compute_logits: cst.FunctionDef, body: cst.IndentedBlock) -> cst.FunctionDef:
    method = parse_template_statement(template("get_top_tokens.py.tmpl"), params=compute_logits.params, body=body)
    assert isinstance(method, cst.FunctionDef)
    return method.with_changes(body=_without_dead_inits(method.body, _mentioned(method)))


# ``NAME = None``, ``NAME: T = None``, ``NAME: T``: a binding that only makes NAME exist (a local's
# annotation is never evaluated), which compute_logits needs when its arms assign the head's result.
PRE_INIT = m.SimpleStatementLine(
    body=[
        m.Assign(targets=[m.AssignTarget(target=m.Name())], value=m.Name("None"))
        | m.AnnAssign(target=m.Name(), value=m.Name("None"))
        | m.AnnAssign(target=m.Name(), value=None)  # a matcher's ``| None`` fails on a missing value
    ]
)


def _mentioned(method: cst.FunctionDef) -> collections.Counter[str]:
    """How often each variable name occurs in ``method`` (parameters included; attribute names and
    keywords of calls are not variables)."""
    not_variables = {
        id(node.attr if isinstance(node, cst.Attribute) else node.keyword)
        for node in nodes_of(method, (cst.Attribute, cst.Arg))
    }
    return collections.Counter(n.value for n in nodes_of(method, cst.Name) if id(n) not in not_variables)


def _without_dead_inits(block: cst.BaseSuite, mentioned: collections.Counter[str]) -> cst.BaseSuite:
    """``block`` (and the arms of its ``if`` chains and ``match`` cases) without a ``PRE_INIT`` of a name the mirror no
    longer mentions elsewhere: the head's result it stood for is returned instead of bound, and the
    dead local would fail ruff (F841). Its comments stay, above the next statement."""
    if not isinstance(block, cst.IndentedBlock):
        return block
    kept: list[cst.BaseStatement] = []
    carried: list[cst.EmptyLine] = []
    for statement in block.body:
        if m.matches(statement, PRE_INIT) and mentioned[_pre_init_name(statement)] == 1:
            carried += statement.leading_lines
            continue
        if isinstance(statement, cst.If):
            statement = _arms_without_dead_inits(statement, mentioned)
        elif isinstance(statement, cst.Match):
            cases = [c.with_changes(body=_without_dead_inits(c.body, mentioned)) for c in statement.cases]
            statement = statement.with_changes(cases=cases)
        kept.append(
            statement.with_changes(leading_lines=[*carried, *statement.leading_lines]) if carried else statement
        )
        carried = []
    return block.with_changes(body=kept)


def _arms_without_dead_inits(statement: cst.If, mentioned: collections.Counter[str]) -> cst.If:
    orelse = statement.orelse
    if isinstance(orelse, cst.If):
        orelse = _arms_without_dead_inits(orelse, mentioned)
    elif isinstance(orelse, cst.Else):
        orelse = orelse.with_changes(body=_without_dead_inits(orelse.body, mentioned))
    return statement.with_changes(body=_without_dead_inits(statement.body, mentioned), orelse=orelse)


def _pre_init_name(statement: cst.SimpleStatementLine) -> str:
    small = statement.body[0]
    target = small.targets[0].target if isinstance(small, cst.Assign) else small.target  # type: ignore[attr-defined]
    return target.value  # type: ignore[attr-defined]


def _returning(head_statement: cst.BaseStatement, call: cst.Call) -> cst.SimpleStatementLine:
    """``return <the get_top_tokens call>`` in place of the head statement."""
    new_return = parse_template_statement(template("return_call.py.tmpl"), call=_top_tokens_call(call))
    assert isinstance(new_return, cst.SimpleStatementLine)
    new_return = new_return.with_changes(leading_lines=head_statement.leading_lines)
    trailing = getattr(head_statement, "trailing_whitespace", None)
    if trailing is not None and trailing.comment is not None and TYPE_IGNORE.match(trailing.comment.value):
        new_return = new_return.with_changes(trailing_whitespace=trailing)
    return new_return


def _mirror_block(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """A block (the body, an arm) whose head the shape rules checked: the statements before the head
    kept, the head (``return CALL``, ``NAME = CALL``, an ``if`` chain or ``match``) returning the
    get_top_tokens call; a ``return NAME`` after ``NAME = CALL`` goes with it, as in ``logits = <call>;
    return logits`` becoming ``return <call>``. Where some path falls through the arms (early
    returns), the statements after them are mirrored the same way."""
    index = head_index(statements)
    if index is None:
        raise MirrorError("no head call")
    head, after = statements[index], statements[index + 1 :]
    if isinstance(head, (cst.If, cst.Match)):
        new = _mirror_arms(head)
        if not exhaustive(head):
            return [*statements[:index], new, *_mirror_block(after)]
    elif m.matches(head, bound_to_name(LOGITS_CALL) | m.SimpleStatementLine(body=[m.Return(value=LOGITS_CALL)])):
        new = _returning(head, head.body[0].value)  # type: ignore[attr-defined]
    else:
        raise MirrorError("head call is not `return CALL` or `NAME = CALL`")
    return [*statements[:index], new]


def _mirror_arms(statement: cst.If | cst.Match) -> cst.If | cst.Match:
    """The ``if`` (``match``) with each arm (case), in its own form, returning the get_top_tokens call
    instead of its head call; conditions, patterns and guards as they are."""
    if isinstance(statement, cst.Match):
        return statement.with_changes(cases=[c.with_changes(body=_mirror_arm(c.body)) for c in statement.cases])
    orelse = statement.orelse
    if isinstance(orelse, cst.If):
        orelse = _mirror_arms(orelse)
    elif isinstance(orelse, cst.Else):
        orelse = orelse.with_changes(body=_mirror_arm(orelse.body))
    return statement.with_changes(body=_mirror_arm(statement.body), orelse=orelse)


def _mirror_arm(block: cst.BaseSuite) -> cst.BaseSuite:
    if not isinstance(block, cst.IndentedBlock):
        raise MirrorError("a one-line arm")
    return block.with_changes(body=_mirror_block(one_statement_per_line(block.body)))


@functools.lru_cache(maxsize=4096)
def mirror_code(compute_logits_code: str) -> str:
    """Mirror of a stand-alone ``def compute_logits`` source, unformatted, as text."""
    _, func = parse_method(compute_logits_code)
    return cst.Module(body=[mirror_function(func)]).code
