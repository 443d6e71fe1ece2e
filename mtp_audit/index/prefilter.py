"""A cheap text pre-filter: cut what facts never read before a module is parsed.

A line scanner (no tokenizer, no parser) finds top-level classes and
functions by their indentation. Method bodies other than ``compute_logits``
and ``get_top_tokens``, and the bodies of module-level functions other than
``__getattr__`` or one ``return Cls(...)`` (a factory), are dropped, a
one-line ``def`` keeping each name bound (the facts list a class's methods).
Of ``__init__`` and of each method that sets an attribute of ``self`` or runs a
method on it (an ``__init__`` may run it on self, here or in a subclass that
another module defines), only the statements
that start with ``self.`` and the assignments of the locals those name stay,
each under ``if __nested__:`` where it stood in a block (the facts read such a
statement as one that may not run). The scanner only skips text: what the
kept text means is read off the parsed tree, by the same code as for an
uncut file. What remains is typically a fifth of the file. ``lines`` maps
each kept line back to its line in the real file, so every position reported
is a real one.

The scanner trusts indentation; a file where that misleads it (a multi-line
string at column 0 inside a method, say) fails to parse once cut, and the
caller then parses the whole file instead.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

WATCHED_METHODS = ("compute_logits", "get_top_tokens")

_CLASS = re.compile(r"class\s+(\w+)")
_DEF = re.compile(r"(?:async\s+)?def\s+(\w+)")
_RAISE = re.compile(r"raise\b")
_EXIT = re.compile(r"return\b")
_OPENS_CALL = re.compile(r"[\w)\]]\s*\($")
# A call whose arguments the facts keep (``Assigned.arguments``): one of a logits processor, whose constructor
# flags may pick a branch of its call alone; the cut keeps its argument rows
ARGUMENTS_KEPT = re.compile(r"(?i)processor")
# the operator of an augmented assignment (``self.v += extra``), before its ``=``
_AUGMENTED = r"(?:[-+*/%&|^@]|//|\*\*|<<|>>)"
# ``self.x = ...``, ``self.x: T``, ``self.x += ...``, and one attribute deeper (``self.logits_processor.flag = ...``)
_SETS_SELF = re.compile(r"self\.(?:\w+(?:\.\w+)?\s*(?::|" + _AUGMENTED + r"?=(?!=))|register_(?:buffer|parameter)\b)")
_CALLS_SELF = re.compile(r"self\.(\w+)\s*\(")
# ``x = self.a = A()``, ``cfg.p = self.a = A()``, ``(p,) = self.a = (A(),)``: a target after a lone ``=`` is one
# of a chained assignment, whatever the first target is (``f(k=self.a=...)``, ``a == self.b = c`` do not parse)
_SETS_SELF_CHAINED = re.compile(r"=\s*self\.\w+\s*=(?!=)")
_ACTS_ON_SELF = re.compile(
    r"^[ \t]*self\.(?:\w+(?:\s*\(|(?:\.\w+)?\s*(?::|" + _AUGMENTED + r"?=(?!=)))|register_(?:buffer|parameter)\b)",
    re.MULTILINE,
)
_SETS_LOCAL = re.compile(r"(?:^|=)\s*(\w+)\s*(?::[^=]*)?=(?!=)")  # ``x = ...``, ``a.b = x = ...``
_WORD = re.compile(r"\w+")
_RETURN = re.compile(r"return\s*(?:\(|[\w.]+\s*\()")  # a call, or a parenthesised value that may be one
_NESTED_SCOPE = re.compile(r"(?:async\s+def|def|class)\b|@")
_NAMES_SELF = re.compile(r"\bself\b")
# ``setattr(self, "x", ...)``; a target list that stores into self (``self.a, self.b = ...``)
_SETATTR_SELF = re.compile(r"setattr\s*\(\s*self(?:\.\w+)?\s*,")
_TARGET_LIST = re.compile(r"[^=]*,[^=]*=(?!=)")
_SETATTR_SELF_LINE = re.compile(r"^[ \t]*setattr\s*\(\s*self(?:\.\w+)?\s*,", re.MULTILINE)
# a target list storing into self: ``a, self.b = ...``, ``self.a, b = ...``, ``(self.a, ...`` over lines; a
# bracketed target, ``(self.a) = A()``, ``[self.a] = [A()]``
_SELF_IN_TARGETS = re.compile(
    r"^[ \t]*(?:(?:[\w.]+[ \t]*,[^\n=]*\bself\.\w+[^\n=]*|self\.\w+[ \t]*,[^\n=]*)=(?!=)|[(\[][^=]*?\bself\.\w+)",
    re.MULTILINE,
)
_COMPOUND = re.compile(r"(?:if|elif|else|for|while|with|try|except|finally|case|async\s+(?:for|with))\b")


@dataclass
class Reduced:
    source: str
    lines: list[int]  # lines[i] = real line number of line i + 1 of ``source``


_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def physical_lines(text: str) -> list[str]:
    """Lines as Python counts them (ends kept): ``str.splitlines`` also splits on form feeds and
    other separators, which would put every later line number off by one."""
    return _LINE.findall(text)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _is_code(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


_STRING = re.compile(r"""("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')""")


