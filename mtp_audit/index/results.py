"""A whole-scan result cache, valid only while every file the scan looked at is unchanged.

A scan's result depends on the bytes of the files it read and on which
module paths existed when it probed them; nothing else. The entry records
exactly that (``observed``: path -> sha256, ``EXISTS`` or ``ABSENT``) and is
used only if all of it still holds, so a warm scan never parses and never
imports libcst. Keyed by tool version and tree root.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import __version__
from ..model import ScanResult, SourceTree

# Bumped whenever a cached class changes shape, so entries of an older layout are never unpickled
# into the new one, or whenever resolution reads the same facts differently (2: MethodFacts keeps
# the method's text, not libcst's printing; 3: the last star import wins, not the first; 4: shape
# kinds are enums and a LogitsShape names its rule's id; 5: records say where the architecture
# cannot be imported, DrafterRecord.unavailable_on).
CACHE_SCHEMA = 5


def default_cache_dir() -> Path:
    override = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("mtp-audit")) / "facts"


EXISTS = "exists"
ABSENT = "absent"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Observed:
    """What a scan looked at, relative to the tree root."""

    files: dict[str, str]

    def still_true(self, root: Path) -> bool:
        for rel, expected in self.files.items():
            path = root / rel
            if expected == ABSENT:
                if path.exists():
                    return False
            elif expected == EXISTS:
                if not path.is_file():
                    return False
            else:
                try:
                    if digest(path.read_bytes()) != expected:
                        return False
                except OSError:
                    return False
        return True


class ResultCache:
    def __init__(self, directory: Path):
        self.directory = directory

    def _path(self, tree: SourceTree) -> Path:
        key = digest(f"{__version__}\0{CACHE_SCHEMA}\0{tree.root}".encode())
        return self.directory / "results" / f"{key}.pickle"

    def load(self, tree: SourceTree) -> ScanResult | None:
        try:
            with self._path(tree).open("rb") as handle:
                observed, result = pickle.load(handle)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, TypeError, ValueError):
            return None
        if not isinstance(observed, Observed) or not isinstance(result, ScanResult):
            return None
        if not observed.still_true(tree.root):
            return None
        result.tree = tree  # the version file is read afresh every time
        return result

    def store(self, tree: SourceTree, observed: Observed, result: ScanResult) -> None:
        path = self._path(tree)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "wb") as handle:
                pickle.dump((observed, result), handle, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache dir only costs speed
