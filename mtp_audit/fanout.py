"""Spread a scan over forked worker processes, in two rounds over chunks of registry entries.

Round one (index) is forked before libcst is imported: one worker resolves
each entry's class and MRO on every platform, which reads, parses and
interprets every module those reach, and another walks the registry
modules' imports and checks that their files compile (the facts worker,
the longest of the round, reads them without that check and caches their
facts only once it has passed), while the parent imports libcst for
classification and reads the speculators. From four jobs on, each of the
two is split in two (two facts workers with half the entries each; the
syntax check in a worker of its own, which also reads the speculators and
sends them back), so that on many CPUs the parent's own work (the libcst
import), not a worker, decides when the round ends.
Round two (classify) is forked after that import, so its workers inherit
libcst and every fact read so far; they classify chunks of registry entries
from the front of a shared queue, taking the next as they finish one, while
the parent, which would otherwise wait, first reads the callers' notes (what
their selection does not follow) and then classifies chunks from the back (one
fork fewer); each worker sends its answers back once, when the queue is empty.

``fix`` uses a WarmWorker instead: forked first, it imports libcst while
the parent scans and plans from the caches, answers what the plan asks that
the caches lack (so the parent never imports libcst; the planned mirrors, and
what the blast-radius checks ask of them, all at once in forks of itself),
then rewrites the files in forks of itself.

Workers compute exactly what the serial scan computes, from the same bytes,
and the parent puts their answers back in registry order, so the result is
the same at any job count (tests/test_fanout.py checks it). Needs ``fork``
(Linux, macOS); elsewhere the scan runs in one process. The caller hands
``forked(jobs)`` to ``scan.scan``; workers receive the parent's state through
their pool's initializer (inherited by the fork, not pickled).
"""

from __future__ import annotations

import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from .classify.memo import load_rules
from .errors import UsageError
from .lifecycle import die_with_parent
from .model import PLATFORMS, ClassKey, RegistryEntry, Unresolved
from .resolve.names import resolve_name

if TYPE_CHECKING:
    from .index.fact_types import ModuleFacts
    from .index.imports import ImportChains, ImportFacts
    from .resolve.callers import CallerIndex
    from .resolve.mro import Mro
    from .scan import Resolution, Resolve, Scanner

T = TypeVar("T")
R = TypeVar("R")

# Fewer drafters than this and forking costs more than it saves (plugin dirs, fixtures).
MIN_ENTRIES = 16
# From this many jobs, round one's two workers become four (see _index_in_workers).
SPLIT_ROUND_ONE_JOBS = 4
# Classification chunks per worker, handed out as workers free up: drafters differ in cost.
CHUNKS_PER_WORKER = 4


# How long taking a chunk may wait for the queue's lock (held for microseconds) before the
# holder is taken for a worker that died holding it.
QUEUE_LOCK_TIMEOUT_S = 60.0


class ChunkQueue:
    """Chunk numbers ``0 .. count-1``, taken from the front by forked workers and from the back by
    the parent, under a lock the fork shares.

    One task per worker that loops on this queue, instead of one pool task per chunk: with a
    task per chunk, each worker waited 15-50 ms between chunks for the pool's management
    thread, which competes for the parent's interpreter lock while the parent classifies.
    """

    def __init__(self, count: int):
        context = multiprocessing.get_context("fork")
        self._lock = context.Lock()
        self._ends = context.RawArray("i", [0, count])  # [front, back): the chunks not taken yet

    def take_front(self) -> int | None:
        """The first chunk not taken yet; None when every chunk is taken."""
        with self._locked():
            front, back = self._ends
            if front >= back:
                return None
            self._ends[0] = front + 1
            return front

    def take_back(self) -> int | None:
        """The last chunk not taken yet; None when every chunk is taken."""
        with self._locked():
            front, back = self._ends
            if front >= back:
                return None
            self._ends[1] = back - 1
            return back - 1

    @contextmanager
    def _locked(self) -> Iterator[None]:
        if not self._lock.acquire(timeout=QUEUE_LOCK_TIMEOUT_S):
            raise RuntimeError("a scan worker stopped while taking work from the classification queue")
        try:
            yield
        finally:
            self._lock.release()