def _header_end(lines: list[str], start: int) -> int:
    """Index of the last line of a ``def``/``class`` header that may span lines."""
    depth = 0
    index = start
    while index < len(lines):
        code = lines[index]
        if '"' in code or "'" in code:
            code = _STRING.sub('""', code)
        code = code.split("#", 1)[0]
        depth += code.count("(") + code.count("[") + code.count("{")
        depth -= code.count(")") + code.count("]") + code.count("}")
        if depth <= 0:
            return index
        index += 1
    return start


def _skip_decorators(lines: list[str], index: int, end: int) -> int:
    """Index of the ``def``/``class`` line after decorators (which may span lines)."""
    while index + 1 < end and (lines[index].lstrip().startswith("@") or not _is_code(lines[index])):
        index = _header_end(lines, index) + 1 if _is_code(lines[index]) else index + 1
    return min(index, end - 1)


class _CodeRows:
    """The file's code lines (neither blank nor comment-only) and their indentation, read once,
    so that a block's end is two binary searches instead of a walk over its lines."""

    def __init__(self, lines: list[str]):
        self.count = len(lines)
        self.rows = [index for index, line in enumerate(lines) if _is_code(line)]
        self.indents = [_indent(lines[index]) for index in self.rows]
        self._at_most: dict[int, list[int]] = {}  # indentation -> code rows indented no deeper

    def block_end(self, header_end: int, indent: int) -> int:
        """Index after the last code line below ``header_end`` that comes before the next code
        line indented ``indent`` or less."""
        shallow = self._at_most.get(indent)
        if shallow is None:
            shallow = self._at_most[indent] = [r for r, i in zip(self.rows, self.indents) if i <= indent]
        following = bisect.bisect_right(shallow, header_end)
        stop = shallow[following] if following < len(shallow) else self.count
        before = bisect.bisect_left(self.rows, stop) - 1
        last = self.rows[before] if before >= 0 and self.rows[before] > header_end else header_end
        return last + 1


def _block_end(lines: list[str], code: _CodeRows, start: int, indent: int) -> int:
    """Index after the block whose header starts at ``start`` (header indentation ``indent``)."""
    return code.block_end(_header_end(lines, start), indent)


def _code(line: str) -> str:
    """The line without its strings' contents and its comment."""
    if '"' in line or "'" in line:
        line = _STRING.sub('""', line)
    return line.split("#", 1)[0].rstrip()


def _statement_rows(lines: list[str], row: int, stop: int) -> tuple[int, bool]:
    """Last row of the statement that starts at ``row`` (brackets closed, no ``\\`` at the end),
    and whether its middle rows are only the arguments of a call whose ``(`` ends the first row:
    dropping them leaves the same expression around the call, of the same callee."""
    first = _code(lines[row])
    depth = opened = _depth(first)[1]
    if depth <= 0 and not first.endswith("\\"):
        return row, False
    middle_inside = opened == 1 and _OPENS_CALL.search(first) is not None and not ARGUMENTS_KEPT.search(first)
    for index in range(row + 1, stop):
        code = _code(lines[index])
        lowest, net = _depth(code)
        if depth + net <= 0 and not code.endswith("\\"):
            return index, middle_inside
        middle_inside = middle_inside and depth + lowest >= opened
        depth += net
    return stop - 1, False


