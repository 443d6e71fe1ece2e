"""Checks on a method's text that are not compute_logits shape rules (those are ``shapes``):
the shape of a ``get_top_tokens``, the layout-blind fingerprint two methods are compared by,
whether a get_top_tokens hands the head its hidden states untouched, and what a method reads
from outside itself (where a mirror of it may be written). ``memo`` caches their answers.
"""

from __future__ import annotations

import ast
import collections
import textwrap
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m

from ..cstnodes import nodes_of, parse_method
from ..index.ast_tools import assigned_name, walk
from ..patterns import FOLLOWED_SUPER, SELF
from .shape_types import FreeNames, Param, ParamKind, TargetMap, TopTokensKind, TopTokensShape
from .shapes import _decompose, params_of

STATIC = m.Decorator(decorator=m.Name("staticmethod"))
PROPERTY = m.Decorator(
    decorator=m.Name("property") | m.Name("cached_property") | m.Attribute(attr=m.Name("cached_property"))
)


def analyze_get_top_tokens(code: str, first_line: int) -> TopTokensShape:
    body, func = _decompose(code, first_line)
    params = params_of(func)
    if func.decorators:
        return TopTokensShape(TopTokensKind.DECORATED, params, tuple(body.decorators), _unbound(func, params))
    statements = body.statements
    names = {p.name for p in params}
    passthrough = m.Arg(value=m.MatchIfTrue(lambda v: isinstance(v, cst.Name) and v.value in names))
    forwarding = m.SimpleStatementLine(
        body=[
            m.Return(
                value=m.Call(
                    func=m.Attribute(value=FOLLOWED_SUPER, attr=m.Name("get_top_tokens")),
                    args=[m.ZeroOrMore(passthrough)],
                )
            )
        ]
    )
    if len(statements) == 1 and m.matches(statements[0], forwarding):
        made = statements[0].body[0].value.func.value  # type: ignore[attr-defined]
        named = body.code(made.args[0].value) if made.args else None
        if named is None or named.partition(".")[0] not in names | {"self"}:  # a parameter names no class
            return TopTokensShape(TopTokensKind.SUPER, params, super_class=named)  # forwards its parameters
    target_map = _local_argmax_remap(statements, params[0].name) if params else None
    if target_map is not None:
        return TopTokensShape(TopTokensKind.LOCAL_ARGMAX_MIXIN, params, target_map=target_map)
    return TopTokensShape(TopTokensKind.OTHER, params)


D2T_READ = m.Attribute(value=SELF, attr=m.Name("draft_id_to_target_id")) | m.Call(
    func=m.Name("getattr"),
    args=[
        m.Arg(SELF),
        m.Arg(m.SimpleString(m.MatchRegex(r"""^['"]draft_id_to_target_id['"]$"""))),
        m.Arg(m.Name("None")),
    ],
)


def _local_argmax_remap(statements: list[cst.BaseStatement], hidden: str) -> TargetMap | None:
    """How a LocalArgmaxMixin-shaped get_top_tokens maps the draft argmax, read from its statements:
    ``top = self.logits_processor.get_top_tokens(self.lm_head, HIDDEN)``, ``d2t = <the map>``, then
    ``if d2t is not None: top = top + d2t[top]`` (offset) or ``top = d2t[top]`` (absolute), ``return top``;
    None for any other body."""
    head = m.Call(
        func=m.Attribute(value=m.Attribute(value=SELF, attr=m.Name("logits_processor")), attr=m.Name("get_top_tokens")),
        args=[m.Arg(value=m.Attribute(value=SELF, attr=m.Name("lm_head"))), m.Arg(value=m.Name(hidden))],
    )
    if len(statements) != 4:
        return None
    top, d2t = (_bound_name(s) for s in statements[:2])
    if top is None or d2t is None or top == d2t:
        return None
    top_at = m.Subscript(value=m.Name(d2t), slice=[m.SubscriptElement(m.Index(m.Name(top)))])
    maps = {
        TargetMap.OFFSET: m.BinaryOperation(left=m.Name(top), operator=m.Add(), right=top_at),
        TargetMap.ABSOLUTE: top_at,
    }
    shape = [
        m.SimpleStatementLine(body=[m.Assign(value=head)]),
        m.SimpleStatementLine(body=[m.Assign(value=D2T_READ)]),
        m.If(
            test=m.Comparison(
                left=m.Name(d2t), comparisons=[m.ComparisonTarget(operator=m.IsNot(), comparator=m.Name("None"))]
            ),
            body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(m.Name(top))])])]),
            orelse=None,
        ),
        m.SimpleStatementLine(body=[m.Return(value=m.Name(top))]),
    ]
    if not all(m.matches(s, pattern) for s, pattern in zip(statements, shape)):
        return None
    remap = statements[2].body.body[0].body[0].value  # type: ignore[attr-defined]
    return next((kind for kind, pattern in maps.items() if m.matches(remap, pattern)), None)


