"""Classification answers by method text, kept across runs in the user cache.

Each rule reads one method's text (``MethodFacts.text``) and nothing else, so
its answer is a pure function of that text (and the line it starts on, which
messages quote).
Stored beside the facts cache (``cache.AnswerStore``, keyed like every cache
entry by the tool's source hash), one small entry per answer: a scan whose
facts are cached then classifies without parsing, or even importing, libcst.
The rules themselves live in ``shapes``, imported on the first miss; the mirror
rule's answers (``synthesize.answers``) are kept the same way, through ``stored``.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from ..cache import MISSING, AnswerStore
from ..index.fact_types import libcst_code
from .shape_types import FreeNames, HeadSignature, LogitsShape, TopTokensShape

if TYPE_CHECKING:
    from ..cache import FactsCache

_store: AnswerStore | None = None  # None: answers are memoised in this process only
# Computes a missing answer elsewhere from the rule's name and arguments (see ``delegated``).
Delegate = Callable[[str, tuple], object]
_delegate: Delegate | None = None
# Runs a task on a list of work, split among processes that have the rules (see ``delegated``).
Spread = Callable[[Callable[[list], dict], list], list[dict]]
_spread: Spread | None = None
_computed_elsewhere: dict[tuple[str, tuple], object] = {}  # answers ``answer_elsewhere`` brought back
_ANSWERS: dict[str, Callable] = {}  # every stored rule's memoised answer, by name (see answer_here)
_KINDS: dict[str, type | tuple[type, ...]] = {}  # what each stored rule answers, by name
Rule = TypeVar("Rule", bound=Callable)


def use_cache(cache: FactsCache | None) -> None:
    """Keep answers beside ``cache``'s facts from now on (None: in this process only)."""
    global _store
    _store = cache.answers() if cache is not None else None


@contextlib.contextmanager
def delegated(delegate: Delegate | None, spread: Spread | None = None) -> Iterator[None]:
    """Answers that neither this process nor the store has are computed by ``delegate(name, args)``
    (e.g. ``answer_here`` run by a ``WarmWorker``, which has libcst already and stores what it
    computes) instead of here, where the first one would import libcst; None: here, as usual.
    ``spread(task, items)``: ``task`` run on parts of ``items`` by processes that have the rules (the
    worker's forks), their answers returned, for ``answer_elsewhere``."""
    global _delegate, _spread
    _delegate, _spread = delegate, spread
    try:
        yield
    finally:
        _delegate, _spread = None, None
        _computed_elsewhere.clear()


def key(rule: Callable, args: tuple) -> tuple[str, tuple]:
    """How ``answer_elsewhere``'s tasks name the answer of a stored ``rule`` for ``args``."""
    return f"{rule.__module__}.{rule.__name__}", args


def known(rule: Callable, args: tuple) -> bool:
    """Is the stored ``rule``'s answer for ``args`` had without computing it (brought back, or in the
    store: then kept here, so that the call does not read the store again)?"""
    name, args = key(rule, args)
    if (name, args) in _computed_elsewhere:
        return True
    if _store is None:
        return False
    value = _store.load(_store.path(rule.__name__, args), _KINDS[name])
    if value is MISSING:
        return False
    _computed_elsewhere[name, args] = value
    return True


def can_answer_elsewhere() -> bool:
    """Are there processes to hand ``answer_elsewhere``'s tasks to (``delegated``'s ``spread``)?"""
    return _spread is not None


def answer_elsewhere(task: Callable[[list], dict], items: list) -> None:
    """``task`` (a module-level function: items -> {``key(rule, args)``: answer}) run on ``items``, split
    among the processes ``delegated``'s ``spread`` hands work to, at once instead of one question at a
    time; what they answer is used by those rules' calls here from then on. Nothing is run without
    ``spread`` (the questions are then asked one by one, as before)."""
    if _spread is None or not items:
        return
    for part in _spread(task, items):
        keep_answers(part)


def keep_answers(answers: dict[tuple[str, tuple], object]) -> None:
    """Use these answers (``answer_elsewhere``'s) in this process, and in processes forked from it."""
    _computed_elsewhere.update(answers)


def answer_here(name: str, args: tuple) -> object:
    """The stored rule ``name``'s answer for ``args``, computed in this process if need be."""
    return _ANSWERS[name](*args)


def load_rules() -> None:
    """Import the rules (libcst) now, e.g. while forked workers parse; every rule calls it first."""
    if _RULES not in sys.modules:
        with _no_signature_docstrings(), _collector_paused():
            from .. import patterns  # noqa: F401  (libcst.matchers: the bulk of the import)
            from . import method_checks, shapes  # noqa: F401


