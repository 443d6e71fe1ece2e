"""Stage 4b: status and consistency of one drafter class on one platform.

Works on the MRO: where ``compute_logits`` and ``get_top_tokens`` come from,
what the delegate chain is, and whether an existing ``get_top_tokens`` selects
the tokens of the ``compute_logits`` actually in use. ``overlay`` adds
methods that a fix would write, so the blast radius of a fix can be checked
before anything is written.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..depth import TooDeep
from ..index.ast_tools import dotted, self_attribute, unparse, walk
from ..index.classes import REBOUND
from ..index.fact_types import Assigned, MethodFacts, libcst_code
from ..index.processor import VLLM_LOGITS_PROCESSOR
from ..model import CallerRecord, ClassKey, Consistency, Status
from ..resolve.mro import Hierarchy, MethodHit, Mro
from ..resolve.names import External, Missing, resolve_expression, resolve_name
from .calls import (
    Contract,
    counterpart,
    first_read,
    forwards_every_call,
    only_unpacked,
    passed_to_top_tokens,
    reads,
    signature_params,
)
from .contract_rules import CallSiteArguments, CallSiteUnproven, CallTypeError, Uncalled, UnfollowedDrafter
from .memo import (
    fingerprint,
    free_names,
    logits_shape,
    returns_plain_head,
    top_tokens_shape,
)
from .shape_types import (
    ASSUMED_SIGNATURE,
    EVERYWHERE,
    MASK_METHODS,
    HeadSignature,
    LogitsKind,
    LogitsShape,
    ParamKind,
    PostKind,
    TargetMap,
    TopTokensKind,
)

if TYPE_CHECKING:
    from ..index.processor import ProcessorFlag, ProcessorPaths
    from .shape_types import Param, TopTokensShape

Overlay = dict[ClassKey, dict[str, MethodFacts]]
# A value ``__init__`` may leave in an attribute of self: its writer, the value, the classes it may be (None:
# cannot be told)
AssignedValue = tuple[ClassKey, Assigned, list[ClassKey | External] | None]
# What its call and its get_top_tokens may run where it cannot be read (a plugin directory without a vLLM):
# a subclass's override of any is taken to make them differ, the reason saying why
UNREAD_PROCESSOR_METHODS = (
    "forward",
    "__call__",
    "_get_logits",
    "_gather_logits",
    "_apply_head",
    "_mask_outside_vocab",
    "get_top_tokens",
)
# What changes the processor's call alone when set or called on the instance: torch's Module.__call__ runs the
# instance's _call_impl and the hooks registered on it, never get_top_tokens
HOOKS = ("register_forward_hook", "register_forward_pre_hook")
# What a module's text must hold for a class of it to change ``self.logits_processor`` where the facts do not look:
# another name bound to it (``p = self.logits_processor``, ``self.logits_processor = p = ...``), setattr on it, a
# hook or ``_call_impl`` (``self.logits_processor.forward = ...`` itself is in the facts). Searched from the
# literal ``self.logits_processor`` (``_may_patch_the_processor``): one pattern of all the forms, which starts
# with no literal, tried a match at nearly every character (25 ms per MB of model code).
_PROCESSOR_ATTRIBUTE = re.compile(r"self\.logits_processor\b")
_REBINDS_THE_PROCESSOR = re.compile(r"self\.logits_processor\s*=\s*\w+\s*(?:=(?!=)|$)", re.MULTILINE)
_ATTRIBUTE_OR_CALL_FOLLOWS = re.compile(r"\s*[.(\[]")
_HOOK = re.compile(r"register_forward(?:_pre)?_hook")
CALL_PATH_HOOKS = {"_call_impl", *HOOKS}
DIVERGENT_POST = {PostKind.MASK, PostKind.D2T_SCATTER, PostKind.VOCAB}
# A shape's hidden states are unknown (None) when the arms of an ``if`` pass different ones.
ARMS_DIFFER = "hidden states that differ by arm"


def _may_patch_the_processor(text: str) -> bool:
    """Does ``text`` hold ``= self.logits_processor`` (not followed by ``.``, ``(`` or ``[``),
    ``self.logits_processor = name =`` (or ``= name`` ending its line), ``setattr(self.logits_processor``,
    a forward hook's registration or ``_call_impl``? (Whitespace, line breaks too, may come between.)"""
    if "_call_impl" in text or "register_forward" in text and _HOOK.search(text):
        return True
    for found in _PROCESSOR_ATTRIBUTE.finditer(text):
        start = found.start()
        if _REBINDS_THE_PROCESSOR.match(text, start):
            return True
        before = _skip_space_back(text, start)
        if before >= 0 and text[before] == "=" and not _ATTRIBUTE_OR_CALL_FOLLOWS.match(text, found.end()):
            return True
        if before >= 0 and text[before] == "(" and text.endswith("setattr", 0, _skip_space_back(text, before) + 1):
            return True
    return False


def _skip_space_back(text: str, end: int) -> int:
    """The position of the last character before ``end`` that is not whitespace; -1 if none."""
    at = end - 1
    while at >= 0 and text[at].isspace():
        at -= 1
    return at


@dataclass(frozen=True)
class Insertion:
    """Write the mirror of ``source`` into class ``target``."""

    target: ClassKey
    source: MethodHit


@dataclass
class Analysis:
    status: Status
    reason: str
    compute_logits: MethodHit | None = None
    get_top_tokens: MethodHit | None = None
    delegates: list[ClassKey] = field(default_factory=list)
    consistency: Consistency | None = None
    insertions: list[Insertion] = field(default_factory=list)
    uncalled: bool = False  # no speculator that can hold the drafter calls get_top_tokens
    # how the speculators that can hold it call it, where that is fewer than its selection reaches
    # (``Contract.held``: some call compute_logits with arguments it does not take); None: all of them
    callers: list[CallerRecord] | None = None
    rule: str | None = None  # id of the shape rule that decided the status (shapes.RULES), if one did


@dataclass(frozen=True)
class MirrorRule:
    """What classification asks of the mirror rule, by method text; the answers come from the
    stage that writes mirrors (``synthesize.answers.MIRROR_RULE``), handed in by the caller."""

    # memo.fingerprint of the get_top_tokens a fix would write for a compute_logits; None: none
    fingerprint: Callable[[str], str | None]
    # the same, with these parameters dropped from its signature
    fingerprint_without: Callable[[str, tuple[str, ...]], str | None]
    # a ``return super().compute_logits(...)`` with the callee's body inlined; None: not plainly
    inlined_super: Callable[[str, str], str | None]


class Analyzer:
    def __init__(self, hierarchy: Hierarchy, mirror: MirrorRule):
        self.h = hierarchy
        self.mirror = mirror
        # ``file:line`` where the tree's LogitsProcessor.get_top_tokens masks every id from
        # org_vocab_size on (read with the tree's registry); None: it does not, or not known
        self.processor_mask: str | None = None
        # what the tree's LogitsProcessor runs for its call and its get_top_tokens; None: it could not be read
        self.processor_paths: ProcessorPaths | None = None
        # what the tree's get_top_tokens and LogitsProcessor call take (head-arguments); assumed until read
        self.head_signature: HeadSignature = ASSUMED_SIGNATURE
        # (module, name) of the class vLLM's processor is defined as in the tree: its call and its get_top_tokens
        # select the same tokens (the mirror rule's premise); where drafters import it from, unless it moved
        self.processor_key: tuple[str, str] = VLLM_LOGITS_PROCESSOR
        self._init_bodies: dict[ClassKey, list[ast.stmt] | None] = {}  # a writer's __init__, parsed when asked
        self._patching_modules: dict[str, ast.Module | None] = {}  # file -> parsed where it may patch a processor

    def shape(self, hit: MethodHit) -> LogitsShape:
        """The shape of ``hit``'s compute_logits, its head call bound to this tree's get_top_tokens."""
        return logits_shape(hit.method.text, hit.method.line, self.head_signature)

    def where(self, hit: MethodHit) -> str:
        return f"{hit.owner.name} ({hit.method.file or self.h.file_of(hit.owner)}:{hit.method.line})"

    # -- status ---------------------------------------------------------------

    def analyze(
        self, key: ClassKey, overlay: Overlay | None = None, _depth: int = 0, contract: Contract | None = None
    ) -> Analysis:
        """``contract``: how the speculators that can hold the drafter call it (top level only)."""
        if _depth == 0:
            try:
                return self._judged(key, overlay, 0, contract)
            except TooDeep as error:
                return Analysis(Status.MISSING_MANUAL, f"{self.h.file_of(key)}: {key.name}: {error}")
        return self._judged(key, overlay, _depth, contract)

    def _judged(
        self, key: ClassKey, overlay: Overlay | None = None, _depth: int = 0, contract: Contract | None = None
    ) -> Analysis:
        analysis = self._analyze(key, overlay, _depth, contract)
        if contract is None or not contract.known or analysis.compute_logits is None:
            return self._by_contract(key, analysis, overlay, contract)
        held = contract.held(signature_params(analysis.compute_logits.method.text))
        if held == contract:
            return self._by_contract(key, analysis, overlay, contract)
        # judged by the speculators that can hold it, and shown with them alone
        analysis = self._by_contract(key, self._analyze(key, overlay, _depth, held), overlay, held)
        analysis.callers = held.records()
        return analysis

    def _by_contract(
        self, key: ClassKey, analysis: Analysis, overlay: Overlay | None, contract: Contract | None
    ) -> Analysis:
        """``analysis`` of the drafter alone, judged by how the speculators that can hold it call it."""
        if contract is None or not contract.known:
            return analysis
        if analysis.status == Status.SUPPORTED:
            analysis.rule = self._contract_rule(key, analysis, contract, overlay) or analysis.rule
            unsure = self._unproven_call(key, analysis, contract, overlay)
            if unsure is not None:
                analysis.consistency, analysis.rule = Consistency.UNPROVEN, CallSiteUnproven.id
                analysis.reason += f"; yet {unsure}"
            return analysis
        uncalled = Uncalled.check(contract)
        if uncalled and analysis.status != Status.NOT_APPLICABLE:
            return Analysis(
                Status.NOT_APPLICABLE,
                uncalled,
                analysis.compute_logits,
                delegates=analysis.delegates,
                uncalled=True,
                rule=Uncalled.id,
            )
        unfollowed = UnfollowedDrafter.check(contract)
        if unfollowed and analysis.status == Status.MISSING_FIXABLE:
            return Analysis(
                Status.MISSING_MANUAL,
                f"{unfollowed}: whether get_top_tokens is called there, and with which arguments, is not known",
                analysis.compute_logits,
                delegates=analysis.delegates,
                rule=UnfollowedDrafter.id,
            )
        if analysis.status == Status.MISSING_FIXABLE and analysis.compute_logits is not None:
            cl = analysis.compute_logits
            params = self.shape(cl).params
            forwarded = self.forwarded(self.h.mro(key), cl, overlay)
            for reach, pair in contract.viable_pairs(params):
                for rule, why, consequence in (
                    (
                        CallTypeError,
                        CallTypeError.check(reach, pair, params, "a mirror of compute_logits"),
                        "a mirror takes the parameters of compute_logits, so that call would raise",
                    ),
                    (
                        CallSiteArguments,
                        CallSiteArguments.check(reach, pair, params, cl.method.text, params, cl.method.line, forwarded),
                        "a mirror would draft with other values than compute_logits gets",
                    ),
                    (
                        CallSiteUnproven,
                        CallSiteUnproven.check(reach, pair, params, cl.method.text, params, forwarded),
                        "a mirror is safe only where both get the same values",
                    ),
                ):
                    if why:
                        return Analysis(
                            Status.MISSING_MANUAL,
                            f"{why}: {consequence}; the call site must pass the same arguments to both methods",
                            cl,
                            delegates=analysis.delegates,
                            rule=rule.id,
                        )
        return analysis

    def _unproven_call(
        self, key: ClassKey, analysis: Analysis, contract: Contract, overlay: Overlay | None
    ) -> str | None:
        """Why a mirror (or equivalent) may still draft other tokens under a caller: it gives the two
        methods arguments only run-time values can compare."""
        cl, gtt = analysis.compute_logits, analysis.get_top_tokens
        if analysis.consistency not in (Consistency.MIRROR, Consistency.EQUIVALENT) or cl is None or gtt is None:
            return None
        cparams = self.shape(cl).params
        gparams = self.called_params(self.h.mro(key), gtt, overlay)
        forwarded = self.forwarded(self.h.mro(key), cl, overlay)
        return next(
            (
                why
                for reach, pair in contract.viable_pairs(cparams)
                if (why := CallSiteUnproven.check(reach, pair, cparams, cl.method.text, gparams, forwarded))
            ),
            None,
        )

    def _contract_rule(
        self, key: ClassKey, analysis: Analysis, contract: Contract, overlay: Overlay | None
    ) -> str | None:
        """The call-contract rule behind a divergent verdict, if one decided it."""
        cl, gtt = analysis.compute_logits, analysis.get_top_tokens
        if analysis.consistency != Consistency.DIVERGENT or cl is None or gtt is None:
            return None
        cparams = self.shape(cl).params
        gparams = self.called_params(self.h.mro(key), gtt, overlay)
        forwarded = self.forwarded(self.h.mro(key), cl, overlay)
        for reach, pair in contract.viable_pairs(cparams):
            if CallTypeError.check(reach, pair, gparams, f"get_top_tokens of {self.where(gtt)}"):
                return CallTypeError.id
            if CallSiteArguments.check(reach, pair, cparams, cl.method.text, gparams, forwarded=forwarded):
                return CallSiteArguments.id
        return None

    def _found_above_undecided(self, mro: Mro, overlay: Overlay | None) -> bool:
        """Both methods are found in a prefix of the order that every alternative order starts with:
        the class itself, then bases of classes that have one base each, decided."""
        for position, item in enumerate(mro.classes):
            if not isinstance(item, ClassKey):
                return False
            prefix = Mro(mro.classes[: position + 1])
            if all(self.h.find(prefix, name, overlay=overlay) for name in ("compute_logits", "get_top_tokens")):
                return True
            if self.h.bases(item)[3] or len(self.h.class_facts(item).bases) > 1:
                return False  # what comes after this class depends on its bases
        return False

    def _analyze(self, key: ClassKey, overlay: Overlay | None, _depth: int, contract: Contract | None) -> Analysis:
        mro = self.h.mro(key)
        if mro.uncreatable:  # a delegate's class (a drafter's own fails its import: ``Scanner.import_failure``)
            return Analysis(Status.MISSING_MANUAL, f"{self.h.uncreatable_reason(mro.uncreatable[0])}: never created")
        if mro.undecided and not self._found_above_undecided(mro, overlay):
            return Analysis(
                Status.MISSING_MANUAL,
                (
                    f"{'; '.join(mro.undecided)}, bound under a condition the tool cannot decide: where "
                    f"compute_logits and get_top_tokens come from in the MRO of {key.name} depends on which"
                ),
            )
        cl = self.h.find(mro, "compute_logits", overlay=overlay)
        gtt = self.h.find(mro, "get_top_tokens", overlay=overlay)
        shadowed = self._behind_unfollowed(key, mro, cl, gtt)
        if shadowed is not None:
            return shadowed
        decorated = self._class_decorator(mro, cl, gtt)
        if decorated and gtt is not None and gtt.method.how != "none":
            analysis = self._analyze_found(key, mro, cl, gtt, overlay, _depth, contract)
            if analysis.consistency in (Consistency.MIRROR, Consistency.EQUIVALENT):
                analysis.consistency = Consistency.UNPROVEN
                analysis.reason += f"; yet {decorated} may set or wrap either method; run `mtp-audit verify`"
            return analysis
        if decorated and cl is not None:
            return Analysis(
                Status.MISSING_MANUAL,
                f"compute_logits of {cl.owner.name}: {decorated} may set or wrap it, and a mirror written into "
                "the class body would not follow it",
                cl,
            )
        return self._analyze_found(key, mro, cl, gtt, overlay, _depth, contract)

    def _class_decorator(self, mro: Mro, cl: MethodHit | None, gtt: MethodHit | None) -> str:
        """``the class decorator @NAME (line N) of C (FILE)``: the first class, from the drafter to the
        one whose compute_logits or get_top_tokens Python finds, decorated by what may set or wrap
        them (``ClassFacts.decorated_by``); else an ``__init__`` of the MRO (or a method it runs) that sets
        either on the instance, which then hides the class's method; "" where none is."""
        found = [hit.index for hit in (cl, gtt) if hit is not None]
        for item in mro.classes[: max(found) + 1] if found else []:
            if isinstance(item, ClassKey) and (by := self.h.class_facts(item).decorated_by):
                return f"the class decorator {by} of {item.name} ({self.h.file_of(item)})"
        for item in (c for c in mro.classes if isinstance(c, ClassKey)) if found else ():
            read = self.h.init_values(mro, item)
            for name in ("compute_logits", "get_top_tokens"):
                for writer, value in read.values.get(name, [])[:1]:  # an instance attribute hides the method
                    return f"self.{name}, set on the instance ({self.h.file_of(writer)}:{value.line}),"
        return ""

    def _analyze_found(
        self,
        key: ClassKey,
        mro: Mro,
        cl: MethodHit | None,
        gtt: MethodHit | None,
        overlay: Overlay | None,
        _depth: int,
        contract: Contract | None,
    ) -> Analysis:
        unresolved = f"; bases not followed: {', '.join(mro.unresolved)}" if mro.unresolved else ""
        if gtt is not None and gtt.method.how == "none" and cl is not None:
            return Analysis(
                Status.MISSING_MANUAL,
                (
                    f"{gtt.method.where} in {gtt.owner.name}: hasattr() finds get_top_tokens, calling it fails; "
                    "a method cannot be added under that binding (remove it first)"
                ),
                cl,
            )
        if gtt is not None and gtt.method.how != "none":
            consistency, why = self.consistency(key, mro, cl, gtt, overlay, _depth, contract=contract)
            origin = "defined" if gtt.owner == key else f"inherited from {gtt.owner.name}"
            delegates = self._delegate_chain(mro, cl, overlay, _depth) if cl else []
            uncalled = f"; {contract.unreached_reason()}" if contract is not None and contract.uncalled else ""
            return Analysis(
                Status.SUPPORTED, f"get_top_tokens {origin}; {why}{uncalled}", cl, gtt, delegates, consistency
            )
        if cl is None and mro.unresolved:  # a base the tool cannot follow may define it: not known to have none
            return Analysis(
                Status.MISSING_MANUAL,
                f"no compute_logits found in the MRO of {key.name}, but {unresolved.removeprefix('; ')}, "
                "where it may be defined",
            )
        if cl is None:
            placeholder = self.h.class_facts(key).init_raises
            note = f"; a placeholder: its {placeholder}" if placeholder else ""
            return Analysis(Status.NOT_APPLICABLE, f"no compute_logits in the MRO of {key.name}{note}")
        inherited = "" if cl.owner == key else f" (inherited from {self.where(cl)})"
        if cl.method.how == "async":
            return Analysis(
                Status.MISSING_MANUAL,
                (
                    f"compute_logits of {cl.owner.name} is {cl.method.where}: a coroutine, and the speculators call "
                    f"get_top_tokens synchronously; no synchronous mirror of it{inherited}"
                ),
                cl,
            )
        if cl.method.how in ("conditional", "outside"):
            return Analysis(
                Status.MISSING_MANUAL,
                (
                    f"compute_logits of {cl.owner.name} is {cl.method.where}; a mirror written into the class body "
                    f"would not follow it{inherited}"
                ),
                cl,
            )
        shape = self.shape(cl)
        if shape.kind == LogitsKind.STUB:
            return Analysis(Status.NOT_APPLICABLE, shape.reason + inherited, cl, rule=shape.rule_id)
        if shape.kind == LogitsKind.MANUAL:
            return Analysis(Status.MISSING_MANUAL, shape.reason + inherited, cl, rule=shape.rule_id)
        if shape.kind == LogitsKind.HEAD:
            target = self._placement(key, cl)
            deleted = self.h.class_facts(target).methods_on(self.h.platform).get("get_top_tokens")
            if deleted is not None and deleted.how == "deleted":
                return Analysis(
                    Status.MISSING_MANUAL,
                    (
                        f"the class body of {target.name} has {deleted.where}: a get_top_tokens written into it "
                        "before that line would be deleted too"
                    ),
                    cl,
                )
            processor = self.processor_difference(mro)
            if processor is not None:
                return Analysis(Status.MISSING_MANUAL, f"{shape.reason}{inherited}, but {processor}", cl)
            elsewhere = self._own_elsewhere(target, cl)
            if elsewhere is not None:
                return Analysis(
                    Status.MISSING_MANUAL,
                    (
                        f"{target.name} defines get_top_tokens on {elsewhere}: a mirror written into its class "
                        "body would replace it there"
                    ),
                    cl,
                )
            return Analysis(Status.MISSING_FIXABLE, shape.reason + inherited, cl, insertions=[Insertion(target, cl)])
        return self._delegating(key, mro, cl, shape, overlay, _depth, inherited)

    def _own_elsewhere(self, target: ClassKey, cl: MethodHit) -> str | None:
        """The platforms (with the line) where ``target``'s body defines get_top_tokens before the point a
        mirror goes (right after compute_logits when ``target`` defines it; anywhere else), which the mirror
        would rebind: a class-body ``if`` on the platform (``if current_platform.is_rocm():``)."""
        before = cl.method.line if cl.owner == target else None
        lines = {
            platform: method.line
            for platform, methods in self.h.class_facts(target).methods_by_platform.items()
            if (method := methods.get("get_top_tokens")) is not None and method.how != "deleted"
            if before is None or method.line < before
        }
        if not lines:
            return None
        return ", ".join(f"{platform} (line {line})" for platform, line in lines.items())

    def _behind_unfollowed(
        self, key: ClassKey, mro: Mro, cl: MethodHit | None, gtt: MethodHit | None
    ) -> Analysis | None:
        """A base the tool cannot follow that Python may search before the class supplying compute_logits or
        get_top_tokens may define either (``class X(make_head(), Base)``): the method in use is not known, so
        no mirror is safe to write and no consistency can be decided. None: no such base."""
        ahead: dict[str, list[str]] = {}  # note on the base -> what it may come before
        for name, hit in (("compute_logits", cl), ("get_top_tokens", gtt)):
            for note in self.h.unfollowed_ahead(mro, hit.owner) if hit is not None else []:
                ahead.setdefault(note, []).append(f"{name} of {hit.owner.name}")
        if not ahead:
            return None
        why = "; ".join(
            f"{note}, and Python may search it before {' and '.join(suppliers)}: it may define its own"
            for note, suppliers in ahead.items()
        )
        if gtt is not None:
            origin = "defined" if gtt.owner == key else f"inherited from {gtt.owner.name}"
            return Analysis(Status.SUPPORTED, f"get_top_tokens {origin}; {why}", cl, gtt, [], Consistency.UNPROVEN)
        return Analysis(Status.MISSING_MANUAL, f"{why}; a mirror may not select the tokens of the one in use", cl)

    def _placement(self, key: ClassKey, cl: MethodHit) -> ClassKey:
        """The drafter class itself when the mirror means the same there (``FreeNames.movable``: in the
        module of compute_logits, the module's names are the same ones), else the owner of compute_logits."""
        if cl.owner == key or not free_names(cl.method.text).movable(key.module == cl.owner.module):
            return cl.owner
        return key

    def super_start(self, mro: Mro, hit: MethodHit, named: str | None, line: int | None) -> tuple[int | None, str]:
        """Where, in ``mro`` (the instance's class's), a ``super()`` call in ``hit``'s method starts its lookup:
        after the class the method is written in, or, for ``super(Cls, self)``, after ``Cls`` as the method's
        module binds it when it runs (per drafter: a subclass's MRO may put other classes after ``Cls``). None,
        with why, where ``Cls`` is not one class of the MRO (``super()`` raises TypeError) or comes before the
        method's own class (the lookup may reach that method again)."""
        if named is None or named == "__class__":
            return hit.index + 1, ""
        at = f" (line {line})" if line is not None else ""
        call = f"`super({named}, self)`{at} in {self.where(hit)}"
        found = resolve_expression(self.h.index, hit.owner.module, named, self.h.platform)
        position = mro.classes.index(found[0]) if len(found) == 1 and found[0] in mro.classes else None
        if position is None:
            return None, f"{call}: {named} is not one class of the MRO of {mro.classes[0].name}"
        if position < hit.index:
            return None, f"{call} starts its lookup before {hit.owner.name}, where it may reach itself"
        return position + 1, ""

    def super_reached(self, mro: Mro, cl: MethodHit, shape: LogitsShape) -> tuple[MethodHit | None, str]:
        """The compute_logits that ``super(...).compute_logits`` in ``cl`` reaches in ``mro``, or None and why."""
        start, why = self.super_start(mro, cl, shape.super_class, shape.line)
        if start is None:
            return None, why
        nxt = self.h.find(mro, "compute_logits", start=start)
        if nxt is None:
            called = f"super({shape.super_class}, self)" if shape.super_class else "super()"
            return None, f"{called}.compute_logits in {self.where(cl)} reaches no compute_logits"
        return nxt, ""

    def _delegate_target(self, mro: Mro, cl: MethodHit, shape: LogitsShape) -> tuple[ClassKey | None, str]:
        if shape.kind == LogitsKind.SUPER:
            nxt, why = self.super_reached(mro, cl, shape)
            return (nxt.owner if nxt is not None else None), why
        attr = shape.delegate_attr
        annotated = next(
            (item for item in mro.classes if isinstance(item, ClassKey) and self._binds_instance(mro, item, attr)),
            None,
        )
        if annotated is not None and not self.h.init_values(mro, annotated).sets(attr):  # ``model: "Inner"``
            annotation = self.h.class_facts(annotated).annotations[attr].strip("'\"")
            found = resolve_expression(self.h.index, annotated.module, annotation, self.h.platform)
            classes = [item for item in found if isinstance(item, ClassKey)]
            if len(classes) != 1 or len(found) != 1:
                return None, f"cannot tell the class of self.{attr} ({annotation} in {annotated.name})"
            return classes[0], ""
        owner, held, unknown = self.assigned_classes(mro, attr)
        if owner is None:
            return None, f"cannot tell the class of self.{attr} (no assignment in __init__)"
        if unknown is not None:
            return None, f"cannot tell the class of self.{attr} ({unknown} in {owner})"
        classes = [item for item in held if isinstance(item, ClassKey)]
        if len(classes) != len(held):
            outside = next(item for item in held if not isinstance(item, ClassKey))
            return None, f"cannot tell the class of self.{attr} ({outside.name} in {owner})"
        if len(classes) != 1:
            names = ", ".join(c.name for c in classes)
            return None, f"self.{attr} may be one of several classes ({names})"
        return classes[0], ""

    def assigned_classes(self, mro: Mro, attr: str) -> tuple[str | None, list[ClassKey | External], str | None]:
        """What ``self.<attr>`` holds on an instance of this MRO, read off ``__init__`` as Python runs it
        (``Hierarchy.init_values``: a method it runs on self is the one the MRO finds): the ``__init__`` methods
        read (``A.__init__``, the first of the MRO to assign it; None: none does), the classes (in the tree or
        outside it) it may be, and, where one value's class cannot be told, that value and its statement
        (``file:line``). Where that ``__init__`` sets it only under a block, what the next such ``__init__`` of the
        MRO (its ``super().__init__``) leaves may stay too (``A.__init__ and B.__init__``), and so on."""
        read, values = self.assigned_values(mro, attr)
        return (read, *self._held(values))

    def _held(self, values: list[AssignedValue]) -> tuple[list[ClassKey | External], str | None]:
        """The classes ``values`` (``assigned_values``) may be, and the first value whose class cannot be told."""
        held: list[ClassKey | External] = []
        for writer, value, made in values:
            if made is None:
                return held, f"{value.code} at {self.h.file_of(writer)}:{value.line}"
            held += [item for item in made if item not in held]
        return held, None

    def assigned_values(self, mro: Mro, attr: str) -> tuple[str | None, list[AssignedValue]]:
        """The ``__init__`` methods ``assigned_classes`` reads, and each value they may leave in ``self.<attr>``,
        with its writer and the classes it may be (None: cannot be told)."""
        writers = [
            item for item in mro.classes if isinstance(item, ClassKey) and self.h.init_values(mro, item).sets(attr)
        ]
        if not writers:
            return None, []
        values = []
        read = ""
        for owner in writers:
            read += f"{' and ' if read else ''}{owner.name}.__init__"
            read_init = self.h.init_values(mro, owner)
            for writer, value in read_init.of(attr):
                made = self._made_by(mro, writer.module, value.callee) if value.callee else None
                values.append((writer, value, made))
                if made is None:
                    return read, values
            if attr in read_init.replaced:
                break
        return read, values

    def _made_by(self, mro: Mro, module: str, callee: str, depth: int = 0) -> list[ClassKey | External] | None:
        """The classes a call of ``callee`` (as ``module`` reads it) may give: a class; a class attribute the MRO
        binds to one (``self.processor_cls(...)``); a module-level factory's ``return Cls(...)``
        (``ModuleFacts.factories``). None where that cannot be told."""
        if depth > 8:
            return None
        if callee.startswith("self."):
            attribute = callee.removeprefix("self.")
            binder = next(
                (item for item in mro.classes if isinstance(item, ClassKey) and self._binds(mro, item, attribute)),
                None,
            )
            value = self.h.class_facts(binder).class_attrs.get(attribute, "") if binder is not None else ""
            return self._made_by(mro, binder.module, value, depth + 1) if binder is not None and value else None
        found = resolve_expression(self.h.index, module, callee, self.h.platform)
        if found and all(isinstance(item, (ClassKey, External)) for item in found):
            return found  # type: ignore[return-value]
        factory = self._factory(module, callee, depth)
        if factory is None:
            return None
        made: list[ClassKey | External] = []
        for product in factory[1]:
            classes = self._made_by(mro, factory[0], product, depth + 1)
            if classes is None:
                return None
            made += [item for item in classes if item not in made]
        return made

    def _binds_instance(self, mro: Mro, cls: ClassKey, attribute: str) -> bool:
        """Whether ``cls``'s ``__init__`` assigns the attribute (for this MRO's instance) or its body annotates it."""
        return self.h.init_values(mro, cls).sets(attribute) or attribute in self.h.class_facts(cls).annotations

    def _binds(self, mro: Mro, cls: ClassKey, attribute: str) -> bool:
        facts = self.h.class_facts(cls)
        return (
            attribute in facts.class_attrs
            or attribute in facts.defined_methods
            or self.h.init_values(mro, cls).sets(attribute)
        )

    def _factory(self, module: str, name: str, depth: int) -> tuple[str, list[str]] | None:
        """The module defining the factory ``name`` (followed through imports) and what it returns."""
        facts = self.h.index.facts(module)
        if facts is None or "." in name or depth > 8:
            return None
        bound = facts.bindings.get(self.h.platform, {}).get(name)
        if bound is None:
            return (module, facts.factories[name]) if name in facts.factories else None
        if len(bound) == 1 and bound[0].kind == "import" and not bound[0].when:
            return self._factory(bound[0].a, bound[0].b, depth + 1)
        return None

    def _delegating(
        self,
        key: ClassKey,
        mro: Mro,
        cl: MethodHit,
        shape: LogitsShape,
        overlay: Overlay | None,
        depth: int,
        inherited: str,
    ) -> Analysis:
        target, why = self._delegate_target(mro, cl, shape)
        if target is None:
            return Analysis(Status.MISSING_MANUAL, why + inherited, cl)
        if depth > 8:
            return Analysis(Status.MISSING_MANUAL, "delegation chain too deep", cl)
        if shape.kind == LogitsKind.SUPER:
            inner = self.analyze_from(key, mro, cl, overlay, depth + 1)
        else:
            inner = self.analyze(target, overlay, depth + 1)
        called = f"super({shape.super_class}, self)" if shape.super_class else "super()"
        via = f"{target.name}" if shape.kind == LogitsKind.DELEGATE else f"{called} ({target.name})"
        if inner.status == Status.MISSING_MANUAL:
            return Analysis(
                Status.MISSING_MANUAL,
                f"delegate {via}: {inner.reason}",
                cl,
                delegates=[target, *inner.delegates],
                rule=inner.rule,
            )
        if inner.status == Status.NOT_APPLICABLE:
            return Analysis(
                Status.MISSING_MANUAL,
                f"delegate {via} has no usable compute_logits: {inner.reason}",
                cl,
                delegates=[target, *inner.delegates],
                rule=inner.rule,
            )
        if inner.status == Status.SUPPORTED and inner.consistency in (Consistency.DIVERGENT, Consistency.UNPROVEN):
            article = "an" if inner.consistency == Consistency.UNPROVEN else "a"
            return Analysis(
                Status.MISSING_MANUAL,
                f"delegate {via} has {article} {inner.consistency.value} get_top_tokens: {inner.reason}",
                cl,
                delegates=[target, *inner.delegates],
            )
        insertions = [Insertion(cl.owner, cl), *inner.insertions]
        return Analysis(
            Status.MISSING_FIXABLE,
            f"{shape.reason}{inherited}; {via}: {inner.reason}",
            cl,
            delegates=[target, *inner.delegates],
            insertions=insertions,
        )

    def analyze_from(self, key: ClassKey, mro: Mro, cl: MethodHit, overlay: Overlay | None, depth: int) -> Analysis:
        """Like analyze, for the methods that ``super(...)`` in ``cl`` reaches in key's MRO: both are looked up
        from where its lookup starts (a class there may define get_top_tokens and not compute_logits)."""
        start, _ = self.super_start(mro, cl, self.shape(cl).super_class, None)
        assert start is not None  # _delegate_target found what it reaches
        cl = self.h.find(mro, "compute_logits", start=start, overlay=overlay)
        gtt = self.h.find(mro, "get_top_tokens", start=start, overlay=overlay)
        assert cl is not None
        if gtt is not None:
            consistency, why = self.consistency(key, mro, cl, gtt, overlay, depth)
            return Analysis(Status.SUPPORTED, why, cl, gtt, consistency=consistency)
        shape = self.shape(cl)
        if shape.kind in (LogitsKind.STUB, LogitsKind.MANUAL):
            status = Status.NOT_APPLICABLE if shape.kind == LogitsKind.STUB else Status.MISSING_MANUAL
            return Analysis(status, f"{shape.reason} in {self.where(cl)}", cl, rule=shape.rule_id)
        if shape.kind == LogitsKind.HEAD:
            processor = self.processor_difference(mro)
            if processor is not None:
                return Analysis(Status.MISSING_MANUAL, f"{shape.reason} in {self.where(cl)}, but {processor}", cl)
            return Analysis(
                Status.MISSING_FIXABLE, f"{shape.reason} in {self.where(cl)}", cl, insertions=[Insertion(cl.owner, cl)]
            )
        return self._delegating(key, mro, cl, shape, overlay, depth, f" (in {self.where(cl)})")

    def forwarded(
        self, mro: Mro, cl: MethodHit, overlay: Overlay | None = None, depth: int = 0
    ) -> frozenset[str] | None:
        """What the code a compute_logits passes its ``**kwargs`` on to reads: the parameters its
        delegate's (or super()'s) compute_logits reads, and, in turn, what that one's ``**kwargs`` go
        to. Empty when it takes no ``**kwargs`` or never reads them; None when it looks into them
        itself or where they go is not known (then any keyword may be read)."""
        shape = self.shape(cl)
        kwargs = next((p.name for p in shape.params if p.kind == ParamKind.STARSTAR), None)
        if kwargs is None or not reads(cl.method.text, kwargs):
            return frozenset()
        if shape.kind not in (LogitsKind.DELEGATE, LogitsKind.SUPER) or not only_unpacked(cl.method.text, kwargs):
            return None
        target, _ = self._delegate_target(mro, cl, shape)
        if target is None or depth > 8:
            return None
        inner_mro = mro if shape.kind == LogitsKind.SUPER else self.h.mro(target)
        inner = self.h.find(inner_mro, "compute_logits", start=inner_mro.classes.index(target), overlay=overlay)
        if inner is None:
            return None
        further = self.forwarded(inner_mro, inner, overlay, depth + 1)
        own = {
            p.name
            for p in self.shape(inner).params
            if p.kind in (ParamKind.POS, ParamKind.KWONLY) and reads(inner.method.text, p.name)
        }
        return None if further is None else further | own

    def _delegate_chain(self, mro: Mro, cl: MethodHit, overlay: Overlay | None, depth: int) -> list[ClassKey]:
        shape = self.shape(cl)
        if shape.kind != LogitsKind.DELEGATE or depth > 8:
            return []
        target, _ = self._delegate_target(mro, cl, shape)
        if target is None:
            return []
        inner_mro = self.h.mro(target)
        inner_cl = self.h.find(inner_mro, "compute_logits", overlay=overlay)
        return [target, *(self._delegate_chain(inner_mro, inner_cl, overlay, depth + 1) if inner_cl else [])]

    # -- consistency ------------------------------------------------------------

    def consistency(
        self,
        key: ClassKey,
        mro: Mro,
        cl: MethodHit | None,
        gtt: MethodHit,
        overlay: Overlay | None,
        depth: int = 0,
        entry: MethodHit | None = None,
        contract: Contract | None = None,
    ) -> tuple[Consistency, str]:
        """``entry``: the get_top_tokens callers reach, when ``gtt`` is what its super() reaches.
        ``contract``: the real call forms; without it, every parameter of compute_logits counts."""
        consistency, why = self._consistency(key, mro, cl, gtt, overlay, depth, entry, contract)
        if consistency not in (Consistency.MIRROR, Consistency.EQUIVALENT) or cl is None:
            return consistency, why
        if self.shape(cl).kind != LogitsKind.HEAD:
            return consistency, why  # a delegate's processor is judged with the delegate
        processor = self.processor_difference(mro)
        if processor is None:
            return consistency, why
        return Consistency.UNPROVEN, f"{why}, but {processor}; run `mtp-audit verify`"

    def _consistency(
        self,
        key: ClassKey,
        mro: Mro,
        cl: MethodHit | None,
        gtt: MethodHit,
        overlay: Overlay | None,
        depth: int,
        entry: MethodHit | None,
        contract: Contract | None,
    ) -> tuple[Consistency, str]:
        if gtt.method.how == "async":
            return Consistency.DIVERGENT, (
                f"get_top_tokens of {self.where(gtt)} is {gtt.method.where}: a call returns a coroutine, not token ids"
            )
        if gtt.method.how == "logits":
            return Consistency.DIVERGENT, (
                f"get_top_tokens of {gtt.owner.name} is {gtt.method.where}: a call returns the logits, not token ids"
            )
        if gtt.method.how in ("conditional", "outside"):
            return Consistency.UNPROVEN, (
                f"get_top_tokens of {gtt.owner.name} is {gtt.method.where}; run `mtp-audit verify`"
            )
        gshape = top_tokens_shape(gtt.method.text, gtt.method.line)
        if gshape.kind == TopTokensKind.DECORATED:
            return self._decorated(gtt, gshape)
        if cl is None:
            return Consistency.UNPROVEN, "no compute_logits to compare with"
        cshape = self.shape(cl)
        by_calls = contract is not None and contract.known and entry is None
        # Named first, before any signature difference: it decides the tokens. (A super() call or the
        # mixin is judged below against what it reaches.)
        statement = (
            None
            if gshape.kind in (TopTokensKind.SUPER, TopTokensKind.LOCAL_ARGMAX_MIXIN)
            else self._statement_difference(cl, cshape, gtt)
        )
        if by_calls:
            assert contract is not None
            forwarded = self.forwarded(mro, cl, overlay, depth)
            called = self.called_params(mro, gtt, overlay)
            for reach, pair in contract.viable_pairs(cshape.params):
                why = CallTypeError.check(
                    reach, pair, called, f"get_top_tokens of {self.where(gtt)}"
                ) or CallSiteArguments.check(
                    reach, pair, cshape.params, cl.method.text, called, cl.method.line, forwarded
                )
                if why:
                    return Consistency.DIVERGENT, f"{statement[1]}; also, {why}" if statement else why
            missing: list[str] = []
        else:
            missing = [] if entry else _unaccepted(cshape, gshape)
            renamed = {name: other for name in missing if (other := counterpart(name, cshape.params, gshape.params))}
            mirrored = self.mirror.fingerprint(cl.method.text) if renamed and len(renamed) == len(missing) else None
            back = _renamed_back(gtt.method.text, renamed) if mirrored is not None else None
            if back is not None and fingerprint(back) == mirrored:
                # the mirror but for parameters renamed in place: how it is called decides
                pairs = ", ".join(f"{other} for {name}" for name, other in renamed.items())
                return Consistency.UNPROVEN, (
                    f"get_top_tokens of {self.where(gtt)} takes {pairs} of compute_logits of {self.where(cl)}, in "
                    "the same place: a call passing it by position reaches it, one passing it by keyword raises "
                    "TypeError; run `mtp-audit verify`"
                )
        if missing:
            read = first_read(cl.method.text, missing[0], cl.method.line)
            why = (
                f"compute_logits of {self.where(cl)} takes {', '.join(missing)}"
                f"{f', which it reads {read}' if read else ''}; "
                f"get_top_tokens of {self.where(gtt)} does not accept it"
            )
            return Consistency.DIVERGENT, f"{statement[1]}; also, {why}" if statement else why
        mirrored = self.mirror.fingerprint(cl.method.text)
        same = mirrored is not None and mirrored == fingerprint(gtt.method.text)
        elsewhere = self._read_elsewhere(cl, gtt) if same else None
        if elsewhere is not None:
            return Consistency.UNPROVEN, (
                f"get_top_tokens of {self.where(gtt)} is written as the mirror of compute_logits of "
                f"{self.where(cl)}, but {elsewhere}; run `mtp-audit verify`"
            )
        if not same and by_calls and mirrored is not None and cshape.kind == LogitsKind.HEAD:
            assert contract is not None
            unused = [
                n
                for n in _unaccepted(cshape, gshape)
                if not reads(cl.method.text, n) and n not in passed_to_top_tokens(contract, cshape.params)
            ]
            without = self.mirror.fingerprint_without(cl.method.text, tuple(unused)) if unused else None
            if without is not None and without == fingerprint(gtt.method.text) and not self._read_elsewhere(cl, gtt):
                return Consistency.EQUIVALENT, (
                    f"the mirror of compute_logits of {self.where(cl)} but for {', '.join(unused)}, which "
                    "compute_logits does not read and no caller passes"
                )
        if same and cshape.kind == LogitsKind.HEAD:
            return Consistency.MIRROR, f"mirror of compute_logits of {self.where(cl)}"
        if same and cshape.kind in (LogitsKind.DELEGATE, LogitsKind.SUPER):
            return self._delegated_consistency(key, mro, cl, cshape, overlay, depth)
        if cshape.kind == LogitsKind.SUPER and gtt.owner == cl.owner:
            inlined = self._super_inlined(mro, cl)
            if (
                inlined is not None
                and self.mirror.fingerprint(inlined[0]) == fingerprint(gtt.method.text)
                and not self._read_elsewhere(inlined[1], gtt)
            ):
                return Consistency.MIRROR, (
                    f"mirror of compute_logits of {self.where(cl)} with the "
                    f"super().compute_logits of {self.where(inlined[1])} inlined"
                )
        if gshape.kind == TopTokensKind.SUPER:
            start, unknown = self.super_start(mro, gtt, gshape.super_class, None)
            if start is None:
                return Consistency.UNPROVEN, f"get_top_tokens calls {unknown}; run `mtp-audit verify`"
            nxt = self.h.find(mro, "get_top_tokens", start=start, overlay=overlay)
            if nxt is None:
                called = f"super({gshape.super_class}, self)" if gshape.super_class else "super()"
                return Consistency.DIVERGENT, f"{called}.get_top_tokens in {self.where(gtt)} reaches nothing"
            return self.consistency(key, mro, cl, nxt, overlay, depth, entry=entry or gtt)
        if gshape.kind == TopTokensKind.LOCAL_ARGMAX_MIXIN:
            return self._against_mixin(key, mro, cl, cshape, gtt, gshape)
        if cshape.kind == LogitsKind.STUB:
            return Consistency.UNPROVEN, f"compute_logits of {self.where(cl)} is a stub"
        optional = asserted_optional(cl, gtt)
        also = f"; also, {optional}" if optional else ""
        if statement is not None:
            return statement[0], statement[1] + also
        if optional:
            return Consistency.DIVERGENT, optional
        if (
            cshape.kind == LogitsKind.HEAD
            and cshape.other_hidden
            and bool(gshape.params)
            and returns_plain_head(gtt.method.text, gshape.params[0].name)
        ):
            return Consistency.DIVERGENT, (
                f"compute_logits of {self.where(cl)} transforms the hidden states before the head "
                f"({cshape.hidden or ARMS_DIFFER}); get_top_tokens of {self.where(gtt)} does not"
            )
        if cshape.kind == LogitsKind.MANUAL:  # name what compute_logits does that no mirror rule covers
            return Consistency.UNPROVEN, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} is "
                "written differently; run `mtp-audit verify`"
            )
        return Consistency.UNPROVEN, (
            f"get_top_tokens of {self.where(gtt)} is written differently from compute_logits of "
            f"{self.where(cl)}; run `mtp-audit verify`"
        )

    def _read_elsewhere(self, cl: MethodHit, gtt: MethodHit) -> str | None:
        """Why two methods of the same text may still read other things, or None: a method's body reads
        the globals of the module it is defined in, its defaults are evaluated in its class body as its
        ``def`` runs, and a private name, ``__class__`` or ``super()`` belong to its class (``free_names``)."""
        if cl.owner == gtt.owner:
            return self._rebound_between(cl, gtt)
        for hit in (cl, gtt):
            names = free_names(hit.method.text)
            if names.anchored is not None:
                return (
                    f"{hit.method.name} of {hit.owner.name} reads {names.anchored}, and the two are defined in "
                    "different classes"
                )
            default = next((n for n in names.defaults if n not in EVERYWHERE), None)
            if default is not None:
                return (
                    f"a default of {hit.method.name} of {hit.owner.name} reads {default}, which each def evaluates "
                    "in the body of its own class, and the two are defined in different classes"
                )
        if cl.owner.module == gtt.owner.module:
            return None
        read = set(free_names(cl.method.text).run) | set(free_names(gtt.method.text).run)
        for name in sorted(read - EVERYWHERE):
            if not self._binds_alike(name, cl.owner.module, gtt.owner.module):
                return (
                    f"compute_logits reads {name} in module {cl.owner.module} and get_top_tokens in "
                    f"{gtt.owner.module}, and the tool cannot show that the two bind it to the same thing"
                )
        return None

    def _rebound_between(self, cl: MethodHit, gtt: MethodHit) -> str | None:
        """A name the defaults read that the class body binds between the two defs (``ClassFacts.default_rebinds``)."""
        first, last = sorted((cl.method.line, gtt.method.line))
        for name, lines in sorted(self.h.class_facts(cl.owner).default_rebinds.items()):
            between = [line for line in lines if first < line < last]
            if between:
                return (
                    f"the body of {cl.owner.name} binds {name} again between the two defs (line {between[0]}), "
                    f"so a default that reads {name} differs"
                )
        return None

    def _binds_alike(self, name: str, module: str, other: str) -> bool:
        """``name`` resolves, in both modules, to one and the same class, module or outside object."""
        found = [resolve_name(self.h.index, m, name, self.h.platform) for m in (module, other)]
        return len(found[0]) == 1 and found[0] == found[1] and not isinstance(found[0][0], Missing)

    def processor_difference(self, mro: Mro) -> str | None:
        """Why ``self.logits_processor(...)`` and ``self.logits_processor.get_top_tokens(...)`` may select
        different tokens for a class of this MRO, which the mirror rule takes them not to: the processor
        ``__init__`` assigns is of a class that overrides what vLLM's LogitsProcessor runs for one of them
        and not the other, or get_top_tokens itself, or the class has a method of that name. None where
        they are vLLM's pair (or a subclass overriding only what both run) for every class ``__init__`` may
        assign (``assigned_classes``); a value whose class cannot be told is named, and so is an assignment of it
        the reading does not reach (a helper it does not follow must not pass for vLLM's processor)."""
        owner, values = self.assigned_values(mro, "logits_processor")
        held, unknown = self._held(values)
        if owner is not None:  # an instance attribute hides a method of the class
            where = f"assigned in {owner}"
            if unknown is not None:
                return (
                    f"the class of self.logits_processor cannot be told ({unknown}, {where}), so whether its call "
                    "and its get_top_tokens select the same tokens is not known"
                )
            for found in held:
                if isinstance(found, External) and not self._is_vllm_processor(found):
                    return (
                        f"self.logits_processor ({where}) is a {found.name}, a class outside the tree: whether its "
                        "call and its get_top_tokens select the same tokens is not known"
                    )
                why = self._processor_overrides(found) if isinstance(found, ClassKey) else None
                if why is not None:
                    return f"self.logits_processor ({where}) is a {why}"
            return (
                self._method_set_on_processor(mro)
                or self._built_to_raise(mro, values)
                or self._built_with_flag(mro, values)
            )
        for item in (item for item in mro.classes if isinstance(item, ClassKey)):
            line = self.h.class_facts(item).defined_methods.get("logits_processor")
            if line is not None:
                return (
                    f"logits_processor is a method of {item.name} ({self.h.file_of(item)}:{line}), so "
                    "self.logits_processor.get_top_tokens raises AttributeError"
                )
        unread = self._unread_writer(mro, "logits_processor")
        if unread is None:
            return None  # nothing in the MRO sets it: the call fails as the mirror would
        return (
            f"the class of self.logits_processor cannot be told: {unread} sets it, but reading {self._inits(mro)} "
            "and the methods run on self from there reaches no assignment of it (a class-body binding, a helper "
            "reached through super() or a base class, an alias of one, or one whose result is used other than "
            "stored on self, is not followed), so it is not known to be vLLM's LogitsProcessor"
        )

    def _built_with_flag(self, mro: Mro, values: list[AssignedValue]) -> str | None:
        """Where vLLM's LogitsProcessor held in ``self.logits_processor`` is built with an argument for a parameter
        that picks a branch of its call alone, or of its get_top_tokens alone (``ProcessorFlag``), other than its
        default (or with unpacked arguments that may pass it): what that branch does the other path does not.
        So too where what such an argument is cannot be read: the processor made by a factory function, or a
        subclass of it with an ``__init__`` of its own; or where the drafter's ``__init__`` sets the flag's
        attribute on the processor after building it. ``values``: what ``assigned_values`` read for it."""
        flags = self.processor_paths.flags if self.processor_paths is not None else ()
        if not flags:
            return None
        params = ", ".join(dict.fromkeys(flag.param for flag in flags))
        verb = "tests" if all(flag.how == "tests" for flag in flags) else "reads"
        for writer, value, made in values:
            where = f"{self.h.file_of(writer)}:{value.line}"
            for item in made or ():
                unread = self._flags_unread(mro, writer, value, item)
                if unread is not None:
                    return (
                        f"its LogitsProcessor ({where}) {unread}, so whether it passes {params}, which only one of "
                        f"the processor's call and get_top_tokens {verb}, is not known: they may select different "
                        "tokens"
                    )
                if not (self._is_vllm_processor(item) or self._inherits_processor_init(item)):
                    continue
                if value.arguments is None:  # a callee not named like a processor (an alias of the class)
                    return (
                        f"its LogitsProcessor ({where}) is built by {value.callee}(...), whose arguments are not read, "
                        f"so whether it passes {params}, which only one of the processor's call and get_top_tokens "
                        f"{verb}, is not known: they may select different tokens"
                    )
                for flag in flags:
                    passed = _argument_for(value.arguments, flag.param, flag.position)
                    if passed is None or passed == flag.default or _same_literal(passed, flag.default):
                        continue
                    if flag.fallback is not None and self._same_value(
                        writer, value, passed, _argument_for(value.arguments, *flag.fallback)
                    ):
                        continue  # the value the attribute falls back to: as if not passed
                    given = (
                        f"unpacked arguments ({passed}) that may pass {flag.param}"
                        if passed.startswith("*")
                        else f"{flag.param}={passed}"
                    )
                    return (
                        f"its LogitsProcessor is built with {given} ({where}), which only the processor's "
                        f"{flag.path} {flag.how} (self.{flag.attr} in {flag.test}): its call and its get_top_tokens "
                        "may select different tokens"
                    )
        return self._flag_set_after(mro, flags)

    def _same_value(self, writer: ClassKey, built: Assigned, first: str, second: str | None) -> bool:
        """Whether two arguments of the call ``built`` (in ``writer.__init__``) are the same value: the same code,
        or ``self.X`` and the dotted name ``E`` where the statements of ``writer.__init__``'s own body, read off
        its file, assign ``self.X = E`` and, between that and the call, nothing may change either (no store to
        ``self.X`` or to ``E``'s first name, no method run on self, no ``super()`` or ``__init__`` call, no call
        that is handed ``self``): ``self.unpadded_vocab_size = config.vocab_size``, then
        ``LogitsProcessor(self.unpadded_vocab_size, config.vocab_size)``."""
        if second is None or first.startswith("*") or second.startswith("*"):
            return False
        if " ".join(first.split()) == " ".join(second.split()):
            return True
        body = self._init_body(writer)
        return body is not None and any(
            _holds_as_assigned(body, attr, other, built.line)
            for code, other in ((first, second), (second, first))
            if (attr := _self_attribute_of(code)) is not None
        )

    def _init_body(self, writer: ClassKey) -> list[ast.stmt] | None:
        """The statements of ``writer``'s own ``__init__`` body, parsed from its file (read through the scan's
        index); None where it cannot be read or found."""
        if writer not in self._init_bodies:
            self._init_bodies[writer] = None
            try:
                module = ast.parse(self.h.index.read_source(self.h.index.tree.root / self.h.file_of(writer)))
            except (OSError, SyntaxError, ValueError, RecursionError):
                return None
            for node in walk(module):
                if isinstance(node, ast.ClassDef) and node.name == writer.name and node.lineno == writer.line:
                    inits = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"]
                    self._init_bodies[writer] = inits[-1].body if inits else None
        return self._init_bodies[writer]

    def _flags_unread(self, mro: Mro, writer: ClassKey, value: Assigned, item: ClassKey | External) -> str | None:
        """Why the arguments vLLM's LogitsProcessor gets cannot be read off the call that makes ``item``: it
        is made by a factory function, or ``item`` subclasses it with an ``__init__`` of its own."""
        if not (self._is_vllm_processor(item) or (isinstance(item, ClassKey) and self._subclasses_processor(item))):
            return None
        direct = resolve_expression(self.h.index, writer.module, value.callee, self.h.platform) if value.callee else []
        if value.callee and not value.callee.startswith("self.") and item not in direct:
            return f"is made by {value.callee}(...), whose call of LogitsProcessor is not read"
        if isinstance(item, ClassKey) and not self._is_vllm_processor(item) and not self._inherits_processor_init(item):
            return f"is an instance of {item.name} ({self.h.file_of(item)}:{item.line}), whose own __init__ is not read"
        return None

    def _is_vllm_processor(self, item: ClassKey | External) -> bool:
        if isinstance(item, External):  # a vLLM outside the tree (a plugin's): named as drafters import it
            return item.name in (".".join(VLLM_LOGITS_PROCESSOR), ".".join(self.processor_key))
        return (item.module, item.name) == self.processor_key

    def _subclasses_processor(self, item: ClassKey) -> bool:
        return any(isinstance(c, ClassKey) and self._is_vllm_processor(c) for c in self.h.mro(item).classes[1:])

    def _inherits_processor_init(self, item: ClassKey) -> bool:
        """A subclass of vLLM's LogitsProcessor whose classes before it define no ``__init__``: built with the
        arguments LogitsProcessor takes."""
        for cls in self.h.mro(item).classes:
            if not isinstance(cls, ClassKey):
                return False
            if self._is_vllm_processor(cls):
                return cls != item
            if "__init__" in self.h.class_facts(cls).defined_methods:
                return False
        return False

    def _built_to_raise(self, mro: Mro, values: list[AssignedValue]) -> str | None:
        """Where vLLM's LogitsProcessor held in ``self.logits_processor`` is built with, or given afterwards, a
        literal value for which one of its paths raises and the other does not (``ProcessorGuard``: vLLM's
        get_top_tokens raises for a scale that is not positive): get_top_tokens would fail where compute_logits
        returns tokens. A value that is not a literal (read from the config) is not judged."""
        guards = self.processor_paths.guards if self.processor_paths is not None else ()
        for guard in guards:
            found: list[tuple[str, str]] = []  # (the value's code, where)
            for writer, value, made in values:
                if value.arguments is None or not any(
                    self._is_vllm_processor(item) or self._inherits_processor_init(item) for item in made or ()
                ):
                    continue
                passed = _argument_for(value.arguments, guard.param, guard.position)
                if passed is not None:
                    found.append((f"{guard.param}={passed}", f"{self.h.file_of(writer)}:{value.line}"))
            for item in (c for c in mro.classes if isinstance(c, ClassKey)):
                for writer, value in self.h.init_values(mro, item).values.get(f"logits_processor.{guard.attr}", []):
                    found.append(
                        (f"self.logits_processor.{guard.attr} = {value.code}", f"{self.h.file_of(writer)}:{value.line}")
                    )
            for given, where in found:
                code = given.split("=", 1)[1].strip()
                try:
                    literal = ast.literal_eval(code)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    continue
                if guard.raises_for(literal):
                    other = "call" if guard.path == "get_top_tokens" else "get_top_tokens"
                    return (
                        f"its LogitsProcessor gets {given} ({where}), for which the processor's {guard.path} raises "
                        f"(`if {guard.test}:` in {guard.where}) and its {other} does not"
                    )
        return None

    def _method_set_on_processor(self, mro: Mro) -> str | None:
        """Where the drafter's ``__init__`` (or a method it runs) stores, on the processor it holds, a method that
        only one of its call and its get_top_tokens runs, or get_top_tokens itself
        (``self.logits_processor.forward = ...``, ``setattr(self.logits_processor, "_get_logits", fn)``): the
        instance's attribute is what that path then runs."""
        paths = self.processor_paths
        if paths is None:
            one_sided = set(UNREAD_PROCESSOR_METHODS)
        else:
            one_sided = (set(paths.call) ^ set(paths.top_tokens)) | {"get_top_tokens", "forward"}
        one_sided.discard("__call__")  # Python looks special methods up on the type: an instance's never runs
        for item in (c for c in mro.classes if isinstance(c, ClassKey)):
            for key, stored in self.h.init_values(mro, item).values.items():
                holder, _, method = key.partition(".")
                if holder == "logits_processor" and method in one_sided and stored:
                    writer, value = stored[0]
                    if method == "get_top_tokens":
                        runs = "the get_top_tokens the processor's own stands for"
                    elif paths is not None and method in paths.top_tokens and method not in paths.call:
                        runs = "what the processor's get_top_tokens alone runs"
                    else:
                        runs = "what the processor's call alone runs"
                    return (
                        f"{self.h.file_of(writer)}:{value.line} sets self.logits_processor.{method} on the instance, "
                        f"{runs}: its call and its get_top_tokens may select different tokens"
                    )
        one_sided |= CALL_PATH_HOOKS
        for item in (c for c in mro.classes if isinstance(c, ClassKey)):
            cls = self._class_node(item)
            line = _patched_through_a_name(cls, one_sided) if cls is not None else None
            if line is not None:
                return (
                    f"{self.h.file_of(item)}:{line} changes the processor it holds through another name, a computed "
                    "attribute name (setattr) or a hook, perhaps what only one of its call and its get_top_tokens "
                    "runs: they may select different tokens"
                )
        return None

    def _class_node(self, item: ClassKey) -> ast.ClassDef | None:
        """The class statement of ``item``, parsed from its file where the file's text may patch the processor
        outside what the facts read (``_may_patch_the_processor``): a cheap text test first, once per file, since
        parsing every drafter's file would cost a cold scan a tenth more."""
        file = self.h.file_of(item)
        if file not in self._patching_modules:
            self._patching_modules[file] = None
            try:
                text = self.h.index.read_source(self.h.index.tree.root / file).decode("utf-8", "replace")
                if _may_patch_the_processor(text):
                    self._patching_modules[file] = ast.parse(text)
            except (OSError, ValueError, SyntaxError, RecursionError):
                return None
        module = self._patching_modules[file]
        if module is None:
            return None
        return next(
            (n for n in walk(module) if isinstance(n, ast.ClassDef) and (n.name, n.lineno) == (item.name, item.line)),
            None,
        )

    def _flag_set_after(self, mro: Mro, flags: tuple[ProcessorFlag, ...]) -> str | None:
        """Where the drafter's ``__init__`` (or a method it runs) sets a flag's attribute on the processor it
        holds (``self.logits_processor.logits_as_input = True``)."""
        for item in (c for c in mro.classes if isinstance(c, ClassKey)):
            stored = self.h.init_values(mro, item).values
            for flag in flags:
                for writer, value in stored.get(f"logits_processor.{flag.attr}", []):
                    return (
                        f"{self.h.file_of(writer)}:{value.line} sets self.logits_processor.{flag.attr}, which only the "
                        f"processor's {flag.path} {flag.how} ({flag.test}): its call and its get_top_tokens may select "
                        "different tokens"
                    )
        return None

    def _unread_writer(self, mro: Mro, attr: str) -> str | None:
        """Where a class of this MRO binds ``attr`` (its class body, or a method that sets ``self.<attr>``) that
        the reading of ``__init__`` did not reach: an assignment that may run all the same, of a class not read."""
        for item in (item for item in mro.classes if isinstance(item, ClassKey)):
            facts = self.h.class_facts(item)
            if attr in facts.class_attrs:
                return f"the class body of {item.name} ({self.h.file_of(item)})"
            for method, steps in facts.init_steps.items():
                line = next((step.line for step in steps if step.attr == attr), None)
                if line is not None:
                    return f"{item.name}.{method} ({self.h.file_of(item)}:{line})"
        return None

    def _inits(self, mro: Mro) -> str:
        """The ``__init__`` methods the classes of this MRO in the tree define, where the reading looked for an
        assignment of an attribute."""
        inits = [
            f"{item.name}.__init__"
            for item in mro.classes
            if isinstance(item, ClassKey) and "__init__" in self.h.class_facts(item).defined_methods
        ]
        return ", ".join(inits) if inits else "__init__ (none in the tree)"

    def _processor_overrides(self, processor: ClassKey) -> str | None:
        """``PROCESSOR (file:line), whose ...``: why its call and its get_top_tokens may select different
        tokens, from what the classes of its MRO before vLLM's LogitsProcessor override of the methods the
        tree's LogitsProcessor runs for either (``processor_paths``); None: they select the same ones (no
        override, or overrides only of methods both run)."""
        paths = self.processor_paths
        runs = (set(paths.call) | set(paths.top_tokens)) if paths is not None else set(UNREAD_PROCESSOR_METHODS)
        overrides: dict[str, tuple[ClassKey, int]] = {}  # method -> the class of the MRO that defines it first
        for item in self.h.mro(processor).classes:
            if isinstance(item, ClassKey) and self._is_vllm_processor(item):
                break
            for name, line in self.h.class_facts(item).defined_methods.items() if isinstance(item, ClassKey) else ():
                if name in runs:
                    overrides.setdefault(name, (item, line))
        named = {name: f"{cls.name}.{name} ({self.h.file_of(cls)}:{line})" for name, (cls, line) in overrides.items()}
        where = f"{processor.name} ({self.h.file_of(processor)}:{processor.line})"
        if "get_top_tokens" in named:
            return (
                f"{where}, which overrides {', '.join(named.values())}: whether its call and its get_top_tokens "
                "select the same tokens is not known"
            )
        if paths is None:
            differing = [
                f"{override} overrides a method vLLM's LogitsProcessor may run for its call or its get_top_tokens "
                "(that class could not be read, so which it runs is not known)"
                for override in named.values()
            ]
        else:
            differing = [
                _one_path(override, paths.call.get(name), paths.top_tokens.get(name))
                for name, override in named.items()
                if (name in paths.call) != (name in paths.top_tokens)
            ]
        if not differing:
            return None
        return f"{where}, whose call and get_top_tokens may select different tokens: {'; '.join(differing)}"

    def called_params(self, mro: Mro, gtt: MethodHit, overlay: Overlay | None, depth: int = 0) -> list[Param]:
        """The parameters a caller's arguments bind to: those of ``gtt``, or, where it only passes every
        call on (``def get_top_tokens(self, *args, **kwargs): return super().get_top_tokens(*args, **kwargs)``,
        or ``super(Cls, self)`` from where that starts its lookup), those of the get_top_tokens its super()
        reaches."""
        gshape = top_tokens_shape(gtt.method.text, gtt.method.line)
        if depth > 8 or gshape.kind != TopTokensKind.SUPER or not forwards_every_call(gtt.method.text):
            return gshape.params
        start, _ = self.super_start(mro, gtt, gshape.super_class, None)
        nxt = self.h.find(mro, "get_top_tokens", start=start, overlay=overlay) if start is not None else None
        if nxt is None or nxt.method.how != "def":
            return gshape.params
        return self.called_params(mro, nxt, overlay, depth + 1)

    def _decorated(self, gtt: MethodHit, gshape: TopTokensShape) -> tuple[Consistency, str]:
        """A call runs the decorators' wrapper, which may change the tokens (or the arguments): nothing
        the body says is claimed; divergent only where no call on the drafter can run the body."""
        rebound = [d.removeprefix(REBOUND)[:-1] for d in gshape.decorators if d.startswith(REBOUND)]
        if rebound and len(gshape.decorators) == 1 and gshape.unbound is None:  # no wrapper: another name bound
            return Consistency.UNPROVEN, (
                f"get_top_tokens of {self.where(gtt)} is bound in the class body to {rebound[0]}, whose code the "
                "scan does not compare; run `mtp-audit verify`"
            )
        wrapped = f"get_top_tokens of {self.where(gtt)} is wrapped ({', '.join(f'@{d}' for d in gshape.decorators)})"
        if gshape.unbound is not None:
            return Consistency.DIVERGENT, f"{wrapped}: {gshape.unbound}"
        return Consistency.UNPROVEN, f"{wrapped}; the wrapper may change the tokens; run `mtp-audit verify`"

    def _statement_difference(
        self, cl: MethodHit, cshape: LogitsShape, gtt: MethodHit
    ) -> tuple[Consistency, str] | None:
        """What compute_logits does to the logits after computing them (a mask, a scatter, a cut or
        padded vocabulary) that get_top_tokens does not: the statement that makes the tokens differ."""
        if cshape.kind != LogitsKind.MANUAL or cshape.post not in DIVERGENT_POST:
            return None
        tree = _parsed_text(gtt.method.text)
        if tree is None or _calls_method(tree, "compute_logits"):
            return Consistency.UNPROVEN, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} "
                "calls compute_logits, so it may take that change too; run `mtp-audit verify`"
            )
        if cshape.post == PostKind.MASK and (
            any(_calls_method(tree, name) for name in MASK_METHODS) or _stores_into_returned(tree)
        ):
            return Consistency.UNPROVEN, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} "
                "masks too; run `mtp-audit verify`"
            )
        if cshape.post == PostKind.VOCAB and self.processor_mask and _cut_by_own_processor(cl, gtt):
            return Consistency.UNPROVEN, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} "
                "calls that processor's get_top_tokens, which masks every id from org_vocab_size on "
                f"({self.processor_mask}); run `mtp-audit verify`"
            )
        if cshape.post == PostKind.VOCAB:
            return Consistency.DIVERGENT, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} "
                "does not change the vocabulary, so it can select ids compute_logits never produces"
            )
        if cshape.post == PostKind.D2T_SCATTER and _may_remap(tree):
            return Consistency.UNPROVEN, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} maps "
                "its tokens too (it reads draft_id_to_target_id or runs a method of self), written otherwise than "
                "LocalArgmaxMixin's; run `mtp-audit verify`"
            )
        return Consistency.DIVERGENT, (
            f"compute_logits of {self.where(cl)}: {cshape.reason}; get_top_tokens of {self.where(gtt)} ignores it"
        )

    def _super_inlined(self, mro: Mro, cl: MethodHit) -> tuple[str, MethodHit] | None:
        """``cl`` with the head-calling compute_logits its super() reaches inlined, if that is plain."""
        nxt, _ = self.super_reached(mro, cl, self.shape(cl))
        if nxt is None or self.shape(nxt).kind != LogitsKind.HEAD:
            return None
        inlined = self.mirror.inlined_super(cl.method.text, nxt.method.text)
        return (inlined, nxt) if inlined is not None else None

    def _delegated_consistency(
        self, key: ClassKey, mro: Mro, cl: MethodHit, cshape: LogitsShape, overlay: Overlay | None, depth: int
    ) -> tuple[Consistency, str]:
        target, why = self._delegate_target(mro, cl, cshape)
        if target is None or depth > 8:
            return Consistency.UNPROVEN, why or "delegation chain too deep"
        inner = (
            self.analyze_from(key, mro, cl, overlay, depth + 1)
            if cshape.kind == LogitsKind.SUPER
            else self.analyze(target, overlay, depth + 1)
        )
        if inner.status != Status.SUPPORTED or inner.consistency is None:
            return Consistency.DIVERGENT, f"delegate {target.name} has no get_top_tokens ({inner.reason})"
        return inner.consistency, f"delegates to {target.name}: {inner.reason}"

    def _against_mixin(
        self, key: ClassKey, mro: Mro, cl: MethodHit, cshape: LogitsShape, gtt: MethodHit, gshape: TopTokensShape
    ) -> tuple[Consistency, str]:
        mixin = self.where(gtt)
        plain = cshape.head == "self.lm_head" and not cshape.pre_transform and not cshape.extra_args
        if cshape.kind == LogitsKind.HEAD and plain:
            sets, unread = self._sets_d2t(mro)
            if sets:
                return Consistency.DIVERGENT, (
                    f"{mixin} remaps through draft_id_to_target_id, which {key.name} sets, but compute_logits of "
                    f"{self.where(cl)} does not scatter"
                )
            if unread is not None:
                return Consistency.UNPROVEN, (
                    f"{mixin} remaps through draft_id_to_target_id where it is set, and {unread}, may set it; "
                    f"compute_logits of {self.where(cl)} does not scatter; run `mtp-audit verify`"
                )
            return Consistency.EQUIVALENT, (
                f"{mixin}: the same head call as compute_logits of {self.where(cl)}; no draft_id_to_target_id"
            )
        if cshape.post == PostKind.D2T_SCATTER and plain:
            return self._against_mixin_scatter(cl, cshape, mixin, gshape)
        if cshape.kind == LogitsKind.MANUAL and cshape.post in DIVERGENT_POST - {PostKind.D2T_SCATTER}:
            return Consistency.DIVERGENT, f"compute_logits of {self.where(cl)}: {cshape.reason}; {mixin} ignores it"
        if cshape.extra_args:
            return Consistency.DIVERGENT, (
                f"compute_logits of {self.where(cl)}: {cshape.reason}; {mixin} passes no extra head arguments"
            )
        other = cshape.other_head or cshape.other_hidden
        if cshape.kind in (LogitsKind.HEAD, LogitsKind.MANUAL) and cshape.head is not None and other:
            return Consistency.DIVERGENT, (
                f"compute_logits of {self.where(cl)} calls the head as "
                f"({cshape.head}, {cshape.hidden or ARMS_DIFFER}); "
                f"{mixin} uses (self.lm_head, hidden states) unchanged"
            )
        return Consistency.UNPROVEN, f"{mixin} against compute_logits of {self.where(cl)}: {cshape.reason}"

    def _against_mixin_scatter(
        self, cl: MethodHit, cshape: LogitsShape, mixin: str, gshape: TopTokensShape
    ) -> tuple[Consistency, str]:
        """A draft-to-target scatter after a plain head call against the mixin's remap of the argmax: the
        same tokens when the scatter maps draft ids as the mixin does and compute_logits does nothing
        else (``LogitsShape.target_map``), other tokens when it maps them otherwise."""
        scatter = f"compute_logits of {self.where(cl)}: {cshape.reason}"
        if cshape.target_map is None:
            return Consistency.UNPROVEN, f"{scatter}; {mixin} only remaps its argmax; run `mtp-audit verify`"
        if cshape.target_map != gshape.target_map:
            return Consistency.DIVERGENT, (
                f"{scatter}, draft id k to {TARGET_IDS[cshape.target_map]}; {mixin} maps it to "
                f"{TARGET_IDS[gshape.target_map]}"  # type: ignore[index]
            )
        return Consistency.EQUIVALENT, (
            f"{mixin} maps draft ids through draft_id_to_target_id as compute_logits of {self.where(cl)} scatters them"
        )

    def _sets_d2t(self, mro: Mro) -> tuple[bool, str | None]:
        """Whether an ``__init__`` of this MRO assigns ``self.draft_id_to_target_id``; where none does, a helper one
        of them runs unread (which may), with its statement."""
        unread = None
        for item in (item for item in mro.classes if isinstance(item, ClassKey)):
            read = self.h.init_values(mro, item)
            if "draft_id_to_target_id" in read.values:
                return True, None
            if read.unread and unread is None:
                writer, value = read.unread[0]
                unread = f"{value.code} at {self.h.file_of(writer)}:{value.line}"
        return False, unread


