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

from ..model import Consistency, Status
from ..resolve.callers import CallPair, ModelCall, Reach
from .calls import Contract, bind, first_read, form, reads, where
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


class CallSiteArguments(ContractRule):
    """The tokens must match ``compute_logits(...).argmax(-1)`` as each caller calls both. A caller
    that passes ``compute_logits`` an argument it reads (``spec_step_idx``, which picks each step's
    head) but calls ``get_top_tokens`` without it drafts every step with the default: a mirror is
    refused, naming the call site, and an existing method is divergent. mtp-audit does not edit the
    call site: a speculator serves many drafters, and passing a new argument there changes them all."""

    id = "MTP203"
    name = "call-site-arguments"
    message = "a caller passes compute_logits an argument it reads but not get_top_tokens"
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
    )

    @staticmethod
    def check(
        reach: Reach,
        pair: CallPair,
        logits_params: list[Param],
        logits_text: str,
        top_params: list[Param],
        def_line: int | None = None,
    ) -> str | None:
        """``def_line``: the line of compute_logits's ``def``, to name the statement that reads the argument."""
        top_bound, _ = bind(top_params, pair.top_tokens)
        for logits in pair.logits:
            bound, _ = bind(logits_params, logits)
            for name in sorted(bound - top_bound):
                if reads(logits_text, name):
                    read = first_read(logits_text, name, def_line) if def_line is not None else None
                    return (
                        f"{reach.speculator} ({where(pair.top_tokens)}) calls {form(pair.top_tokens)} but "
                        f"{form(logits)} ({where(logits)}) on the same path, and compute_logits reads {name}"
                        + (f" {read}" if read else "")
                    )
        return None


CONTRACT_RULES: tuple[type[ContractRule], ...] = (Uncalled, CallTypeError, CallSiteArguments)


def example_contract(example: CallExample) -> Contract:
    """The one-caller contract of an example (for tests and the rules doc)."""

    def call(method: str, args: tuple[str, ...], line: int) -> ModelCall:
        keywords = tuple(a.split("=", 1)[0] for a in args if "=" in a)
        return ModelCall(method, args, keywords, sum("=" not in a for a in args), "speculator.py", line)

    logits = call("compute_logits", example.logits_call, 2)
    reach = Reach("ExampleSpeculator", "speculator.py", 1)
    if example.top_tokens_call is None:
        reach.logits.append(logits)
    else:
        reach.pairs.append(CallPair(call("get_top_tokens", example.top_tokens_call, 3), (logits,)))
    return Contract((reach,))
