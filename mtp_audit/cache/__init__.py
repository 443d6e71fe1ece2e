"""Every on-disk cache of the tool, in one place.

Three namespaces under one root (``MTP_AUDIT_CACHE_DIR``, else the user cache dir):
``facts`` (a module's facts, by its bytes and name), ``shapes`` (a classification
answer, by the method text it reads) and ``results`` (a whole scan, valid while every
file it looked at is unchanged). Every key includes the hash of the tool's own source
(``source.source_hash``), so a code change never meets an answer of other code, and
entries are data-only JSON (``codec``): reading one never runs anything.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from ..model import ScanAnswers, ScanResult, SourceTree
from .store import (
    MISSING,
    SOURCE_LIMIT,
    NotRegular,
    Store,
    TooLarge,
    atomic_write,
    default_cache_dir,
    read_regular,
    usable,
)

__all__ = [
    "ABSENT",
    "CHANGED",
    "DIRECTORY",
    "EXISTS",
    "KINDS",
    "MISSING",
    "AnswerStore",
    "FactsCache",
    "Observed",
    "ReadableFiles",
    "ResultCache",
    "UNREADABLE",
    "atomic_write",
    "default_cache_dir",
    "digest",
    "kind_of",
    "listing_of",
    "NotRegular",
    "SOURCE_LIMIT",
    "TooLarge",
    "read_regular",
    "usable",
]

EXISTS = "exists"  # a regular file (symlinks followed)
DIRECTORY = "directory"
OTHER = "other"  # a FIFO, a device, a socket
ABSENT = "absent"
UNREADABLE = "unreadable"  # a folder on the way may not be searched (permission denied): what is there is unknown
KINDS = (EXISTS, DIRECTORY, OTHER, ABSENT, UNREADABLE)  # what ``kind_of`` tells
CHANGED = "changed"  # read twice with different bytes: no one content was analysed, and no file matches


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kind_of(path: Path | str) -> str:
    """What is at ``path``, symlinks followed: one of ``KINDS`` (one ``stat``)."""
    try:
        mode = os.stat(path).st_mode
    except PermissionError:
        return UNREADABLE
    except (OSError, ValueError):
        return ABSENT
    return EXISTS if stat.S_ISREG(mode) else DIRECTORY if stat.S_ISDIR(mode) else OTHER


def list_folder(folder: Path | str) -> list[tuple[str, bool]] | None:
    """The entries of ``folder``, sorted by name, each with whether it is a folder of its own (not a
    symlink to one: walks do not follow those); None when it cannot be listed."""
    try:
        with os.scandir(folder) as entries:
            return sorted((entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries)
    except (OSError, ValueError):
        return None


def listing_of(entries: list[tuple[str, bool]] | None) -> str:
    """What a listing (``list_folder``) is recorded as: the digest of its names, a folder's with a
    trailing slash, or ABSENT."""
    if entries is None:
        return ABSENT
    return digest("\0".join(name + "/" * is_folder for name, is_folder in entries).encode("utf-8", "surrogateescape"))


class FactsCache:
    """A module's facts by its bytes, module name and kind; the same bytes elsewhere share them."""

    def __init__(self, directory: Path | None = None):
        self.directory = directory or default_cache_dir()
        self._store = Store(self.directory, "facts")

    def load(self, data: bytes, module: str, is_package: bool, kind: type) -> object:
        """The ``kind`` facts stored for these bytes, or MISSING."""
        return self._store.load(self._store.path(module, is_package, digest(data)), kind)

    def store(self, content: str, module: str, is_package: bool, facts: object) -> None:
        """Keep ``facts`` for the bytes whose ``digest`` is ``content``: those they were read from, never
        bytes read again later (an edit saved meanwhile would file old facts under the new bytes)."""
        self._store.save(self._store.path(module, is_package, content), facts)

    def answers(self) -> AnswerStore:
        return AnswerStore(self.directory)


class AnswerStore:
    """Classification answers (classify.memo) by the name of the question and its arguments."""

    def __init__(self, directory: Path):
        self._store = Store(directory, "shapes")

    def path(self, question: str, args: tuple) -> Path:
        return self._store.path(question, args)

    def load(self, path: Path, kind: type | tuple[type, ...]) -> object:
        return self._store.load(path, kind)

    def save(self, path: Path, value: object) -> None:
        self._store.save(path, value)


