"""Processes we start die with the process that started them, and leave Ctrl-C (and SIGTERM) to it.

A forked worker of a ``scan`` or ``fix`` holds the caller's stdout: one that
outlived a killed parent (kill -9, a closed terminal) kept a pipeline open
and went on computing for nobody. On Linux the kernel sends the child
SIGKILL when its parent dies (``PR_SET_PDEATHSIG``); elsewhere a watchdog
thread notices the parent's pid change and exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_PR_SET_PDEATHSIG = 1
WATCHDOG_PERIOD_S = 0.25


def die_with_parent(parent: int) -> None:
    """In a child of ``parent``, right after the fork (a pool initializer, a process target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent answers it
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a forked worker must not run the parent's handler
    if not _kernel_kills_orphans():
        threading.Thread(target=_watch, args=(parent,), name="mtp-audit-watchdog", daemon=True).start()
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)


def _kernel_kills_orphans() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCHDOG_PERIOD_S)
    os._exit(1)


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM, raised by our handler: not a KeyboardInterrupt, which click turns into "Aborted!"
    and exit 1; a BaseException, so that only ``finally`` and rollbacks see it on the way up."""


class _CtrlC:
    """Where Ctrl-C stands: ``pressed`` once it (or SIGTERM; ``which`` came first) came; ``deferred``
    while a write runs that answers it at its own safe points (``stop_if_interrupted``) instead of at
    any bytecode.

    No lock: the handler runs in the main thread, maybe while that thread is entering a deferral.
    Each side sets its own flag first and then reads the other's, so under the GIL either the
    handler sees the deferral (and only records the press) or the deferral sees the press (and
    never starts)."""

    pressed = False
    deferred = False
    which = signal.SIGINT


def _raise_interrupted(signum, frame) -> None:
    if not _CtrlC.pressed:
        _CtrlC.which = signal.Signals(signum)
    _CtrlC.pressed = True
    if not _CtrlC.deferred:
        raise Interrupted


@contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """While the body writes files, Ctrl-C raises ``Interrupted`` only where the body asks
    (``stop_if_interrupted``), and at the latest on the way out, so that it can undo what it wrote.

    An exception that a signal handler raises may land anywhere, an ``except`` clause that undoes
    a write included; and in the main thread waiting for the command's thread, on CPython up to
    3.12 it marks that thread as ended (``Thread.join``), so nothing would wait for its rollback.
    """
    _CtrlC.deferred = True
    try:
        stop_if_interrupted()
        yield
    finally:
        _CtrlC.deferred = False
    stop_if_interrupted()


def stop_if_interrupted() -> None:
    """A safe point of a deferred write: raise ``Interrupted`` if Ctrl-C was pressed."""
    if _CtrlC.pressed:
        raise Interrupted


def usable_stderr() -> None:
    """With file descriptor 2 closed (``2>&-``) Python sets ``sys.stderr`` to None, and a ``print(...,
    file=sys.stderr)`` then writes to stdout, into the report: errors and warnings go nowhere instead.
    Where writing to it fails (``2>/dev/full``, ``2>&1 | head -1`` once the reader is gone), what
    was said there is lost, but the exit code still says what the command did: the failed write
    raised OSError, which ended the command as an unreadable input does, and that message failing
    too ended it with exit 1 (findings, a refusal) even after a fix that wrote every file."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115  (for the life of the process)
    if not isinstance(sys.stderr, _Unfailing):
        sys.stderr = _Unfailing(sys.stderr)