# The target id each TargetMap gives draft id k.
TARGET_IDS = {TargetMap.OFFSET: "k + draft_id_to_target_id[k]", TargetMap.ABSOLUTE: "draft_id_to_target_id[k]"}


def _parsed_text(method_text: str) -> ast.Module | None:
    """A method's text parsed (dedented); None where it does not parse."""
    try:
        return ast.parse(textwrap.dedent(method_text))
    except SyntaxError:
        return None


def _calls_method(tree: ast.AST, name: str) -> bool:
    """Whether the code calls ``name`` (``self.compute_logits(...)``, ``logits.masked_fill_(...)``), as code,
    not as words of a docstring or a comment."""
    return any(
        isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Attribute) and node.func.attr == name)
            or (isinstance(node.func, ast.Name) and node.func.id == name)
        )
        for node in ast.walk(tree)
    )


def _may_remap(tree: ast.AST) -> bool:
    """Whether a get_top_tokens may map draft ids to target ids: it reads ``draft_id_to_target_id`` (as an
    attribute or a name given to ``getattr``) or runs a method of self (``self.map_draft_to_target(top)``),
    whose code is not compared."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "draft_id_to_target_id":
            return True
        if isinstance(node, ast.Constant) and node.value == "draft_id_to_target_id":
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and unparse(node.func.value) == "self":
            return True
    return False


def _stores_into_returned(tree: ast.AST) -> bool:
    """Whether the method stores into items of a local that what it returns reads (``logits[:, banned] = -inf``
    then ``return logits.argmax(-1)``): a mask written by assignment, which no method name shows. A store into
    anything else (``self.cache[0] = out``) is no mask of what it selects from."""
    returned = {
        n.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Return) and node.value is not None
        for n in ast.walk(node.value)
        if isinstance(n, ast.Name)
    }
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                    if target.value.id in returned:
                        return True
    return False


def _patched_through_a_name(cls: ast.ClassDef, methods: set[str]) -> int | None:
    """The line of a statement in a method of ``cls`` that changes the processor self holds where the facts do
    not look: one of ``methods`` stored through a name that holds it (``lp = self.logits_processor = LP(v)``,
    ``lp.forward = fn``; chains of such names), any attribute through ``setattr`` with a computed name on it, or
    a forward hook registered on it; None where none does."""
    holders = {"self.logits_processor"}
    assignments = [n for n in walk(cls) if isinstance(n, ast.Assign)]
    for _ in range(len(assignments) + 1):  # names holding names holding it...
        grown = set(holders)
        for node in assignments:
            texts = {unparse(t) for t in node.targets} | {unparse(node.value)}
            if texts & grown:
                grown |= {unparse(t) for t in node.targets if isinstance(t, ast.Name)}
                grown |= {unparse(node.value)} if isinstance(node.value, ast.Name) else set()
        if grown == holders:
            break
        holders = grown
    for node in walk(cls):
        match node:
            case ast.Attribute(value=held, attr=attr, ctx=ast.Store()) if unparse(held) in holders and attr in methods:
                return node.lineno
            case ast.Call(func=ast.Name(id="setattr"), args=[held, name, *_]) if unparse(held) in holders:
                if not isinstance(name, ast.Constant) or name.value in methods:
                    return node.lineno
            case ast.Call(func=ast.Attribute(value=held, attr=hook)) if unparse(held) in holders and hook in HOOKS:
                return node.lineno
    return None


def _self_attribute_of(code: str) -> str | None:
    """X of the code ``self.X``; None for anything else."""
    try:
        expression = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return None
    return self_attribute(expression)


def _holds_as_assigned(body: list[ast.stmt], attr: str, code: str, line: int) -> bool:
    """Whether, at the statement of ``body`` on ``line``, ``self.<attr>`` holds what the dotted name ``code`` is:
    the last statement of the body before it that stores ``self.<attr>`` is ``self.<attr> = <code>``, and no
    statement after that may change ``self.<attr>`` or ``code``'s first name (see ``_may_change``)."""
    try:
        expression = ast.parse(code.strip(), mode="eval").body
    except SyntaxError:
        return False
    if dotted(expression) is None or unparse(expression).split(".")[0] == "self":
        return False
    root = unparse(expression).split(".")[0]
    at = next((i for i, statement in enumerate(body) if statement.lineno == line), None)
    if at is None:
        return False
    for statement in reversed(body[:at]):
        match statement:
            case ast.Assign(targets=[ast.Attribute(value=ast.Name(id="self"), attr=stored)], value=value) if (
                stored == attr
            ):
                return unparse(value) == unparse(expression)
        if _may_change(statement, attr, root):
            return False
    return False


