"""Which binding of a name a point of a function reads, read statically.

Two calls on a drafter that pass the same text (``spec_step_idx=spec_step_idx``) pass the same
value only where the names that text reads hold the same value at both: a name rebound on one
path (``spec_step_idx = 0`` before one call), or the variables of two comprehensions that share a
name, may hold other values. ``Bindings`` answers, for a point of a function and a name, the one
binding every path to that point last ran (a parameter, an assignment or loop that dominates the
point with no other binding of the name between), or, when it cannot tell, the bindings that may.

A value changes without its name being bound too: a store into it (``h[:, :] = x``), an in-place
method (``h.mul_(2)``, ``steps.append(i)``), an attribute stored (``self.step += 1``) or set by a
method of its owner (``self._advance()``), a nested function's ``nonlocal`` store (where it is
called). Each counts as a binding of the names (and attribute chains, ``self.step``) it may change.
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
        self._nonlocal = _nonlocal_stores(function)
        for statement in function.body:
            self._collect(statement)

    def _collect(self, node: ast.AST) -> None:
        """Record the function-scope bindings under ``node`` (not those inside its lambdas, nested
        functions and classes, nor comprehension variables: each has its own scope)."""
        for name, binder in _bound_here(node, self.parents):
            self._add(name, binder)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            for name in self._nonlocal.get(node.func.id, ()):
                self._add(name, _enclosing_statement(node, self.parents))
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
        bindings = self._changing(name)
        dominating = [b for b in bindings if self._dominates(b, node, bindings)]
        if not bindings:
            return Reaching((), True)
        if len(dominating) == 1:
            return Reaching((dominating[0],), True)
        return Reaching(tuple(bindings), False)

    def _changing(self, name: str) -> list[ast.AST]:
        """The bindings that may change what ``name`` (a name or an attribute chain) holds: its own, the
        stores into longer chains (``self.step.x = 1``), and for a chain each shorter chain's and the methods
        called on it (``self._advance()`` may set ``self.step``; ``h.size(0)`` changes no ``h``)."""
        parts = name.split(".")
        keys = [name, *(key for key in self._of if key.startswith(f"{name}.") and not key.endswith(CALLED))]
        for end in range(1, len(parts)):
            prefix = ".".join(parts[:end])
            keys += [prefix, f"{prefix}{CALLED}"]
        if len(parts) > 1:
            keys.append(f"{name}{CALLED}")
        out: list[ast.AST] = []
        for key in dict.fromkeys(keys):
            out += [b for b in self._of.get(key, []) if not any(b is o for o in out)]
        return out

    def unchanged_across(self, first: ast.AST, second: ast.AST, name: str) -> bool:
        """No binding that may change ``name`` lies inside the innermost statement holding both points
        (the ``if`` whose arms hold them): each reads the value it had when that statement began, in any
        one run of it (a counter raised after the ``if``, in the loop around it, changes neither). A
        comprehension's variable is its own at each point: not this."""
        if any(self._comprehension_binding(point, name) is not None for point in (first, second)):
            return False
        above = set()
        node: ast.AST | None = first
        while node is not None:
            above.add(id(node))
            node = self.parents.get(id(node))
        common: ast.AST | None = second
        while common is not None and (id(common) not in above or not isinstance(common, ast.stmt)):
            common = self.parents.get(id(common))
        if common is None:
            return False
        return not any(b is common or self._inside(b, [common]) for b in self._changing(name))

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
    elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, (ast.Store, ast.Del)):
        changed = chain(node) if isinstance(node, ast.Attribute) else chain(_stored_into(node))  # h[...] = x changes h
        if changed is not None:
            yield changed, _enclosing_statement(node, parents)
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner, method = chain(node.func.value), node.func.attr
        in_place = method.endswith("_") and not method.endswith("__")
        if owner in TENSOR_MODULES and in_place and node.args:  # torch.relu_(h): h changes
            owner = chain(node.args[0])
        if owner is not None:
            if in_place or method in MUTATORS:
                yield owner, _enclosing_statement(node, parents)  # h.mul_(2), steps.append(i)
            yield f"{owner}{CALLED}", _enclosing_statement(node, parents)  # may set any attribute of it


# The key under which a method called on a value is recorded: it may change that value's attributes.
CALLED = ".()"
# Methods of Python's containers that change them in place (tensors' in-place methods end in ``_``).
# (Not ``add``: a tensor's is out of place.)
MUTATORS = frozenset(
    ("append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "discard")
)
# Modules whose in-place functions change their first argument (``torch.relu_(h)``).
TENSOR_MODULES = frozenset({"torch", "F", "torch.nn.functional"})


def chain(node: ast.AST) -> str | None:
    """``self.step`` for an attribute chain from a name (a name alone: itself); None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(parts)]) if isinstance(node, ast.Name) else None


def names_read(tree: ast.AST, longest: bool = False) -> frozenset[str]:
    """The names code reads, and the attribute chains from them (``self.step`` and ``self``); ``longest``: only
    each chain in full (``self.step``, not ``self``, unless ``self`` is read on its own too)."""
    nodes = [n for n in walk(tree) if isinstance(n, (ast.Name, ast.Attribute))]
    inner = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)} if longest else set()
    return frozenset(read for n in nodes if id(n) not in inner and (read := chain(n)) is not None)


def _stored_into(node: ast.Subscript) -> ast.AST:
    """The value a subscript store changes: ``h`` of ``h[0][1] = x``, ``self.buf`` of ``self.buf[i] = x``."""
    value: ast.AST = node.value
    while isinstance(value, ast.Subscript):
        value = value.value
    return value


def _nonlocal_stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, tuple[str, ...]]:
    """The functions defined in ``function`` (by name) that rebind a name of it through ``nonlocal``."""
    out = {}
    for node in walk(function):
        if node is not function and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = [n for inner in walk(node) if isinstance(inner, ast.Nonlocal) for n in inner.names]
            if names:
                out[node.name] = tuple(names)
    return out


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
