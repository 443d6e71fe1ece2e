"""Small helpers over CPython's ``ast`` that reading a module's facts and its imports share."""

from __future__ import annotations

import ast
import sys
from collections import deque
from collections.abc import Iterator


def absolute_module(module: str, is_package: bool, relative: int, name: str | None) -> str:
    """Resolve ``from ..x import y`` inside ``module``."""
    if not relative:
        return name or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    if relative > 1:
        base = base[: len(base) - (relative - 1)]
    return ".".join([*base, name] if name else base)


def self_attribute(node: ast.AST) -> str | None:
    """X of ``self.X``; None for anything else."""
    match node:
        case ast.Attribute(value=ast.Name(id="self"), attr=attribute):
            return attribute
    return None


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk``: the same nodes in the same order (breadth first, each node's children queued
    before it is handed out), at half its cost: one generator, not three a node. A scan walks some
    250,000 subtrees."""
    return _breadth_first(node, None)


def parent_map(root: ast.AST) -> dict[int, ast.AST]:
    """Each node below ``root`` (by id) -> the node that holds it: for a node held in several places
    (CPython shares ``Load()``), the last in ``walk``'s order, as a dict built over ``walk`` and
    ``ast.iter_child_nodes`` keeps it; one pass, without their generators."""
    held: dict[int, ast.AST] = {}
    for _ in _breadth_first(root, held):
        pass
    return held


def _breadth_first(root: ast.AST, held: dict[int, ast.AST] | None) -> Iterator[ast.AST]:
    """The walk of ``walk`` and ``parent_map``; with ``held``, each child's holder noted in it."""
    todo = [root]
    queue = todo.append
    position = 0
    while position < len(todo):
        current = todo[position]
        position += 1
        first_child = len(todo)
        for name in current._fields:
            value = getattr(current, name, None)
            if value.__class__ is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        queue(item)
            elif isinstance(value, ast.AST):
                queue(value)
        if held is not None:
            for child in todo[first_child:]:
                held[id(child)] = current
        yield current


if sys.version_info >= (3, 11):
    unparse = ast.unparse
else:
    _TUPLE = ast._Precedence.TUPLE  # type: ignore[attr-defined]
    _TEST = ast._Precedence.TEST  # type: ignore[attr-defined]

    class _Unparser311(ast._Unparser):  # type: ignore[name-defined]
        """3.10's unparser, writing what 3.11 writes differently as 3.11 does, so that code quoted in a
        message reads the same on every Python: a tuple bare where it needs no parentheses (the targets
        of ``=``, ``for`` and a comprehension: 3.10 wrote ``for (k, v) in``) and as a subscript with a
        starred item, ``lambda:`` without a space when it takes no arguments."""

        def visit_Tuple(self, node: ast.Tuple) -> None:
            with self.delimit_if("(", ")", not node.elts or self.get_precedence(node) > _TUPLE):
                self.items_view(self.traverse, node.elts)

        def visit_Assign(self, node: ast.Assign) -> None:
            self.set_precedence(_TUPLE, *node.targets)
            super().visit_Assign(node)

        def _for_helper(self, fill: str, node: ast.For | ast.AsyncFor) -> None:
            self.set_precedence(_TUPLE, node.target)
            super()._for_helper(fill, node)

        def visit_Subscript(self, node: ast.Subscript) -> None:
            if not (isinstance(node.slice, ast.Tuple) and any(isinstance(e, ast.Starred) for e in node.slice.elts)):
                super().visit_Subscript(node)
                return
            self.set_precedence(ast._Precedence.ATOM, node.value)  # type: ignore[attr-defined]
            self.traverse(node.value)
            with self.delimit("[", "]"):
                self.items_view(self.traverse, node.slice.elts)

        def visit_Lambda(self, node: ast.Lambda) -> None:
            if any((node.args.posonlyargs, node.args.args, node.args.vararg, node.args.kwonlyargs, node.args.kwarg)):
                super().visit_Lambda(node)
                return
            with self.require_parens(_TEST, node):
                self.write("lambda: ")
                self.set_precedence(_TEST, node.body)
                self.traverse(node.body)

    def unparse(node: ast.AST) -> str:
        """``ast.unparse`` as Python 3.11 and later write it."""
        return _Unparser311().visit(node)


