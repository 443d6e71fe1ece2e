"""libcst helpers that need no ``libcst.matchers``: parse one method, walk a tree.

Importing the matchers costs more than importing libcst itself (0.4 s), so
code that only parses, walks and prints nodes (the file rewriter) stays
free of them.

The walk: ``libcst.matchers.findall`` drives a full visitor that rebuilds
every node on the way; reading the dataclass fields directly is an order of
magnitude cheaper, and the analysis walks many small method bodies.
"""

from __future__ import annotations

import functools
import re
import textwrap
from collections.abc import Iterator, Sequence

import libcst as cst

from .depth import check_depth


@functools.lru_cache(maxsize=4096)
def parse_method(code: str) -> tuple[cst.Module, cst.FunctionDef]:
    """Parse one method's source (as stored in the facts) on its own; nodes are immutable, so shared.
    ``TooDeep`` where an expression is nested too deep to parse in reasonable time."""
    code = textwrap.dedent(code)
    check_depth(code)
    module = cst.parse_module(code)
    func = module.body[0]
    if not isinstance(func, cst.FunctionDef):
        raise ValueError("not a function definition")
    if isinstance(func.body, cst.SimpleStatementSuite):  # ``def f(self, h): return ...``: read as a block
        func = func.with_changes(body=_as_block(func.body))
    if _ONE_LINE_BODY.search(code):  # a visit costs as much as the parse: only where one may be
        func = func.visit(_OneLineBodiesAsBlocks())  # type: ignore[assignment]
    return module, func


# A compound statement's header with code after its colon (``if c: return x``; ``): return x``, ``]: ...`` or a
# line after a ``\`` ending a header over lines): where a body may be on its header's line.
_ONE_LINE_BODY = re.compile(
    r"^[ \t]*(?:(?:el)?if|else|for|while|with|try|except|finally|case|async)\b[^\n]*:[ \t]*[^\s#]"
    r"|[)\]}]:[ \t]*[^\s#]|\\\n[^\n]*:[ \t]*[^\s#]",
    re.MULTILINE,
)


class _OneLineBodiesAsBlocks(cst.CSTTransformer):
    """``if c: return x`` (the body of any compound statement on its header's line) as a block, as ruff writes
    it: the rules read (and the mirror writes) arms one statement per line."""

    def leave_SimpleStatementSuite(
        self, original_node: cst.SimpleStatementSuite, updated_node: cst.SimpleStatementSuite
    ) -> cst.IndentedBlock:
        return _as_block(updated_node)


def _as_block(suite: cst.SimpleStatementSuite) -> cst.IndentedBlock:
    """The statements after a ``def ...:`` on its line, one per line as ruff writes them, the line's
    comment on the last."""
    line = cst.SimpleStatementLine(body=suite.body, trailing_whitespace=suite.trailing_whitespace)
    return cst.IndentedBlock(body=one_statement_per_line([line]))


_NODE, _SEQUENCE, _OTHER = range(3)
_KINDS: dict[type, int] = {}  # type of a field value -> what it is (isinstance on ABCs is slow)
_FIELDS: dict[type, tuple[str, ...]] = {}  # node type -> its field names


def _kind(value_type: type) -> int:
    kind = _KINDS.get(value_type)
    if kind is None:
        kind = _KINDS[value_type] = (
            _NODE
            if issubclass(value_type, cst.CSTNode)
            else _SEQUENCE
            if issubclass(value_type, (list, tuple))
            else _OTHER
        )
    return kind


# What of a nested function, class or lambda runs where it is defined: its decorators, defaults,
# annotations and bases. Its body runs only when it is called (a class body: in a scope of its own),
# so a ``return`` there does not return from the function around it, nor does an assignment bind there.
_OUTER_FIELDS: dict[type, tuple[str, ...]] = {
    cst.FunctionDef: ("decorators", "params", "returns"),
    cst.ClassDef: ("decorators", "bases", "keywords"),
    cst.Lambda: ("params",),
}


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, in source (pre-)order."""
    return iter(_descendants(node, False))


def walk_scope(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it that belongs to the scope ``node`` is in (source pre-order):
    the bodies of nested functions, classes and lambdas are left out (``_OUTER_FIELDS``)."""
    return iter(_descendants(node, True))


