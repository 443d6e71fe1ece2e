"""Stage 6c: write rewrites all or nothing, only over the bytes we read, never outside the tree.

The protocol, for ``fix`` and ``pre-commit --fix``:

1. every target is checked first: inside the tree once symlinks are resolved,
   no other hard link (it would keep the old content), writable, and its
   bytes still the ones analysed (content hash);
2. a journal (``.mtp-audit-journal`` in the tree's root) records every
   target's old and new text, flushed to disk, before any target is touched;
   it is locked while the run writes;
3. each target is replaced through a temporary file beside it that carries
   the old file's owner, mode and extended attributes: once that file is
   written and on disk, the target is re-checked (its bytes still the old
   ones) right before ``os.replace`` (an editor may have saved it meanwhile:
   then every file already replaced is put back and the run refused). What
   is left is the window between that re-check and the rename, a read and a
   system call long (0.1 ms for a 20 KB file): a save landing exactly there is
   overwritten. The path is the one step 1 resolved: a folder on it swapped for
   a symlink since is followed (README, "fix" safety);
4. the journal is removed.

Ctrl-C is deferred while the tree is locked (``lifecycle.ctrl_c_deferred``) and
answered between two files of step 3 and after the last: every file already
replaced is put back, then the journal is removed.

A run killed in between leaves the journal. The next command that writes in
that tree (``recover``, called before anything else) completes the run when
every target still holds either its old or its new text, else puts back the
old text where it is safe to, and removes the temporary files either way; a
command that only reads refuses to run there (``refuse_interrupted``). A
journal is data the tree brings along, not a command: every file it names
passes the checks of step 1 that a fresh write passes (inside the tree, its
paths read relative to the tree's root, a single link, a ``.py`` file, an
old text that is not empty) before anything is written, or nothing is.
"""

from __future__ import annotations

import contextlib
import difflib
import fcntl
import hashlib
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..lifecycle import ctrl_c_deferred, stop_if_interrupted

if TYPE_CHECKING:  # a read-only command checks for an interrupted fix without importing the classifier
    from .changes import Rewrite

JOURNAL = ".mtp-audit-journal"
_TEMP_SUFFIX = ".mtp-audit-tmp"


_GIT_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")


def git_lines(text: str) -> list[str]:
    """Lines as git reads them (ends kept): split at ``\\n`` only, so a bare CR or a form feed stays
    inside its line, where ``git apply`` looks for it."""
    return _GIT_LINE.findall(text)


def diff_lines(old: str, new: str, fromfile: str, tofile: str) -> list[str]:
    """Unified diff lines, each ending in a newline, as git writes them: a last line without one is
    followed by git's ``\\ No newline at end of file`` (without it the next line runs on)."""
    return [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
        for line in difflib.unified_diff(git_lines(old), git_lines(new), fromfile=fromfile, tofile=tofile, n=3)
    ]


def unified_diff(rewrite: Rewrite) -> str:
    return "".join(diff_lines(rewrite.old, rewrite.new, f"a/{rewrite.path}", f"b/{rewrite.path}"))


def diff_bytes(rewrite: Rewrite) -> bytes:
    """``unified_diff`` in the file's own bytes (see ``encoded_diff``)."""
    return encoded_diff(rewrite.old, rewrite.new, rewrite.path, f"a/{rewrite.path}", rewrite.encoding)


def encoded_diff(old: str, new: str, path: str, fromfile: str, encoding: str) -> bytes:
    """The unified diff of a file in its own bytes, for ``git apply`` to find its lines: each line is
    encoded as the file is (its PEP 263 codec; a BOM stays at the start of the first line), the
    ``---``/``+++`` headers in UTF-8."""
    bom = "\ufeff" if encoding == "utf-8-sig" else ""
    lines = diff_lines(bom + old if old else old, bom + new, fromfile, f"b/{path}")
    header = [line.encode("utf-8") for line in lines[:2]]
    try:
        return b"".join(header + [line.encode("utf-8" if bom else encoding) for line in lines[2:]])
    except UnicodeEncodeError as error:
        raise UsageError(
            f"{path}: the new method has text that {encoding} (the file's encoding) "
            f"cannot hold ({error.reason}); no diff printed"
        ) from None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def target_path(root: Path, relative: str, also: tuple[Path, ...] = ()) -> Path:
    """Where ``relative`` really lives; refused when that is outside ``root`` and the other roots
    the scan read (installed plugins' directories): a symlink out."""
    real, inside = _resolved(root, relative, also)
    if not inside:
        raise UsageError(
            f"{relative} resolves to {real}, outside {root}; nothing written "
            "(mtp-audit never writes through a symlink out of the tree)"
        )
    return real