def dotted(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
# ``try`` statements: ``try/except*`` (``ast.TryStar``) exists from Python 3.11 on.
TRIES: tuple[type[ast.stmt], ...] = (ast.Try, *([ast.TryStar] if hasattr(ast, "TryStar") else []))


def statement_blocks(statement: ast.AST, cases: bool = True) -> list[list[ast.stmt]]:
    """The non-empty statement lists a node holds: bodies, ``else``/``finally``, handlers and (``cases``)
    match cases."""
    blocks = []
    for attr in ("body", "orelse", "finalbody"):
        part = getattr(statement, attr, None)
        if isinstance(part, list) and part:
            blocks.append(part)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    for case in getattr(statement, "cases", ()) if cases else ():  # ``match``: each case's body may run
        blocks.append(case.body)
    return blocks


def walk_statements(statements: list[ast.stmt], cases: bool = True):
    """Statements in source order, entering if/try/with/for bodies and (``cases``) match cases, never
    defs or classes."""
    for statement in statements:
        yield statement
        if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
            continue
        for block in statement_blocks(statement, cases):
            yield from walk_statements(block, cases)


_SKELETON = {
    ast.ExceptHandler: ("body",),
    ast.match_case: ("body",),
}
_STATEMENT_FIELDS = ("body", "handlers", "cases", "orelse", "finalbody")


def statements_within(node: ast.AST) -> Iterator[ast.stmt]:
    """The statements below ``node`` (nested defs and classes included) in the order ``ast.walk``
    reaches them, without visiting a single expression: what reads only statements (assignments,
    imports) pays for the statements alone."""
    todo: deque[ast.AST] = deque([node])
    while todo:
        current = todo.popleft()
        if isinstance(current, ast.stmt) and current is not node:
            yield current
        for name in _SKELETON.get(type(current), _STATEMENT_FIELDS):
            todo.extend(getattr(current, name, ()))


def names_bound(statement: ast.stmt) -> list[str]:
    """The names ``statement`` itself binds (or deletes) in the scope it runs in: a ``def``'s or a class's
    name, an import's, an assignment's, a ``for``/``with``/``except`` target; not those of the blocks it
    holds (``walk_statements`` yields them)."""
    if isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in statement.names]
    own = [getattr(statement, "target", None), *(i.optional_vars for i in getattr(statement, "items", []))]
    if not hasattr(statement, "body"):  # a simple statement: all of it is its own
        own.append(statement)
    bound = [n.id for o in own if o for n in walk(o) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]
    return bound + [h.name for h in getattr(statement, "handlers", []) if h.name]


def _strings(node: ast.AST) -> list[str]:
    """String literals inside ``node``, outside f-strings."""
    if isinstance(node, ast.JoinedStr):
        return []
    if isinstance(node, ast.Constant):
        return [node.value] if isinstance(node.value, str) else []
    return [s for child in ast.iter_child_nodes(node) for s in _strings(child)]


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def match_as_if(node: ast.Match) -> list[ast.stmt]:
    """A ``match`` as the ``if``/``elif`` chain it runs as: ``case "cuda" | "rocm":`` tests ``subject == "cuda"
    or subject == "rocm"``, an irrefutable ``case _:`` (or ``case name:``) is the ``else``. A pattern of
    another kind, or a guard, tests ``...``, which no condition evaluator decides: that case is an alternative.
    Each ``if`` stands at its ``case`` line."""
    chain: list[ast.stmt] = []
    for case in reversed(node.cases):
        test = _pattern_test(node.subject, case.pattern)
        if test is None and case.guard is None:
            chain = case.body
        else:
            undecided = test is None or case.guard is not None
            branch = ast.If(test=ast.Constant(...) if undecided else test, body=case.body, orelse=chain)
            chain = [ast.copy_location(branch, case.pattern)]  # at its ``case`` line, for reasons naming it
    return chain


def _pattern_test(subject: ast.expr, pattern: ast.pattern) -> ast.expr | None:
    """The condition a pattern tests, ``...`` where it is not a literal one; None: it always matches."""
    if isinstance(pattern, ast.MatchAs):
        return None if pattern.pattern is None else _pattern_test(subject, pattern.pattern)
    if isinstance(pattern, ast.MatchValue):
        return ast.Compare(left=subject, ops=[ast.Eq()], comparators=[pattern.value])
    if isinstance(pattern, ast.MatchOr):
        tests = [_pattern_test(subject, p) for p in pattern.patterns]
        if any(t is None for t in tests):
            return None
        return ast.BoolOp(op=ast.Or(), values=tests)
    return ast.Constant(...)


def assigned_name(statement: ast.stmt) -> str | None:
    """NAME of ``NAME = ...`` or ``NAME: T = ...`` (an annotation changes nothing of the binding)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
        return statement.targets[0].id
    if isinstance(statement, ast.AnnAssign) and statement.value is not None and isinstance(statement.target, ast.Name):
        return statement.target.id
    return None
