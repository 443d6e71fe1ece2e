"""Stage 4a: the shape of one ``compute_logits`` body (``get_top_tokens`` and the other checks
on a method's text: ``method_checks``).

Each check is a small rule over the decomposed body (statements before the
head call, the head call, statements after it), in the style of ruff and Fixit:
a ShapeRule with an id, a name, a message and VALID / INVALID examples
(tests/test_rules.py). The first rule in RULES that objects decides; a body no
rule objects to is a mechanical mirror candidate.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst
import libcst.matchers as m

from ..cstnodes import nodes_in_scope, nodes_of, one_statement_per_line, parse_method, walk, walk_scope
from ..patterns import (
    CLASS_SUPER,
    DOCSTRING,
    FOLLOWED_SUPER,
    HEAD_CALL,
    LOGITS_CALL,
    SELF,
    SUPER_CALL,
    bound_name,
    bound_to_name,
    exhaustive,
    has_logits_call,
)
from .shape_types import (
    ASSUMED_SIGNATURE,
    MASK_METHODS,
    HeadSignature,
    LogitsKind,
    LogitsShape,
    Param,
    ParamKind,
    PostKind,
    SignatureParam,
    TargetMap,
)

ANY_COMPUTE_LOGITS_CALL = m.Call(func=m.Attribute(attr=m.Name("compute_logits")))
STUB_STATEMENT = m.SimpleStatementLine(body=[m.OneOf(m.Raise(), m.Pass(), m.Expr(value=m.Ellipsis()))])
BY_HAND = m.Call(
    func=m.Attribute(
        attr=m.Name("addmm")
        | m.Name("matmul")
        | m.Name("mm")
        | m.Name("linear")
        | m.Name("einsum")
        | m.Name("_gather_logits")
        | m.Name("bmm")
    )
    | m.Name("linear")
    | m.Name("matmul")
) | m.BinaryOperation(operator=m.MatrixMultiply())
RETURN_NAME = m.SimpleStatementLine(body=[m.Return(value=m.Name())])
# self.logits_processor.forward(...): the processor's method called directly, bypassing Module.__call__
PROCESSOR_METHOD_CALL = m.Call(func=m.Attribute(value=m.Attribute(value=SELF, attr=m.Name("logits_processor"))))


# Sub-statement nodes the rules look at, with their CPython ast counterparts.
_KINDS = (
    (cst.Call, ast.Call),
    (cst.Return, ast.Return),
    (cst.Yield, ast.Yield),
    (cst.Raise, ast.Raise),
    (cst.BinaryOperation, ast.BinOp),
    (cst.Assign, ast.Assign),
    (cst.AugAssign, ast.AugAssign),
    (cst.AnnAssign, ast.AnnAssign),
    (cst.For, ast.For),
    (cst.While, ast.While),
)
_INTERESTING = tuple(kind for kind, _ in _KINDS)


def _source_order(node: ast.AST) -> tuple:
    return (node.lineno, node.col_offset, -(node.end_lineno or 0), -(node.end_col_offset or 0))


_NODE_MATCHERS = type(m.Call()).__module__  # where libcst defines one matcher class per node class (not OneOf, TypeOf)


class _Body:
    """A method body without its docstring, with cheap node lookups and real line numbers.

    Lines come from CPython's ast of the same text (libcst's PositionProvider
    would cost more than the whole analysis): the body holds one statement per
    line (``a; b`` is split), so its statements are the ast's, one for one, and
    within one statement nodes of one kind appear in the same order in both trees.
    """

    def __init__(self, func: cst.FunctionDef, module: cst.Module, text: str, first_line: int, signature: HeadSignature):
        statements = one_statement_per_line(func.body.body)
        self.docstring = bool(statements) and m.matches(statements[0], DOCSTRING)
        self.statements = statements[1:] if self.docstring else statements
        self.decorators = [module.code_for_node(d.decorator).strip() for d in func.decorators]
        self.module = module
        self.text = text
        self.first_line = first_line
        self.signature = signature  # what the tree's get_top_tokens and LogitsProcessor call take
        self._nodes: dict[int, list[cst.CSTNode]] = {}
        self._in_scope: dict[int, set[int]] = {}  # id(statement) -> ids of its nodes in the method's own scope
        self._owner: dict[int, int] = {}  # id(node) -> index of its statement
        self._lines: dict[int, int] = {}
        self._ast: list[ast.stmt] | None = None
        self._offset = 0

    def _nodes_of(self, index: int) -> list[cst.CSTNode]:
        statement = self.statements[index]
        nodes = self._nodes.get(id(statement))
        if nodes is None:
            nodes = self._nodes[id(statement)] = nodes_of(statement, _INTERESTING)  # all: lines align with the ast's
            self._owner.update((id(n), index) for n in nodes)
        return nodes

    def find(self, statement: cst.CSTNode, matcher) -> list:
        """The nodes of ``statement`` that ``matcher`` matches and that run in the method's own scope
        (a ``return`` in a nested function returns from that function)."""
        index = next(i for i, s in enumerate(self.statements) if s is statement)
        scope = self._in_scope.get(id(statement))
        if scope is None:
            scope = self._in_scope[id(statement)] = {id(n) for n in walk_scope(statement)}
        nodes = self._nodes_of(index)
        if type(matcher).__module__ == _NODE_MATCHERS:  # a node's matcher matches only that node class
            name = type(matcher).__name__
            nodes = [n for n in nodes if type(n).__name__ == name]
        return [n for n in nodes if id(n) in scope and m.matches(n, matcher)]

    def _ast_statements(self) -> list[ast.stmt]:
        if self._ast is None:
            tree = ast.parse(self.text).body[0]
            self._offset = self.first_line - tree.lineno
            self._ast = tree.body[1:] if self.docstring else tree.body
        return self._ast

    def line(self, node: cst.CSTNode) -> int:
        statements = self._ast_statements()
        for index, statement in enumerate(self.statements):
            if statement is node:
                return statements[index].lineno + self._offset
        if id(node) not in self._lines:
            if id(node) not in self._owner:  # inside a block: its statement's nodes are not listed yet
                for index in range(len(self.statements)):
                    self._nodes_of(index)
            index = self._owner[id(node)]
            ours = self._nodes_of(index)
            for kind, ast_kind in _KINDS:
                mine = [n for n in ours if isinstance(n, kind)]
                theirs = sorted((n for n in ast.walk(statements[index]) if isinstance(n, ast_kind)), key=_source_order)
                self._lines.update((id(a), b.lineno + self._offset) for a, b in zip(mine, theirs))
        return self._lines[id(node)]

    def code(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node).strip()


def params_of(func: cst.FunctionDef) -> list[Param]:
    def build(param: cst.Param, kind: ParamKind) -> Param:
        default = cst.Module([]).code_for_node(param.default) if param.default else None
        return Param(param.name.value, default, kind)

    p = func.params
    out = [build(x, ParamKind.POSONLY) for x in p.posonly_params] + [build(x, ParamKind.POS) for x in p.params]
    if isinstance(p.star_arg, cst.Param):
        out.append(build(p.star_arg, ParamKind.STAR))
    out += [build(x, ParamKind.KWONLY) for x in p.kwonly_params]
    if p.star_kwarg:
        out.append(build(p.star_kwarg, ParamKind.STARSTAR))
    return [x for x in out if x.name != "self"]


def _decompose(
    code: str, first_line: int, signature: HeadSignature = ASSUMED_SIGNATURE
) -> tuple[_Body, cst.FunctionDef]:
    module, func = parse_method(code)
    return _Body(func, module, textwrap.dedent(code), first_line, signature), func


def _calls(body: _Body, statement: cst.CSTNode, matcher) -> list[cst.Call]:
    return [c for c in body.find(statement, matcher) if isinstance(c, cst.Call)]


@dataclass(frozen=True)
class Example:
    """A ``compute_logits`` method and the shape all the rules together give it."""

    code: str
    kind: LogitsKind
    finding: str  # LogitsShape.rule: the name of what was found, e.g. "by-hand" or "post-mask"


def _method(code: str) -> str:
    return textwrap.dedent(code).strip() + "\n"


_PLAIN = _method("""
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)
""")


_ASSIGNED = _method("""
    def compute_logits(self, hidden_states):
        logits = self.logits_processor(self.lm_head, hidden_states)
        return logits
""")


_BRANCHED = _method("""
    def compute_logits(self, hidden_states):
        if self.lora_head is not None:
            logits = self.logits_processor(self.lora_head, hidden_states)
        else:
            logits = self.logits_processor(self.lm_head, hidden_states)
        return logits