def _depth(code: str) -> tuple[int, int]:
    """(lowest bracket depth reached along the line, depth at its end), from 0 at its start."""
    net = code.count("(") + code.count("[") + code.count("{") - code.count(")") - code.count("]") - code.count("}")
    if not (")" in code or "]" in code or "}" in code):
        return 0, net
    depth = lowest = 0
    for char in code:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
            lowest = min(lowest, depth)
    return lowest, net


def _cut_init(lines: list[str], keep: list[bool], inserted: dict[int, str], first: int, define: int, stop: int) -> None:
    """Cut ``__init__`` down to what its facts are read from (``classes.py`` reads them off the
    tree): the header, and each statement that starts with ``self.``, moved to the body's first
    level, where the tree walk finds it as it would in its ``if``/``for``/``with``/``try``.
    In a ``def`` nested in the method (with no ``self`` parameter of its own), the statements that start by
    storing on self stay, each under ``if __closure__:`` (they run if and whenever that function is called),
    those of defs and classes within it not; the rest of nested ``def``/``class`` blocks goes; a ``match`` case's
    stay, as a block's do (its header goes). ``setattr(self, ...)`` and target lists storing into self stay whole.
    A ``return`` stays, without its value, where it stood among them (under ``if __nested__:`` from a block):
    what follows a ``return`` may not run, or never runs.
    The method stays whole where the line scan could misread it (a string spanning lines, a block
    with its body on the header's line, statements after a ``;``, a nested def whose header names
    ``self``) and where its body may be a lone ``raise``."""
    for index in range(first, define):
        keep[index] = False  # decorators
    header_end = _header_end(lines, define)
    body = [index for index in range(header_end + 1, stop) if _is_code(lines[index])]
    if not body or any(_misread(lines[i]) for i in body):
        return
    margin = lines[body[0]][: _indent(lines[body[0]])]
    statements: list[tuple[int, int, bool]] = []  # (first row, last row, middle rows droppable)
    locals_set: list[tuple[str, tuple[int, int, bool]]] = []  # local name -> its assignment statement
    exits: list[int] = []  # the rows of ``return`` statements
    closures: set[int] = set()  # the first rows of the stores on self of defs nested in the method
    nested_under: int | None = None  # indentation of a def/class/match whose block is skipped
    closure = False  # that block is a def's with no ``self`` parameter: its stores on self are the method's
    deeper_under: int | None = None  # indentation of a def/class within it, whose block is skipped whole
    row = body[0]
    while row < stop:
        line = lines[row]
        if not _is_code(line):
            row += 1
            continue
        last, hollow = _statement_rows(lines, row, stop)
        indent, code = _indent(line), line.strip()
        if nested_under is not None and indent > nested_under:
            if deeper_under is None or indent <= deeper_under:
                deeper_under = indent if _NESTED_SCOPE.match(code) else None
                if closure and deeper_under is None:
                    if _COMPOUND.match(code) and not _code(lines[last]).endswith(":"):
                        return  # a body on the header's line, which the tree walk reads
                    if _SETS_SELF.match(code):  # runs if the def is called
                        statements.append((row, last, hollow and not code.startswith("self.register_")))
                        closures.add(row)
                    elif _sets_attr_of_self(lines, row, last, code) or _stores_into_self_list(lines, row, last, code):
                        statements.append((row, last, False))
                        closures.add(row)
            row = last + 1
            continue
        nested_under = None
        if indent == len(margin) and _RAISE.match(code):
            return  # maybe a placeholder that only raises: the tree says
        if _NESTED_SCOPE.match(code):
            header = "".join(_code(lines[i]) for i in range(row, last + 1))
            if not code.startswith("@") and not _code(lines[last]).endswith(":"):
                return  # ``def f(): self.a = A()``: a body on the header's line
            if _DEF.match(code) and _NAMES_SELF.search(header):
                return  # its own ``self`` parameter, or ``self`` in a default: the tree tells which
            nested_under, deeper_under = indent, None
            closure = _DEF.match(code) is not None
        elif _COMPOUND.match(code) and not _code(lines[last]).endswith(":"):
            return  # ``if x: self.a = A()``: a body on the header's line
        elif _EXIT.match(code):
            exits.append(row)
        elif _SETS_SELF.match(code) or _CALLS_SELF.match(code) or _SETS_SELF_CHAINED.search(code):
            statements.append((row, last, hollow and not code.startswith("self.register_")))  # its first argument
        elif _sets_attr_of_self(lines, row, last, code) or _stores_into_self_list(lines, row, last, code):
            statements.append((row, last, False))
        else:
            locals_set += [(name, (row, last, hollow)) for name in _SETS_LOCAL.findall(_code(code))]
        row = last + 1
    statements += _locals_read(lines, statements, locals_set)
    for index in range(header_end + 1, stop):
        keep[index] = False
    for row, last, hollow in sorted(statements):
        nested = "if __nested__: " if _indent(lines[row]) > len(margin) else ""  # under a block: it may not run
        nested = "if __closure__: " if row in closures else nested
        inserted[row] = margin + nested + lines[row].lstrip(" \t")
        for index in range(last if hollow else row + 1, last + 1):
            keep[index] = True  # a call's arguments go: its callee is what the facts read
    for row in exits:
        nested = "if __nested__: " if _indent(lines[row]) > len(margin) else ""
        inserted[row] = margin + nested + "return" + (lines[row][len(lines[row].rstrip("\r\n")) :] or "\n")
    if not statements and not exits:
        inserted[body[0]] = margin + "pass" + (lines[body[0]][len(lines[body[0]].rstrip("\r\n")) :] or "\n")