class ReadableFiles:
    """Whether a scan of ``tree`` reads a file: one that resolves (symlinks followed) inside its
    root or an extra root, or any with ``follow_symlinks``. The index asks it before reading a
    file, and a cached result asks it again of every file that scan read (``Observed.still_true``);
    each directory is resolved once, each file only looked at (``lstat``)."""

    def __init__(self, tree: SourceTree):
        self.follow = tree.follow_symlinks
        self.roots = tuple(os.path.join(os.path.realpath(root), "") for root in (tree.root, *tree.plugin_folders))
        self.directories: dict[str, bool] = {}

    def inside(self, real: str) -> bool:
        return any(os.path.join(real, "").startswith(root) for root in self.roots)

    def __call__(self, path: Path | str) -> bool:
        if self.follow:
            return True
        if os.path.islink(path):
            return self.inside(os.path.realpath(path))
        directory = os.path.dirname(path)
        if directory not in self.directories:
            self.directories[directory] = self.inside(os.path.realpath(directory))
        return self.directories[directory]


@dataclass
class Observed:
    """Everything of the file system a scan's answer depends on, relative to the tree root (absolute
    outside it): a path -> the sha256 of the bytes read, CHANGED, or what ``kind_of`` told of it (an
    existence check: EXISTS, DIRECTORY, OTHER, ABSENT, UNREADABLE); a folder's path with a trailing slash -> what
    listing it told (``listing_of``). A scan looks at the file system only through the module index,
    which records each such look, so a warm result is used only while every one of them still tells
    the same.

    A file with a content hash was read, which a scan does only where ``ReadableFiles`` allows
    (inside the tree, not through a symlink out of it): that is part of what it saw, so the
    same bytes behind a new symlink out are a change too.
    """

    files: dict[str, str]

    def still_true(self, tree: SourceTree) -> bool:
        readable = ReadableFiles(tree)
        root = str(tree.root)
        for rel, expected in self.files.items():
            path = os.path.join(root, rel)  # plain strings: thousands of paths on every warm scan
            if rel.endswith("/"):
                if listing_of(list_folder(path)) != expected:
                    return False
            elif expected in KINDS:
                if kind_of(path) != expected:
                    return False
            else:
                try:
                    # as the scan read it: a regular file only (a FIFO is not waited for), to its end
                    if not readable(path) or digest(read_regular(path, SOURCE_LIMIT, follow_symlinks=True)) != expected:
                        return False
                except OSError:
                    return False
        return True


class ResultCache:
    """A whole scan's result, valid only while every file the scan looked at is unchanged.

    A scan's result depends on the bytes of the files it read and on which module paths
    existed when it probed them; nothing else. The entry records exactly that and is used
    only if all of it still holds, so a warm scan never parses and never imports libcst.
    """

    def __init__(self, directory: Path | None = None):
        self._store = Store(directory or default_cache_dir(), "results")

    def load(self, tree: SourceTree) -> ScanResult | None:
        entry = self._valid_entry(tree)
        if entry is None:
            return None
        entry.result.tree = tree  # the version file is read afresh every time
        return entry.result

    def answers(self, tree: SourceTree) -> ScanAnswers | None:
        """The import-chain and call-contract answers of the cached scan of ``tree``, while every file
        that scan looked at is unchanged: ``fix`` reuses them instead of walking the same imports and
        reading the same speculators again."""
        entry = self._valid_entry(tree)
        return None if entry is None else replace(entry.answers, observed=entry.observed.files)

    def _valid_entry(self, tree: SourceTree) -> _ResultEntry | None:
        path = self._path(tree)
        entry = self._store.load(path, _ResultEntry)
        if entry is MISSING:  # absent, or bad (its fields' types are checked as it is read: codec)
            return None
        if not entry.observed.still_true(tree):
            return None
        return entry

    def store(self, tree: SourceTree, observed: Observed, result: ScanResult, answers: ScanAnswers) -> None:
        self._store.save(self._path(tree), _ResultEntry(observed, result, answers))

    def _path(self, tree: SourceTree) -> Path:
        """The key: the tree and all that locating it read afresh (each run reads them again, before
        the cache): the plugins' metadata as discovered (entry points, top-level packages), the
        folders their ``.pth`` files and editable finders add, the plugins ``VLLM_PLUGINS`` lets load."""
        plugins = [(p.name, p.version, str(p.location), p.entry_points, p.packages) for p in tree.plugins]
        mapped = [(package, str(path)) for package, path in tree.mapped_packages]
        allowed = list(tree.allowed_plugins) if tree.allowed_plugins is not None else None
        homes = [(package, str(path)) for package, path in tree.plugin_homes]
        return self._store.path(str(tree.root), [str(r) for r in tree.extra_roots], mapped, plugins, allowed, homes)


@dataclass
class _ResultEntry:
    observed: Observed
    result: ScanResult
    answers: ScanAnswers
