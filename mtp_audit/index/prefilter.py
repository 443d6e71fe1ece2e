"""A cheap text pre-filter: cut what facts never read before libcst parses a module.

A line scanner (no tokenizer, no parser) finds top-level classes and
functions by their indentation. Method bodies other than ``compute_logits``
and ``get_top_tokens``, and module-level functions other than
``__getattr__``, are dropped; ``__init__`` is dropped too, after its
``self.X = Callee(...)`` assignments are read off its lines. What remains is
typically a fifth of the file. ``lines`` maps each kept line back to its
line in the real file, so every position reported is a real one.

The scanner trusts indentation; a file where that misleads it (a multi-line
string at column 0 inside a method, say) fails to parse once cut, and the
caller then parses the whole file instead.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

WATCHED_METHODS = ("compute_logits", "get_top_tokens")

_CLASS = re.compile(r"class\s+(\w+)")
_DEF = re.compile(r"(?:async\s+)?def\s+(\w+)")
_SELF_ASSIGN = re.compile(r"^\s*self\.(\w+)\s*(:[^=]+?)?\s*(?:=(?!=)\s*(.*))?$")
_QUOTES = ('"""', "'''")
_REGISTER = re.compile(r"^\s*self\.register_(?:buffer|parameter)\(\s*[\"'](\w+)[\"']")
_CALLEE = re.compile(r"^([A-Za-z_][\w.]*)\s*\(")


@dataclass
class InitFacts:
    attrs: dict[str, list[str]] = field(default_factory=dict)  # self.X = Callee(...)
    raises: str | None = None  # the body is a single raise: its text


@dataclass
class Reduced:
    source: str
    lines: list[int]  # lines[i] = real line number of line i + 1 of ``source``
    inits: dict[int, InitFacts]  # real line of the class -> its __init__ facts


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


def _call_end(lines: list[str], index: int, column: int) -> int | None:
    """Row where the call whose ``(`` is at (index, column) closes, if nothing follows it there."""
    depth = 0
    for row in range(index, len(lines)):
        text = _STRING.sub('""', lines[row]).split("#", 1)[0]
        for position in range(column if row == index else 0, len(text)):
            char = text[position]
            depth += char in "([{"
            depth -= char in ")]}"
            if depth == 0:
                return row if not text[position + 1 :].strip() else None
    return None


def _init_facts(lines: list[str]) -> InitFacts:
    """``self.X = Callee(...)`` of an ``__init__``; any other value of X counts as ``<other>``."""
    facts = InitFacts()
    for index, line in enumerate(lines[1:], 1):
        joined = line.rstrip() + (
            lines[index + 1].strip() if line.rstrip().endswith("(") and index + 1 < len(lines) else ""
        )
        registered = _REGISTER.match(joined)
        if registered:  # self.register_buffer("x", ...) sets self.x to something we cannot name
            bucket = facts.attrs.setdefault(registered.group(1), [])
            if "<other>" not in bucket:
                bucket.append("<other>")
            continue
        match = _SELF_ASSIGN.match(line)
        if not match:
            continue
        attr, annotation, value = match.groups()
        if annotation is None and value is None:
            continue  # a bare expression, not an assignment
        bucket = facts.attrs.setdefault(attr, [])
        if not value:
            continue  # an annotation without a value
        row, text = index, line.rstrip("\r\n")
        wrapped = value.strip() == "(" and index + 1 < len(lines)  # self.x = (\n    Callee(...)\n)
        if wrapped:
            row, text = index + 1, lines[index + 1].rstrip("\r\n")
            value = text.lstrip()
        callee = _CALLEE.match(value)
        end = _call_end(lines, row, len(text) - len(value) + callee.end() - 1) if callee else None
        if end is not None and wrapped:
            end = end if end + 1 < len(lines) and lines[end + 1].strip() == ")" else None
        name = callee.group(1) if callee and end is not None else "<other>"
        if name not in bucket:
            bucket.append(name)
    code = [line.strip() for line in lines[_header_end(lines, 0) + 1 :] if _is_code(line)]
    if code and code[0][:3] in _QUOTES and len(code[0]) > 3 and code[0].endswith(code[0][:3]):
        code = code[1:]  # a one-line docstring
    if code and code[0].startswith("raise ") and not any(c.startswith(("self.", "return ", "if ")) for c in code):
        text = " ".join(code)
        exception = re.match(r"raise\s+([\w.]+)", text)
        message = " ".join(found.group(0)[1:-1] for found in _STRING.finditer(text))
        facts.raises = (exception.group(1) if exception else "an exception") + (f": {message}" if message else "")
    return facts


def whole(source: str) -> Reduced:
    """The source uncut, for when the cut one does not parse."""
    return Reduced(source, list(range(1, source.count("\n") + 2)), {})


def reduce_source(source: str) -> Reduced:
    lines = physical_lines(source)
    code = _CodeRows(lines)
    keep = [True] * len(lines)
    inserted: dict[int, str] = {}  # index -> replacement line put before it
    inits: dict[int, InitFacts] = {}
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
        if function and function.group(1) != "__getattr__":
            for i in range(start, end):
                keep[i] = False
        elif _CLASS.match(header):
            _reduce_class(lines, code, keep, inserted, inits, index, end)
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
    return Reduced("".join(out), numbers, inits)


def _reduce_class(
    lines: list[str],
    code: _CodeRows,
    keep: list[bool],
    inserted: dict[int, str],
    inits: dict[int, InitFacts],
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
    dropped = [(first, stop, name) for first, _, stop, name in members if name and name not in WATCHED_METHODS]
    for first, stop, name in dropped:
        if name == "__init__":
            inits[header + 1] = _init_facts(lines[first:stop])
        for i in range(first, stop):
            keep[i] = False
    if len(dropped) == len(members) and dropped:
        first = dropped[0][0]
        newline = lines[first][len(lines[first].rstrip("\r\n")) :] or "\n"
        inserted[first] = lines[first][: _indent(lines[first])] + "pass" + newline