def _resolved(root: Path, relative: str, also: tuple[Path, ...]) -> tuple[Path, bool]:
    """Where ``relative`` (to ``root``) really lives, symlinks resolved, and whether that is inside
    ``root`` or ``also``."""
    real = (root / relative).resolve()
    return real, any(real.is_relative_to(r.resolve()) for r in (root, *also))


def _temp_of(path: Path) -> Path:
    return path.with_name(f".{path.name}{_TEMP_SUFFIX}")


@dataclass(frozen=True)
class _Target:
    """One file of a write: where it really lives, and its bytes before and after."""

    path: Path
    old: bytes
    new: bytes


class _Changed(Exception):
    """The file no longer holds the bytes a replace expected: someone saved it meanwhile."""


def check_targets(root: Path, rewrites: list[Rewrite], also: tuple[Path, ...] = ()) -> list[Path]:
    """Every target's real path, once each passes step 1; the first that fails is refused."""
    paths = []
    for rewrite in rewrites:
        path = target_path(root, rewrite.path, also)
        try:
            info = path.stat()
            current = path.read_bytes()
        except OSError as error:
            raise UsageError(f"{rewrite.path}: cannot be read ({error.strerror}); nothing written") from None
        if info.st_nlink > 1:
            raise UsageError(
                f"{rewrite.path} has {info.st_nlink - 1} other hard link(s), which would keep the old "
                "content; nothing written (break the link, e.g. cp then mv, and run fix again)"
            )
        if _digest(current) != _digest(_encoded(rewrite, rewrite.old)):
            raise UsageError(f"{rewrite.path} changed since it was analysed; nothing written, run fix again")
        _encoded(rewrite, rewrite.new)
        mode = info.st_mode
        if not mode & stat.S_IWUSR or not os.access(path, os.W_OK):
            raise UsageError(
                f"{rewrite.path} is read-only (mode {stat.S_IMODE(mode):04o}); nothing written, "
                "make it writable and run fix again"
            )
        if not os.access(path.parent, os.W_OK):  # the new text is written beside it, then renamed over it
            raise UsageError(
                f"{rewrite.path}: its folder is not writable (mode {stat.S_IMODE(path.parent.stat().st_mode):04o}), "
                "and the file is replaced by a new one written there; nothing written, make the folder "
                "writable and run fix again"
            )
        paths.append(path)
    if not os.access(root, os.W_OK):
        raise UsageError(f"{root} is not writable: the write journal goes there; nothing written")
    return paths


def write_all(root: Path, rewrites: list[Rewrite], also: tuple[Path, ...] = ()) -> None:
    """Write every rewrite, or none (see the module docstring); ``also``: other roots whose files
    the scan read (installed plugins), writable too, under the journal in ``root``."""
    if not rewrites:
        return
    with tree_lock(root), ctrl_c_deferred():
        _recover_locked(root, also)
        paths = check_targets(root, rewrites, also)
        real_root = root.resolve()
        entries = [
            {"path": os.path.relpath(path, real_root), "old": r.old, "new": r.new, "encoding": r.encoding}
            for path, r in zip(paths, rewrites)
        ]
        targets = [_Target(path, _encoded(r, r.old), _encoded(r, r.new)) for path, r in zip(paths, rewrites)]
        _write_journaled(root, targets, rewrites, entries)


def _write_journaled(root: Path, targets: list[_Target], rewrites: list[Rewrite], entries: list[dict]) -> None:
    """Ctrl-C (deferred by ``write_all``) is answered before each file and after the last, while the
    journal stands: everything replaced is put back."""
    with _journal(root, entries, targets):
        for position, (target, rewrite) in enumerate(zip(targets, rewrites)):
            stop_if_interrupted()
            try:
                _replace(target.path, target.new, expected=target.old)
            except _Changed:
                put_back = _roll_back(targets[:position])
                raise UsageError(
                    f"{rewrite.path} changed while fix was writing; nothing written{put_back}, run fix again"
                ) from None
        stop_if_interrupted()


