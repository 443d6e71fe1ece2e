"""The hash of the tool's own code: part of every cache key, so any change to it invalidates.

Hashes the content of every ``mtp_audit/**/*.py`` and template, once per process (about
70 small files, ~2 ms). Content, not mtimes: an editable install that is edited, a
reinstall with the same version number, or a CI checkout with fresh mtimes all get the
right answer. The two parsers whose readings are cached count as code too: the running
Python (a file with 3.12-only syntax compiles on 3.12, not 3.11) and libcst's version,
so two interpreters or venvs sharing one cache folder never read each other's entries.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import sys
from pathlib import Path

from ..templating import TEMPLATE_DIRS

PACKAGE = Path(__file__).resolve().parent.parent


def _files(top: Path, suffix: str) -> list[Path]:
    found = []
    for folder, dirs, names in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found.extend(Path(folder, n) for n in sorted(names) if n.endswith(suffix))
    return found


def source_files() -> list[Path]:
    templates = next((d for d in TEMPLATE_DIRS if d.is_dir()), None)
    return _files(PACKAGE, ".py") + (_files(templates, "") if templates else [])


@functools.cache
def source_hash() -> str:
    """sha256 over the parsers' versions, then the relative path and bytes of each source
    file, in a fixed order."""
    digest = hashlib.sha256(parsers().encode() + b"\0")
    for path in source_files():
        digest.update(path.relative_to(PACKAGE.parent).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


def parsers() -> str:
    """The running Python and the installed libcst, read without importing libcst (which takes
    a tenth of a second; ``importlib.metadata`` half that): its ``_version.py`` file's bytes."""
    spec = importlib.util.find_spec("libcst")
    folder = Path(spec.origin).parent if spec and spec.origin else None
    try:
        libcst = (folder / "_version.py").read_bytes().decode(errors="replace") if folder else "absent"
    except OSError:
        libcst = f"at {folder}"
    return f"{sys.implementation.name} {sys.version} | libcst {libcst}"