def _may_change(statement: ast.stmt, attr: str, root: str) -> bool:
    """Whether ``statement`` may change ``self.<attr>`` or the local ``root``: a store or ``del`` of either (in any
    target form), a method run on self, a ``super()`` or ``__init__`` call, ``setattr``/``vars``/``exec``, or a call
    handed ``self`` itself."""
    for node in walk(statement):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) and node.id == root:
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name).split(".")[0] == root for alias in node.names
        ):
            return True
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            if unparse(node).split(".")[0].split("[")[0] == root:  # ``config.vocab_size = ...``, ``+=``
                return True
        if isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Load):
            if unparse(node.value) == "self" and node.attr in (attr, "__dict__"):
                return True
        if isinstance(node, ast.Call):
            function = node.func
            if isinstance(function, ast.Name) and function.id in ("setattr", "vars", "exec", "eval", "super"):
                return True
            if isinstance(function, ast.Attribute) and (
                unparse(function.value) == "self" or function.attr in ("__init__", "__setattr__", "update")
            ):
                return True
            values = [*node.args, *(k.value for k in node.keywords)]
            if any(isinstance(v, ast.Name) and v.id in ("self", root) for v in values):
                return True  # a call handed self, or the object the value is read from (``pad_vocab(config)``)
            if isinstance(function, ast.Attribute) and unparse(function).split(".")[0] == root:
                return True  # a method of it (``config.update(...)``)
    return False


