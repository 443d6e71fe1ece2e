"""Persistent per-module facts, keyed by content hash, module name and tool version.

Safe when files change (the key is the content, not the mtime) and in CI
where mtimes lie. One small JSON file per entry in the user cache dir.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

import platformdirs

from .. import __version__
from .facts import ClassFacts, MethodFacts, ModuleFacts, Target


def default_cache_dir() -> Path:
    override = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir("mtp-audit")) / "facts"


class FactsCache:
    def __init__(self, directory: Path | None = None):
        self.directory = directory or default_cache_dir()

    def _path(self, data: bytes, module: str, is_package: bool) -> Path:
        digest = hashlib.sha256()
        digest.update(f"{__version__}\0{module}\0{is_package}\0".encode())
        digest.update(data)
        key = digest.hexdigest()
        return self.directory / key[:2] / f"{key}.json"

    def load(self, data: bytes, module: str, is_package: bool, rel: str) -> ModuleFacts | None:
        path = self._path(data, module, is_package)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        try:
            return _from_json(raw, rel)
        except (KeyError, TypeError):
            return None  # an entry from an incompatible layout: re-read the file

    def store(self, data: bytes, facts: ModuleFacts) -> None:
        path = self._path(data, facts.module, facts.is_package)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(asdict(facts), handle)
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache dir only costs speed


def _from_json(raw: dict, rel: str) -> ModuleFacts:
    classes = [
        ClassFacts(
            name=c["name"], line=c["line"], bases=c["bases"],
            methods={k: MethodFacts(**v) for k, v in c["methods"].items()},
            init_attrs=c["init_attrs"], annotations=c["annotations"], init_raises=c["init_raises"],
        )
        for c in raw["classes"]
    ]
    bindings = {
        platform: {name: [Target(**t) for t in targets] for name, targets in names.items()}
        for platform, names in raw["bindings"].items()
    }
    return ModuleFacts(
        module=raw["module"], path=rel, is_package=raw["is_package"], classes=classes,
        bindings=bindings, import_errors=raw["import_errors"], parse_error=raw["parse_error"],
    )