def _misread(line: str) -> bool:
    """Whether the line scan could misread a method's line: a string that may span lines, statements after a ``;``."""
    return '"""' in line or "'''" in line or (";" in line and ";" in _code(line))


def _sets_attr_of_self(lines: list[str], row: int, last: int, code: str) -> bool:
    """Whether a statement (``code``, its first line) is ``setattr(self, ...)``, over lines too (``setattr(`` then
    ``self, "x", v`` below, as ruff writes a long call)."""
    return (
        code.startswith("setattr")
        and _SETATTR_SELF.match(code if row == last else _kept_text(lines, (row, last, False)).lstrip()) is not None
    )


def _stores_into_self_list(lines: list[str], row: int, last: int, code: str) -> bool:
    """Whether a statement (``code``, its first line) may store into self through a target list or a bracketed
    target: its first ``=`` follows a list naming ``self.`` (``self.a, self.b = ...``), or it starts with a
    bracket and names ``self.`` (``(self.a, self.b) = ...`` over lines, ``(self.a) = A()``, ``[self.a] = [A()]``,
    ``(self.a): T``; kept whole, as the tree reads whatever it is)."""
    if code[:1] in "([":
        return "self." in _kept_text(lines, (row, last, False))
    if "self." not in code or "," not in code:
        return False
    found = _TARGET_LIST.match(code)
    return found is not None and "self." in found.group()


def _locals_read(
    lines: list[str], statements: list[tuple[int, int, bool]], locals_set: list[tuple[str, tuple[int, int, bool]]]
) -> list[tuple[int, int, bool]]:
    """The assignments of locals that a kept statement (or a kept assignment of another local) names: a local
    carries a value into ``self.X = local``."""
    kept: list[tuple[int, int, bool]] = []
    words = {word for statement in statements for word in _WORD.findall(_kept_text(lines, statement))}
    waiting = locals_set
    while waiting:
        named = [(name, statement) for name, statement in waiting if name in words]
        if not named:
            break
        waiting = [(name, statement) for name, statement in waiting if name not in words]
        for _, statement in named:
            kept.append(statement)
            words.update(_WORD.findall(_kept_text(lines, statement)))
    return kept


def _kept_text(lines: list[str], statement: tuple[int, int, bool]) -> str:
    row, last, hollow = statement
    return "".join(_code(lines[index]) for index in ([row, last] if hollow else range(row, last + 1)))


def _single_return(lines: list[str], define: int, end: int) -> bool:
    """Whether a function's body is one ``return`` statement (or it is all on its ``def`` line): the facts read
    what such a factory returns."""
    header_end = _header_end(lines, define)
    body = [index for index in range(header_end + 1, end) if _is_code(lines[index])]
    if not body:
        return True
    return bool(_RETURN.match(lines[body[0]].lstrip())) and _statement_rows(lines, body[0], end)[0] == body[-1]


