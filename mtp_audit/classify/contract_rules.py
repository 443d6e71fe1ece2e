"""The call-contract rules: a drafter judged by how its speculators call it.

Like the shape rules (``shapes.RULES``), each is a small named object with an
id, a one-line message, a docstring saying why, and examples that one
parametrized test (tests/test_contract_rules.py) runs. An example is a
``compute_logits`` (and, where the drafter has one, a ``get_top_tokens``)
with the arguments one caller passes each of them on the same path.
Free of libcst: the rules read call forms and ``ast``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ..model import CallPair, Consistency, ModelCall, Reach, Status
from ..resolve.callers import HIDDEN_BY_STAR
from .calls import (
    NOT_PASSED,
    UNKNOWN_VALUE,
    ArgumentGap,
    Contract,
    argument_gaps,
    bind,
    first_read,
    form,
    through,
    where,
)
from .shape_types import Param


@dataclass(frozen=True)
class CallExample:
    """A drafter's methods and how one caller calls them; ``expected`` is the rule's verdict
    (status, and consistency when the drafter has a get_top_tokens), None when it does not object."""

    compute_logits: str
    top_tokens_call: tuple[str, ...] | None  # None: the caller never reaches get_top_tokens
    logits_call: tuple[str, ...]
    get_top_tokens: str | None = None
    expected: tuple[Status, Consistency | None] | None = None
    unfollowed: tuple[str, ...] = ()  # drafter references of the caller not followed: FILE:LINE: `code`
    uncreatable: str = ""  # why the caller's class statement raises TypeError (then it calls nothing)


class ContractRule:
    id: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    VALID: ClassVar[tuple[CallExample, ...]]
    INVALID: ClassVar[tuple[CallExample, ...]]


class Uncalled(ContractRule):
    """A speculator that overrides the drafting loop (``propose``, ``_generate_draft``) may draft
    through other drafter methods and never reach ``get_top_tokens``. A method written for it is
    dead code that still makes ``use_local_argmax_reduction`` pass the ``hasattr`` check, then
    silently does nothing: no candidate speculator calls it, so none is written."""

    id = "MTP201"
    name = "uncalled"
    message = "no speculator that can hold the drafter calls get_top_tokens"
    VALID = (
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            ("hidden_states",),
            ("hidden_states",),
        ),
    )
    INVALID = (
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            None,
            ("hidden_states",),
            expected=(Status.NOT_APPLICABLE, None),
        ),
    )

    @staticmethod
    def check(contract: Contract) -> str | None:
        return contract.unreached_reason() if contract.uncalled else None


class CallTypeError(ContractRule):
    """A caller passes ``get_top_tokens`` an argument the method does not take (the multi-module
    MTP speculator passes ``spec_step_idx=``): that call raises ``TypeError``. A mirror takes what
    ``compute_logits`` takes, so it is refused only where ``compute_logits`` would accept the call."""

    id = "MTP202"
    name = "call-type-error"
    message = "a caller passes get_top_tokens an argument it does not accept"
    VALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            "def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[spec_step_idx], hidden_states)\n",
        ),
    )
    INVALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[0], hidden_states)\n",
            expected=(Status.SUPPORTED, Consistency.DIVERGENT),
        ),
    )

    @staticmethod
    def check(reach: Reach, pair: CallPair, top_params: list[Param], method: str) -> str | None:
        _, errors = bind(top_params, pair.top_tokens)
        if errors:
            return (
                f"{reach.speculator} ({where(pair.top_tokens)}) calls {form(pair.top_tokens)}; {method} "
                f"does not accept {', '.join(errors)} (TypeError)"
            )
        return None


def _on_same_path(reach: Reach, pair: CallPair, gap: ArgumentGap, joiner: str) -> str:
    """``S (where) calls get_top_tokens(...) <joiner> compute_logits(...) (where) on the same path``."""
    top, logits = pair.top_tokens, gap.logits
    return (
        f"{reach.speculator} ({where(top)}) calls {form(top)}{through(top)} "
        f"{joiner} {form(logits)} ({where(logits)}){through(logits)} on the same path"
    )


class CallSiteArguments(ContractRule):
    """The tokens must match ``compute_logits(...).argmax(-1)`` as each caller calls both. A caller
    that gives ``compute_logits`` a value of an argument it reads (``spec_step_idx``, which picks each
    step's head) and ``get_top_tokens`` another (none, so the default; another constant; the step the
    other call leaves to its default) drafts some step with another head: a mirror is refused, naming
    the call site, and an existing method is divergent. Arguments are compared by what each parameter
    receives, so a renamed parameter passed in the same place is the same argument. mtp-audit does
    not edit the call site: a speculator serves many drafters, and passing a new argument there
    changes them all."""

    id = "MTP203"
    name = "call-site-arguments"
    message = "a caller gives compute_logits and get_top_tokens different values of an argument compute_logits reads"
    VALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.lm_head, hidden_states)\n",
            ("hidden_states",),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
        ),
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states",),
            ("hidden_states",),
        ),
        CallExample(  # the same value, once by position and once by keyword, or as the default
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "0"),
            ("hidden_states", "spec_step_idx=0"),
        ),
        CallExample(  # a renamed parameter in the same place receives the same step
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "step"),
            ("hidden_states", "spec_step_idx=step"),
            "def get_top_tokens(self, hidden_states, step_idx=0):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[step_idx], hidden_states)\n",
        ),
        CallExample(  # a forwarding wrapper: its *args and **kwargs take what compute_logits has parameters for
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            "def get_top_tokens(self, *args, **kwargs):\n    return self.model.get_top_tokens(*args, **kwargs)\n",
        ),
    )
    INVALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states",),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
            expected=(Status.MISSING_MANUAL, None),
        ),
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states",),
            ("hidden_states", "step"),
            "def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[spec_step_idx], hidden_states)\n",
            expected=(Status.SUPPORTED, Consistency.DIVERGENT),
        ),
        CallExample(  # a constant step for get_top_tokens, the loop's step for compute_logits
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=0"),
            ("hidden_states", "spec_step_idx=step"),
            expected=(Status.MISSING_MANUAL, None),
        ),
        CallExample(  # the other way round: get_top_tokens gets the step, compute_logits its default
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=step"),
            ("hidden_states",),
            "def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[spec_step_idx], hidden_states)\n",
            expected=(Status.SUPPORTED, Consistency.DIVERGENT),
        ),
    )

    @staticmethod
    def check(
        reach: Reach,
        pair: CallPair,
        logits_params: list[Param],
        logits_text: str,
        top_params: list[Param],
        def_line: int | None = None,
        forwarded: frozenset[str] | None = None,
    ) -> str | None:
        """``def_line``: the line of compute_logits's ``def``, to name the statement that reads the argument;
        ``forwarded``: what the code its ``**kwargs`` go to reads (``argument_gaps``)."""
        gaps = argument_gaps(pair, logits_params, logits_text, top_params, forwarded)
        gap = next((g for g in gaps if g.provable), None)
        if gap is None:
            return None
        assert gap.name is not None
        rebound = f" ({gap.rebound})" if gap.rebound else ""
        read = first_read(logits_text, gap.name, def_line) if def_line is not None else None
        reads_it = f"compute_logits reads {gap.name}" + (f" {read}" if read else "")
        calls = _on_same_path(reach, pair, gap, "but")
        if gap.forwarded:
            return (
                f"{calls}: {gap.name} is {_value(gap.top_value or '')} for get_top_tokens and "
                f"{_value(gap.logits_value)} for compute_logits{rebound}, whose **kwargs take it and pass it on to "
                f"code that reads {gap.name}"
            )
        if gap.top_value is None and gap.name in pair.top_tokens.keywords:  # taken by its **kwargs
            return (
                f"{_on_same_path(reach, pair, gap, 'and')}; {reads_it}, "
                "which get_top_tokens has no parameter for (its **kwargs takes it)"
            )
        if gap.top_value is None:
            return f"{calls}, and {reads_it}, which get_top_tokens has no parameter for"
        if gap.top_value.startswith("=") and not gap.logits_value.startswith("="):
            return f"{calls}, and {reads_it}"
        return (
            f"{calls}: {gap.name} is {_value(gap.top_value)} for get_top_tokens and {_value(gap.logits_value)} "
            f"for compute_logits{rebound}, and {reads_it}"
        )


class CallSiteUnproven(ContractRule):
    """A caller gives the two methods arguments that are written differently but that no static
    reading can compare (``self.draft_step`` against ``step``, other hidden states, ``*args``): the
    tokens agree only if run-time values do. A mirror is then not provably safe and is refused,
    naming the call site; an existing method, otherwise the mirror, is unproven (``verify``)."""

    id = "MTP204"
    name = "call-site-unproven"
    message = "a caller gives compute_logits and get_top_tokens arguments only run-time values can compare"
    VALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=step"),
            ("hidden_states", "step"),
        ),
    )
    INVALID = (
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n",
            ("hidden_states", "spec_step_idx=self.draft_step"),
            ("hidden_states", "spec_step_idx=step"),
            expected=(Status.MISSING_MANUAL, None),
        ),
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            ("self.last_hidden_states",),
            ("hidden_states",),
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n",
            expected=(Status.SUPPORTED, Consistency.UNPROVEN),
        ),
    )

    @staticmethod
    def check(
        reach: Reach,
        pair: CallPair,
        logits_params: list[Param],
        logits_text: str,
        top_params: list[Param],
        forwarded: frozenset[str] | None = None,
    ) -> str | None:
        gaps = argument_gaps(pair, logits_params, logits_text, top_params, forwarded)
        gap = next((g for g in gaps if not g.provable), None)
        if gap is None:
            return None
        calls = _on_same_path(reach, pair, gap, "but")
        if gap.name is None:
            return f"{calls}: a *args or **kwargs argument hides which parameter gets what"
        if gap.starred:
            return (
                f"{_on_same_path(reach, pair, gap, 'and')}: compute_logits reads {gap.name}, which get_top_tokens "
                f"takes in its {gap.starred}; what it selects with it only run-time values tell"
            )
        if gap.forwarded:
            return (
                f"{calls}: {gap.name} is {_value(gap.top_value or '')} for get_top_tokens and "
                f"{_value(gap.logits_value)} for compute_logits, whose **kwargs take it and pass it on"
                f"{f' ({gap.rebound})' if gap.rebound else ''}; whether they differ where it is read only run-time "
                "values tell"
            )
        if gap.rebound and gap.top_value == gap.logits_value:
            return (
                f"{calls}: {gap.name} is {_value(gap.logits_value)} for both, but {gap.rebound}, so it may hold "
                "another value at each call, which only run-time values can compare"
            )
        if gap.rebound:
            return (
                f"{calls}: {gap.name} is {_value(gap.top_value or '')} for get_top_tokens and "
                f"{_value(gap.logits_value)} for compute_logits ({gap.rebound}), which only run-time values can compare"
            )
        return (
            f"{calls}: {gap.name} is {_value(gap.top_value or '')} for get_top_tokens and "
            f"{_value(gap.logits_value)} for compute_logits, which only run-time values can compare"
        )


class UnfollowedDrafter(ContractRule):
    """A speculator that hands its drafter to code the scan does not follow (a method of another
    object, a function outside the caller files, ``getattr``) may call ``get_top_tokens`` there,
    with arguments nobody compared. When no other speculator is seen to call it, the drafter is
    neither provably uncalled (MTP201) nor provably safe to mirror: the reason names each
    reference, to be read by hand. So for a drafting method the scan cannot tell (a class-body
    assignment binding it to what the scan does not follow, a base in the vLLM tree it cannot
    read, a name rebound on the instance to what the scan does not follow), for a drafting path
    that calls no method of the drafter the scan sees (it cannot draft without one: the scan
    missed a hop), and for a speculator whose class has no consistent method resolution order:
    Python raises at its class statement, and what it would call is not known."""

    id = "MTP205"
    name = "unfollowed-drafter"
    message = "a speculator hands the drafter to code the scan does not follow"
    VALID = (
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            ("hidden_states",),
            ("hidden_states",),
            unfollowed=("speculator.py:4: `warm_up(self.model)`",),
        ),
    )
    INVALID = (
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            None,
            ("hidden_states",),
            expected=(Status.MISSING_MANUAL, None),
            unfollowed=("speculator.py:4: `greedy_sample(self.model, hidden_states)`",),
        ),
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n",
            None,
            (),
            expected=(Status.MISSING_MANUAL, None),
            uncreatable="speculator.py:1: class ExampleSpeculator raises TypeError (no consistent method resolution "
            "order for its bases A, B)",
        ),
    )

    @staticmethod
    def check(contract: Contract) -> str | None:
        if any(r.reaches for r in contract.reaches) or not contract.unfollowed():
            return None
        return "; ".join(
            f"{reach.speculator}'s drafting path cannot be followed ({reach.uncreatable})"
            if reach.uncreatable
            else f"{reach.speculator} ({reach.file}:{reach.line}) calls no get_top_tokens that the scan sees, but "
            f"its drafting path goes where the scan does not follow it ({', '.join(reach.unfollowed)})"
            for reach in contract.unfollowed()
        )


def _value(value: str) -> str:
    if value == UNKNOWN_VALUE:
        return "a value the wrapper it passes through computes"
    if value == NOT_PASSED:
        return "not passed"
    if value == HIDDEN_BY_STAR:
        return "a value that a *args or **kwargs argument of the wrapper call hides"
    return f"`{value[1:]}` (its default)" if value.startswith("=") else f"`{value}`"


CONTRACT_RULES: tuple[type[ContractRule], ...] = (
    Uncalled,
    CallTypeError,
    CallSiteArguments,
    CallSiteUnproven,
    UnfollowedDrafter,
)


def example_contract(example: CallExample) -> Contract:
    """The one-caller contract of an example (for tests and the rules doc)."""

    def call(method: str, args: tuple[str, ...], line: int) -> ModelCall:
        keywords = tuple(a.split("=", 1)[0] for a in args if "=" in a)
        return ModelCall(method, args, keywords, sum("=" not in a for a in args), "speculator.py", line)

    logits = call("compute_logits", example.logits_call, 2)
    reach = Reach("ExampleSpeculator", "speculator.py", 1, unfollowed=list(example.unfollowed))
    if example.uncreatable:  # never made: it calls nothing
        reach.uncreatable = example.uncreatable
    elif example.top_tokens_call is None:
        reach.logits.append(logits)
    else:
        reach.pairs.append(CallPair(call("get_top_tokens", example.top_tokens_call, 3), (logits,)))
    return Contract((reach,))
