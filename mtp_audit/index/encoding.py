"""Source bytes to text as CPython reads them: a UTF-8 BOM, or a PEP 263 coding cookie, else UTF-8."""

from __future__ import annotations

import ast
import re
import tokenize


class NotDecodable(ValueError):
    """The bytes are not text in the encoding the file declares (or UTF-8)."""


def decode_source(data: bytes) -> tuple[str, str]:
    """The text of ``data`` and the codec that writes it back byte for byte ("utf-8-sig" keeps a BOM)."""
    try:
        encoding, _ = tokenize.detect_encoding(_first_lines(data))
    except SyntaxError as error:  # no codec by that name, a BOM with another cookie, or bytes not UTF-8
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as undecodable:
            raise NotDecodable(f"not UTF-8 ({undecodable.reason} at byte {undecodable.start})") from None
        raise NotDecodable(error.msg) from None
    try:
        return data.decode(encoding), encoding
    except UnicodeDecodeError as error:
        name = "UTF-8" if encoding in ("utf-8", "utf-8-sig") else encoding
        raise NotDecodable(f"not {name} ({error.reason} at byte {error.start})") from None


def decode_as_imported(data: bytes) -> str:
    """The text of the module Python's import compiles from ``data``: ``decode_source``'s, or, where
    the bytes its codec cannot decode all lie in comments (CPython's tokenizer never decodes a comment,
    so ``compile`` of the bytes passes), the text with each such byte replaced (U+FFFD): the code is
    Python's. Bytes that ``compile`` rejects (in a string, a name) stay ``NotDecodable``."""
    try:
        return decode_source(data)[0]
    except NotDecodable as undecodable:
        try:
            compile(data, "<module>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except (SyntaxError, ValueError):  # ValueError: a null byte, before Python 3.12
            raise undecodable from None
        return data.decode(_declared_codec(data), errors="replace")


def _declared_codec(data: bytes) -> str:
    """The codec ``data`` declares (a BOM, a PEP 263 cookie in its first two lines) or UTF-8, by
    ``tokenize.detect_encoding``'s rules: given those lines with what does not decode as UTF-8
    replaced, as only a comment's bytes may be (a cookie is ASCII)."""
    head = b"".join(line.decode("utf-8", "replace").encode("utf-8") for line in data.splitlines(True)[:2])
    return tokenize.detect_encoding(_first_lines(head))[0]


def _first_lines(data: bytes):
    """A ``readline`` over ``data``'s lines as CPython's tokenizer ends them (``\\r\\n``, ``\\n`` or a lone
    ``\\r``, which ``BytesIO.readline`` does not end a line at: a cookie on an old-Mac file's second line)."""
    head = _TWO_LINES.match(data)
    return iter([*head.group().splitlines(True), b""]).__next__  # type: ignore[union-attr]


# The first two lines, whatever ends them, read no further (a module is read in full only once).
_TWO_LINES = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)?[^\r\n]*(?:\r\n|\r|\n)?")