def whole(source: str) -> Reduced:
    """The source uncut, for when the cut one does not parse."""
    return Reduced(source, list(range(1, source.count("\n") + 2)))


def reduce_source(source: str) -> Reduced:
    lines = physical_lines(source)
    code = _CodeRows(lines)
    keep = [True] * len(lines)
    inserted: dict[int, str] = {}  # index -> replacement line put before it
    index = 0
    while index < len(lines):
        line = lines[index]
        if not _is_code(line) or _indent(line):
            index += 1
            continue
        start = index
        index = _skip_decorators(lines, index, len(lines))
        header = lines[index]
        end = _block_end(lines, code, index, 0)
        function = _DEF.match(header)
        if function and function.group(1) != "__getattr__" and not _single_return(lines, index, end):
            for i in range(start, end):
                keep[i] = False
            newline = header[len(header.rstrip("\r\n")) :] or "\n"
            inserted[index] = f"def {function.group(1)}(): pass{newline}"  # the name is rebound all the same
        elif _CLASS.match(header):
            _reduce_class(lines, code, keep, inserted, index, end)
        index = max(end, index + 1)
    out: list[str] = []
    numbers: list[int] = []
    for i, line in enumerate(lines):
        if i in inserted:
            out.append(inserted[i])
            numbers.append(i + 1)
        if keep[i]:
            out.append(line)
            numbers.append(i + 1)
    return Reduced("".join(out), numbers)


def _acts_on_self(lines: list[str], member: tuple[int, int, int, str | None]) -> bool:
    """Whether a method's body has a statement that sets an attribute of self or runs a method on self: an
    ``__init__`` that runs it on self, in this class or a subclass (in any module), reads those statements."""
    _, define, stop, name = member
    if name is None:
        return False
    body = "".join(lines[define + 1 : stop])
    return (
        _ACTS_ON_SELF.search(body) is not None
        or _SETS_SELF_CHAINED.search(body) is not None
        or ("setattr" in body and _SETATTR_SELF_LINE.search(body) is not None)
        or _SELF_IN_TARGETS.search(body) is not None
        or _acts_on_self_inline(lines, define)
    )


def _acts_on_self_inline(lines: list[str], define: int) -> bool:
    """Whether a ``def`` has its body on its header's last line (``def _build(self, c): self.p = P()``) and that
    body sets an attribute of self or runs a method on it."""
    code = _code(lines[_header_end(lines, define)])
    return any(
        _ACTS_ON_SELF.match(code[colon + 1 :]) or _SETS_SELF_CHAINED.search(code, colon + 1)
        for colon, char in enumerate(code)
        if char == ":"
    )


def _reduce_class(
    lines: list[str],
    code: _CodeRows,
    keep: list[bool],
    inserted: dict[int, str],
    header: int,
    end: int,
) -> None:
    body_indent = None
    index = _header_end(lines, header) + 1
    members: list[tuple[int, int, int, str | None]] = []  # (first, def line, end, name)
    while index < end:
        line = lines[index]
        if not _is_code(line):
            index += 1
            continue
        indent = _indent(line)
        if body_indent is None:
            if indent == 0:
                return  # one-line class body: leave it alone
            body_indent = indent
        if indent != body_indent:
            index += 1
            continue
        first = index
        index = _skip_decorators(lines, index, end)
        function = _DEF.match(lines[index].lstrip())
        stop = _block_end(lines, code, index, body_indent)
        members.append((first, index, stop, function.group(1) if function else None))
        index = max(stop, index + 1)
    read = [member for member in members if member[3] == "__init__" or _acts_on_self(lines, member)]
    for first, define, stop, name in read:  # an __init__ of this class or a subclass may run it: read as part of it
        if name not in WATCHED_METHODS:
            _cut_init(lines, keep, inserted, first, define, stop)
    cut = {*WATCHED_METHODS, *(member[3] for member in read)}
    dropped = [member for member in members if member[3] and member[3] not in cut]
    for first, define, stop, name in dropped:  # the name is bound all the same: the facts keep it
        for i in range(first, stop):
            keep[i] = False
        newline = lines[define][len(lines[define].rstrip("\r\n")) :] or "\n"
        inserted[define] = lines[define][: _indent(lines[define])] + f"def {name}(self): pass{newline}"
