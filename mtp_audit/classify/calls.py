"""Stage 4c: judge a drafter by how its speculators call it (the call contract).

A ``get_top_tokens`` is right when it selects the tokens of
``compute_logits(...).argmax(-1)`` *as each caller calls both*. This module
takes the call forms that ``resolve.callers`` read and answers three questions
for one drafter: does any speculator that can hold it reach
``get_top_tokens`` at all; would a caller pass the two methods different
arguments that ``compute_logits`` depends on; would a call raise ``TypeError``.
"""

from __future__ import annotations

import ast
import functools
import textwrap
from dataclasses import dataclass, replace

from ..index.ast_tools import unparse, walk
from ..model import CallerRecord, CallPair, ModelCall, Reach
from ..resolve.bindings import names_read
from ..resolve.callers import HIDDEN_BY_STAR
from .shape_types import Param, ParamKind


@dataclass(frozen=True)
class Contract:
    """The speculators that can hold one drafter, each with what its drafting path calls."""

    reaches: tuple[Reach, ...]

    @property
    def known(self) -> bool:
        return bool(self.reaches)

    @property
    def uncalled(self) -> bool:
        """No speculator that can hold the drafter ever calls get_top_tokens, and none hands the
        drafter to code the scan does not follow."""
        return self.known and not any(r.reaches or r.unfollowed or r.uncreatable for r in self.reaches)

    def unfollowed(self) -> list[Reach]:
        """The speculators that reach no get_top_tokens the scan sees but hand the drafter on where
        it does not follow (to another object's method, a function outside the caller files), or whose
        class Python never makes (no C3 order: what it would call is not known)."""
        return [r for r in self.reaches if not r.reaches and (r.unfollowed or r.uncreatable)]

    def pairs(self) -> list[tuple[Reach, CallPair]]:
        return [(r, p) for r in self.reaches for p in r.pairs]

    def held(self, logits_params: list[Param]) -> Contract:
        """The speculators that can hold a drafter whose compute_logits takes ``logits_params``, with
        the paths of theirs that can run it. A path that calls compute_logits with arguments it does
        not take fails there (TypeError) before any token is chosen; where its get_top_tokens call
        would fail on a mirror too (the same parameters), no method written can make it run. A
        speculator whose every compute_logits call fails, and no path of which can run, cannot hold
        the drafter at all (the multi-module MTP speculator passes ``spec_step_idx=`` to both)."""

        held = []
        for reach in self.reaches:
            pairs = [p for p in reach.pairs if _fits(logits_params, p.logits) or _fits(logits_params, [p.top_tokens])]
            # calling no get_top_tokens the scan sees, but handing the drafter on (or never made): what it
            # does there is not known, and it stays (MTP205 asks for a human)
            hands_on = not reach.pairs and (reach.unfollowed or reach.uncreatable)
            if reach.logits and not any(_fits(logits_params, [c]) for c in reach.logits) and not pairs and not hands_on:
                continue
            held.append(reach if len(pairs) == len(reach.pairs) else replace(reach, pairs=pairs))
        # where none can, the selection may have missed the one that does: judged by them all, as before
        return Contract(tuple(held)) if held else self

    def viable_pairs(self, logits_params: list[Param]) -> list[tuple[Reach, CallPair]]:
        """The pairs whose compute_logits calls bind to ``logits_params``: a speculator that calls
        compute_logits with arguments it does not take cannot hold the drafter (it fails before
        any token is chosen), so its get_top_tokens call decides nothing."""
        return [(r, p) for r, p in self.pairs() if _fits(logits_params, p.logits)]

    def records(self) -> list[CallerRecord]:
        out = []
        for reach in self.reaches:
            for pair in reach.pairs:
                first = pair.logits[0] if pair.logits else None
                out.append(
                    CallerRecord(
                        reach.speculator,
                        pair.top_tokens.file,
                        pair.top_tokens.line,
                        pair.top_tokens.args,
                        first.args if first else None,
                        first.line if first else None,
                    )
                )
            if not reach.pairs:
                first = reach.logits[0] if reach.logits else None
                out.append(
                    CallerRecord(
                        reach.speculator,
                        reach.file,
                        None,
                        None,
                        first.args if first else None,
                        first.line if first else None,
                    )
                )
        return out

    def unreached_reason(self) -> str:
        parts = []
        for reach in self.reaches:
            uses = [*(["compute_logits"] if reach.logits else []), *reach.other]
            drafts = f"drafts with {', '.join(uses)}" if uses else "calls no logits method of the drafter"
            parts.append(f"{reach.speculator} ({reach.file}:{reach.line}) {drafts}")
        return "no speculator that can hold it calls get_top_tokens: " + "; ".join(parts)


