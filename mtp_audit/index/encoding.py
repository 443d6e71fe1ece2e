"""Source bytes to text as CPython reads them: a UTF-8 BOM, or a PEP 263 coding cookie, else UTF-8."""

from __future__ import annotations

import io
import tokenize


class NotDecodable(ValueError):
    """The bytes are not text in the encoding the file declares (or UTF-8)."""


def decode_source(data: bytes) -> tuple[str, str]:
    """The text of ``data`` and the codec that writes it back byte for byte ("utf-8-sig" keeps a BOM)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
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
