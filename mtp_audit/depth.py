"""How deep a method's expressions nest, checked before libcst parses it (with ``ast``, which is linear)."""

from __future__ import annotations

import ast
import re

# libcst's parse time grows with the square of an expression's nesting (``1+1+...``, ``a[1][1]...``,
# ``x if c else y if d else ...``): 1,000 deep parses in 0.2-0.9 s, 20,000 in hours. Deeper is not read.
MAX_EXPRESSION_DEPTH = 1000
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)


class TooDeep(ValueError):
    """A method holding an expression nested deeper than ``MAX_EXPRESSION_DEPTH``: not given to libcst."""

    def __init__(self, name: str, line: int):
        self.name, self.line = name, line
        super().__init__(
            f"`{name}` holds an expression nested more than {MAX_EXPRESSION_DEPTH} deep (line {line} of the "
            "method), which mtp-audit does not read: libcst's parse time grows with the square of the depth"
        )

    def __reduce__(self):  # raised in a worker process (fix's warm worker), re-raised in the parent
        return type(self), (self.name, self.line)


def check_depth(code: str) -> None:
    """Raise ``TooDeep`` for code libcst would take minutes or hours on (only text long enough to hold it is
    parsed with ``ast`` to measure; each level takes at least two characters)."""
    if len(code) < 2 * MAX_EXPRESSION_DEPTH:
        return
    named = _DEF.search(code)
    name = named.group(1) if named else "?"
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return  # libcst says what is wrong with it
    except (MemoryError, RecursionError):  # deeper than CPython's own parser goes
        raise TooDeep(name, 1) from None
    pending: list[tuple[ast.AST, int]] = [(tree, 0)]
    while pending:
        node, depth = pending.pop()
        depth = depth + 1 if isinstance(node, ast.expr) else 0
        if depth > MAX_EXPRESSION_DEPTH:
            raise TooDeep(name, getattr(node, "lineno", 1))
        pending.extend((child, depth) for child in ast.iter_child_nodes(node))