""")


class ShapeRule:
    """One ``compute_logits`` shape rule: ``check`` answers a LogitsShape when it objects, else None.

    ``after``: rules that must run first, because this one relies on what they rule
    out (e.g. that there is exactly one head call). ``VALID`` methods pass this rule;
    ``INVALID`` ones are caught by it when all rules run in ``RULES`` order.
    """

    id: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    after: ClassVar[tuple[str, ...]] = ()
    VALID: ClassVar[tuple[Example, ...]]
    INVALID: ClassVar[tuple[Example, ...]]

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        raise NotImplementedError


class Decorated(ShapeRule):
    """A decorator (or a class-level rebinding, which the facts record as one) may change the logits."""

    id = "MTP101"
    name = "decorated"
    message = "compute_logits is wrapped by a decorator, which a mirror would not go through"
    VALID = (Example(_PLAIN, LogitsKind.HEAD, "head"),)
    INVALID = (
        Example(
            _method("""
            @torch.compile
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "decorated",
        ),
        Example(
            _method("""
            @staticmethod
            def compute_logits(self, hidden_states):
                raise NotImplementedError
        """),
            LogitsKind.MANUAL,
            "decorated",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        if body.decorators:
            names = ", ".join(body.decorators)
            return LogitsShape(
                LogitsKind.MANUAL,
                "decorated",
                f"compute_logits is wrapped ({names}); the wrapper may "
                "change the logits, and a mirror would not go through it",
                None,
                params,
            )
        return None


class Stub(ShapeRule):
    """A method that only raises or passes computes no logits: nothing to mirror, nothing to fix."""

    id = "MTP102"
    name = "stub"
    message = "compute_logits is a stub (a docstring, pass, ... or raise only)"
    after = ("decorated",)
    VALID = (Example(_PLAIN, LogitsKind.HEAD, "head"),)
    INVALID = (
        Example(
            _method('''
            def compute_logits(self, hidden_states):
                """Not used by this drafter."""
        '''),
            LogitsKind.STUB,
            "stub",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                raise NotImplementedError("no head")
        """),
            LogitsKind.STUB,
            "stub",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                ...
        """),
            LogitsKind.STUB,
            "stub",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        if not body.statements:
            return LogitsShape(LogitsKind.STUB, "stub", "compute_logits has only a docstring", None, params)
        if all(m.matches(s, STUB_STATEMENT) for s in body.statements):
            first = body.statements[0]
            raises = body.find(first, m.Raise())
            text = "raises NotImplementedError" if raises and "NotImplementedError" in body.code(first) else "is a stub"
            return LogitsShape(
                LogitsKind.STUB, "stub", f"compute_logits {text} (line {body.line(first)})", body.line(first), params
            )
        return None


class ByHand(ShapeRule):
    """Logits multiplied out by hand bypass the logits processor (scaling, soft-capping, vocabulary
    gathering), which get_top_tokens goes through."""

    id = "MTP103"
    name = "by-hand"
    message = "logits computed by hand (matmul, linear, einsum, ...) instead of self.logits_processor"
    VALID = (Example(_PLAIN, LogitsKind.HEAD, "head"),)
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return torch.matmul(hidden_states, self.lm_head.weight.t())
        """),
            LogitsKind.MANUAL,
            "by-hand",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                return logits + hidden_states @ self.bias
        """),
            LogitsKind.MANUAL,
            "by-hand",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = torch.addmm(self.zero, hidden_states, self.lm_head.weight.t(), alpha=1.0 / self.mup)
                return logits[..., : self.logits_processor.org_vocab_size]
        """),
            LogitsKind.MANUAL,
            "by-hand",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        for index, statement in enumerate(body.statements):
            for node in body.find(statement, BY_HAND):
                what = body.code(node.func) if isinstance(node, cst.Call) else "@"
                reason = f"logits computed by hand ({what}, line {body.line(node)})"
                tail = body.statements[index:]
                vocabulary = _vocabulary_change(_Flow(body, tail, _assigned_name(statement)))
                if vocabulary is not None:
                    reason += f", then {vocabulary}"
                return LogitsShape(
                    LogitsKind.MANUAL,
                    "by-hand",
                    reason,
                    body.line(node),
                    params,
                    post=PostKind.VOCAB if vocabulary else None,
                )
        return None


VOCAB_SLICE = m.Subscript(
    value=m.Name(),
    slice=[
        m.AtLeastN(n=1),
        m.SubscriptElement(slice=m.Slice(lower=None, upper=m.MatchIfTrue(lambda upper: upper is not None), step=None)),
    ],
)
VOCAB_PAD = m.Call(func=m.Attribute(attr=m.Name("pad")) | m.Name("pad"))


def _vocabulary_change(flow: _Flow) -> str | None:
    """``truncated ...`` / ``padded ...`` with the line and code of the first change of the logits
    that cuts the last (vocabulary) dimension of a tensor or pads it: a different vocabulary from
    the one get_top_tokens reduces over."""
    found = flow.vocabulary_cut()
    if found is None:
        return None
    body, (node, line) = flow.body, found
    if m.matches(node, VOCAB_SLICE):
        upper = node.slice[-1].slice.upper  # type: ignore[attr-defined]
        return f"truncated to {body.code(upper)} entries of the vocabulary (line {line}: `{body.code(node)}`)"
    return f"padded (line {line}: `{body.code(node)}`)"


# A statement that may change a tensor, and the forms the changes take.
CHANGE_STATEMENT = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Expr, cst.Return)
IN_PLACE_CALL = m.Call(func=m.Attribute(attr=m.Name(m.MatchRegex(r".*[^_]_$"))))
# Writes through an index, in place or into a copy: masking when the tensor is the head's logits.
MASK_CALL = m.Call(func=m.Attribute(attr=m.Name(m.MatchIfTrue(lambda name: name in MASK_METHODS))))
SUBSCRIPT_STORE = m.Assign(targets=[m.ZeroOrMore(), m.AssignTarget(target=m.Subscript()), m.ZeroOrMore()])
TANH = m.Call(func=m.Attribute(attr=m.Name("tanh")) | m.Name("tanh"))
PLAIN_ALIAS = m.Assign(targets=[m.AtLeastN(m.AssignTarget(target=m.Name()), n=1)], value=m.Name())
# ``out = logits.clone()`` (``.contiguous()``, ``.detach()``): the same values, in a tensor of its own
COPY_ALIAS = m.Assign(
    targets=[m.AtLeastN(m.AssignTarget(target=m.Name()), n=1)],
    value=m.Call(
        func=m.Attribute(value=m.Name(), attr=m.Name("contiguous") | m.Name("clone") | m.Name("detach")), args=[]
    ),
)
# ``wide = logits.new_full(...)``, ``torch.zeros_like(logits)``: a new tensor that takes only the logits' shape
# and dtype, none of their values: a change, yet not the one a reason should name
ALLOCATION = m.Assign(
    value=m.Call(
        func=m.Attribute(
            attr=m.Name(m.MatchIfTrue(lambda name: name in ("new_full", "new_zeros", "new_ones", "new_empty")))
        )
        | m.Attribute(
            value=m.Name("torch"),
            attr=m.Name(m.MatchIfTrue(lambda name: name.removesuffix("_like") in ("full", "zeros", "ones", "empty"))),
        )
    )
)
# ``torch.where(cond, logits, float("-inf"))``: the logits where ``cond`` holds, another value elsewhere
WHERE_CALL = m.Call(func=m.Attribute(value=m.Name("torch"), attr=m.Name("where")), args=[m.Arg(), m.Arg(), m.Arg()])

# The draft-to-target scatter: ``new = logits.new_full((rows, vocab), float("-inf"))`` (or
# ``torch.full``), ``new[:, ids] = logits``, ``return new``, where ``ids`` is ``self.draft_id_to_target_id``
# (absolute ids) or ``torch.arange(n) + self.draft_id_to_target_id`` (offsets), through plain locals.
D2T = m.Attribute(value=SELF, attr=m.Name("draft_id_to_target_id"))
NEG_INF = m.Call(
    func=m.Name("float"), args=[m.Arg(m.SimpleString(m.MatchRegex(r"""^['"]-inf(inity)?['"]$""")))]
) | m.UnaryOperation(
    operator=m.Minus(),
    expression=m.Call(func=m.Name("float"), args=[m.Arg(m.SimpleString(m.MatchRegex(r"""^['"]inf(inity)?['"]$""")))])
    | m.Attribute(value=m.Name("torch") | m.Name("math"), attr=m.Name("inf")),
)
ROWS_BY_VOCAB = m.Arg(value=m.Tuple(elements=[m.Element(), m.Element()]), keyword=None)
NEG_INF_FILLED = m.Call(
    func=m.Attribute(value=m.Name(), attr=m.Name("new_full")), args=[ROWS_BY_VOCAB, m.Arg(NEG_INF), m.ZeroOrMore()]
) | m.Call(
    func=m.Attribute(value=m.Name("torch"), attr=m.Name("full")), args=[ROWS_BY_VOCAB, m.Arg(NEG_INF), m.ZeroOrMore()]
)
# ``torch.arange(n)`` (device, dtype aside): the draft ids 0..n-1
DRAFT_IDS = m.Call(
    func=m.Attribute(value=m.Name("torch"), attr=m.Name("arange")),
    args=[m.Arg(keyword=None, star=""), m.ZeroOrMore(m.Arg(keyword=m.Name("device") | m.Name("dtype")))],
)
COLUMN_STORE = m.SimpleStatementLine(
    body=[
        m.Assign(
            targets=[
                m.AssignTarget(
                    target=m.Subscript(
                        value=m.Name(),
                        slice=[
                            m.SubscriptElement(m.Slice(lower=None, upper=None, step=None)),
                            m.SubscriptElement(m.Index()),  # the ids: a slice of columns is a pad, no scatter
                        ],
                    )
                )
            ],
        )
    ]
)
SCATTER_CALL = m.Call(
    func=m.Attribute(attr=m.Name("scatter") | m.Name("scatter_") | m.Name("index_copy") | m.Name("index_copy_")),
    args=[m.Arg(keyword=None), m.Arg(keyword=None), m.Arg(keyword=None)],
)
D2T_UNSET = m.Comparison(left=D2T, comparisons=[m.ComparisonTarget(operator=m.Is(), comparator=m.Name("None"))])
ASSERT = m.SimpleStatementLine(body=[m.Assert()])


@dataclass
class _TargetScatter:
    """The draft-to-target scatter found after the head call: its store, how it maps draft ids when
    nothing else changes the logits or returns (None: something does, or the ids are no such map),
    and the statements after the head call that are not part of it."""

    store: cst.CSTNode
    target_map: TargetMap | None
    rest: list[cst.BaseStatement]

    def outside(self, changes: list[cst.CSTNode]) -> cst.CSTNode | None:
        """The first of ``changes`` (or, else, of the other statements) that is not part of the scatter."""
        inside = {id(n) for statement in self.rest for n in walk_scope(statement)}
        return next((c for c in changes if id(c) in inside), self.rest[0] if self.rest else None)