def _argument_for(arguments: tuple[tuple[str, str], ...], param: str, place: int) -> str | None:
    """The code of the argument a call with ``arguments`` passes for the parameter ``param`` (at ``place`` among
    the positional ones; ``*x`` / ``**x`` where unpacked arguments may pass it); None where none does."""
    for position, (keyword, code) in enumerate(a for a in arguments if a[0] in ("", "*")):
        if keyword == "*":  # where it ends, and so what binds to the flag's place, is not known
            return f"*{code}"
        if position == place:
            return code
    named = dict(arguments)
    if param in named:
        return named[param]
    for keyword, code in arguments:
        if keyword in ("*", "**"):
            return f"{keyword}{code}"
    return None


def _same_literal(code: str, default: str | None) -> bool:
    """Whether ``code`` and the default's code are literals of equal value (``0`` and ``False`` are not)."""
    if default is None:
        return False
    try:
        value, expected = ast.literal_eval(code.strip()), ast.literal_eval(default)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return type(value) is type(expected) and value == expected


def _cut_by_own_processor(cl: MethodHit, gtt: MethodHit) -> bool:
    """compute_logits truncates the vocabulary only to ``self.P.org_vocab_size`` and get_top_tokens calls
    ``self.P.get_top_tokens``: the same processor, whose own mask may stand for the cut."""
    parsed_cl, parsed_gtt = _method_tree(cl), _method_tree(gtt)
    if parsed_cl is None or parsed_gtt is None:
        return False
    bounds = {unparse(cut) for cut in _vocabulary_cuts(parsed_cl[0])}
    processors = {bound.removesuffix(".org_vocab_size") for bound in bounds if bound.endswith(".org_vocab_size")}
    if len(bounds) != 1 or len(processors) != 1:
        return False
    called = f"{processors.pop()}.get_top_tokens"
    return any(isinstance(node, ast.Call) and unparse(node.func) == called for node in walk(parsed_gtt[0]))