@functools.lru_cache(maxsize=16384)
def _descendants(node: cst.CSTNode, in_scope: bool) -> tuple[cst.CSTNode, ...]:
    """The walk, kept: nodes are immutable (and hash by identity), and the rules walk the same
    method bodies and expressions again and again."""
    return tuple(_walk(node, _OUTER_FIELDS if in_scope else {}))


def _walk(node: cst.CSTNode, fields: dict[type, tuple[str, ...]]) -> Iterator[cst.CSTNode]:
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        node_type = type(current)
        names = fields.get(node_type) or _FIELDS.get(node_type)
        if names is None:
            names = _FIELDS[node_type] = tuple(node_type.__dataclass_fields__)
        children: list[cst.CSTNode] = []
        for name in names:
            value = getattr(current, name)
            kind = _kind(type(value))
            if kind == _NODE:
                children.append(value)
            elif kind == _SEQUENCE:
                children.extend(v for v in value if _kind(type(v)) == _NODE)
        stack.extend(reversed(children))


def nodes_of(node: cst.CSTNode, types: type | tuple[type, ...]) -> list:
    return [n for n in walk(node) if isinstance(n, types)]


def nodes_in_scope(node: cst.CSTNode, types: type | tuple[type, ...]) -> list:
    """The nodes of ``types`` in ``node`` that run in its own scope (``walk_scope``)."""
    return [n for n in walk_scope(node) if isinstance(n, types)]


def one_statement_per_line(statements: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``a; b`` as two statement lines, the way CPython's ast and ruff see a block: the rules and the
    mirror then read (and the mirror writes) one statement per line, and a body's statements line up
    with the ast's. The first piece keeps the line's leading lines, the last its trailing comment."""
    out: list[cst.BaseStatement] = []
    for statement in statements:
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) < 2:
            out.append(statement)
            continue
        last = len(statement.body) - 1
        for index, small in enumerate(statement.body):
            out.append(
                cst.SimpleStatementLine(
                    body=[small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)],
                    leading_lines=statement.leading_lines if index == 0 else (),
                    trailing_whitespace=statement.trailing_whitespace if index == last else cst.TrailingWhitespace(),
                )
            )
    return out


def kept_compute_logits(statements: Sequence[cst.BaseStatement]) -> int | None:
    """Where in a class body its compute_logits is: the last ``def`` of that name, the one Python keeps
    (as ``source_text.anchor_statement`` reads the ast); None when it has none."""
    return next(
        (
            i
            for i in reversed(range(len(statements)))
            if isinstance(statements[i], cst.FunctionDef) and statements[i].name.value == "compute_logits"  # type: ignore[attr-defined]
        ),
        None,
    )


def methods_after(
    block: cst.IndentedBlock, anchor: int, methods: Sequence[cst.FunctionDef], footer_ends_block: bool = True
) -> cst.IndentedBlock:
    """``block`` with ``methods`` right after its statement ``anchor``, each after a blank line.

    Comment lines right below the anchor, up to a blank line, trail it and stay above the new
    methods: in the next statement's leading lines, or in the block's footer when the anchor is
    its last statement (there also when nothing follows them, if the footer ends the block: a
    stand-in block cut before the next statement says it does not). The rest stays where it was.
    """
    body = list(block.body)
    footer = list(block.footer)
    last = anchor == len(body) - 1
    below = footer if last else list(body[anchor + 1].leading_lines)
    first_blank = next((i for i, line in enumerate(below) if line.comment is None), len(below))
    trailing = first_blank if first_blank < len(below) or (last and footer_ends_block) else 0
    if last:
        footer = below[trailing:]
    else:
        body[anchor + 1] = body[anchor + 1].with_changes(leading_lines=below[trailing:])
    blank = cst.EmptyLine(indent=False)
    body[anchor + 1 : anchor + 1] = [
        method.with_changes(leading_lines=[*(below[:trailing] if position == 0 else ()), blank])
        for position, method in enumerate(methods)
    ]
    return block.with_changes(body=body, footer=footer)