def _target_scatter(statements: list[cst.BaseStatement], name: str) -> _TargetScatter | None:
    """The scatter of the logits bound to ``name`` into a ``-inf`` tensor of the target vocabulary,
    read from its statements (docs/mirror.md); None without such a store."""
    stores = [s for s in statements if m.matches(s, COLUMN_STORE) and _root(s.body[0].value) == name]  # type: ignore[attr-defined]
    for store in stores:
        target = store.body[0].targets[0].target  # type: ignore[attr-defined]
        used: list[cst.CSTNode] = [store]
        target_map = _ids_map(statements, target.slice[1].slice.value, used)
        new = target.value.value
        allocation = _bound(statements, new)
        if target_map is None or allocation is None or not m.matches(allocation.body[0].value, NEG_INF_FILLED):  # type: ignore[attr-defined]
            continue
        used.append(allocation)
        returned = m.matches(statements[-1], m.SimpleStatementLine(body=[m.Return(value=m.Name(new))]))
        if returned:
            used.append(statements[-1])
        rest = [
            s
            for s in statements
            if not any(s is u for u in used) and not m.matches(s, ASSERT) and not _d2t_unset_returns(s, name)
        ]
        # it is what the method returns, only the allocation and the store write into it, and no other
        # statement can change a tensor (the logits, the map) or return
        alone = (
            returned
            and m.matches(store.body[0].value, m.Name(name))  # type: ignore[attr-defined]  (not a cut of them)
            and len(_writes(statements, new)) == 2
            and not _writes(statements, name)
            and not any(map(_may_act, rest))
        )
        return _TargetScatter(store, target_map if alone else None, rest)
    for statement in statements:  # the other spelling, a scatter method: recognised, its map never claimed
        for call in nodes_in_scope(statement, cst.Call):
            if m.matches(call, SCATTER_CALL) and _root(call.args[2].value) == name:
                if _ids_map(statements, call.args[1].value, []) is not None:
                    return _TargetScatter(call, None, [])
    return None


LOCAL_BINDING = m.Assign(targets=[m.AtLeastN(m.AssignTarget(target=m.Name()), n=1)])


def _may_act(statement: cst.BaseStatement) -> bool:
    """Whether ``statement`` may return or change a tensor: anything but plain local bindings without
    an in-place call (the caller checks that they bind nothing the scatter reads); an expression
    statement runs only for what it does."""
    acting = (cst.Return, cst.Expr, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.With, cst.Del)
    if nodes_in_scope(statement, acting):
        return True
    return any(not m.matches(n, LOCAL_BINDING) for n in nodes_in_scope(statement, cst.Assign)) or any(
        m.matches(c, IN_PLACE_CALL) for c in nodes_in_scope(statement, cst.Call)
    )


def _d2t_unset_returns(statement: cst.BaseStatement, name: str) -> bool:
    """``if self.draft_id_to_target_id is None:`` (asserts, then) ``return NAME``: the draft logits
    where there is no map, as LocalArgmaxMixin returns the draft argmax."""
    if not m.matches(statement, m.If(test=D2T_UNSET, orelse=None)):
        return False
    *asserts, last = statement.body.body  # type: ignore[attr-defined]
    return all(m.matches(a, ASSERT) for a in asserts) and m.matches(
        last, m.SimpleStatementLine(body=[m.Return(value=m.Name(name))])
    )


def _bound(statements: list[cst.BaseStatement], name: str) -> cst.SimpleStatementLine | None:
    """The top-level ``NAME = EXPR`` of ``statements`` that first binds ``name``."""
    plain = m.SimpleStatementLine(body=[m.Assign(targets=[m.AssignTarget(target=m.Name(name))])])
    return next((s for s in statements if m.matches(s, plain)), None)  # type: ignore[misc]


def _followed(
    statements: list[cst.BaseStatement], value: cst.BaseExpression, used: list[cst.CSTNode]
) -> cst.BaseExpression:
    """``value``, a local name followed to the one plain assignment that binds it (recorded in ``used``)."""
    for _ in range(8):
        if not isinstance(value, cst.Name):
            break
        bound = _bound(statements, value.value)
        if bound is None or len(_writes(statements, value.value)) != 1:
            break
        used.append(bound)
        value = bound.body[0].value  # type: ignore[attr-defined]
    return value


def _ids_map(statements: list[cst.BaseStatement], ids: cst.BaseExpression, used: list[cst.CSTNode]) -> TargetMap | None:
    """How the ids a scatter writes the draft logits to map draft id ``k``: ``d2t[k]`` for
    ``self.draft_id_to_target_id`` itself, ``k + d2t[k]`` for it plus ``torch.arange(n)``."""
    ids = _followed(statements, ids, used)
    if m.matches(ids, D2T):
        return TargetMap.ABSOLUTE
    if not m.matches(ids, m.BinaryOperation(operator=m.Add())):
        return None
    operands = [_followed(statements, ids.left, used), _followed(statements, ids.right, used)]  # type: ignore[attr-defined]
    if any(m.matches(o, D2T) for o in operands) and any(m.matches(o, DRAFT_IDS) for o in operands):
        return TargetMap.OFFSET
    return None


def _assigned_name(statement: cst.BaseStatement) -> str | None:
    """NAME of a statement ``NAME = ...`` or ``NAME: T = ...``."""
    return bound_name(statement) if m.matches(statement, bound_to_name()) else None  # type: ignore[arg-type]