def _bound_name(statement: cst.BaseStatement) -> str | None:
    """NAME of a statement ``NAME = ...``."""
    one = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name())])])
    return statement.body[0].targets[0].target.value if m.matches(statement, one) else None  # type: ignore[attr-defined]


def _unbound(func: cst.FunctionDef, params: list[Param]) -> str | None:
    """Why ``self.model.get_top_tokens(hidden_states)`` cannot run the body as a method of the drafter,
    from the outermost decorator (the one the class attribute is): a staticmethod gets no drafter, so
    its ``self`` is the caller's first argument; a property's getter is called with the drafter alone."""
    outermost = func.decorators[0]
    written = [p.name.value for p in [*func.params.posonly_params, *func.params.params]][:1]
    if m.matches(outermost, STATIC) and written == ["self"]:
        return "a staticmethod gets no drafter: the caller's first argument becomes `self`"
    positional = (ParamKind.POSONLY, ParamKind.POS, ParamKind.KWONLY)
    required = [p.name for p in params if p.default is None and p.kind in positional]
    if m.matches(outermost, PROPERTY) and required:
        return (
            "a property's getter is called with the drafter alone, so reading the attribute raises TypeError "
            f"(no {', '.join(required)})"
        )
    return None


def normalize(code: str) -> str:
    """A layout-, comment- and docstring-blind fingerprint of a method's logic, its decorators included
    (a wrapper may change what a call returns)."""
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
    mentioned = collections.Counter(n.id for n in walk(func) if isinstance(n, ast.Name))
    mentioned.update(a.arg for a in walk(func.args) if isinstance(a, ast.arg))
    mentioned.update(name for n in walk(func) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names)
    func.body = _without_dead_inits(func.body, mentioned) or [ast.Pass()]
    func.name = "_"
    func.returns = None
    return ast.dump(func, include_attributes=False)


def _pre_init(statement: ast.stmt) -> str | None:
    """NAME of ``NAME = None``, ``NAME: T = None`` or ``NAME: T`` (a local's annotation is never evaluated)."""
    if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
        value = statement.value
        return (
            statement.target.id if value is None or (isinstance(value, ast.Constant) and value.value is None) else None
        )
    none = isinstance(getattr(statement, "value", None), ast.Constant) and statement.value.value is None  # type: ignore[attr-defined]
    return assigned_name(statement) if none else None


def _without_dead_inits(body: list[ast.stmt], mentioned: collections.Counter[str]) -> list[ast.stmt]:
    """``body`` (and the arms of its ``if`` chains and ``match`` cases) without a pre-initialisation of a
    name nothing else mentions: ``logits = None`` before arms whose head calls are returned does nothing, so the mirror
    leaves it out (``synthesize.mirror``) and a method with or without it is the same."""
    kept = []
    for statement in body:
        name = _pre_init(statement)
        if name is not None and mentioned[name] == 1:
            continue
        if isinstance(statement, ast.If):
            statement.body = _without_dead_inits(statement.body, mentioned) or [ast.Pass()]
            statement.orelse = _without_dead_inits(statement.orelse, mentioned)
        for case in statement.cases if isinstance(statement, ast.Match) else ():
            case.body = _without_dead_inits(case.body, mentioned) or [ast.Pass()]
        kept.append(statement)
    return kept


