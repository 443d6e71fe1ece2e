"""Files the user names for output (``--pr-body``, ``--json``, ``--emit-test``): checked before
anything is written, written whole or reported in one line."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
from pathlib import Path
from typing import NoReturn

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


class OutputFailed(Exception):
    """Standard output is closed, a closed pipe or a full disk. Not an OSError: click would
    take a broken pipe for a normal end and exit 1 in silence."""


class ReaderGone(OutputFailed):
    """The reader of standard output closed it (``scan | head``): not a failure of the command."""


def _failed(error: OSError) -> OutputFailed:
    if isinstance(error, BrokenPipeError):
        return ReaderGone("the reader of standard output closed it")
    return OutputFailed(f"writing to standard output failed: {error.strerror or error}")


def leave_as_a_closed_pipe_ends_a_command() -> NoReturn:
    """End as ``git log | head`` and ruff end when the reader goes: killed by SIGPIPE, saying nothing
    (exit 141 in a shell); where there is no SIGPIPE (Windows), exit 141 alike."""
    if hasattr(signal, "SIGPIPE"):
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(128 + 13)


class _GuardedStdout:
    """``sys.stdout`` whose write errors are ``OutputFailed``; everything else is the stream's. ``flushed``: each
    write is flushed at once (the stream stands for an unbuffered one, see ``guard_stdout``)."""

    def __init__(self, stream, flushed: bool = False):
        self._stream = stream
        self._flushed = flushed

    def write(self, text: str) -> int:
        if self._stream is None:
            raise OutputFailed("standard output is closed")
        try:
            written = self._stream.write(text)
            if self._flushed:
                self._stream.flush()
            return written
        except OSError as error:
            raise _failed(error) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as error:
            raise _failed(error) from None

    def isatty(self) -> bool:
        return self._stream is not None and self._stream.isatty()

    @property
    def buffer(self) -> _GuardedStdout:
        """The binary stream (``fix --diff`` writes the files' own bytes), guarded the same way."""
        if self._stream is None:
            raise OutputFailed("standard output is closed")
        return _GuardedStdout(self._stream.buffer, self._flushed)

    def __getattr__(self, name: str):
        if self._stream is None:
            raise AttributeError(name)
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """From now on, output that cannot be written ends the command with one line (see cli.main)."""
    stream = sys.stdout
    raw = getattr(stream, "buffer", None)
    if isinstance(raw, io.RawIOBase) and stream is not None:
        # unbuffered (``python -u``, PYTHONUNBUFFERED): text goes to the file in one raw write, and the part a
        # short write leaves (a full disk) is dropped without an error. A buffered writer writes all or raises;
        # each write is flushed at once, as unbuffered output is.
        stream = open(  # standard output from now on, never closed
            raw.fileno(), "w", encoding=stream.encoding, errors=stream.errors, closefd=False
        )
        sys.stdout = _GuardedStdout(stream, flushed=True)  # type: ignore[assignment]
        return
    sys.stdout = _GuardedStdout(stream)  # type: ignore[assignment]


def silence_stdout() -> None:
    """After an output failure: nothing more to flush at exit (no 'Exception ignored' noise)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    except OSError:
        pass
    sys.stdout = None  # type: ignore[assignment]