def _encoded(rewrite: Rewrite, text: str) -> bytes:
    try:
        return text.encode(rewrite.encoding)
    except UnicodeEncodeError as error:
        raise UsageError(
            f"{rewrite.path}: the new method has text that {rewrite.encoding} (the file's encoding) "
            f"cannot hold ({error.reason}); nothing written"
        ) from None


@contextlib.contextmanager
def tree_lock(root: Path, shared: bool = False) -> Iterator[None]:
    """An exclusive lock on the tree's root directory: one writer, or one recovery, at a time
    (``shared``: a reader waiting for the writer to be done).

    A lock on the directory itself leaves no file behind, and dies with its process.
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _journal(root: Path, entries: list[dict], targets: list[_Target]) -> Iterator[None]:
    """The journal on disk while the body writes; removed when it is done or undone."""
    journal = root / JOURNAL
    temp = _temp_of(journal)
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"tool": "mtp-audit", "files": entries}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, journal)
        _sync_dir(root)
        try:
            yield
        except BaseException:
            # A refusal or an interrupt we see: undo what was replaced, then drop the journal.
            _roll_back(targets)
            raise
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(journal)
            _sync_dir(root)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)


def _replace(path: Path, data: bytes, expected: bytes) -> None:
    """Replace ``path`` atomically by ``data``, keeping its owner, mode and extended attributes, if it
    still holds ``expected`` once the new bytes are on disk (``_Changed`` if not): the re-check sits
    right before the rename, so only a save landing between the two is missed."""
    info = path.stat()
    temp = _temp_of(path)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _copy_metadata(path, handle.fileno(), info)
            os.fsync(handle.fileno())
        if path.read_bytes() != expected:
            raise _Changed(path)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def _copy_metadata(source: Path, fd: int, info: os.stat_result) -> None:
    if hasattr(os, "listxattr"):
        try:
            names = os.listxattr(source)
        except OSError:  # a file system without extended attributes
            names = []
        for name in names:
            os.setxattr(fd, name, os.getxattr(source, name))
    if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, info.st_uid, info.st_gid)
        except PermissionError:
            raise UsageError(
                f"{source} belongs to uid {info.st_uid}, gid {info.st_gid}, which this user cannot "
                "give the rewritten file; nothing written"
            ) from None
    os.fchmod(fd, stat.S_IMODE(info.st_mode))  # after chown, which clears set-id bits


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _roll_back(targets: list[_Target]) -> str:
    """Put back the old bytes of every target that holds exactly its new bytes; says what was put back."""
    restored = []
    for target in targets:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_temp_of(target.path))
        try:
            if target.path.read_bytes() == target.new:
                _replace(target.path, target.old, expected=target.new)
                restored.append(target.path.name)
        except (FileNotFoundError, _Changed):  # gone, or saved meanwhile: the user's now
            continue
    return f" (put back: {', '.join(restored)})" if restored else ""


def refuse_interrupted(root: Path) -> None:
    """Stop a command that only reads in a tree that an interrupted fix left half written.

    Settling the journal writes files; a read-only command (``scan``, ``fix --diff``, ``verify``...)
    never writes, so it says how to settle it instead, and does not report on a half-written tree.
    A journal never committed (its temporary file) means nothing was written: no obstacle. A journal
    seen here of a fix writing now (it holds the tree's lock) is no obstacle either: the command waits
    for that write to be done (a fraction of a second), as a writing command does. (A write that starts
    after this check is not waited for: the command reads what is there, as any reader of a tree in
    edit does.)
    """
    journal = root / JOURNAL
    if not journal.exists():
        return
    with contextlib.suppress(OSError), tree_lock(root, shared=True):
        pass
    if journal.exists():
        raise UsageError(
            f"{journal}: a fix was interrupted in this tree and left this journal; this command only reads, "
            "so it neither completes nor undoes it: run the same `mtp-audit fix` (without --diff, --check or "
            "--patches) in this tree again to settle it, or check the files it names with your version "
            "control, then delete it"
        )


def recover(root: Path, also: tuple[Path, ...] = ()) -> None:
    """Finish or undo a write that was interrupted in ``root`` (kill -9, power loss), before anything else.

    Waits while another live run writes in the tree. Completed when every file holds its
    old or its new text; otherwise every file holding its new text gets its old text back,
    and files edited since are left as they are and named. ``also``: the other roots the
    command may write under (installed plugins), as for ``write_all``.
    """
    journal = root / JOURNAL
    if not journal.exists() and not _temp_of(journal).exists():
        return
    try:
        with tree_lock(root), ctrl_c_deferred():
            _recover_locked(root, also)
    except PermissionError:
        raise UsageError(
            f"{journal}: an interrupted fix left this journal, and this user cannot finish it "
            "(no write access to the tree)"
        ) from None


def _recover_locked(root: Path, also: tuple[Path, ...]) -> None:
    journal = root / JOURNAL
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_temp_of(journal))  # a journal never committed: nothing was written
    try:
        entries = json.loads(journal.read_text(encoding="utf-8"))["files"]
        if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
            raise TypeError("files is not a list of entries")
    except FileNotFoundError:
        return
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(
            f"{journal}: an interrupted fix left this journal and it cannot be read ({error}); "
            "check the files it names with your version control, then delete it"
        ) from None
    _settle(root, _journal_targets(root, also, journal, entries))
    os.unlink(journal)
    _sync_dir(root)


def _journal_targets(root: Path, also: tuple[Path, ...], journal: Path, entries: list[dict]) -> list[_Target]:
    """Every entry of the journal as a target, each checked as a fresh write's target is; the first
    that fails refuses the whole journal, before anything is written."""
    targets: list[_Target] = []
    seen: set[Path] = set()
    for entry in entries:
        named = entry.get("path")
        try:
            target = _journal_target(root, also, entry)
        except UsageError as why:
            raise UsageError(
                f"{journal}: an interrupted fix left this journal, and its entry {named!r} is not a file a fix "
                f"writes ({why}); nothing written: check the files it names with your version control, "
                "then delete it"
            ) from None
        if target.path in seen:
            raise UsageError(f"{journal}: names {target.path} twice; nothing written, check it and delete it")
        seen.add(target.path)
        targets.append(target)
    return targets


def _journal_target(root: Path, also: tuple[Path, ...], entry: dict) -> _Target:
    """One journal entry, refused (``UsageError``, the reason) unless a fix could have written it:
    text fields, a path relative to ``root`` (an older journal's absolute one too) that resolves
    inside the tree or ``also``, a ``.py`` file with a single link, an old text that is not empty."""
    path, old, new, encoding = (entry.get(key) for key in ("path", "old", "new", "encoding"))
    if not all(isinstance(v, str) for v in (path, old, new)) or not isinstance(encoding, (str, type(None))):
        raise UsageError("its path, old and new are not all text")
    real, inside = _resolved(root, path, also)
    if not inside:
        raise UsageError(f"it resolves to {real}, outside {root}")
    if real.suffix != ".py":
        raise UsageError("not a .py file")
    if not old:
        raise UsageError("an empty old text: a fix writes into a file that holds a class")
    try:
        info = real.lstat()
    except FileNotFoundError:
        info = None
    if info is not None and (not stat.S_ISREG(info.st_mode) or info.st_nlink > 1):
        raise UsageError("not a regular file with a single link")
    try:
        return _Target(real, old.encode(encoding or "utf-8"), new.encode(encoding or "utf-8"))
    except (LookupError, UnicodeEncodeError) as error:
        raise UsageError(f"its text cannot be encoded ({error})") from None


def _settle(root: Path, targets: list[_Target]) -> None:
    states = []
    for target in targets:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_temp_of(target.path))
        try:
            data = target.path.read_bytes()
        except FileNotFoundError:
            data = None
        states.append("old" if data == target.old else "new" if data == target.new else "edited")
    edited = [t.path for t, state in zip(targets, states) if state == "edited"]
    if not edited:
        try:
            for target, state in zip(targets, states):
                if state == "old":
                    _replace(target.path, target.new, expected=target.old)
        except _Changed as changed:
            edited = [changed.args[0]]
        else:
            print(
                f"mtp-audit: completed a fix that was interrupted in {root} ({len(targets)} file(s))", file=sys.stderr
            )
            return
    put_back = _roll_back(targets)
    print(
        f"mtp-audit: undid a fix that was interrupted in {root}{put_back}; "
        f"{', '.join(map(str, edited))} changed since, left as they are",
        file=sys.stderr,
    )