def _irrefutable(case: ast.match_case) -> bool:
    """``case _:`` or ``case name:``: no path falls through the ``match``."""
    return isinstance(case.pattern, ast.MatchAs) and case.pattern.pattern is None and case.guard is None


def _arms_assign(statement: ast.If | ast.Match, name: str) -> bool:
    """Every arm of an if/elif/else chain (every case of a ``match`` with an irrefutable last case)
    ends in ``name = ...``."""
    if isinstance(statement, ast.Match):
        return _irrefutable(statement.cases[-1]) and all(assigned_name(c.body[-1]) == name for c in statement.cases)
    node: ast.stmt = statement
    while isinstance(node, ast.If):
        if not node.body or assigned_name(node.body[-1]) != name:
            return False
        if not node.orelse:
            return False
        if len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
            node = node.orelse[0]
            continue
        return assigned_name(node.orelse[-1]) == name
    return False


def _returning_arms(statement: ast.If | ast.Match) -> ast.If | ast.Match:
    if isinstance(statement, ast.Match):
        for case in statement.cases:
            case.body = [*case.body[:-1], ast.Return(value=case.body[-1].value)]  # type: ignore[attr-defined]
        return statement
    statement.body = [*statement.body[:-1], ast.Return(value=statement.body[-1].value)]  # type: ignore[attr-defined]
    if len(statement.orelse) == 1 and isinstance(statement.orelse[0], ast.If):
        statement.orelse = [_returning_arms(statement.orelse[0])]
    else:
        statement.orelse = [*statement.orelse[:-1], ast.Return(value=statement.orelse[-1].value)]  # type: ignore[attr-defined]
    return statement


def _returns_collapsed(body: list[ast.stmt]) -> list[ast.stmt]:
    """``x = call; return x`` is ``return call``, at the end of the body and of every ``if`` arm and
    ``match`` case; an ``if`` (a ``match``) whose every arm assigns ``x`` on every path, then
    ``return x``, returns from each arm."""
    body = list(body)
    returned = (
        body[-1].value.id
        if body and isinstance(body[-1], ast.Return) and isinstance(body[-1].value, ast.Name)
        else None
    )
    if returned and len(body) >= 2 and assigned_name(body[-2]) == returned:
        body = [*body[:-2], ast.Return(value=body[-2].value)]  # type: ignore[attr-defined]
    elif returned and len(body) >= 2 and isinstance(body[-2], (ast.If, ast.Match)) and _arms_assign(body[-2], returned):
        body = [*body[:-2], _returning_arms(body[-2])]
    for statement in body:
        if isinstance(statement, ast.If):
            statement.body = _returns_collapsed(statement.body)
            statement.orelse = _returns_collapsed(statement.orelse)
        for case in statement.cases if isinstance(statement, ast.Match) else ():
            case.body = _returns_collapsed(case.body)
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


@dataclass(frozen=True)
class Anchor:
    """A construct whose meaning depends on the class a method's text is written in: a copy of the
    text in another class (a subclass of its own) means something else."""

    pattern: m.BaseMatcherNode
    why: str  # ``{}``: the construct's code


def _private(name: str) -> bool:
    return name.startswith("__") and not name.endswith("__")


ANCHORS = (
    Anchor(m.Name(m.MatchIfTrue(_private)), "the private name {} (Python mangles it with the class's name)"),
    Anchor(m.Name("__class__"), "{} (the class it is written in)"),
    Anchor(m.Call(func=m.Name("super"), args=[]), "{} (it starts after the class it is written in)"),
    Anchor(m.Nonlocal(), "`{}` (a name of an enclosing function)"),
)