_RULES = "mtp_audit.classify.shapes"


def shape_rules() -> tuple:
    """The compute_logits shape rules (``shapes.RULES``), importing libcst the fast way if need be."""
    load_rules()
    from .shapes import RULES

    return RULES


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while libcst imports.

    An import makes classes and functions that live as long as the process,
    not garbage; yet the thousands of them trigger ~130 collections, each
    walking everything made so far: 0.08 s of the import (gc callbacks, cold
    scan of vLLM 0.34.0). Refcounting still frees what the import drops.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextlib.contextmanager
def _no_signature_docstrings() -> Iterator[None]:
    """While libcst imports, report its classes' signatures as unavailable.

    A dataclass without a docstring gets one rendered from its signature; for
    the ~200 classes of ``libcst.matchers`` that means formatting huge
    ``Union`` annotations, a quarter of importing libcst (0.2 s of a cold
    scan, measured with callgrind: 2.5 G instructions without this, 1.9 G
    with it). Nothing reads those docstrings; a signature that cannot be had
    is dataclasses' own fallback (the docstring is then the class name).
    Signatures of everything else are untouched. Older dataclasses (3.10,
    3.11 before 3.11.7: Debian's 3.11.2) have no such fallback; there the
    import runs unchanged.
    """
    if not _dataclasses_tolerate_unsigned():
        yield
        return
    signature = inspect.signature

    def libcst_classes_unsigned(obj, *args, **kwargs):
        if isinstance(obj, type) and obj.__module__.split(".", 1)[0] == "libcst":
            raise ValueError("signature not rendered while libcst imports")
        return signature(obj, *args, **kwargs)

    inspect.signature = libcst_classes_unsigned
    try:
        yield
    finally:
        inspect.signature = signature


def stored(kind: type | tuple[type, ...]) -> Callable[[Rule], Rule]:
    """Memoise a rule answering a ``kind`` in this process and, when a store is set, on disk."""

    def wrap(rule: Rule) -> Rule:
        @functools.lru_cache(maxsize=4096)
        @functools.wraps(rule)
        def answer(*args):
            elsewhere = _computed_elsewhere.get((name, args), MISSING)
            if elsewhere is not MISSING:
                return elsewhere
            store = _store
            path = store.path(rule.__name__, args) if store is not None else None
            if path is not None:
                value = store.load(path, kind)
                if value is not MISSING:
                    return value
            if _delegate is not None:
                return _delegate(name, args)
            load_rules()
            value = rule(*args)
            if path is not None:
                store.save(path, value)
            return value

        name = f"{rule.__module__}.{rule.__name__}"
        _ANSWERS[name] = answer
        _KINDS[name] = kind
        return answer  # type: ignore[return-value]

    return wrap


@functools.cache
def _dataclasses_tolerate_unsigned() -> bool:
    """Does ``dataclasses`` fall back to a bare name when a class's signature raises?

    Asked of the running interpreter's ``dataclasses`` itself, on a throwaway
    class, rather than guessed from its version number (distributions
    backport fixes).
    """
    import dataclasses

    class Probe:
        pass

    signature = inspect.signature

    def unsigned(obj, *args, **kwargs):
        if obj is Probe:
            raise ValueError("probe")
        return signature(obj, *args, **kwargs)

    inspect.signature = unsigned
    try:
        dataclasses.dataclass(Probe)
    except ValueError:
        return False
    finally:
        inspect.signature = signature
    return Probe.__doc__ == "Probe"


@stored(LogitsShape)
def logits_shape(text: str, line: int, signature: HeadSignature) -> LogitsShape:
    """``signature`` is part of the key: one tree's answer is not another's whose get_top_tokens differs."""
    from .shapes import analyze_compute_logits

    return analyze_compute_logits(libcst_code(text), line, signature)


@stored(TopTokensShape)
def top_tokens_shape(text: str, line: int) -> TopTokensShape:
    from .method_checks import analyze_get_top_tokens

    return analyze_get_top_tokens(libcst_code(text), line)


@stored(str)
def fingerprint(text: str) -> str:
    from .method_checks import normalize

    return normalize(libcst_code(text))


@stored(FreeNames)
def free_names(text: str) -> FreeNames:
    from .method_checks import free_names as rule

    return rule(libcst_code(text))


@stored(bool)
def returns_plain_head(text: str, hidden: str) -> bool:
    from .method_checks import returns_plain_head as rule

    return rule(libcst_code(text), hidden)
