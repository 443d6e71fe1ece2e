"""Files the user names for output (``--pr-body``, ``--json``, ``--emit-test``): checked before
anything is written, written whole or reported in one line."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from .errors import UsageError


def check_output(path: Path, option: str) -> None:
    """Refuse now, before the first write of the run, an output path that cannot be written."""
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; nothing written")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: no directory {parent}; nothing written")
    if path.exists() and not os.access(path, os.W_OK) or not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {path}: not writable; nothing written")


def write_output(path: Path, text: str, option: str) -> None:
    """Write ``text`` to ``path`` through a temporary file: whole, or not at all."""
    temp = path.with_name(f".{path.name}.mtp-audit-tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except OSError as error:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise UsageError(f"{option} {path}: cannot be written ({error.strerror or error})") from None
