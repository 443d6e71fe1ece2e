"""Which binding of a name a point of a function reads, read statically.

Two calls on a drafter that pass the same text (``spec_step_idx=spec_step_idx``) pass the same
value only where the names that text reads hold the same value at both: a name rebound on one
path (``spec_step_idx = 0`` before one call), or the variables of two comprehensions that share a
name, may hold other values. ``Bindings`` answers, for a point of a function and a name, the one
binding every path to that point last ran (a parameter, an assignment or loop that dominates the
point with no other binding of the name between), or, when it cannot tell, the bindings that may.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from ..index.ast_tools import parent_map, statement_blocks, unparse, walk

COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
INNER_SCOPES = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
SCOPED_BLOCKS = (ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)  # bind a name for their body


@dataclass(frozen=True)
class Reaching:
    """The bindings of one name that may reach a point: ``decided`` when exactly one does (or none:
    a global or builtin, the same everywhere)."""

    bindings: tuple[ast.AST, ...]
    decided: bool

    def same_as(self, other: Reaching) -> bool:
        """Both points read the same binding, so the same value (within one run of the function)."""
        return (
            self.decided
            and other.decided
            and len(self.bindings) == len(other.bindings)
            and all(a is b for a, b in zip(self.bindings, other.bindings))
        )


class Bindings:
    """The bindings of the names of one function, by the point that reads them."""

    def __init__(self, function: ast.FunctionDef | ast.AsyncFunctionDef):
        self.function = function
        self.parents = parent_map(function)
        self._of: dict[str, list[ast.AST]] = {}  # name -> the statements (or the arguments) binding it
        arguments = function.args
        for arg in (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg):
            if arg is not None:
                self._of.setdefault(arg.arg, []).append(arguments)
        for statement in function.body:
            self._collect(statement)

    def _collect(self, node: ast.AST) -> None:
        """Record the function-scope bindings under ``node`` (not those inside its lambdas, nested
        functions and classes, nor comprehension variables: each has its own scope)."""
        for name, binder in _bound_here(node, self.parents):
            self._add(name, binder)
        if isinstance(node, INNER_SCOPES):
            return
        for child in ast.iter_child_nodes(node):
            if isinstance(child, COMPREHENSIONS):  # only a ``:=`` inside binds in the function
                for part in walk(child):
                    if isinstance(part, ast.NamedExpr) and isinstance(part.target, ast.Name):
                        self._add(part.target.id, _enclosing_statement(part, self.parents))
                continue
            self._collect(child)

    def _add(self, name: str, binder: ast.AST) -> None:
        known = self._of.setdefault(name, [])
        if not any(b is binder for b in known):
            known.append(binder)

    def at(self, node: ast.AST, name: str) -> Reaching:
        """What ``name`` read at ``node`` is bound by."""
        comprehension = self._comprehension_binding(node, name)
        if comprehension is not None:
            return Reaching((comprehension,), True)
        bindings = self._of.get(name, [])
        dominating = [b for b in bindings if self._dominates(b, node, bindings)]
        if not bindings:
            return Reaching((), True)
        if len(dominating) == 1:
            return Reaching((dominating[0],), True)
        return Reaching(tuple(bindings), False)

    def _comprehension_binding(self, node: ast.AST, name: str) -> ast.AST | None:
        """The innermost comprehension around ``node`` whose variables include ``name`` (its first
        iterable runs in the enclosing scope, so not there)."""
        below, child = node, node  # ``below``: the node under ``child`` on the way up
        while (parent := self.parents.get(id(child))) is not None:
            if isinstance(parent, COMPREHENSIONS) and not (child is parent.generators[0] and below is child.iter):
                targets = {n.id for g in parent.generators for n in walk(g.target) if isinstance(n, ast.Name)}
                if name in targets:
                    return parent
            below, child = child, parent
        return None

    def _dominates(self, binding: ast.AST, node: ast.AST, bindings: list[ast.AST]) -> bool:
        """Every path to ``node`` runs ``binding`` last of ``bindings``: a parameter or a plain
        assignment earlier in a block that holds ``node`` (no other binding between them, nor in the
        statement holding ``node``, which may loop), or a ``for``/``with`` whose body holds ``node``
        (no other binding in that body)."""
        others = [b for b in bindings if b is not binding]
        if isinstance(binding, SCOPED_BLOCKS):
            return self._inside(node, binding.body) and not any(self._inside(b, binding.body) for b in others)
        if binding is self.function.args:
            block, start = self.function.body, 0
        elif isinstance(binding, ast.Assign) or (isinstance(binding, ast.AnnAssign) and binding.value is not None):
            holder = self.parents.get(id(binding))
            block = next((b for b in statement_blocks(holder) if any(s is binding for s in b)), []) if holder else []
            start = next((i for i, s in enumerate(block) if s is binding), len(block)) + 1
        else:
            return False
        holding = next((i for i in range(start, len(block)) if self._inside(node, [block[i]])), None)
        return holding is not None and not any(self._inside(b, block[start : holding + 1]) for b in others)

    def _inside(self, node: ast.AST, statements: list[ast.stmt]) -> bool:
        ids = {id(s) for s in statements}
        while node is not None and id(node) not in ids:
            node = self.parents.get(id(node))
        return node is not None


def _bound_here(node: ast.AST, parents: dict[int, ast.AST]) -> Iterator[tuple[str, ast.AST]]:
    """(name, its binding statement) for the names ``node`` itself binds in the function's scope."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name, node
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from ((alias.asname or alias.name.split(".")[0], node) for alias in node.names)
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        yield from ((name, node) for name in node.names)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        yield node.name, node
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        yield node.name, _enclosing_statement(node, parents)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        yield node.rest, _enclosing_statement(node, parents)
    elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        yield node.id, _enclosing_statement(node, parents)


def _enclosing_statement(node: ast.AST, parents: dict[int, ast.AST]) -> ast.AST:
    """The statement that binds through ``node``: a ``for``/``with`` for its target, else the
    statement holding it."""
    while not isinstance(node, ast.stmt) and id(node) in parents:
        node = parents[id(node)]
    return node


def described(binding: ast.AST, file: str) -> str:
    """A binding as the reason names it: ``FILE:LINE: `code```."""
    if isinstance(binding, ast.arguments):
        return "its parameter"
    if isinstance(binding, COMPREHENSIONS):
        code = " ".join(unparse(g).strip() for g in binding.generators)
    elif isinstance(binding, (ast.For, ast.AsyncFor)):
        code = f"for {unparse(binding.target)} in {unparse(binding.iter)}"
    elif isinstance(binding, (ast.With, ast.AsyncWith)):
        code = f"with {', '.join(unparse(item) for item in binding.items)}"
    elif isinstance(binding, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        code = f"{type(binding).__name__.removesuffix('Def').lower()} {binding.name}"
    else:
        code = unparse(binding).splitlines()[0]
    return f"{file}:{getattr(binding, 'lineno', '?')}: `{code}`"