def signature_params(text: str) -> list[Param]:
    """The parameters (``self`` left out) of a method's text as the file holds it, read with ast: what
    binding a call needs, without a libcst parse of the method (most drafters need none)."""
    return list(_signature_params(text))


@functools.lru_cache(maxsize=1024)
def _signature_params(text: str) -> tuple[Param, ...]:
    """Read once per text: a compute_logits is asked for by every drafter and platform that inherits it."""
    module = ast.parse("class _:\n" + text if text[:1] in (" ", "\t") else text)
    function = next(n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    out = [
        Param(
            a.arg,
            ast.unparse(d) if d is not None else None,
            ParamKind.POSONLY if a in arguments.posonlyargs else ParamKind.POS,
        )
        for a, d in zip(positional, defaults)
    ]
    if arguments.vararg:
        out.append(Param(arguments.vararg.arg, None, ParamKind.STAR))
    out += [
        Param(a.arg, ast.unparse(d) if d is not None else None, ParamKind.KWONLY)
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)
    ]
    if arguments.kwarg:
        out.append(Param(arguments.kwarg.arg, None, ParamKind.STARSTAR))
    return tuple(p for p in out if p.name != "self")


def _fits(params: list[Param], calls: list[ModelCall]) -> bool:
    """Every call binds to a method with ``params`` (none would raise TypeError)."""
    return not any(bind(params, call)[1] for call in calls)


def where(call: ModelCall) -> str:
    return f"{call.file}:{call.line}"


def form(call: ModelCall) -> str:
    return f"{call.method}({', '.join(call.args)})"


def through(call: ModelCall) -> str:
    """`` through `WRAPPER CALL` (FILE:LINE)`` where the call's arguments come through a wrapper."""
    return f" through {call.through}" if call.through else ""


def bind(params: list[Param], call: ModelCall) -> tuple[set[str], list[str]]:
    """The parameters ``call`` binds, and why it would raise TypeError (empty: it would not)."""
    positional = [p for p in params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    star = any(p.kind == ParamKind.STAR for p in params)
    starstar = any(p.kind == ParamKind.STARSTAR for p in params)
    bound = {p.name for p in positional[: call.positional]}
    errors = []
    if call.positional > len(positional) and not star:
        errors.append(f"{call.positional} positional arguments")
    names = {p.name for p in params if p.kind in (ParamKind.POS, ParamKind.KWONLY)}
    for keyword in call.keywords:
        if keyword in names:
            bound.add(keyword)
        elif not starstar:
            errors.append(f"{keyword}=")
    return bound, errors


@functools.lru_cache(maxsize=4096)
def reads(text: str, name: str) -> bool:
    """Whether a method's body reads parameter ``name`` (unparsable text: assume it does)."""
    try:
        func = ast.parse(textwrap.dedent(text)).body[0]
    except (SyntaxError, IndexError):
        return True
    body = getattr(func, "body", [])
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
        for statement in body
        for n in walk(statement)
    )


@functools.lru_cache(maxsize=1024)
def only_unpacked(text: str, name: str) -> bool:
    """Whether a method reads ``name`` only to unpack it into a call (``f(**kwargs)``): it passes the
    keywords on and looks at none of them."""
    try:
        func = ast.parse(textwrap.dedent(text)).body[0]
    except (SyntaxError, IndexError):
        return False
    unpacked = {id(k.value) for k in walk(func) if isinstance(k, ast.keyword) and k.arg is None}
    return all(
        id(n) in unpacked
        for n in walk(func)
        if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
    )


