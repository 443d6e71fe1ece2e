"""Stage 6c: write rewrites atomically, all or nothing, and only over the bytes we read."""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
import tempfile
from pathlib import Path

from ..errors import UsageError
from .changes import Rewrite


def unified_diff(rewrite: Rewrite) -> str:
    return "".join(difflib.unified_diff(
        rewrite.old.splitlines(keepends=True), rewrite.new.splitlines(keepends=True),
        fromfile=f"a/{rewrite.path}", tofile=f"b/{rewrite.path}",
    ))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_all(root: Path, rewrites: list[Rewrite]) -> None:
    """Check every file first (unchanged since it was read, writable), then replace each atomically."""
    for rewrite in rewrites:
        path = root / rewrite.path
        current = path.read_bytes()
        if _digest(current) != _digest(rewrite.old.encode("utf-8")):
            raise UsageError(f"{rewrite.path} changed since it was analysed; nothing written, run fix again")
        mode = path.stat().st_mode
        if not mode & stat.S_IWUSR or not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
            raise UsageError(f"{rewrite.path} is read-only (mode {stat.S_IMODE(mode):04o}); nothing written, "
                             "make it writable and run fix again")
    for rewrite in rewrites:
        path = (root / rewrite.path).resolve()  # a symlinked file is rewritten where it lives
        mode = path.stat().st_mode
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".mtp-audit")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(rewrite.new.encode("utf-8"))
            os.chmod(tmp, mode & 0o7777)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