def _root(node: cst.CSTNode) -> str | None:
    """The variable a chain of subscripts and attributes starts from (``logits`` of ``logits[:, 0].data``)."""
    while isinstance(node, (cst.Subscript, cst.Attribute)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


def _written(target: cst.BaseExpression) -> set[str]:
    """The variables an assignment target writes: the names it binds (unpacking included) and those
    whose subscripts or attributes it stores into."""
    if isinstance(target, (cst.Tuple, cst.List)):
        return {name for element in target.elements for name in _written(element.value)}
    root = _root(target)
    return {root} if root is not None else set()


def _targets(statement: cst.CSTNode) -> list[cst.BaseExpression]:
    if isinstance(statement, cst.Assign):
        return [t.target for t in statement.targets]
    if isinstance(statement, (cst.AugAssign, cst.AnnAssign)) and not m.matches(statement, m.AnnAssign(value=None)):
        return [statement.target]
    return []


class _Flow:
    """What the statements after a head call (``statements``, in any block) do to its logits.

    Only statements that change them count: an assignment to the variable the head call's result is
    bound to (``name``), to a plain alias of it (``out = logits``) or to a variable that is returned; a
    store into a subscript of one; an in-place method called on one (``logits.index_put_(...)``); a
    return of anything but one of them. Reading the logits (logging them, keeping a slice of them
    elsewhere) and changing other tensors (``self.calls.fill_(1)``) change nothing. Another head call
    is left to the rules about several heads.
    """

    def __init__(self, body: _Body, statements: list[cst.BaseStatement], name: str | None):
        self.body = body
        self.statements = statements
        candidates = [n for s in statements for n in nodes_in_scope(s, CHANGE_STATEMENT) if not has_logits_call(n)]
        returned = {r.value.value for r in candidates if m.matches(r, m.Return(value=m.Name()))}  # type: ignore[attr-defined]
        self.returned = returned
        self.aliases = {name} if name is not None else set()
        grown = True
        while grown:
            before = len(self.aliases)
            for alias in candidates:
                if self._aliasing(alias):
                    self.aliases |= {t.target.value for t in alias.targets}  # type: ignore[attr-defined]
            grown = len(self.aliases) > before
        self.holders = self.aliases | returned
        self.changes = [n for n in candidates if self._changes(n)]
        self.others = [n for n in candidates if n not in self.changes and not self._returns_holder(n)]
        self.scatter = _target_scatter(statements, name) if name is not None else None

    def _aliasing(self, statement: cst.CSTNode) -> bool:
        """``out = logits``, or ``out = logits.clone()`` where ``out`` is what the method returns: ``out``
        holds the logits' values (a copy the method does not return is a scratch tensor: changing it
        changes no logits)."""
        if m.matches(statement, PLAIN_ALIAS):
            return statement.value.value in self.aliases  # type: ignore[attr-defined]
        return (
            m.matches(statement, COPY_ALIAS)
            and statement.value.func.value.value in self.aliases  # type: ignore[attr-defined]
            and {t.target.value for t in statement.targets} <= self.returned  # type: ignore[attr-defined]
        )

    def _returns_holder(self, statement: cst.CSTNode) -> bool:
        return m.matches(statement, m.Return(value=m.Name(m.MatchIfTrue(lambda name: name in self.holders))))

    def _changes(self, statement: cst.CSTNode) -> bool:
        if m.matches(statement, m.Return()):
            return not self._returns_holder(statement)
        if self._changes_in_place(statement):
            return True
        if m.matches(statement, m.Expr()) or self._aliasing(statement):
            return False
        return any(_written(t) & self.holders for t in _targets(statement))

    def _changes_in_place(self, statement: cst.CSTNode) -> bool:
        """An in-place method called on the logits anywhere in the statement: on its own line, as the
        value of an assignment (``masked = logits.masked_fill_(...)``) or as an argument."""
        return any(
            m.matches(call, IN_PLACE_CALL) and _root(call.func.value) in self.holders  # type: ignore[attr-defined]
            for call in nodes_in_scope(statement, cst.Call)
        )

    def masks(self) -> list[cst.CSTNode]:
        """Stores into the head's logits through an index (``logits[:, ids] = -inf``, ``-=``), the
        masking calls on them (``logits.index_fill_(...)``, ``torch.masked_fill(logits, ...)``) and a
        ``torch.where(cond, logits, other)`` (three positional arguments, ``torch`` by that name) that
        keeps them only where its condition holds; other spellings of it are changes, not masks."""
        found: list[cst.CSTNode] = []
        for statement in self.changes:
            if any(isinstance(t, cst.Subscript) and _root(t) in self.aliases for t in _targets(statement)):
                found.append(statement)
            for call in nodes_in_scope(statement, cst.Call):
                first = call.args[0].value if call.args else None
                receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
                if m.matches(call, MASK_CALL) and {_root(receiver), _root(first)} & self.aliases:  # type: ignore[arg-type]
                    found.append(call)
                elif m.matches(call, WHERE_CALL) and {_root(a.value) for a in call.args[1:]} & self.aliases:
                    found.append(call)
        return found

    def vocabulary_cut(self) -> tuple[cst.CSTNode, int] | None:
        """The first cut of the last dimension (``logits[..., :n]``) or pad in a value the logits take,
        with the line of its statement."""
        for statement in self.changes:
            value = getattr(statement, "value", None)
            if isinstance(statement, cst.Expr) or value is None:
                continue
            for node in nodes_in_scope(value, (cst.Subscript, cst.Call)):
                if m.matches(node, VOCAB_SLICE | VOCAB_PAD):
                    return node, self.body.line(statement)
        return None

    def kind(self) -> PostKind:
        """Masking wins, since a scatter-aware method still ignores it; then a draft-to-target scatter,
        recognised by its statements (``scatter``)."""
        if not self.changes:
            return PostKind.OTHER
        changed = "\n".join(self.body.code(s) for s in self.changes)
        if self.masks():
            return PostKind.MASK
        if self.scatter is not None:
            return PostKind.D2T_SCATTER
        if self.vocabulary_cut() is not None:
            return PostKind.VOCAB
        if "tanh" in changed or "soft_cap" in changed or "softcap" in changed:
            return PostKind.SOFTCAP
        return PostKind.OTHER

    def reason(self, kind: PostKind) -> tuple[int, str]:
        """The line that decides, and why the mirror cannot be written (the change that decides; a
        statement that changes no logits still has no place in a mirror)."""
        line, code = self.deciding(kind)
        reason = f"{POST_REASONS[kind] if self.changes else UNCHANGED_TAIL} (line {line}: `{code}`)"
        scatter = self.scatter if kind == PostKind.D2T_SCATTER else None
        other = scatter.outside(self.changes) if scatter is not None and scatter.target_map is None else None
        if other is not None:
            reason += (
                f", not only the scatter through draft_id_to_target_id (line {self.body.line(other)}: "
                f"`{self.body.code(other).splitlines()[0]}`)"
            )
        return line, reason

    def deciding(self, kind: PostKind) -> tuple[int, str]:
        """Line and code of the statement that does what ``kind`` says (the mask, the scatter, the cut,
        the soft-cap), inside whatever ``if`` guards it; else of the first change of the logits; else
        of the first statement, in any block, that does not return them."""
        body = self.body
        found: list[cst.CSTNode] = []
        if kind == PostKind.MASK:
            found = self.masks()
        elif kind == PostKind.VOCAB:
            node, line = self.vocabulary_cut()  # type: ignore[misc]
            return line, body.code(node)
        elif kind == PostKind.D2T_SCATTER:
            assert self.scatter is not None
            found = [self.scatter.store]
        elif kind == PostKind.SOFTCAP:
            found = [n for s in self.changes for n in nodes_in_scope(s, cst.Call) if m.matches(n, TANH)]
        if found:
            return body.line(found[0]), body.code(found[0])
        changes = [s for s in self.changes if not m.matches(s, ALLOCATION)] or self.changes  # one that moves values
        for statement in [*changes, *self.others][:1]:
            named = statement.value if m.matches(statement, m.Expr(value=m.Call())) else statement
            if not isinstance(named, cst.Expr):
                return body.line(named), body.code(named).splitlines()[0]
        effective = [s for s in self.statements if not m.matches(s, RETURN_NAME)] or self.statements
        return body.line(effective[0]), body.code(effective[0]).splitlines()[0]


class NoHead(ShapeRule):
    """Without a head call (self.logits_processor, a delegate's or super()'s compute_logits) there is
    nothing a mirror could call; a helper that computes the logits must be ported by hand."""

    id = "MTP104"
    name = "no-head"
    message = "compute_logits calls no self.logits_processor, delegate or super() compute_logits"
    after = ("stub", "by-hand")
    VALID = (
        Example(_PLAIN, LogitsKind.HEAD, "head"),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.model.compute_logits(hidden_states)
        """),
            LogitsKind.DELEGATE,
            "delegate",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super().compute_logits(hidden_states)
        """),
            LogitsKind.SUPER,
            "super",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self._logits(hidden_states)
        """),
            LogitsKind.MANUAL,
            "helper",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return compute_logits(self.head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "no-head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return helpers.compute_logits(self.head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "helper",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor.forward(self.lm_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "processor-method",
        ),
        Example(  # the lambda's head call runs only where the lambda is called
            _method("""
            def compute_logits(self, hidden_states):
                run = lambda h: self.logits_processor(self.lm_head, h)
                return run(hidden_states)
        """),
            LogitsKind.MANUAL,
            "nested-head",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        for statement in body.statements:
            if _calls(body, statement, LOGITS_CALL):
                return None
        for statement in body.statements:
            for call in nodes_of(statement, cst.Call):  # none in the method's scope: one in a nested one?
                if m.matches(call, LOGITS_CALL):
                    return LogitsShape(
                        LogitsKind.MANUAL,
                        "nested-head",
                        f"the head is called only inside a nested function, lambda or class (line {body.line(call)}), "
                        "which runs where it is called; a mirror does not follow it there",
                        body.line(call),
                        params,
                    )
        for statement in body.statements:
            for call in _calls(body, statement, ANY_COMPUTE_LOGITS_CALL):
                return LogitsShape(
                    LogitsKind.MANUAL,
                    "helper",
                    f"calls helper {body.code(call.func)} instead of self.logits_processor (line {body.line(call)})",
                    body.line(call),
                    params,
                )
        for statement in body.statements:
            for call in _calls(body, statement, PROCESSOR_METHOD_CALL):
                method = call.func.attr.value  # type: ignore[attr-defined]
                return LogitsShape(
                    LogitsKind.MANUAL,
                    "processor-method",
                    f"the head is called as `self.logits_processor.{method}(...)` (line {body.line(call)}), not as "
                    "`self.logits_processor(...)`: calling the module runs its hooks, which this skips, so "
                    "get_top_tokens is not the same call",
                    body.line(call),
                    params,
                )
        for statement in body.statements:
            for call in _calls(body, statement, m.Call(func=m.Attribute(value=SELF))):
                return LogitsShape(
                    LogitsKind.MANUAL,
                    "helper",
                    f"logits come from {body.code(call.func)}(...), not self.logits_processor (line {body.line(call)})",
                    body.line(call),
                    params,
                )
        return LogitsShape(
            LogitsKind.MANUAL, "no-head", "no self.logits_processor call in compute_logits", None, params
        )


class HeadLoop(ShapeRule):
    """A head call inside a loop runs once per head (Medusa): compute_logits returns one set of
    logits per head, which a single get_top_tokens call cannot mirror; the reason names what the
    loop does with each set (scatters it, collects it into a list)."""

    id = "MTP111"
    name = "head-loop"
    message = "the head is called in a loop over several heads"
    after = ("no-head",)
    VALID = (Example(_PLAIN, LogitsKind.HEAD, "head"), Example(_BRANCHED, LogitsKind.HEAD, "head"))
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits_lst = []
                for hs, lm_head in zip(hidden_states, self.lm_heads):
                    logits_lst.append(self.logits_processor(lm_head, hs))
                return logits_lst
        """),
            LogitsKind.MANUAL,
            "head-loop",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                out = []
                for hs, lm_head in zip(hidden_states, self.lm_heads):
                    logits = self.logits_processor(lm_head, hs)
                    full = logits.new_full((logits.shape[0], self.vocab_size), float("-inf"))
                    full[..., self.token_map] = logits
                    out.append(full)
                return out
        """),
            LogitsKind.MANUAL,
            "head-loop",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        index = _head_index(body)
        loop = next(
            (n for n in nodes_in_scope(body.statements[index], (cst.For, cst.While)) if has_logits_call(n.body)),
            None,
        )
        if loop is None:
            return None
        header = body.code(loop).splitlines()[0].rstrip(":")
        line = body.line(loop)
        what = [f"the head is called once per iteration of a loop (line {line}: `{header}`)"]
        for node in body.find(body.statements[index], m.Assign()):
            if m.matches(node, SUBSCRIPT_STORE):
                what.append(f"each result is scattered into a new tensor (line {body.line(node)}: `{body.code(node)}`)")
                break
        returned = [r for s in body.statements[index:] for r in body.find(s, m.Return(value=m.Name() | m.List()))]
        if returned and self._collects(body, returned[-1]):
            what.append(f"a list of logits is returned (line {body.line(returned[-1])}: `{body.code(returned[-1])}`)")
        return LogitsShape(LogitsKind.MANUAL, "head-loop", "; ".join(what), line, params)

    @staticmethod
    def _collects(body: _Body, returned: cst.Return) -> bool:
        """``return [...]`` or ``return NAME`` where NAME starts as a list."""
        if isinstance(returned.value, cst.List):
            return True
        name = returned.value.value  # type: ignore[union-attr]
        for statement in body.statements:
            for assign in body.find(statement, m.Assign(targets=[m.AssignTarget(target=m.Name(name))])):
                if isinstance(assign.value, (cst.List, cst.ListComp)) or m.matches(
                    assign.value, m.Call(func=m.Name("list"))
                ):
                    return True
            for annotated in nodes_in_scope(statement, cst.AnnAssign):
                if m.matches(annotated.target, m.Name(name)) and isinstance(annotated.value, (cst.List, cst.ListComp)):
                    return True
        return False


class SeveralHeads(ShapeRule):
    """Which of several head calls produces the logits depends on control flow a mirror cannot copy."""

    id = "MTP105"
    name = "several-heads"
    message = "compute_logits calls the head more than once"
    after = ("no-head", "changed-in-block")
    VALID = (
        Example(_PLAIN, LogitsKind.HEAD, "head"),
        Example(_BRANCHED, LogitsKind.HEAD, "head"),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if self.first:
                    return self.logits_processor(self.first_head, hidden_states)
                elif self.nested:
                    if self.second:
                        logits = self.logits_processor(self.second_head, hidden_states)
                    else:
                        logits = self.logits_processor(self.third_head, hidden_states)
                else:
                    logits = self.logits_processor(self.lm_head, hidden_states)
                return logits
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(  # early returns, then the fallthrough: the same control flow as if/elif/else
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                if spec_step_idx == 1:
                    return self.logits_processor(self.heads[1], hidden_states)
                elif spec_step_idx == 2:
                    logits = self.logits_processor(self.heads[2], hidden_states)
                    return logits
                if self.shared:
                    return self.logits_processor(self.lm_head, self.norm(hidden_states))
                logits = self.logits_processor(self.lm_head, hidden_states)
                return logits
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(  # a match whose cases return, or bind the logits on every path (``case _:``) then return them
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                match spec_step_idx:
                    case 0:
                        return self.logits_processor(self.lm_head, hidden_states)
                    case 1 | 2 if self.shared:
                        logits = self.logits_processor(self.lm_head, self.norm(hidden_states))
                        return logits
                return self.logits_processor(self.heads[spec_step_idx], hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                match spec_step_idx:
                    case 0:
                        logits = self.logits_processor(self.lm_head, hidden_states)
                    case _:
                        logits = self.logits_processor(self.heads[spec_step_idx], hidden_states)
                return logits
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(  # the nested function's head call runs only where it is called: never here
            _method("""
            def compute_logits(self, hidden_states):
                def probe(h):
                    return self.logits_processor(self.probe_head, h)

                return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if self.lora_head is not None:
                    logits = self.logits_processor(self.lora_head, hidden_states)
                logits = self.logits_processor(self.lm_head, hidden_states)
                return logits
        """),
            LogitsKind.MANUAL,
            "several-heads",
        ),
        Example(  # an arm that binds its head's result without returning it falls through to the next head
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                match spec_step_idx:
                    case 0:
                        logits = self.logits_processor(self.lm_head, hidden_states)
                    case 1:
                        return self.logits_processor(self.heads[1], hidden_states)
                logits = self.logits_processor(self.heads[spec_step_idx], hidden_states)
                return logits
        """),
            LogitsKind.MANUAL,
            "several-heads",
        ),
        Example(  # a case whose head is called in its guard
            _method("""
            def compute_logits(self, hidden_states):
                match self.mode:
                    case "peek" if self.logits_processor(self.lm_head, hidden_states) is not None:
                        return self.logits_processor(self.lm_head, hidden_states)
                    case _:
                        return self.logits_processor(self.other_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "several-heads",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        calls = [c for s in body.statements for c in _calls(body, s, LOGITS_CALL)]
        if len(calls) > 1 and _branched_arms(body) is None:
            lines = ", ".join(str(body.line(c)) for c in calls)
            first = body.statements[_head_index(body)]
            header = f"`{body.code(first).splitlines()[0]}` (line {body.line(first)})"
            if isinstance(first, (cst.If, cst.Match)):
                arms = "cases" if isinstance(first, cst.Match) else "arms"
                why = (
                    f"one inside {header}, whose {arms} do not each end in their own head call, or return it "
                    "before a fallthrough that does; a mirror copies only such arms"
                )
            else:
                why = "on one path"
            return LogitsShape(
                LogitsKind.MANUAL,
                "several-heads",
                f"several head calls (lines {lines}), {why}",
                body.line(calls[0]),
                params,
            )
        return None


def _head_index(body: _Body) -> int:
    return next(i for i, s in enumerate(body.statements) if _calls(body, s, LOGITS_CALL))


def _head_expression(statement: cst.BaseStatement) -> tuple[cst.Call, str | None] | None:
    """The head call of ``return CALL`` or ``NAME = CALL`` (``NAME: T = CALL``), and NAME."""
    if m.matches(statement, m.SimpleStatementLine(body=[m.Return(value=LOGITS_CALL)])):
        return statement.body[0].value, None  # type: ignore[attr-defined]
    if m.matches(statement, bound_to_name(LOGITS_CALL)):
        return statement.body[0].value, bound_name(statement)  # type: ignore[attr-defined,arg-type]
    return None


@dataclass(frozen=True)
class _Branched:
    """Head calls in the arms of an ``if`` chain or the cases of a ``match`` (early returns included):
    mirrorable arm by arm."""

    index: int  # of the ``if`` (``match``) in the body's statements
    end: int  # of the first statement after the arms and any fallthrough: what a mirror does not copy
    calls: tuple[cst.Call, ...]
    name: str | None  # the name the arms that do not return assign, and the body then returns; None: all return


@dataclass(frozen=True)
class _Arms:
    """The head calls ending the arms of an ``if`` chain or a ``match``, each arm in its own form
    (``return CALL``, ``NAME = CALL`` with or without ``return NAME`` after it, a nested chain), and
    the name the arms that do not return assign (None: every arm returns)."""

    calls: tuple[cst.Call, ...]
    name: str | None


def _arms(statement: cst.If | cst.Match) -> tuple[list[cst.BaseSuite], bool]:
    """The blocks of an ``if``/``elif``/``else`` chain or of a ``match``'s cases, and whether one of
    them runs on every path (a final ``else``, an irrefutable last case)."""
    if isinstance(statement, cst.Match):
        return [case.body for case in statement.cases], exhaustive(statement)
    arms: list[cst.BaseSuite] = []
    node: cst.If | cst.Else | None = statement
    while isinstance(node, cst.If):
        arms.append(node.body)
        node = node.orelse
    return [*arms, node.body] if isinstance(node, cst.Else) else arms, exhaustive(statement)


def _tests(statement: cst.If | cst.Match) -> list[cst.CSTNode]:
    """What the chain evaluates to pick an arm: the conditions, or the subject and the case patterns
    and guards."""
    if isinstance(statement, cst.Match):
        return [statement.subject, *(part for c in statement.cases for part in (c.pattern, c.guard) if part)]
    tests: list[cst.CSTNode] = []
    node: cst.If | cst.Else | None = statement
    while isinstance(node, cst.If):
        tests.append(node.test)
        node = node.orelse
    return tests


def _returns_name(statements: list[cst.BaseStatement], name: str | None) -> bool:
    """``statements`` is exactly ``return NAME``."""
    return (
        name is not None
        and len(statements) == 1
        and m.matches(statements[0], m.SimpleStatementLine(body=[m.Return(value=m.Name(name))]))
    )


def _chain_arms(statement: cst.If | cst.Match) -> tuple[_Arms, bool] | None:
    """Every arm of the chain (the ``match``) ends in its head call (no head call in what picks the
    arm), and whether an arm runs on every path; None otherwise, when the arms that do not return
    assign different names, or when there is no arm for every path and some arm does not return."""
    arms, exhaustive = _arms(statement)
    if any(has_logits_call(test) for test in _tests(statement)):
        return None
    calls: list[cst.Call] = []
    names: set[str] = set()
    for arm in arms:
        found = _block_arms(one_statement_per_line(arm.body) if isinstance(arm, cst.IndentedBlock) else [])
        if found is None:
            return None
        calls += found.calls
        names |= {found.name} if found.name is not None else set()
    if len(names) > 1 or (names and not exhaustive):
        return None
    return _Arms(tuple(calls), names.pop() if names else None), exhaustive


def _head_block(statements: list[cst.BaseStatement]) -> tuple[int, int, _Arms] | None:
    """Statements without a return or a head call, then the head: ``return CALL``, ``NAME = CALL``,
    an ``if`` chain or ``match`` whose arms end in their head calls, or one whose every arm returns
    but some path falls through (early returns), then the same again for the fallthrough. Answers
    where the head starts, where what follows it starts, and the arms; None for any other shape."""
    index = next((i for i, s in enumerate(statements) if has_logits_call(s)), None)
    if index is None:
        return None
    for earlier in statements[:index]:
        if nodes_in_scope(earlier, (cst.Return, cst.Yield)):
            return None
    head = statements[index]
    if isinstance(head, (cst.If, cst.Match)):
        chain = _chain_arms(head)
        if chain is None:
            return None
        arms, exhaustive = chain
        if exhaustive:
            return index, index + 1, arms
        fallthrough = _head_block(statements[index + 1 :])
        if fallthrough is None:
            return None
        _, end, rest = fallthrough
        return index, index + 1 + end, _Arms(arms.calls + rest.calls, rest.name)
    expression = _head_expression(head)
    if expression is None or not m.matches(expression[0], HEAD_CALL):
        return None
    return index, index + 1, _Arms((expression[0],), expression[1])


def _block_arms(statements: list[cst.BaseStatement]) -> _Arms | None:
    """One arm (``_head_block``), then nothing or ``return NAME``."""
    found = _head_block(statements)
    if found is None:
        return None
    _, end, arms = found
    after = statements[end:]
    if not after:
        return arms
    return _Arms(arms.calls, None) if _returns_name(after, arms.name) else None


def _branched_arms(body: _Body) -> _Branched | None:
    """The body's first head statement, an ``if`` chain or ``match`` whose every arm ends in its head
    call (with its fallthrough, where arms return early); what follows is not looked at, save that
    it calls no head."""
    index = next((i for i, s in enumerate(body.statements) if _calls(body, s, LOGITS_CALL)), None)
    if index is None or not isinstance(body.statements[index], (cst.If, cst.Match)):
        return None
    found = _head_block(body.statements)
    if found is None or found[0] != index or any(has_logits_call(s) for s in body.statements[found[1] :]):
        return None
    _, end, arms = found
    return _Branched(index, end, arms.calls, arms.name)


def _keyword(statement: cst.BaseStatement) -> str:
    """``if`` or ``match``: the statement whose arms hold the head calls, as a reason names it."""
    return "match" if isinstance(statement, cst.Match) else "if"


def _branched(body: _Body) -> _Branched | None:
    """Arms that end in their head calls, then nothing (every arm returns) or ``return NAME``."""
    found = _branched_arms(body)
    if found is None:
        return None
    tail = body.statements[found.end :]
    if (found.name is None and not tail) or _returns_name(tail, found.name):
        return found
    return None


class ChangedInBlock(ShapeRule):
    """Logits changed after a head call that sits in a block (an ``if`` arm, a ``with``): a mirror
    of the head call alone would pick tokens the change does not. The reason names the change, not
    the head calls. (A plain head statement followed by a change is post-processing, caught there;
    so is any change but a mask after an ``if`` whose every arm ends in its head call.)"""

    id = "MTP110"
    name = "changed-in-block"
    message = "logits from a head call inside a block are changed afterwards"
    after = ("no-head", "head-loop")
    VALID = (Example(_BRANCHED, LogitsKind.HEAD, "head"),)
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if self.table is not None:
                    logits = self.table(hidden_states)
                else:
                    logits = self.logits_processor(self.lm_head, hidden_states)
                if self.suppressed is not None:
                    logits.index_fill_(1, self.suppressed, -float("inf"))
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                with torch.no_grad():
                    logits = self.logits_processor(self.lm_head, hidden_states)
                    logits[:, self.blocked] = float("-inf")
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if self.lora_head is not None:
                    logits = self.logits_processor(self.lora_head, hidden_states)
                    logits = logits / self.lora_scale
                else:
                    logits = self.logits_processor(self.lm_head, hidden_states)
                return logits
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        index = _head_index(body)
        if _head_expression(body.statements[index]) is not None:
            return None
        arms_mirrored = _branched_arms(body) is not None
        for head in _heads_in_blocks(body.statements[index:]):
            flow = _Flow(body, _after(body.statements, head), _assigned_name(head))
            kind = flow.kind()
            if flow.changes and (kind == PostKind.MASK or not arms_mirrored):
                line, reason = flow.reason(kind)
                return LogitsShape(
                    LogitsKind.MANUAL,
                    _post_rule(kind),
                    reason,
                    line,
                    params,
                    post=kind,
                )
        return None


def _heads_in_blocks(statements: list[cst.BaseStatement]) -> list[cst.SimpleStatementLine]:
    """The ``NAME = ...`` statements with a head call inside the blocks of ``statements``."""
    return [
        line
        for statement in statements
        if not isinstance(statement, cst.SimpleStatementLine)
        for line in nodes_in_scope(statement, cst.SimpleStatementLine)
        if has_logits_call(line) and _assigned_name(line) is not None
    ]


def _after(statements: Sequence[cst.BaseStatement], target: cst.CSTNode) -> list[cst.BaseStatement]:
    """The statements that may run after ``target``, a statement of ``statements`` or of a block in
    one: the rest of its own block, then of each block around it (not the other arms of an ``if``)."""
    for index, statement in enumerate(statements):
        rest = list(statements[index + 1 :])
        if statement is target:
            return rest
        for block in _blocks(statement):
            if any(node is target for inner in block for node in walk(inner)):
                return _after(block, target) + rest
    return []


def _blocks(node: cst.CSTNode) -> list[Sequence[cst.BaseStatement]]:
    """The statement lists of a compound statement's blocks (its ``elif``, ``else``, ``except`` and
    ``finally`` ones too); a block's own nested statements are not listed."""
    blocks: list[Sequence[cst.BaseStatement]] = []
    for child in node.children:
        if isinstance(child, cst.IndentedBlock):
            blocks.append(child.body)
        elif not isinstance(child, cst.BaseExpression):
            blocks += _blocks(child)
    return blocks


class ConditionalHead(ShapeRule):
    """A head call inside an expression or a block (``if``, ``with``, a conditional expression)
    runs only sometimes, or with something around it; the mirror rule copies plain statements."""

    id = "MTP106"
    name = "conditional-head"
    message = "the head call is not a plain `return` or assignment"
    after = ("several-heads", "head-loop")
    VALID = (
        Example(_PLAIN, LogitsKind.HEAD, "head"),
        Example(_ASSIGNED, LogitsKind.HEAD, "head"),
        Example(_BRANCHED, LogitsKind.HEAD, "head"),
        Example(  # an annotated assignment binds the name all the same (a local's annotation is never evaluated)
            _method("""
            def compute_logits(self, hidden_states):
                logits: torch.Tensor = self.logits_processor(self.lm_head, hidden_states)
                return logits
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(  # the body on the ``def`` line is a plain return too
            _method("""
            def compute_logits(self, hidden_states): return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                assert self.lm_head is not None
                if spec_step_idx == 0:
                    return self.logits_processor(self.lm_head, hidden_states)
                elif self.share_head:
                    return self.logits_processor(self.lm_head, self.norm(hidden_states))
                else:
                    head = self.heads[spec_step_idx]
                    return self.logits_processor(head, hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                assert self.lm_head is not None; return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                head = self.lm_head; scale = 2
                return self.logits_processor(head, hidden_states * scale)
        """),
            LogitsKind.HEAD,
            "head",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                with torch.no_grad():
                    return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "conditional-head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states) if self.ready else None
        """),
            LogitsKind.MANUAL,
            "conditional-head",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        statement = body.statements[_head_index(body)]
        if _head_expression(statement) is None and _branched_arms(body) is None:
            call = _calls(body, statement, LOGITS_CALL)[0]
            reason = (
                f"the head call (line {body.line(call)}) is inside `{body.code(statement).splitlines()[0]}` "
                f"(line {body.line(statement)}), which a mirror does not copy"
                if not isinstance(statement, cst.SimpleStatementLine)
                else f"the head call is not a plain `return` or assignment (line {body.line(call)})"
            )
            return LogitsShape(
                LogitsKind.MANUAL,
                "conditional-head",
                reason,
                body.line(call),
                params,
            )
        return None


class EarlyReturn(ShapeRule):
    """A return before the head call means some calls never reach the head: the mirror would differ."""

    id = "MTP107"
    name = "early-return"
    message = "compute_logits returns before the head call"
    after = ("no-head",)
    VALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                assert hidden_states.dim() == 2
                return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(  # a return in a nested function or class returns from that, not from compute_logits
            _method("""
            def compute_logits(self, hidden_states):
                def scaled(h):
                    return h * self.scale

                class Pre:
                    def __call__(self, h):
                        yield h

                return self.logits_processor(self.lm_head, scaled(hidden_states))
        """),
            LogitsKind.HEAD,
            "head",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if hidden_states is None:
                    return None
                return self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "early-return",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        for statement in body.statements[: _head_index(body)]:
            for node in body.find(statement, m.Return() | m.Yield()):
                return LogitsShape(
                    LogitsKind.MANUAL,
                    "early-return",
                    f"returns before the head call (line {body.line(node)})",
                    body.line(node),
                    params,
                )
        return None


POST_REASONS = {
    PostKind.D2T_SCATTER: "logits scattered to the target vocabulary after the head call",
    PostKind.MASK: "logits masked after the head call",
    PostKind.VOCAB: "the vocabulary of the logits changed after the head call",
    PostKind.SOFTCAP: "logits soft-capped after the head call",
    PostKind.OTHER: "logits post-processed after the head call",
}


def _post_rule(kind: PostKind) -> str:
    """The rule id of what follows the head call (``post-mask``, ``post-d2t-scatter``, ...)."""
    return f"post-{kind.replace('_', '-')}"


UNCHANGED_TAIL = "a statement after the head call that a mirror would not run"


class PostProcessing(ShapeRule):
    """Whatever happens to the logits after the head call (scatter, mask, soft-cap) must happen to the
    top tokens too; the shape keeps the head call's details so consistency checks can compare."""

    id = "MTP108"
    name = "post-processing"
    message = "the head call's result is changed, or not returned, before compute_logits returns"
    after = ("conditional-head",)
    VALID = (
        Example(_PLAIN, LogitsKind.HEAD, "head"),
        Example(_ASSIGNED, LogitsKind.HEAD, "head"),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                logits[:, self.vocab_size:] = float("-inf")
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                logits[:, self.banned] -= float("inf")
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                out = logits
                out.index_put_((self.rows, self.banned), self.floor)
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                masked = logits.clone()
                masked[:, self.banned] = float("-inf")
                return masked
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                return torch.where(self.allowed, logits, float("-inf"))
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(  # a copy it does not return is a scratch tensor: no mask, only a statement a mirror lacks
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                scratch = logits.clone()
                scratch[:, 0] = 0.0
                self.stats = scratch
                return logits
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                logger.debug("first logits %s", logits[0, :8])
                self.calls.fill_(1)
                return logits
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                return torch.tanh(logits / 30.0) * 30.0
        """),
            LogitsKind.MANUAL,
            "post-softcap",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                base = self.draft_id_to_target_id
                out = logits.new_full((logits.shape[0], self.vocab), float("-inf"))
                out[:, base + torch.arange(logits.shape[1])] = logits
                return out
        """),
            LogitsKind.MANUAL,
            "post-d2t-scatter",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
                return logits.float()
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states); logits = logits.float()
                return logits
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                if self.lora_head is not None:
                    logits = self.logits_processor(self.lora_head, hidden_states)
                else:
                    logits = self.logits_processor(self.lm_head, hidden_states)
                logits = logits.float()
                return logits
        """),
            LogitsKind.MANUAL,
            "post-other",
        ),
        Example(  # after an early return, on the fallthrough's path only: still not in a mirror
            _method("""
            def compute_logits(self, hidden_states, spec_step_idx=0):
                if spec_step_idx:
                    return self.logits_processor(self.heads[spec_step_idx], hidden_states)
                logits = self.logits_processor(self.lm_head, hidden_states)
                logits[:, self.banned] = float("-inf")
                return logits
        """),
            LogitsKind.MANUAL,
            "post-mask",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                logits = self.logits_processor(self.lm_head, hidden_states)
        """),
            LogitsKind.MANUAL,
            "no-return",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states)
                print("unreachable")
        """),
            LogitsKind.MANUAL,
            "unreachable-tail",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        if _branched(body) is not None:
            return None
        arms = _branched_arms(body)
        if arms is not None:
            return self._after_arms(body, params, arms)
        index = _head_index(body)
        call, name = _head_expression(body.statements[index])  # type: ignore[misc]
        tail = body.statements[index + 1 :]
        if name is None and not tail:
            return None
        if (
            name is not None
            and len(tail) == 1
            and m.matches(tail[0], m.SimpleStatementLine(body=[m.Return(value=m.Name(name))]))
        ):
            return None
        if not tail:
            return LogitsShape(
                LogitsKind.MANUAL,
                "no-return",
                f"the head call's result is never returned (line {body.line(call)})",
                body.line(call),
                params,
            )
        if name is None:
            return LogitsShape(
                LogitsKind.MANUAL,
                "unreachable-tail",
                f"statements after the returning head call (line {body.line(tail[0])})",
                body.line(tail[0]),
                params,
            )
        flow = _Flow(body, tail, name)
        return self._post(_head_shape(body, params, call, manual=True), flow)

    @staticmethod
    def _post(shape: LogitsShape, flow: _Flow) -> LogitsShape:
        kind = flow.kind()
        shape.line, shape.reason = flow.reason(kind)
        shape.rule = _post_rule(kind)
        shape.post = kind
        if kind == PostKind.D2T_SCATTER:
            assert flow.scatter is not None
            shape.target_map = flow.scatter.target_map
        return shape

    def _after_arms(self, body: _Body, params: list[Param], arms: _Branched) -> LogitsShape:
        """Arms that each end in their head call, followed by what a mirror cannot carry: the reason
        names that statement (not the several head calls)."""
        tail = body.statements[arms.end :]
        keyword = _keyword(body.statements[arms.index])
        if arms.name is None:
            line = body.line(tail[0])
            return LogitsShape(
                LogitsKind.MANUAL,
                "unreachable-tail",
                f"statements after an `{keyword}` whose every arm returns (line {line})",
                line,
                params,
            )
        if not tail:
            line = body.line(body.statements[arms.index])
            return LogitsShape(
                LogitsKind.MANUAL,
                "no-return",
                f"the head call's result is never returned (the `{keyword}` at line {line})",
                line,
                params,
            )
        shape = _branched_shape(body, params, arms)
        shape.kind = LogitsKind.MANUAL
        return self._post(shape, _Flow(body, tail, arms.name))


class HeadArguments(ShapeRule):
    """The mirror passes the head call's arguments to get_top_tokens as they are: each must bind there the
    way Python binds it, and to the parameter it binds to in the call (``forward``), else the mirror raises
    TypeError or passes a value as another parameter. The signatures are the scanned tree's (``HeadSignature``)."""

    id = "MTP109"
    name = "head-arguments"
    message = "self.logits_processor called with arguments get_top_tokens does not take"
    after = ("conditional-head",)
    VALID = (
        Example(_PLAIN, LogitsKind.HEAD, "head"),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states, embedding_bias=self.bias)
        """),
            LogitsKind.HEAD,
            "head",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states=hidden_states)
        """),
            LogitsKind.HEAD,
            "head",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states, self.bias, embedding_bias=self.bias)
        """),
            LogitsKind.MANUAL,
            "head-arguments",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(self.lm_head, hidden_states, scale=2.0)
        """),
            LogitsKind.MANUAL,
            "head-arguments",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return self.logits_processor(*self.head_args)
        """),
            LogitsKind.MANUAL,
            "head-arguments",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        arms = _branched_arms(body)
        if arms is not None:
            return next((shape for c in arms.calls if (shape := self._check_call(body, params, c))), None)
        call, _ = _head_expression(body.statements[_head_index(body)])  # type: ignore[misc]
        if not m.matches(call, HEAD_CALL):
            return None
        return self._check_call(body, params, call)

    @staticmethod
    def _check_call(body: _Body, params: list[Param], call: cst.Call) -> LogitsShape | None:
        signature = body.signature
        line = body.line(call)
        problem = _unbound(body, call, signature)
        if problem is None:
            return None
        where = (
            f"get_top_tokens{_signature_text(signature.top_tokens)} at {signature.where}"
            if signature.where is not None
            else f"get_top_tokens, whose signature was not read, assumed {_signature_text(signature.top_tokens)}"
        )
        return LogitsShape(
            LogitsKind.MANUAL,
            "head-arguments",
            f"self.logits_processor called with arguments get_top_tokens does not take (line {line}): "
            f"{problem}; {where}",
            line,
            params,
        )


def _unbound(body: _Body, call: cst.Call, signature: HeadSignature) -> str | None:
    """Why the head call's arguments, passed as they are to get_top_tokens, are not the same call there;
    None when each binds there to the parameter it binds to in the call. A get_top_tokens parameter left
    without a value is named only where the call (when read) gives each of its own one: else the call
    raises as much as its mirror."""
    starred = next((a for a in call.args if a.star), None)
    if starred is not None:
        return f"`{starred.star}{body.code(starred.value)}` unpacks arguments that cannot be bound statically"
    arguments = [a.keyword.value if a.keyword is not None else None for a in call.args]
    to_top_tokens = _bind(arguments, signature.top_tokens)
    if isinstance(to_top_tokens, str):
        return to_top_tokens
    if signature.call is None:
        return None
    to_call = _bind(arguments, signature.call)
    if isinstance(to_call, str):
        return f"the call itself: {to_call}"
    missing = [p.name for p in signature.top_tokens if p.required and p.name not in to_top_tokens]
    if missing and all(p.name in to_call for p in signature.call if p.required):
        return f"no value for `{missing[0]}`"
    for argument, top_tokens, called in zip(call.args, to_top_tokens, to_call):
        if top_tokens != called:
            return f"`{body.code(argument.value)}` is `{called}` in the call but `{top_tokens}` in get_top_tokens"
    return None


def _bind(arguments: list[str | None], signature: tuple[SignatureParam, ...]) -> list[str] | str:
    """The parameter each argument (its keyword, None: positional) binds to, as Python binds a call;
    a string saying why where it does not bind (parameters left without a value are the caller's to check)."""
    positional = [p for p in signature if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    by_keyword = {p.name: p for p in signature if p.kind in (ParamKind.POS, ParamKind.KWONLY)}
    star = next((f"*{p.name}" for p in signature if p.kind == ParamKind.STAR), None)
    starstar = next((f"**{p.name}" for p in signature if p.kind == ParamKind.STARSTAR), None)
    bound: list[str] = []
    for index, keyword in enumerate(arguments):
        if keyword is None:
            name = positional[index].name if index < len(positional) else star
            if name is None:
                return f"no parameter takes positional argument {index + 1}"
        elif keyword in by_keyword:
            name = keyword
        elif starstar is None:
            return f"no parameter `{keyword}`"
        else:
            name = starstar
        if name in bound and not name.startswith("*"):
            return f"two values for `{name}`"
        bound.append(name)
    return bound


def _signature_text(signature: tuple[SignatureParam, ...]) -> str:
    prefix = {ParamKind.STAR: "*", ParamKind.STARSTAR: "**"}
    return "(" + ", ".join(prefix.get(p.kind, "") + p.name + ("" if p.required else "=...") for p in signature) + ")"


class SuperArguments(ShapeRule):
    """``super(Cls, self)`` starts the lookup after ``Cls`` in the MRO of the instance's class, which the
    analysis follows where ``Cls`` names a class of the module; with any other arguments (``type(self)``,
    a local, another instance) where the call lands is not known statically."""

    id = "MTP112"
    name = "super-arguments"
    message = "super() called with arguments that do not name a class and self"
    after = ("post-processing",)
    VALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super(Base, self).compute_logits(hidden_states)
        """),
            LogitsKind.SUPER,
            "super",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super(layers.Base, self).compute_logits(hidden_states)
        """),
            LogitsKind.SUPER,
            "super",
        ),
    )
    INVALID = (
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super(type(self), self).compute_logits(hidden_states)
        """),
            LogitsKind.MANUAL,
            "super-arguments",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super(self.__class__, self).compute_logits(hidden_states)
        """),
            LogitsKind.MANUAL,
            "super-arguments",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states):
                return super(Base, self.model).compute_logits(hidden_states)
        """),
            LogitsKind.MANUAL,
            "super-arguments",
        ),
        Example(
            _method("""
            def compute_logits(self, hidden_states, base):
                return super(base, self).compute_logits(hidden_states)
        """),
            LogitsKind.MANUAL,
            "super-arguments",
        ),
    )

    def check(self, body: _Body, params: list[Param]) -> LogitsShape | None:
        call = _calls(body, body.statements[_head_index(body)], SUPER_CALL)
        made = call[0].func.value if call else None  # type: ignore[attr-defined]
        if made is None or (m.matches(made, FOLLOWED_SUPER) and not self._local(body, params, made)):
            return None
        line = body.line(made)
        return LogitsShape(
            LogitsKind.MANUAL,
            "super-arguments",
            f"`{body.code(made)}` (line {line}) does not name a class and self: where its lookup starts "
            "cannot be told statically",
            line,
            params,
        )

    @staticmethod
    def _local(body: _Body, params: list[Param], made: cst.Call) -> bool:
        """The class argument's root is a parameter or a local of the method, not a module name."""
        if not made.args:
            return False
        name = _root(made.args[0].value)
        if name is None:
            return False
        return name in {"self", *(p.name for p in params)} or bool(_writes(body.statements, name))