@functools.lru_cache(maxsize=1024)
def forwards_every_call(text: str) -> bool:
    """Whether a get_top_tokens is ``(self, *args, **kwargs)`` returning ``super().get_top_tokens(*args,
    **kwargs)`` or ``super(Cls, self).get_top_tokens(*args, **kwargs)`` (a docstring aside, no decorator):
    every call reaches the next one its ``super()`` finds, arguments unchanged."""
    try:
        func = ast.parse(textwrap.dedent(text)).body[0]
    except (SyntaxError, IndexError):
        return False
    if not isinstance(func, ast.FunctionDef) or func.decorator_list:
        return False
    arguments = func.args
    if arguments.posonlyargs or arguments.kwonlyargs or len(arguments.args) != 1 or not arguments.vararg:
        return False
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    if arguments.kwarg is None or len(body) != 1:
        return False
    passed = f"(*{arguments.vararg.arg}, **{arguments.kwarg.arg})"
    if unparse(body[0]) == f"return super().get_top_tokens{passed}":
        return True
    parameters = {"self", arguments.vararg.arg, arguments.kwarg.arg}
    named = _super_class_named(body[0])
    return (
        arguments.args[0].arg == "self"
        and named is not None
        and named.partition(".")[0] not in parameters  # ``super(self.__class__, self)`` names no class
        and unparse(body[0]) == f"return super({named}, self).get_top_tokens{passed}"
    )


def _super_class_named(statement: ast.stmt) -> str | None:
    """``Cls`` of ``return super(Cls, self).NAME(...)``, where it is a (dotted) name, as written."""
    call = statement.value if isinstance(statement, ast.Return) else None
    made = call.func.value if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) else None
    if not isinstance(made, ast.Call) or len(made.args) != 2:
        return None
    named = unparse(made.args[0])
    return named if all(part.isidentifier() for part in named.split(".")) else None


def first_read(text: str, name: str, def_line: int) -> str | None:
    """``(line N: `statement`)`` for the first statement of a method that reads ``name``;
    ``def_line`` is the line of its ``def``."""
    try:
        func = ast.parse(textwrap.dedent(text)).body[0]
    except (SyntaxError, IndexError):
        return None
    found = [
        s
        for s in walk(func)
        if isinstance(s, ast.stmt)
        and s is not func
        and not isinstance(  # the statement, not its block
            s, (ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, ast.Match)
        )
        and any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in walk(s))
    ]
    if not found:
        return None
    statement = min(found, key=lambda s: (s.lineno, s.col_offset))
    return f"(line {def_line + statement.lineno - func.lineno}: `{unparse(statement).splitlines()[0]}`)"


UNKNOWN_VALUE = "\0"  # an argument passed through a wrapper that computes it from its own locals