@dataclass
class Inherited:
    """What a forked scan worker gets from the parent: its scanner, the entries, what it had read;
    in the classification round, the chunks of entries and the queue that hands them out."""

    scanner: Scanner
    entries: list[RegistryEntry]
    known: frozenset[str]  # modules the parent had read when it forked
    known_located: frozenset[str]  # modules the parent had located when it forked
    known_imports: frozenset[str]  # modules whose imports the parent had read when it forked
    chunks: list[list[int]] = field(default_factory=list)
    queue: ChunkQueue | None = None


_inherited: Inherited | None = None  # set in each scan worker by its pool's initializer; never in the parent


def _start_worker(parent: int, state: Inherited | None) -> None:
    die_with_parent(parent)
    global _inherited
    _inherited = state


def _state() -> Inherited:
    assert _inherited is not None, "a scan task ran outside a forked scan worker"
    return _inherited


def can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def usable_cpus() -> int:
    """The CPUs this process may run on (a container's or ``taskset``'s set), not the machine's."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


def resolve_jobs(jobs: int) -> int:
    """``jobs`` as asked (0: one per CPU, at most 8); more than one needs ``fork``."""
    if jobs == 0:
        return min(usable_cpus(), 8) if can_fork() else 1
    if jobs > 1 and not can_fork():
        raise UsageError("--jobs above 1 needs the fork start method, which this platform lacks")
    return jobs


@dataclass
class Harvest:
    """What one worker read that the parent had not: facts, modules located, imports read (the
    import chains of the classes' own modules ask them again), files observed, read errors; and
    the index round's MROs, which classification would otherwise redo."""

    facts: dict[str, ModuleFacts | None]
    located: dict[str, tuple[Path, bool] | None]
    imports: dict[str, ImportFacts | None]
    observed: dict[str, str]
    read_errors: dict[str, str]
    mros: dict[str, dict[ClassKey, Mro]]
    chains: ImportChains
    unchecked: list[str] = field(default_factory=list)  # facts read without the whole-file check
    unstored: list[str] = field(default_factory=list)  # facts read and not cached
    syntax_errors: dict[str, str] = field(default_factory=dict)  # that check, made for them elsewhere
    callers: CallerIndex | None = None  # the speculators, read and prepared (see _check_registry_modules)


def _harvest(state: Inherited, with_mros: bool = False) -> Harvest:
    scanner = state.scanner
    index = scanner.index
    return Harvest(
        facts={m: f for m, f in index.loaded().items() if m not in state.known},
        located={m: found for m, found in index.located.items() if m not in state.known_located},
        imports={m: found for m, found in index.imports_read().items() if m not in state.known_imports},
        observed=dict(index.observed),
        read_errors=dict(index.read_errors),
        mros={p: h.memoised() for p, h in scanner.hierarchies.items()} if with_mros else {},
        chains=index.chains,
    )


def _absorb(scanner: Scanner, harvest: Harvest) -> None:
    scanner.index.absorb(harvest)
    if harvest.callers is not None:
        scanner.adopt_callers(harvest.callers)
    for platform, mros in harvest.mros.items():
        scanner.hierarchies[platform].absorb(mros)


def chunk_entries(entries: list[RegistryEntry], jobs: int) -> list[list[int]]:
    """Entry positions in ``jobs`` chunks; entries of one module stay together (one parse)."""
    modules: dict[str, list[int]] = {}
    for position, entry in enumerate(entries):
        modules.setdefault(entry.module, []).append(position)
    chunks: list[list[int]] = [[] for _ in range(jobs)]
    for turn, positions in enumerate(modules.values()):
        chunks[turn % jobs].extend(positions)
    return [sorted(c) for c in chunks if c]


def _index_chunk(positions: list[int]) -> Harvest:
    state = _state()
    scanner = state.scanner
    scanner.index.checked_elsewhere = _registry_modules(state.entries)  # checked by _check_registry_modules
    scanner.index.store_later = True  # by a round-two worker: this is the round's longest task
    for position in positions:
        entry = state.entries[position]
        for platform in PLATFORMS:
            for found in resolve_name(scanner.index, entry.module, entry.cls, platform):
                if isinstance(found, ClassKey):
                    scanner.hierarchies[platform].mro(found)
    harvest = _harvest(state, with_mros=True)
    harvest.unchecked, harvest.unstored = list(scanner.index.unchecked), list(scanner.index.unstored)
    return harvest


def _check_registry_modules(walk_chains: bool, check_syntax: bool, read_callers: bool = False) -> Harvest:
    """The registry modules' import chains and/or their whole-file syntax check, which the facts
    workers leave to this one (on many CPUs, one worker does each); with ``read_callers``, the
    speculators too, sent back prepared (unpickling them costs the parent a third of reading them)."""
    state = _state()
    if walk_chains:
        state.scanner.walk_import_chains(state.entries)
    syntax_errors = state.scanner.index.syntax_errors(sorted(_registry_modules(state.entries))) if check_syntax else {}
    if read_callers:
        state.scanner.prepare_callers()
    harvest = _harvest(state)
    harvest.syntax_errors = syntax_errors
    if read_callers and state.scanner.vllm is not None:
        harvest.callers = state.scanner.callers
    return harvest


def _registry_modules(entries: list[RegistryEntry]) -> frozenset[str]:
    return frozenset(entry.module for entry in entries)


def _walk_class_chains(scanner: Scanner, entries: list[RegistryEntry]) -> None:
    """The import chains of the classes' own modules, walked in the order ``Scanner.resolve``
    walks them, so that every chain is described as a one-process scan describes it."""
    for entry in entries:
        for platform in scanner.platforms_of(entry):
            for found in resolve_name(scanner.index, entry.module, entry.cls, platform):
                if isinstance(found, ClassKey):
                    scanner.import_failure(entry, found, platform)


Classified = tuple[list[tuple[int, "Resolution"]], list[tuple[int, Unresolved]]]


def _classify(scanner: Scanner, entries: list[RegistryEntry], positions: list[int]) -> Classified:
    resolutions: list[tuple[int, Resolution]] = []
    unresolved: list[tuple[int, Unresolved]] = []
    for position in positions:
        found, missing = scanner.resolve([entries[position]])
        resolutions.extend((position, r) for r in found)
        unresolved.extend((position, u) for u in missing)
    return resolutions, unresolved


def _classify_share(unstored: list[str]) -> tuple[dict[int, Classified], Harvest]:
    """Cache this worker's share of the facts round one left uncached, then classify chunks from
    the queue's front until none is left; the answers by chunk number, and what was read."""
    state = _state()
    assert state.queue is not None, "a classification task ran in a worker forked without a queue"
    state.scanner.index.store_facts(unstored)
    done: dict[int, Classified] = {}
    while (number := state.queue.take_front()) is not None:
        done[number] = _classify(state.scanner, state.entries, state.chunks[number])
    return done, _harvest(state)


def _classify_with_workers(
    scanner: Scanner, entries: list[RegistryEntry], chunks: list[list[int]], jobs: int, unstored: list[str]
) -> list[Classified]:
    """Every chunk classified, by ``jobs - 1`` forked workers taking chunks from the front of a
    queue and this process taking them from the back; the workers first cache the ``unstored``
    facts, each a share (on many CPUs one worker caching them all would finish last)."""
    workers = max(1, min(jobs, len(chunks)) - 1)
    queue = ChunkQueue(len(chunks))
    with frozen_heap(), _fork_pool(scanner, entries, workers, chunks, queue) as pool:
        shares = [pool.submit(_classify_share, unstored[share::workers]) for share in range(workers)]
        scanner.caller_notes()  # the workers take this process's share of chunks meanwhile
        parts: dict[int, Classified] = {}
        while (number := queue.take_back()) is not None:
            parts[number] = _classify(scanner, entries, chunks[number])
        for share in shares:
            done, harvest = share.result()
            _absorb(scanner, harvest)
            parts.update(done)
    return [parts[number] for number in range(len(chunks))]


def _fork_pool(
    scanner: Scanner,
    entries: list[RegistryEntry],
    workers: int,
    chunks: list[list[int]] | None = None,
    queue: ChunkQueue | None = None,
):
    """A pool whose workers fork (at the first submit) from the parent as it is now."""
    index = scanner.index
    state = Inherited(
        scanner,
        entries,
        frozenset(index.loaded()),
        frozenset(index.located),
        frozenset(index.imports_read()),
        chunks or [],
        queue,
    )
    return forked_pool(workers, state)


@contextmanager
def forked_pool(workers: int, state: Inherited | None = None) -> Iterator[ProcessPoolExecutor]:
    """A fork pool whose workers die with this process and hold ``state`` (a scan's; inherited
    by the fork, not pickled); on an exception (Ctrl-C) they are killed at once instead of
    being waited for."""
    pool = ProcessPoolExecutor(
        workers,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_start_worker,
        initargs=(os.getpid(), state),
    )
    try:
        yield pool
    except BaseException:
        for process in list((pool._processes or {}).values()):  # no public way to stop busy workers
            process.kill()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def forked(jobs: int) -> Resolve | None:
    """A ``scan.Resolve`` that spreads the work over ``jobs`` forked workers; None for one job."""
    if jobs <= 1:
        return None

    def resolve(scanner: Scanner, entries: list[RegistryEntry]) -> tuple[list[Resolution], list[Unresolved]]:
        if len(entries) < MIN_ENTRIES:
            return scanner.resolve_here(entries)
        return resolve_in_workers(scanner, entries, jobs)

    return resolve


def _index_in_workers(scanner: Scanner, entries: list[RegistryEntry], jobs: int) -> tuple[list[Harvest], list[Harvest]]:
    """Round one: the harvests of the import-chain and syntax-check workers, and of the facts
    workers, which read the modules that resolving every entry reaches.

    Two workers below ``SPLIT_ROUND_ONE_JOBS`` jobs (one walks the registry modules' imports and
    checks their syntax, one reads facts), while this process imports libcst and reads the
    speculators (round two inherits all of it). From there four (each job split in two: the
    facts workers take half the entries each, and the syntax checker reads the speculators), so
    that on many CPUs no worker outlasts this process's libcst import. On fewer CPUs, sending
    the speculators back would cost more CPU than it saves.
    """
    split = jobs >= SPLIT_ROUND_ONE_JOBS
    with _fork_pool(scanner, entries, 4 if split else 2) as pool:
        if split:
            chaining = [
                pool.submit(_check_registry_modules, walk_chains=True, check_syntax=False),
                pool.submit(_check_registry_modules, walk_chains=False, check_syntax=True, read_callers=True),
            ]
            indexing = [pool.submit(_index_chunk, half) for half in chunk_entries(entries, 2)]
        else:
            chaining = [pool.submit(_check_registry_modules, walk_chains=True, check_syntax=True)]
            indexing = [pool.submit(_index_chunk, list(range(len(entries))))]
        load_rules()
        if not split:
            scanner.prepare_callers()
        return [f.result() for f in chaining], [f.result() for f in indexing]


def resolve_in_workers(
    scanner: Scanner, entries: list[RegistryEntry], jobs: int
) -> tuple[list[Resolution], list[Unresolved]]:
    """``scanner.resolve_here(entries)``, computed by ``jobs`` forked workers."""
    chunks = chunk_entries(entries, jobs * CHUNKS_PER_WORKER)
    chained, indexed = _index_in_workers(scanner, entries, jobs)
    for harvest in chained:
        _absorb(scanner, harvest)
    syntax_errors = {module: error for harvest in chained for module, error in harvest.syntax_errors.items()}
    unstored: list[str] = []
    if not any(module in syntax_errors for harvest in indexed for module in harvest.unchecked):
        for harvest in indexed:
            _absorb(scanner, harvest)
        unstored = list(dict.fromkeys(module for harvest in indexed for module in harvest.unstored))
    # else a registry module does not compile, yet its facts were read as if it did: they are
    # dropped, and round two reads every module again, checked.
    _walk_class_chains(scanner, entries)
    resolutions: dict[tuple, tuple[int, Resolution]] = {}
    unresolved: list[tuple[int, Unresolved]] = []
    for found, missing in _classify_with_workers(scanner, entries, chunks, jobs, unstored):
        for position, resolution in found:  # an entry listed twice is one resolution, as in one process
            resolutions.setdefault((resolution.entry, resolution.key), (position, resolution))
        unresolved.extend(missing)
    ordered = sorted(resolutions.values(), key=lambda pair: pair[0])  # stable: an entry's own order is kept
    unresolved.sort(key=lambda pair: pair[0])
    return [r for _, r in ordered], [u for _, u in unresolved]


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Everything alive now out of the collector's reach while forked workers run.

    What workers inherit (libcst, every fact read) is not garbage; yet each
    full collection in a worker walked all of it (60-110 ms apiece) and
    wrote to every object's header, copying the shared pages. This is what
    ``gc.freeze`` is for; the caller's heap is thawed when the workers are done.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class WarmWorker:
    """A forked process that runs ``warm_up`` (an import) now, while the caller goes on, and
    later answers calls itself (``ask``) or maps a task over chunks in ``jobs`` forks of itself,
    which inherit what it imported and answered.

    Tasks and chunks are pickled: the worker inherits nothing the caller computes after the
    fork. One warm process, not ``jobs``: on few CPUs, several importing at once would slow
    the caller's own work down more than they save.
    """

    def __init__(self, jobs: int, warm_up: Callable[[], None]):
        context = multiprocessing.get_context("fork")
        self._connection, theirs = context.Pipe()
        # Not a daemon: daemons may not fork; close() (warm_worker's exit) always stops it.
        self._process = context.Process(target=_serve, args=(theirs, jobs, warm_up, os.getpid()))
        self._process.start()
        theirs.close()
        self._used = False

    def map(self, task: Callable[[T], R], chunks: list[T]) -> list[R]:
        """``[task(c) for c in chunks]``, computed in the worker's forks; their exceptions are raised here."""
        return self._request(True, task, chunks)

    def ask(self, task: Callable[..., R], *args) -> R:
        """``task(*args)``, computed in the worker itself (what it computes stays there, for its later
        forks too); its exception is raised here."""
        return self._request(False, task, args)

    def _request(self, in_forks: bool, task: Callable, payload):
        self._used = True
        self._connection.send((in_forks, task, payload))
        failed, value = self._connection.recv()
        if failed:
            raise value
        return value

    def kill(self) -> None:
        """Stop the worker now, busy or not (its own forks die with it)."""
        self._process.kill()
        self._process.join()
        self._connection.close()

    def close(self) -> None:
        """Stop the worker; one that was never given work is not waited for."""
        if self._used:
            self._connection.send(None)
            self._process.join()
        else:
            self._process.terminate()
            self._process.join()
        self._connection.close()


class Ahead:
    """``task(*args)`` computed by a forked process while the caller goes on; ``result()`` waits
    for it (its exception is raised there). ``close()`` stops one whose result nobody asked for."""

    def __init__(self, task: Callable[..., object], *args) -> None:
        context = multiprocessing.get_context("fork")
        self._connection, theirs = context.Pipe(duplex=False)
        self._process = context.Process(target=_compute, args=(theirs, os.getpid(), task, args))
        self._process.start()
        theirs.close()

    def result(self):
        try:
            failed, value = self._connection.recv()
        except EOFError:  # killed (out of memory) or ended without an answer
            self._process.join()
            code = self._process.exitcode
            raise RuntimeError(f"a worker process ended without an answer (exit code {code})") from None
        if failed:
            raise value
        return value

    def close(self) -> None:
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._connection.close()


def _compute(connection, parent: int, task: Callable[..., object], args: tuple) -> None:
    die_with_parent(parent)
    try:
        reply = (False, task(*args))
    except Exception as error:  # sent back to be raised in the caller
        reply = (True, error)
    _send(connection, reply)


def _send(connection, reply: tuple[bool, object]) -> None:
    """A worker's reply; an exception that does not pickle goes back as a RuntimeError naming it."""
    try:
        connection.send(reply)
    except Exception as error:
        connection.send((True, RuntimeError(f"{type(error).__name__}: {error}")))


def _serve(connection, jobs: int, warm_up: Callable[[], None], parent: int) -> None:
    die_with_parent(parent)
    warm_up()
    gc.freeze()  # what the warm-up imported is shared with every fork (see frozen_heap)
    while (request := connection.recv()) is not None:
        in_forks, task, payload = request
        try:
            if in_forks:
                with forked_pool(min(jobs, len(payload)) or 1) as pool:
                    reply = (False, list(pool.map(task, payload)))
            else:
                reply = (False, task(*payload))
        except Exception as error:  # sent back to be raised in the caller
            reply = (True, error)
        _send(connection, reply)


@contextmanager
def warm_worker(jobs: int, warm_up: Callable[[], None]) -> Iterator[WarmWorker | None]:
    """A WarmWorker for ``jobs`` above one, else None; closed on the way out."""
    if jobs <= 1:
        yield None
        return
    worker = WarmWorker(jobs, warm_up)
    try:
        yield worker
    except BaseException:  # Ctrl-C or an error: the worker may be busy; do not wait for it
        worker.kill()
        raise
    worker.close()
