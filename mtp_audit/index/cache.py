"""Persistent per-module facts, keyed by content hash, module name and tool version.

Safe when files change (the key is the content, not the mtime) and in CI
where mtimes lie. One small pickle per entry in the user cache dir: it is
the user's own cache, written and read by the same tool version only.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from .. import __version__
from .facts import ModuleFacts
from .results import CACHE_SCHEMA, default_cache_dir


class FactsCache:
    def __init__(self, directory: Path | None = None):
        self.directory = directory or default_cache_dir()

    def _path(self, data: bytes, module: str, is_package: bool) -> Path:
        digest = hashlib.sha256()
        digest.update(f"{__version__}\0{CACHE_SCHEMA}\0{module}\0{is_package}\0".encode())
        digest.update(data)
        key = digest.hexdigest()
        return self.directory / key[:2] / f"{key}.pickle"

    def load(self, data: bytes, module: str, is_package: bool, rel: str) -> ModuleFacts | None:
        facts = load_entry(self._path(data, module, is_package))
        if not isinstance(facts, ModuleFacts):
            return None
        facts.path = rel  # the same content may live at another path
        return facts

    def store(self, data: bytes, facts: ModuleFacts) -> None:
        store_entry(self._path(data, facts.module, facts.is_package), facts)


MISSING = object()


def load_entry(path: Path) -> object:
    """The object pickled at ``path``; ``MISSING`` when absent, torn or of another layout."""
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
        return MISSING


def store_entry(path: Path, value: object) -> None:
    """Pickle ``value`` at ``path`` atomically; a read-only cache dir only costs speed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError:
        pass