def received(params: list[Param], call: ModelCall) -> dict[str, str] | None:
    """What each parameter of a method with ``params`` gets from ``call``: the argument (its value
    where the call is passed through wrappers, ``UNKNOWN_VALUE`` where that is not known), or ``=``
    and the default the call leaves it; None when a ``*``/``**`` argument hides which gets what."""
    positional = call.args[: call.positional]
    keywords = call.args[call.positional :]
    if any(a.startswith("*") for a in positional) or any(a.startswith("**") for a in keywords):
        return None
    values = [UNKNOWN_VALUE if v is None else v for v in call.argument_values]
    out = {p.name: f"={_normal(p.default)}" for p in params if p.default is not None}
    named = [p for p in params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    out.update((p.name, value) for p, value in zip(named, values[: call.positional]))
    out.update((k.split("=", 1)[0], value) for k, value in zip(keywords, values[call.positional :]))
    return out


def counterpart(name: str, logits_params: list[Param], top_params: list[Param]) -> str | None:
    """The parameter of get_top_tokens that stands for compute_logits's ``name``: the same name, or
    a renamed one in the same place (``step_idx`` for ``spec_step_idx``); None: it has none."""
    if any(p.name == name for p in top_params):
        return name
    logits_named = [p.name for p in logits_params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    top_named = [p.name for p in top_params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    if name in logits_named and logits_named.index(name) < len(top_named):
        renamed = top_named[logits_named.index(name)]
        return None if any(p.name == renamed for p in logits_params) else renamed
    return None


def agree(first: str, second: str) -> bool | None:
    """Do two argument values (``=`` marks a default) agree on every call? True: the same code or the
    same constant; False: a constant against other code or another constant (the classic case: the
    default step against the loop's step); None: two expressions that run-time values decide."""
    if UNKNOWN_VALUE in (first, second) or HIDDEN_BY_STAR in (first, second):
        return None
    if first.lstrip("=") == second.lstrip("="):
        return True
    constants = [_constant(v.lstrip("=")) for v in (first, second)]
    if all(c is not _NOT_CONSTANT for c in constants):
        return constants[0] == constants[1] and type(constants[0]) is type(constants[1])
    return False if any(c is not _NOT_CONSTANT for c in constants) else None


_NOT_CONSTANT = object()


def _guarded_equal(top: ModelCall, logits_value: str, top_value: str | None) -> bool:
    """Whether the path to ``top`` tests ``logits_value == C`` with ``C`` the constant get_top_tokens
    gets (``if step == 0: get_top_tokens(h)`` against ``compute_logits(h, spec_step_idx=step)``):
    equal where the test still holds, which only run-time values tell (the name may be rebound)."""
    constant = _constant((top_value or "").lstrip("="))
    return constant is not _NOT_CONSTANT and any(
        _normal(value) == _normal(logits_value.lstrip("=")) and _constant(guard) == constant
        for value, guard in top.guards
    )


def _constant(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return _NOT_CONSTANT


@functools.lru_cache(maxsize=1024)
def _normal(text: str) -> str:
    """A default as ``ast.unparse`` writes it, as the caller's arguments are."""
    try:
        return unparse(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return text


@dataclass(frozen=True)
class ArgumentGap:
    """A parameter compute_logits reads that one caller gives the two methods differently, on one path."""

    logits: ModelCall
    name: str | None  # None: a ``*``/``**`` argument hides which parameter gets what
    logits_value: str = ""  # as passed; ``=`` and the default when the call leaves it
    top_value: str | None = None  # None: get_top_tokens has no such parameter
    provable: bool = False  # different on some call (a constant against other code), not only written differently
    rebound: str = ""  # the bindings of a name both values read that may give it another value at each call
    forwarded: bool = False  # taken by compute_logits's **kwargs and passed on
    starred: str = ""  # get_top_tokens has no such parameter, but its ``*args`` or ``**kwargs`` (named so) takes it


NOT_PASSED = "\x02"  # a keyword one call passes into a **kwargs and the other does not pass at all


def argument_gaps(
    pair: CallPair,
    logits_params: list[Param],
    logits_text: str,
    top_params: list[Param],
    forwarded: frozenset[str] | None = None,
):
    """Every parameter compute_logits reads whose value the caller gives get_top_tokens (a method with
    ``top_params``: a mirror has ``logits_params``) differently, for each compute_logits call paired;
    and every keyword that compute_logits's ``**kwargs`` takes and passes on to code that reads it
    (``forwarded``: the names that code reads; None: not known, so any of them)."""
    top_values = received(top_params, pair.top_tokens)
    gaps: list[ArgumentGap] = []
    for logits in pair.logits:
        values = received(logits_params, logits)
        if values is None or top_values is None:
            gaps.append(ArgumentGap(logits, None))
            continue
        for param in logits_params:
            value = values.get(param.name)
            if value is None or not reads(logits_text, param.name):
                continue
            other = counterpart(param.name, logits_params, top_params)
            starred = _taken_by_star(param.name, logits_params, top_params, pair.top_tokens) if other is None else None
            if starred is not None:  # what get_top_tokens does with it only its body tells
                gaps.append(ArgumentGap(logits, param.name, value, None, False, starred=starred))
                continue
            if other is None:
                if not value.startswith("="):
                    gaps.append(ArgumentGap(logits, param.name, value, None, True))
                continue
            top_value = top_values.get(other)
            if top_value is None:
                continue
            rebound = _rebound_in(logits, value, top_value)
            same = agree(value, top_value)
            if same and rebound:  # the same text, but maybe not the same value
                same = None
            if same is False and _guarded_equal(pair.top_tokens, value, top_value):
                same = None
            if same is not True:
                gaps.append(ArgumentGap(logits, param.name, value, top_value, same is False, rebound))
        gaps += _forwarded_gaps(logits, pair.top_tokens, values, top_values, logits_params, logits_text, forwarded)
    return gaps


def _taken_by_star(name: str, logits_params: list[Param], top_params: list[Param], top: ModelCall) -> str | None:
    """``*ARGS`` or ``**KWARGS`` when get_top_tokens, which has no parameter for compute_logits's ``name``,
    takes what the caller passes in its place there: by position (where compute_logits has it) into
    ``*args``, by keyword into ``**kwargs``; None when nothing reaches it."""
    star = {p.kind: p.name for p in top_params if p.kind in (ParamKind.STAR, ParamKind.STARSTAR)}
    logits_named = [p.name for p in logits_params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    top_named = [p for p in top_params if p.kind in (ParamKind.POSONLY, ParamKind.POS)]
    if ParamKind.STAR in star and name in logits_named and len(top_named) <= logits_named.index(name) < top.positional:
        return f"*{star[ParamKind.STAR]}"
    if ParamKind.STARSTAR in star and name in top.keywords:
        return f"**{star[ParamKind.STARSTAR]}"
    return None


def _forwarded_gaps(
    logits: ModelCall,
    top: ModelCall,
    values: dict[str, str],
    top_values: dict[str, str],
    logits_params: list[Param],
    logits_text: str,
    forwarded: frozenset[str] | None,
) -> list[ArgumentGap]:
    """The arguments compute_logits takes in its ``*args``/``**kwargs`` (and reads, so passes on) that
    the caller gives get_top_tokens differently: a keyword is compared as a parameter would be,
    provably different only where the code it is passed on to is known to read it; extra positional
    arguments, which hide which parameter they reach, only by their text."""
    star = {p.kind: p.name for p in logits_params if p.kind in (ParamKind.STAR, ParamKind.STARSTAR)}
    gaps = []
    if ParamKind.STAR in star and reads(logits_text, star[ParamKind.STAR]):
        named = sum(p.kind in (ParamKind.POSONLY, ParamKind.POS) for p in logits_params)
        if logits.argument_values[named : logits.positional] != top.argument_values[named : top.positional]:
            gaps.append(ArgumentGap(logits, None))
    if ParamKind.STARSTAR not in star or not reads(logits_text, star[ParamKind.STARSTAR]):
        return gaps
    declared = {p.name for p in logits_params if p.kind in (ParamKind.POS, ParamKind.KWONLY)}
    for keyword in sorted({*logits.keywords, *top.keywords} - declared):
        if forwarded is not None and keyword not in forwarded:
            continue
        value, top_value = values.get(keyword, NOT_PASSED), top_values.get(keyword, NOT_PASSED)
        rebound = _rebound_in(logits, value, top_value)
        same = None if NOT_PASSED in (value, top_value) else agree(value, top_value)
        if same and rebound:
            same = None
        if same is not True:  # one passed, one not: different unless it is a constant the default may equal
            passed = top_value if value == NOT_PASSED else value  # the one call's value, when the other passes none
            passed_code = NOT_PASSED in (value, top_value) and _constant(passed.lstrip("=")) is _NOT_CONSTANT
            provable = forwarded is not None and (same is False or passed_code)
            gaps.append(ArgumentGap(logits, keyword, value, top_value, provable, rebound, forwarded=True))
    return gaps


def _rebound_in(logits: ModelCall, value: str, top_value: str) -> str:
    """Where the names of ``logits.rebound`` that the compared values read are bound (a name bound to
    a constant before one call reads as that constant there, so one of the two still reads it)."""
    read = _names(value.lstrip("=")) | _names(top_value.lstrip("="))
    return "; ".join(f"{name} is bound by {where}" for name, where in logits.rebound if name in read)


@functools.lru_cache(maxsize=4096)
def _names(text: str) -> frozenset[str]:
    try:
        tree = ast.parse(text.lstrip("*"), mode="eval")
    except (SyntaxError, ValueError, RecursionError):
        return frozenset()
    return names_read(tree)


def passed_to_top_tokens(contract: Contract, params: list[Param]) -> set[str]:
    """The parameters of a ``get_top_tokens`` with ``params`` that some caller binds."""
    out: set[str] = set()
    for _, pair in contract.pairs():
        out |= bind(params, pair.top_tokens)[0]
    return out
