"""A cheap pre-filter: blank out what facts never read, before libcst parses a module.

CPython's ``ast`` (about ten times faster than libcst) finds statement
boundaries; method bodies other than ``compute_logits``, ``get_top_tokens``
and ``__init__``, and module-level functions other than ``__getattr__``,
become blank lines. Line numbers are unchanged, so every position libcst
reports afterwards is a position in the real file.
"""

from __future__ import annotations

import ast

WATCHED_METHODS = ("compute_logits", "get_top_tokens")
KEPT_METHODS = frozenset((*WATCHED_METHODS, "__init__"))
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *(d.lineno for d in decorators)])


def reduce_source(source: str) -> str:
    """``source`` with irrelevant function bodies blanked; raises SyntaxError like ast.parse."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    blank: list[tuple[int, int, str | None]] = []  # (first, last, replacement for the first line)

    for statement in tree.body:
        if isinstance(statement, FUNCTIONS) and statement.name != "__getattr__":
            blank.append((_first_line(statement), statement.end_lineno or statement.lineno, None))
        elif isinstance(statement, ast.ClassDef):
            methods = [s for s in statement.body if isinstance(s, FUNCTIONS) and s.name not in KEPT_METHODS]
            if not methods or statement.body[0].lineno == statement.lineno:
                continue
            kept = [s for s in statement.body if s not in methods]
            for index, method in enumerate(methods):
                first = _first_line(method)
                indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
                needs_pass = not kept and index == 0
                blank.append((first, method.end_lineno or method.lineno, f"{indent}pass" if needs_pass else None))
    if not blank:
        return source
    for first, last, replacement in blank:
        for number in range(first, last + 1):
            line = lines[number - 1]
            newline = line[len(line.rstrip("\r\n")):] or "\n"
            lines[number - 1] = newline
        if replacement is not None:
            line = lines[first - 1]
            lines[first - 1] = replacement + line
    return "".join(lines)