# The first rule that objects decides; each rule runs after those in its ``after``.
RULES: tuple[ShapeRule, ...] = (
    Decorated(),
    Stub(),
    ByHand(),
    NoHead(),
    HeadLoop(),
    ChangedInBlock(),
    SeveralHeads(),
    ConditionalHead(),
    EarlyReturn(),
    PostProcessing(),
    SuperArguments(),
    HeadArguments(),
)


def _head_and_hidden(body: _Body, call: cst.Call) -> tuple[str | None, str | None]:
    """Code of the head and of the hidden states a head call passes, by position or by the keyword
    get_top_tokens takes too (``hidden_states=h`` is the same call as ``h`` in second place)."""
    head, hidden = _head_and_hidden_nodes(call)
    return (body.code(head) if head is not None else None), (body.code(hidden) if hidden is not None else None)


def _head_and_hidden_nodes(call: cst.Call) -> tuple[cst.BaseExpression | None, cst.BaseExpression | None]:
    positional = [a.value for a in call.args if a.keyword is None]
    named = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    head = positional[0] if positional else named.get("lm_head")
    hidden = positional[1] if len(positional) > 1 else named.get("hidden_states")
    return head, hidden


def _writes(statements: list[cst.BaseStatement], name: str) -> list[cst.CSTNode]:
    """What in ``statements`` binds ``name`` or changes it in place: an assignment (unpacking, a
    subscript, ``+=``, ``:=``), a ``for`` or ``with ... as`` target, an in-place method (``x.mul_(2)``)."""
    found: list[cst.CSTNode] = []
    for statement in statements:
        for node in nodes_in_scope(
            statement, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.For, cst.AsName, cst.Call)
        ):
            if isinstance(node, cst.Call):
                if m.matches(node, IN_PLACE_CALL) and _root(node.func.value) == name:  # type: ignore[attr-defined]
                    found.append(node)
            elif isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                if any(name in _written(t) for t in _targets(node)):
                    found.append(node)
            elif name in _written(node.target if not isinstance(node, cst.AsName) else node.name):
                found.append(node)
    return found