class _Unfailing:
    """A text stream whose writes and flushes never raise (what cannot be written is dropped)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except (OSError, ValueError):
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def handle_ctrl_c() -> None:
    """From now on Ctrl-C raises Interrupted (unless SIGINT was ignored when we started), and so does
    SIGTERM (``kill``, a CI job's timeout), which would otherwise end the process where it stands: a
    fix's write not rolled back until the next run, verify's scratch directory left in the temp folder."""
    sys.unraisablehook = _quiet_when_interrupted
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _raise_interrupted)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _raise_interrupted)


def _quiet_when_interrupted(unraisable) -> None:
    """Python's report of an exception it cannot raise, but not for Ctrl-C's: Interrupted raised
    inside a callback (an import's module-lock weakref, a ``__del__``) would print "Exception
    ignored" and a traceback after "mtp-audit: interrupted"; the command ends either way."""
    if not isinstance(unraisable.exc_value, Interrupted):
        sys.__unraisablehook__(unraisable)


def ignore_ctrl_c() -> None:
    """The command has ended and said what it had to: a Ctrl-C (or SIGTERM) now ends nothing.

    Left to Python, a late one would raise in an exit handler ("Exception ignored"), or, once
    the interpreter has put its default handlers back while it finalizes, kill the process
    by signal instead of the command's exit code.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


_SCRATCH: list[str] = []  # the scratch directories in use, for ``interrupted`` to remove


@contextmanager
def scratch_directory(prefix: str, folder: str | os.PathLike | None = None) -> Iterator[str]:
    """A temporary directory (in ``folder``, else the system's), removed on the way out, and by
    ``interrupted`` too: its ``os._exit`` skips every context exit, and a worker blocked in a wait
    does not unwind in time."""
    path = tempfile.mkdtemp(prefix=prefix, dir=folder)
    _SCRATCH.append(path)
    try:
        yield path
    finally:
        _SCRATCH.remove(path)
        shutil.rmtree(path, ignore_errors=True)


def _remove_scratch() -> None:
    """Renamed first, so that workers still writing until they die with us cannot create files in
    it again; removed then."""
    for path in list(_SCRATCH):
        gone = f"{path}.interrupted"
        try:
            os.rename(path, gone)
        except OSError:
            gone = path
        shutil.rmtree(gone, ignore_errors=True)


def interrupted() -> None:
    """Ctrl-C: one line, exit 130 now (SIGTERM: "terminated", 143); workers die with us, nothing
    waits for them.

    Exit handlers are skipped on purpose: they join worker pools that may be mid-task.
    Writes in progress have already been undone (``apply.write`` defers Ctrl-C to its safe
    points, ``ctrl_c_deferred``, and rolls back on the way up);
    scratch directories are removed here.
    """
    _remove_scratch()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    terminated = _CtrlC.pressed and _CtrlC.which == signal.SIGTERM
    try:
        os.write(2, b"mtp-audit: terminated\n" if terminated else b"mtp-audit: interrupted\n")
    except OSError:
        pass
    os._exit(128 + (signal.SIGTERM if terminated else signal.SIGINT))


# Deep code that CPython compiles (300 chained calls, a 900-term sum, a 1200-deep class
# chain) is walked recursively by libcst and by our resolution: the command runs on a
# thread with a big stack and a recursion limit to match.
BIG_STACK_BYTES = 512 * 1024 * 1024  # reserved address space; pages are touched only when used
DEEP_RECURSION_LIMIT = 200_000


def on_big_stack(run: Callable[[], None]) -> None:
    """``run()`` on a thread with a big stack; its exceptions (SystemExit too) are raised here.

    Ctrl-C arrives in this (main) thread: it is passed on to the worker thread, so that
    worker pools unwind there, and then ends the command either way. A write in progress defers
    it (``ctrl_c_deferred``): the handler raises nothing here, and the write undoes itself and
    ends its thread with ``Interrupted``, which is raised here as any outcome is.
    """
    outcome: list[BaseException] = []
    finished = threading.Event()  # not ``Thread.join``, which on CPython <= 3.12 marks a thread it
    # was interrupted waiting for as ended, so that a second join returns at once (bpo-45274)

    def target() -> None:
        try:
            run()
        except BaseException as error:  # noqa: BLE001 - re-raised in the main thread
            outcome.append(error)
        finally:
            finished.set()

    limit = sys.getrecursionlimit()
    previous = threading.stack_size(BIG_STACK_BYTES)
    try:
        worker = threading.Thread(target=target, name="mtp-audit")
        worker.start()
    finally:
        threading.stack_size(previous)
    sys.setrecursionlimit(max(limit, DEEP_RECURSION_LIMIT))
    try:
        finished.wait()
    except (Interrupted, KeyboardInterrupt):
        _raise_in(worker, Interrupted)
        finished.wait(timeout=0.5)
        raise
    finally:
        sys.setrecursionlimit(limit)
    if outcome:
        raise outcome[0]


def _raise_in(thread: threading.Thread, error: type[BaseException]) -> None:
    import ctypes

    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(error))
