"""Where cache entries live, how they are written and how a bad one is refused.

``<root>/<generation>/<namespace>/<aa>/<key>.json``: the generation is the hash of the
tool's source (``source.source_hash``), so entries of other code are never read; a new
generation, marked as the tool's own (``GENERATION_MARK``), prunes all but the most recent
few of the marked ones: the cache folder may hold other things. Writes are atomic (a
temporary file in the same folder, then ``os.replace``). A missing entry is a plain miss;
one that is not a regular file of sane size, cannot be read, parsed or is not what was
asked for is reported in one line on stderr, ignored and rewritten by the caller.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from . import codec, source

MISSING = object()
FORMAT = "mtp-audit-cache/1"
GENERATIONS_KEPT = 3
_WARNINGS_SHOWN = 5
_GENERATION = re.compile("[0-9a-f]{24}")
GENERATION_MARK = ".mtp-audit-generation"  # a file in each generation folder: only those are ever pruned
ENTRY_LIMIT = 256 << 20  # bytes; a whole scan of a vLLM release stores under 1 MiB
SOURCE_LIMIT = 32 << 20  # bytes; vLLM's largest module is under 1 MiB


def default_cache_dir() -> Path:
    override = os.environ.get("MTP_AUDIT_CACHE_DIR")
    if override:
        return Path(override).expanduser()  # "~/x" as a CI file writes it, which no shell expanded
    import platformdirs

    return Path(platformdirs.user_cache_dir("mtp-audit")) / "facts"


_MADE: set[Path] = set()  # folders this process made or found (a scan writes hundreds of entries)


def atomic_write(path: Path, data: bytes) -> None:
    """``path`` holds ``data`` whole, or is unchanged; a read-only cache folder only costs speed. A folder
    where the entry goes (no entry of ours; made by hand or another tool) is removed, so the entry is rebuilt
    instead of warned about on every run."""
    try:
        fd, tmp = _temporary_in(path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            try:
                os.replace(tmp, path)
            except OSError:  # EISDIR, ENOTEMPTY: a folder in its place
                if not (os.path.isdir(path) and not os.path.islink(path)):
                    raise
                shutil.rmtree(path)
                os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


def _temporary_in(folder: Path) -> tuple[int, str]:
    if folder in _MADE:
        try:
            return tempfile.mkstemp(dir=folder, suffix=".tmp")
        except FileNotFoundError:  # removed since (the cache cleared while this process runs)
            pass
    _make(folder)
    _MADE.add(folder)
    return tempfile.mkstemp(dir=folder, suffix=".tmp")


def _make(folder: Path) -> None:
    """``mkdir -p``, leaving out of ``_MADE`` each folder it makes (again): one removed while this process
    runs (``prune`` of another) is then new to whoever marks it (``Store.save``: a generation's mark)."""
    try:
        folder.mkdir()
    except FileExistsError:
        return
    except FileNotFoundError:
        _make(folder.parent)
        folder.mkdir(exist_ok=True)
    _MADE.discard(folder)


def usable(directory: Path, quiet: bool) -> bool:
    """Whether the cache can be read from ``directory`` (made when missing); when it cannot (a file,
    a folder this user cannot make, enter or read), says so once, unless ``quiet``, and the command runs
    without it rather than warning about every entry. ``quiet`` silences the warnings about bad entries too
    (workers forked later inherit it)."""
    _Warnings.silent = quiet
    why = _unusable(directory)
    if why is not None and not quiet:
        print(
            f"warning: cache directory {directory} cannot be used ({why}); running without the cache", file=sys.stderr
        )
    return why is None


def _unusable(directory: Path) -> str | None:
    """Why ``directory`` cannot hold the cache, None when it can. Any probe of it may raise, not only
    ``mkdir`` (a parent this user cannot enter, a name too long, a symlink loop): that is the reason."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        return "not a directory"
    except OSError as error:
        return (error.strerror or str(error)).lower()
    if not os.access(directory, os.R_OK | os.X_OK):  # read-only is usable: it only costs speed
        return "this user cannot read it"
    return None


def _is_folder(path: Path) -> bool:
    """``path.is_dir()``, False where even asking fails (a parent this user cannot enter)."""
    try:
        return path.is_dir()
    except OSError:
        return False


class _Warnings:
    shown = 0
    silent = False

    @classmethod
    def bad_entry(cls, path: Path, why: str) -> None:
        cls.shown += 1
        if cls.silent:
            return
        if cls.shown <= _WARNINGS_SHOWN:
            print(f"warning: ignoring cache entry {path} ({why}); it will be rebuilt", file=sys.stderr)
        elif cls.shown == _WARNINGS_SHOWN + 1:
            print("warning: more bad cache entries; not listing them", file=sys.stderr)


class Store:
    """One namespace of the cache (facts, shapes, results) for the running tool's code."""

    def __init__(self, root: Path, namespace: str):
        self.root = root
        self.namespace = namespace
        self._generation: Path | None = None

    @property
    def directory(self) -> Path:
        if self._generation is None:
            self._generation = self.root / source.source_hash()[:24]
        return self._generation / self.namespace

    def path(self, *key: object) -> Path:
        name = hashlib.sha256(repr(key).encode()).hexdigest()
        return self.directory / name[:2] / f"{name}.json"

    def load(self, path: Path, kind: type | tuple[type, ...]) -> object:
        """The ``kind`` value stored at ``path``; MISSING when absent or bad (bad: one warning)."""
        try:
            data = read_regular(path, ENTRY_LIMIT)
        except FileNotFoundError:
            return MISSING
        except OSError as error:
            _Warnings.bad_entry(path, f"unreadable: {error.strerror or error}")
            return MISSING
        try:
            entry = codec.loads(data)
        except codec.UnreadableEntry as error:
            self.reject(path, f"not a cache entry: {error}")
            return MISSING
        if not (
            isinstance(entry, tuple)
            and len(entry) == 3
            and entry[0] == FORMAT
            and entry[1] == path.stem
            and isinstance(entry[2], kind)
        ):
            self.reject(path, "written by other code or for another key")
            return MISSING
        return entry[2]

    @staticmethod
    def reject(path: Path, why: str) -> None:
        """Say (once a line, a few times a run) that the entry at ``path`` is ignored and rebuilt."""
        _Warnings.bad_entry(path, why)

    def save(self, path: Path, value: object) -> None:
        """Write the entry; a generation folder this process has not marked yet (new, or made again
        after it was removed while this process runs) gets its mark, so that it can be pruned."""
        generation = self.directory.parent
        new = generation not in _MADE and not _is_folder(generation)
        if new:
            atomic_write(generation / GENERATION_MARK, FORMAT.encode())
        atomic_write(path, codec.dumps((FORMAT, path.stem, value)))
        if generation not in _MADE:  # found, or made again by this write (``_make``)
            atomic_write(generation / GENERATION_MARK, FORMAT.encode())
        if new:
            prune(self.root, keep=generation)


class NotRegular(OSError):
    """``read_regular`` found a FIFO, a device or a socket (a folder is an IsADirectoryError)."""


class TooLarge(OSError):
    """``read_regular`` found more than its limit of bytes."""


def read_regular(path: Path | str, limit: int, follow_symlinks: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, never a symlink (out of the cache, to a device; with
    ``follow_symlinks`` the file it names, a regular one too), a FIFO (opened without waiting for a writer) or
    more than ``limit`` bytes: those raise OSError saying which (``NotRegular``, ``TooLarge``), so that reading
    an entry neither hangs nor fills memory. FileNotFoundError when there is none. A file that grows past
    ``limit`` while it is read comes back ``limit + 1`` bytes long, for the caller to refuse."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW))
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise OSError(errno.ELOOP, "a symbolic link") from None
        raise
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):  # as opening it for reading says
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(info.st_mode):
            raise NotRegular(errno.EINVAL, "not a regular file")
        if info.st_size > limit:
            raise TooLarge(errno.EFBIG, f"larger than {limit} bytes")
        return read_up_to(fd, info.st_size, limit)
    finally:
        os.close(fd)


def read_up_to(fd: int, size: int, limit: int) -> bytes:
    """Up to ``limit + 1`` bytes of the open file ``fd``, which ``fstat`` said is ``size`` bytes: ``size + 1``
    asked for first, more only if it has grown since. Read with ``os.read``: a buffered reader's
    ``read(limit + 1)`` allocates the whole limit (32-256 MiB) for every file, and its set-up costs three
    system calls more, together half the time of reading a tree's files."""
    data = b""
    wanted = min(size, limit) + 1
    while len(data) <= limit:
        chunk = os.read(fd, wanted - len(data))
        if not chunk:
            break
        data += chunk
        if len(data) == wanted:  # grown since fstat (or a short read): on to the limit
            wanted = limit + 1
    return data


def _made_by_the_tool(folder: Path) -> bool:
    """Whether ``folder`` is a cache generation (its mark, as ``Store.save`` writes it), not a folder
    of someone else's that only has a name of the same shape."""
    try:
        return read_regular(folder / GENERATION_MARK, len(FORMAT)) == FORMAT.encode()
    except OSError:
        return False


def prune(root: Path, keep: Path, kept: int = GENERATIONS_KEPT) -> None:
    """Remove the cache generations of other code, all but the ``kept`` most recently made; only folders
    the tool made (``_made_by_the_tool``) are ever removed."""
    try:
        generations = [
            p for p in root.iterdir() if p != keep and _GENERATION.fullmatch(p.name) and _made_by_the_tool(p)
        ]
        generations.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return
    for old in generations[kept - 1 :]:
        shutil.rmtree(old, ignore_errors=True)