def _resolved(
    statements: list[cst.BaseStatement], value: cst.BaseExpression, parameter: str | None = None, depth: int = 0
) -> cst.BaseExpression | None:
    """What ``value`` holds after ``statements``: a local name bound there once, by a plain top-level
    ``NAME = EXPR``, is followed to EXPR; ``parameter`` and a name they do not bind are themselves.
    None when a name is bound several times, in a block or otherwise (unpacking, in place), or
    through a chain too long to follow."""
    if not isinstance(value, cst.Name) or value.value == parameter:
        return value
    writes = _writes(statements, value.value)
    if not writes:
        return value
    plain = m.Assign(targets=[m.AssignTarget(target=m.Name(value.value))])
    top = [s.body[0] for s in statements if m.matches(s, m.SimpleStatementLine(body=[plain]))]  # type: ignore[attr-defined]
    if len(writes) != 1 or not top or writes[0] is not top[0] or depth > 8:
        return None
    return _resolved(statements, top[0].value, parameter, depth + 1)


def _other_head(statements: list[cst.BaseStatement], head: cst.BaseExpression | None) -> bool:
    """The head is provably not ``self.lm_head``."""
    resolved = _resolved(statements, head) if head is not None else None
    return resolved is not None and not m.matches(resolved, m.Attribute(value=SELF, attr=m.Name("lm_head")))