def free_names(code: str) -> FreeNames:
    """What a method reads from outside itself (``FreeNames``): all but its parameters and locals.

    The mirror writes its own return annotation (``-> torch.Tensor``) and no decorator: those are
    left out. A quoted annotation is read like an unquoted one (ruff and ``get_type_hints`` do).
    A name the method declares ``global`` is a module's, even where the method assigns it.
    """
    module, func = parse_method(code)
    params = [*func.params.posonly_params, *func.params.params, *func.params.kwonly_params]
    params += [p for p in (func.params.star_arg, func.params.star_kwarg) if isinstance(p, cst.Param)]
    anchored = _anchor(module, [*params, func.body])
    defaults = [p.default for p in params if p.default]
    defined, unquoted_def = _names_read(defaults + [p.annotation for p in params if p.annotation])
    run, unquoted_run = _names_read([func.body])
    unquoted = unquoted_def or unquoted_run
    unparsed = f"the quoted annotation {unquoted!r}, which quotes no expression" if unquoted is not None else None
    declared = {item.name.value for g in nodes_of(func.body, cst.Global) for item in g.names}
    local = {p.name.value for p in nodes_of(func, cst.Param)}
    local |= {t.target.value for t in nodes_of(func.body, cst.AssignTarget) if isinstance(t.target, cst.Name)}
    local -= declared
    read_by_defaults = tuple(sorted(set(_names_read(defaults)[0])))
    return FreeNames(tuple(sorted(set(run) - local)), tuple(sorted(set(defined))), anchored, read_by_defaults, unparsed)


def _anchor(module: cst.Module, parts: list[cst.CSTNode]) -> str | None:
    """Why ``parts`` mean something else in another class (the first ``ANCHORS`` finds), or None."""
    for part in parts:
        for node in nodes_of(part, (cst.Name, cst.Call, cst.Nonlocal)):
            for anchor in ANCHORS:
                if m.matches(node, anchor.pattern):
                    return anchor.why.format(module.code_for_node(node).strip())
    return None


def _names_read(parts: list[cst.CSTNode]) -> tuple[list[str], str | None]:
    """The names ``parts`` read (an attribute's, a keyword's and a parameter's names are not read),
    quoted annotations parsed; and the first quoted annotation that does not parse, or None."""
    names: list[str] = []
    for part in parts:
        nodes = nodes_of(part, (cst.Name, cst.Attribute, cst.Arg, cst.Param, cst.Annotation))
        not_read = {id(n.attr) for n in nodes if isinstance(n, cst.Attribute)}
        not_read |= {id(n.keyword) for n in nodes if isinstance(n, cst.Arg) and n.keyword is not None}
        not_read |= {id(n.name) for n in nodes if isinstance(n, cst.Param)}
        names += [n.value for n in nodes if isinstance(n, cst.Name) and id(n) not in not_read]
        for annotation in (n for n in nodes if isinstance(n, cst.Annotation)):
            for quoted in _quoted(annotation.annotation):
                expression = _unquoted(quoted)
                if expression is None:
                    return names, cst.Module([]).code_for_node(quoted)
                inner, unparsed = _names_read([cst.Annotation(expression)])
                names += inner
                if unparsed is not None:
                    return names, unparsed
    return names, None


def _quoted(annotation: cst.BaseExpression) -> list[cst.SimpleString | cst.ConcatenatedString | cst.FormattedString]:
    """The strings in an annotation (``"X"``, ``Optional["X"]``), each read as the expression it quotes."""
    strings = nodes_of(annotation, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString))
    parts = {id(p) for s in strings if isinstance(s, cst.ConcatenatedString) for p in (s.left, s.right)}
    return [s for s in strings if id(s) not in parts]


def _unquoted(quoted: cst.SimpleString | cst.ConcatenatedString | cst.FormattedString) -> cst.BaseExpression | None:
    """The expression a string in an annotation quotes; None when it quotes none (an f-string, bytes,
    text that does not parse)."""
    text = None if isinstance(quoted, cst.FormattedString) else quoted.evaluated_value
    if not isinstance(text, str):
        return None
    try:
        return cst.parse_expression(text.strip())
    except cst.ParserSyntaxError:
        return None