def _vocabulary_cuts(tree: ast.AST) -> list[ast.expr]:
    """The upper bounds of ``x[..., :n]`` (a cut of the last dimension) in a method."""
    cuts = []
    for node in walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) > 1:
            last = node.slice.elts[-1]
            if isinstance(last, ast.Slice) and last.lower is None and last.upper is not None and last.step is None:
                cuts.append(last.upper)
    return cuts


def _tested_attr(test: ast.AST) -> str | None:
    """``self.X``, ``self.X is None``, ``self.X is not None`` (and ``not`` of those) -> X."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        test = test.left
    return self_attribute(test)


def _method_tree(hit: MethodHit) -> tuple[ast.AST, int] | None:
    func = _parsed_method(hit.method.text)
    return None if func is None else (func, hit.method.line - func.lineno)


@functools.lru_cache(maxsize=1024)
def _parsed_method(text: str) -> ast.AST | None:
    """An indented method is parsed in a class, as in its file: dedenting the text would break on a
    string of it that goes on at column 0."""
    try:
        if text[:1] not in (" ", "\t"):
            return ast.parse(text).body[0]
        wrapper = ast.parse("class _:\n" + text).body[0]
        assert isinstance(wrapper, ast.ClassDef)
        return wrapper.body[0]
    except (SyntaxError, IndexError):
        return None


def asserted_optional(cl: MethodHit, gtt: MethodHit) -> str | None:
    """get_top_tokens asserts or dereferences ``self.X`` where compute_logits tests it and falls
    back: with X unset, compute_logits still selects tokens and get_top_tokens fails. An ``if`` of
    get_top_tokens that tests X too guards both (a type-narrowing assert under it fails nothing)."""
    parsed_cl, parsed_gtt = _method_tree(cl), _method_tree(gtt)
    if parsed_cl is None or parsed_gtt is None:
        return None
    optional = _tested_attrs(parsed_cl)
    guarded = _tested_attrs(parsed_gtt)
    uses: list[tuple[int, str, str]] = []
    for node in walk(parsed_gtt[0]):
        if isinstance(node, ast.Assert):
            name = _tested_attr(node.test)
            if name in optional and name not in guarded:
                uses.append((node.lineno + parsed_gtt[1], name, "asserts"))
        elif isinstance(node, (ast.Attribute, ast.Call)):
            name = self_attribute(node.value if isinstance(node, ast.Attribute) else node.func)
            if name in optional and name not in guarded:
                uses.append((node.lineno + parsed_gtt[1], name, "uses"))
    if not uses:
        return None
    line, name, how = min(uses)
    return (
        f"get_top_tokens of {gtt.owner.name} {how} self.{name} (line {line}), which compute_logits of "
        f"{cl.owner.name} treats as optional (line {optional[name]}): without it compute_logits falls back, "
        "get_top_tokens fails"
    )


def _tested_attrs(parsed: tuple[ast.AST, int]) -> dict[str, int]:
    """``self.X`` tested by an ``if`` (or a conditional expression) -> the line of the first test."""
    out: dict[str, int] = {}
    for node in walk(parsed[0]):
        if isinstance(node, (ast.If, ast.IfExp)):
            for part in node.test.values if isinstance(node.test, ast.BoolOp) else [node.test]:
                name = _tested_attr(part)
                if name is not None:
                    out.setdefault(name, node.lineno + parsed[1])
    return out


def _renamed_back(text: str, renamed: dict[str, str]) -> str | None:
    """``text`` of a method with each parameter ``renamed`` maps a name to called by that name again;
    None where the method reads that name already (a global, say): renaming would capture it."""
    function = ast.parse(textwrap.dedent(libcst_code(text))).body[0]
    back = {other: name for name, other in renamed.items()}
    if any(isinstance(node, ast.Name) and node.id in renamed for node in walk(function)):
        return None
    for node in walk(function):
        if isinstance(node, ast.arg) and node.arg in back:
            node.arg = back[node.arg]
        elif isinstance(node, ast.Name) and node.id in back:
            node.id = back[node.id]
    return ast.unparse(function)


def _unaccepted(cshape: LogitsShape, gshape: TopTokensShape) -> list[str]:
    variadic = (ParamKind.STAR, ParamKind.STARSTAR)
    if any(p.kind in variadic for p in gshape.params):
        return []
    accepted = {p.name for p in gshape.params}
    return [p.name for p in cshape.params if p.kind not in variadic and p.name not in accepted]


def _one_path(override: str, call: tuple[str, ...] | None, top_tokens: tuple[str, ...] | None) -> str:
    """``override`` of a method vLLM's LogitsProcessor runs for one path alone (the chain that reaches it)."""
    if call is not None:
        return (
            f"{override} overrides a method vLLM's LogitsProcessor runs for its call ({' -> '.join(call)}), "
            "not for its get_top_tokens"
        )
    assert top_tokens is not None
    return (
        f"{override} overrides a method vLLM's LogitsProcessor runs for its get_top_tokens "
        f"({' -> '.join(top_tokens)}), not for its call"
    )