# ``x.contiguous()``, ``x.clone()``, ``x.detach()``: a copy or a view of the same values, which
# the head maps to the same logits (a dtype or device move, ``.to(...)``, may round: not here).
SAME_VALUES = m.Call(func=m.Attribute(attr=m.Name("contiguous") | m.Name("clone") | m.Name("detach")), args=[])


def _other_hidden(statements: list[cst.BaseStatement], hidden: cst.BaseExpression | None, first: str | None) -> bool:
    """The head provably gets other hidden states than the first parameter as passed: another
    expression or parameter, or the first parameter rebound or changed in place in ``statements``.
    Calls that only copy the values (``SAME_VALUES``) are looked through."""
    if hidden is None or first is None:
        return True
    resolved = _resolved(statements, hidden, first)
    while resolved is not None and m.matches(resolved, SAME_VALUES):
        resolved = _resolved(statements, resolved.func.value, first)  # type: ignore[attr-defined]
    if resolved is None:
        return False
    return not m.matches(resolved, m.Name(first)) or bool(_writes(statements, first))


def _head_shape(body: _Body, params: list[Param], call: cst.Call, manual: bool = False) -> LogitsShape:
    index = _head_index(body)
    prefix = body.statements[:index]
    assert_only = all(m.matches(s, m.SimpleStatementLine(body=[m.Assert()])) for s in prefix)
    line = body.line(call)
    if m.matches(call, HEAD_CALL):
        head, hidden = _head_and_hidden(body, call)
        first = params[0].name if params else None
        written = ", ".join(
            f"{a.keyword.value}={body.code(a.value)}" if a.keyword is not None else body.code(a.value)
            for a in call.args
        )
        head_node, hidden_node = _head_and_hidden_nodes(call)
        return LogitsShape(
            LogitsKind.MANUAL if manual else LogitsKind.HEAD,
            "head",
            f"compute_logits returns self.logits_processor({written})",
            line,
            params,
            head=head,
            hidden=hidden,
            pre_transform=not assert_only or hidden != first,
            other_hidden=_other_hidden(prefix, hidden_node, first),
            other_head=_other_head(prefix, head_node),
            extra_args=len(call.args) > 2,
        )
    if m.matches(call, SUPER_CALL):
        made = call.func.value  # type: ignore[attr-defined]
        return LogitsShape(
            LogitsKind.MANUAL if manual else LogitsKind.SUPER,
            "super",
            f"compute_logits delegates to {body.code(made)}.compute_logits",
            line,
            params,
            super_class=body.code(made.args[0].value) if m.matches(made, CLASS_SUPER) else None,
            pre_transform=not assert_only,
        )
    attr = call.func.value.attr.value  # type: ignore[attr-defined]
    return LogitsShape(
        LogitsKind.MANUAL if manual else LogitsKind.DELEGATE,
        "delegate",
        f"compute_logits delegates to self.{attr}.compute_logits",
        line,
        params,
        delegate_attr=attr,
        pre_transform=not assert_only,
    )


