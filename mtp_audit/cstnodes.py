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
import textwrap
from collections.abc import Iterator

import libcst as cst


@functools.lru_cache(maxsize=4096)
def parse_method(code: str) -> tuple[cst.Module, cst.FunctionDef]:
    """Parse one method's source (as stored in the facts) on its own; nodes are immutable, so shared."""
    module = cst.parse_module(textwrap.dedent(code))
    func = module.body[0]
    if not isinstance(func, cst.FunctionDef):
        raise ValueError("not a function definition")
    return module, func


def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """``node`` and every node below it, in source (pre-)order."""
    stack: list[cst.CSTNode] = [node]
    while stack:
        current = stack.pop()
        yield current
        children: list[cst.CSTNode] = []
        for name in current.__dataclass_fields__:
            value = getattr(current, name)
            if isinstance(value, cst.CSTNode):
                children.append(value)
            elif isinstance(value, (list, tuple)):
                children.extend(v for v in value if isinstance(v, cst.CSTNode))
        stack.extend(reversed(children))


def nodes_of(node: cst.CSTNode, types: type | tuple[type, ...]) -> list:
    return [n for n in walk(node) if isinstance(n, types)]
