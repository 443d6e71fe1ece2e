"""The mirror rule's answers by method text, kept like every classification answer
(``classify.memo.stored``): reading a cached one needs no libcst, computing one imports
``mirror`` or ``inline``.

Classification asks them through ``MIRROR_RULE`` (handed to ``classify.analysis.Analyzer``
by the scan): whether an existing get_top_tokens is what a fix would write is a question
for the stage that writes it.
"""

from __future__ import annotations

import ast

from ..classify import memo
from ..classify.analysis import Insertion, MirrorRule, Overlay
from ..classify.memo import stored
from ..index.ast_tools import unparse
from ..index.fact_types import MethodFacts, libcst_code
from ..resolve.mro import Hierarchy, MethodHit


@stored(str)
def mirror_text(text: str) -> str:
    """The mirror a fix would write, unformatted; raises MirrorError when there is none."""
    from .mirror import mirror_code

    return mirror_code(libcst_code(text))


@stored((str, type(None)))
def mirror_fingerprint(text: str) -> str | None:
    from ..classify.method_checks import normalize
    from .mirror import MirrorError, mirror_code

    try:
        return normalize(mirror_code(libcst_code(text)))
    except MirrorError:
        return None


@stored((str, type(None)))
def mirror_fingerprint_without(text: str, params: tuple[str, ...]) -> str | None:
    """The fingerprint of the mirror with ``params`` dropped from its signature."""
    from ..classify.method_checks import normalize
    from .mirror import MirrorError, mirror_code

    try:
        func = ast.parse(mirror_code(libcst_code(text))).body[0]
    except MirrorError:
        return None
    assert isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef))
    arguments = func.args
    for name in ("posonlyargs", "args", "kwonlyargs"):
        kept = [a for a in getattr(arguments, name) if a.arg not in params]
        dropped = len(getattr(arguments, name)) - len(kept)
        if name == "args" and dropped:
            positions = [i for i, a in enumerate(arguments.args) if a.arg in params]
            first_default = len(arguments.args) - len(arguments.defaults)
            arguments.defaults = [d for i, d in enumerate(arguments.defaults) if first_default + i not in positions]
        if name == "kwonlyargs" and dropped:
            arguments.kw_defaults = [
                d for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if a.arg not in params
            ]
        setattr(arguments, name, kept)
    return normalize(unparse(func))


@stored((str, type(None)))
def inlined_super(caller: str, callee: str) -> str | None:
    """``caller`` (a ``return super().compute_logits(...)``) with ``callee``'s body inlined, or None
    when the plain inlining rule does not apply (see synthesize.inline)."""
    from .inline import InlineError, inline_super

    try:
        return inline_super(libcst_code(caller), libcst_code(callee))
    except InlineError:
        return None


def synthetic_mirror(hit: MethodHit, hierarchy: Hierarchy) -> MethodFacts:
    """The method a fix would write, as facts (for blast-radius checks). Its line is the mirrored
    compute_logits's, so it is placed in that method's file (a mixin's module, say), not in the
    file of the class it is written into: reasons name the line the text comes from."""
    return MethodFacts(
        "get_top_tokens", hit.method.line, mirror_text(hit.method.text), file=hierarchy.file_of(hit.owner)
    )


def planned_overlay(insertions: list[Insertion], hierarchy: Hierarchy) -> Overlay:
    """The methods a plan writes, by the class each goes into (for blast-radius checks). Where other
    processes can answer (``fix``'s warm worker), the mirrors no cache holds, and what the checks ask
    of them, are answered there first, all at once (``memo.answer_elsewhere``)."""
    if memo.can_answer_elsewhere():
        wanted = {(i.source.method.text, i.source.method.line) for i in insertions}
        memo.answer_elsewhere(_mirror_answers, sorted(w for w in wanted if not memo.known(mirror_text, w[:1])))
    return {i.target: {"get_top_tokens": synthetic_mirror(i.source, hierarchy)} for i in insertions}


def _mirror_answers(items: list[tuple[str, int]]) -> dict[tuple[str, tuple], object]:
    """For each compute_logits (text, line): its mirror, and what classifying the mirror as a planned
    get_top_tokens asks (its shape and fingerprint, the fingerprint of the mirror rule). Run where the
    rules are; a question whose rule raises is left out, to be asked alone (and raise) if it is asked."""
    found: dict[tuple[str, tuple], object] = {}
    for text, line in items:
        try:
            mirror = mirror_text(text)
        except Exception:  # noqa: BLE001 - asked again alone, where it raises as it would have
            continue
        found[memo.key(mirror_text, (text,))] = mirror
        for rule, args in (
            (memo.top_tokens_shape, (mirror, line)),
            (memo.fingerprint, (mirror,)),
            (mirror_fingerprint, (text,)),
        ):
            try:
                found[memo.key(rule, args)] = rule(*args)
            except Exception:  # noqa: BLE001 - as above
                continue
    return found


MIRROR_RULE = MirrorRule(mirror_fingerprint, mirror_fingerprint_without, inlined_super)