def analyze_compute_logits(code: str, first_line: int, signature: HeadSignature = ASSUMED_SIGNATURE) -> LogitsShape:
    body, func = _decompose(code, first_line, signature)
    params = params_of(func)
    for rule in RULES:
        shape = rule.check(body, params)
        if shape is not None:
            shape.rule_id = rule.id
            return shape
    branched = _branched(body)
    if branched is not None:
        return _branched_shape(body, params, branched)
    call, _ = _head_expression(body.statements[_head_index(body)])  # type: ignore[misc]
    return _head_shape(body, params, call)


def _branched_shape(body: _Body, params: list[Param], branched: _Branched) -> LogitsShape:
    """A head call in every arm: the mirror calls get_top_tokens in every arm. The head and hidden
    states are the arms' own when they agree (else None); the choice between arms counts as a
    transform before the head, so no single-call equivalence is claimed."""
    heads, hidden = set(), set()
    for call in branched.calls:
        head_code, hidden_code = _head_and_hidden(body, call)
        heads.add(head_code)
        hidden.add(hidden_code)
    heads_agree, hidden_agree = len(heads) == 1, len(hidden) == 1  # read before the pops below empty the sets
    line = body.line(body.statements[branched.index])
    first = params[0].name if params else None
    upto = body.statements[: branched.end]  # up to the head calls: the arms, and a fallthrough
    nodes = [_head_and_hidden_nodes(call) for call in branched.calls]
    return LogitsShape(
        LogitsKind.HEAD,
        "head",
        f"compute_logits returns self.logits_processor(...) in each of {len(branched.calls)} arms "
        f"of the `{_keyword(body.statements[branched.index])}` at line {line}",
        line,
        params,
        head=heads.pop() if heads_agree else None,
        hidden=hidden.pop() if hidden_agree else None,
        pre_transform=True,
        other_hidden=not hidden_agree or any(_other_hidden(upto, h, first) for _, h in nodes),
        other_head=heads_agree and any(_other_head(upto, h) for h, _ in nodes),
        extra_args=any(len(c.args) > 2 for c in branched.calls),
    )
