"""A fast pre-order walk over a libcst tree.

``libcst.matchers.findall`` drives a full visitor that rebuilds every node on
the way; reading the dataclass fields directly is an order of magnitude
cheaper, and the analysis walks many small method bodies.
"""

from __future__ import annotations

from collections.abc import Iterator

import libcst as cst


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
