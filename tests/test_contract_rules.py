"""The call-contract rules, each against its own VALID / INVALID examples, through the analyzer.

Each example is a drafter class built in a small tree and analysed with the one
caller the example describes; an INVALID example must get the rule's verdict and
its id, a VALID one must not be decided by the rule.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import BASE, build_tree
from mtp_audit.classify.contract_rules import CONTRACT_RULES, CallExample, ContractRule, Uncalled, example_contract
from mtp_audit.locate import locate
from mtp_audit.model import ClassKey, Consistency, ModelCall, Status
from mtp_audit.resolve.names import resolve_name
from mtp_audit.scan import Scanner

CASES = [
    pytest.param(rule, valid, example, id=f"{rule.id}-{rule.name}-{'valid' if valid else 'invalid'}{i}")
    for rule in CONTRACT_RULES
    for valid, examples in ((True, rule.VALID), (False, rule.INVALID))
    for i, example in enumerate(examples)
]


def _analyse(example: CallExample, tmp_path: Path):
    root = build_tree(BASE, tmp_path / "tree")
    models = root / "vllm" / "model_executor" / "models"
    methods = example.compute_logits + (example.get_top_tokens or "")
    body = textwrap.indent(methods.replace("\n\n", "\n"), "    ")
    (models / "example_mtp.py").write_text(f"class ExampleMTP:\n{body}")
    (models / "registry.py").write_text(
        '_SPECULATIVE_DECODING_MODELS = {"ExampleMTPModel": ("example_mtp", "ExampleMTP")}\n'
    )
    scanner = Scanner(locate(root))
    key = next(
        k
        for k in resolve_name(scanner.index, "vllm.model_executor.models.example_mtp", "ExampleMTP", "cuda")
        if isinstance(k, ClassKey)
    )
    return scanner.analyzers["cuda"].analyze(key, contract=example_contract(example))


@pytest.mark.parametrize(("rule", "valid", "example"), CASES)
def test_contract_rule_examples(rule: type[ContractRule], valid: bool, example: CallExample, tmp_path: Path):
    analysis = _analyse(example, tmp_path)
    if valid:
        assert analysis.rule != rule.id, analysis.reason
    else:
        assert (analysis.status, analysis.consistency) == example.expected, analysis.reason
        assert analysis.rule == rule.id, analysis.reason
        assert "ExampleSpeculator" in analysis.reason  # the reason names the caller


def test_every_contract_rule_is_described_and_unique():
    for rule in CONTRACT_RULES:
        assert rule.id.startswith("MTP2") and rule.name and rule.message and rule.__doc__, rule
        assert rule.VALID and rule.INVALID
    assert len({r.id for r in CONTRACT_RULES}) == len(CONTRACT_RULES)


READS_STEP = "(line 3: `return self.logits_processor(self.heads[spec_step_idx], hidden_states)`)"
REASONS = [  # each INVALID example's reason, in CONTRACT_RULES order: the caller, its file and line, the call
    "no speculator that can hold it calls get_top_tokens: ExampleSpeculator (speculator.py:1) drafts "
    "with compute_logits",
    "get_top_tokens defined; ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states, "
    "spec_step_idx=spec_step_idx); get_top_tokens of ExampleMTP "
    "(vllm/model_executor/models/example_mtp.py:4) does not accept spec_step_idx= (TypeError)",
    "ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states) but "
    "compute_logits(hidden_states, spec_step_idx=spec_step_idx) (speculator.py:2) on the same path, "
    "and compute_logits reads spec_step_idx "
    f"{READS_STEP}"
    ": a mirror would draft with other values than compute_logits gets; the call site must pass the "
    "same arguments to both methods",
    "get_top_tokens defined; ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states) "
    "but compute_logits(hidden_states, step) (speculator.py:2) on the same path, and compute_logits "
    "reads spec_step_idx "
    f"{READS_STEP}",
    "ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states, spec_step_idx=0) but "
    "compute_logits(hidden_states, spec_step_idx=step) (speculator.py:2) on the same path: "
    "spec_step_idx is `0` for get_top_tokens and `step` for compute_logits, and compute_logits reads "
    "spec_step_idx "
    f"{READS_STEP}"
    ": a mirror would draft with other values than compute_logits gets; the call site must pass the "
    "same arguments to both methods",
    "get_top_tokens defined; ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states, "
    "spec_step_idx=step) but compute_logits(hidden_states) (speculator.py:2) on the same path: "
    "spec_step_idx is `step` for get_top_tokens and `0` (its default) for compute_logits, and "
    "compute_logits reads spec_step_idx "
    f"{READS_STEP}",
    "ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states, "
    "spec_step_idx=self.draft_step) but compute_logits(hidden_states, spec_step_idx=step) "
    "(speculator.py:2) on the same path: spec_step_idx is `self.draft_step` for get_top_tokens and "
    "`step` for compute_logits, which only run-time values can compare: a mirror is safe only where "
    "both get the same values; the call site must pass the same arguments to both methods",
    "get_top_tokens defined; mirror of compute_logits of ExampleMTP "
    "(vllm/model_executor/models/example_mtp.py:2); yet ExampleSpeculator (speculator.py:3) calls "
    "get_top_tokens(self.last_hidden_states) but compute_logits(hidden_states) (speculator.py:2) on "
    "the same path: hidden_states is `self.last_hidden_states` for get_top_tokens and "
    "`hidden_states` for compute_logits, which only run-time values can compare",
    "ExampleSpeculator (speculator.py:1) calls no get_top_tokens that the scan sees, but its drafting path goes "
    "where the scan does not follow it (speculator.py:4: `greedy_sample(self.model, hidden_states)`): whether "
    "get_top_tokens is called there, and with which arguments, is not known",
    "ExampleSpeculator's drafting path cannot be followed (speculator.py:1: class ExampleSpeculator raises "
    "TypeError (no consistent method resolution order for its bases A, B)): whether get_top_tokens is called "
    "there, and with which arguments, is not known",
]


def test_each_contract_rule_says_which_call_and_where(tmp_path: Path):
    invalid = [example for rule in CONTRACT_RULES for example in rule.INVALID]
    assert [_analyse(example, tmp_path / str(i)).reason for i, example in enumerate(invalid)] == REASONS


STEP_HEAD = (
    "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
    "    return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n"
)
LOGITS_WITH_STEP = ("hidden_states", "spec_step_idx=spec_step_idx")


def test_a_call_with_two_arguments_get_top_tokens_does_not_accept(tmp_path: Path):
    existing = _analyse(
        CallExample(
            STEP_HEAD,
            (*LOGITS_WITH_STEP, "temperature=t"),
            LOGITS_WITH_STEP,
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[0], hidden_states)\n",
        ),
        tmp_path / "existing",
    )
    assert (existing.status, existing.consistency, existing.rule) == (
        Status.SUPPORTED,
        Consistency.DIVERGENT,
        "MTP202",
    )
    assert existing.reason.endswith("does not accept spec_step_idx=, temperature= (TypeError)")
    # no get_top_tokens yet: a mirror would take compute_logits's parameters, and the call still raises
    mirror = _analyse(CallExample(STEP_HEAD, ("hidden_states", "temperature=t", "top_k=k"), LOGITS_WITH_STEP), tmp_path)
    assert (mirror.status, mirror.rule) == (Status.MISSING_MANUAL, "MTP202")
    assert mirror.reason == (
        "ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states, temperature=t, top_k=k); a mirror "
        "of compute_logits does not accept temperature=, top_k= (TypeError): a mirror takes the parameters of "
        "compute_logits, so that call would raise; the call site must pass the same arguments to both methods"
    )


def test_an_argument_read_only_in_a_condition(tmp_path: Path):
    """compute_logits reads spec_step_idx in an ``if`` test, no statement of its own to quote."""
    analysis = _analyse(
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    if spec_step_idx:\n"
            "        return self.logits_processor(self.heads[1], hidden_states)\n"
            "    return self.logits_processor(self.lm_head, hidden_states)\n",
            ("hidden_states",),
            LOGITS_WITH_STEP,
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n",
        ),
        tmp_path,
    )
    assert (analysis.consistency, analysis.rule) == (Consistency.DIVERGENT, "MTP203")
    assert analysis.reason == (
        "get_top_tokens defined; ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states) but "
        "compute_logits(hidden_states, spec_step_idx=spec_step_idx) (speculator.py:2) on the same path, and "
        "compute_logits reads spec_step_idx, which get_top_tokens has no parameter for"
    )


def test_an_example_is_the_calls_it_describes():
    [reach] = example_contract(Uncalled.INVALID[0]).reaches  # drafts with compute_logits alone
    assert (reach.speculator, reach.file, reach.line, reach.pairs) == ("ExampleSpeculator", "speculator.py", 1, [])
    assert reach.logits == [ModelCall("compute_logits", ("hidden_states",), (), 1, "speculator.py", 2)]
    # an argument's value may hold "=" too: the keyword is what comes before the first one
    step = ("hidden_states", "spec_step_idx=step if step >= 0 else 0")
    [(reach, pair)] = example_contract(CallExample(STEP_HEAD, step, step)).pairs()
    assert pair.top_tokens == ModelCall("get_top_tokens", step, ("spec_step_idx",), 1, "speculator.py", 3)
    assert pair.logits == (ModelCall("compute_logits", step, ("spec_step_idx",), 1, "speculator.py", 2),)


HEAD_ONLY = "def compute_logits(self, hidden_states):\n    return self.logits_processor(self.lm_head, hidden_states)\n"


def test_a_drafter_no_speculator_reaches_get_top_tokens_of(tmp_path: Path):
    fixable = _analyse(Uncalled.INVALID[0], tmp_path / "fixable")
    assert (fixable.status, fixable.uncalled, fixable.rule) == (Status.NOT_APPLICABLE, True, "MTP201")
    assert fixable.compute_logits is not None and fixable.compute_logits.owner.name == "ExampleMTP"
    # a get_top_tokens already written stays supported, and the reason says no caller reaches it
    supported = _analyse(
        CallExample(
            HEAD_ONLY,
            None,
            ("hidden_states",),
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n",
        ),
        tmp_path / "supported",
    )
    assert (supported.status, supported.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert supported.reason.endswith(
        "; no speculator that can hold it calls get_top_tokens: ExampleSpeculator (speculator.py:1) drafts with "
        "compute_logits"
    )


def test_a_compute_logits_no_mirror_can_follow_is_judged_before_its_callers(tmp_path: Path):
    analysis = _analyse(
        CallExample(
            "def compute_logits(self, hidden_states):\n    return self.lm_head(hidden_states)\n",
            ("hidden_states", "temperature=t"),
            ("hidden_states",),
        ),
        tmp_path,
    )
    assert (analysis.status, analysis.rule) == (Status.MISSING_MANUAL, "MTP104")
    assert analysis.reason == "logits come from self.lm_head(...), not self.logits_processor (line 3)"


PLAIN_TOP_TOKENS = (
    "def get_top_tokens(self, hidden_states):\n"
    "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
)
AT = "(vllm/model_executor/models/example_mtp.py:{})"


def test_parameters_that_compute_logits_does_not_read_and_no_caller_passes(tmp_path: Path):
    unread = (
        "def compute_logits(self, hidden_states, spec_step_idx=0, temperature=1.0):\n"
        "    return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    both = ("hidden_states", "spec_step_idx=spec_step_idx", "temperature=t")
    equivalent = _analyse(CallExample(unread, ("hidden_states",), both, PLAIN_TOP_TOKENS), tmp_path / "equivalent")
    assert (equivalent.status, equivalent.consistency) == (Status.SUPPORTED, Consistency.EQUIVALENT)
    assert equivalent.reason == (
        "get_top_tokens defined; the mirror of compute_logits of ExampleMTP " + AT.format(2) + " but for "
        "spec_step_idx, temperature, which compute_logits does not read and no caller passes"
    )
    # the parameters dropped, and another head: not the mirror
    other_head = _analyse(
        CallExample(unread, ("hidden_states",), both, PLAIN_TOP_TOKENS.replace("self.lm_head", "self.head")),
        tmp_path / "other_head",
    )
    assert other_head.consistency == Consistency.UNPROVEN


def test_a_parameter_compute_logits_reads_is_never_dropped(tmp_path: Path):
    """Dropped from get_top_tokens, whose body still names it: a NameError, not an equivalent method."""
    analysis = _analyse(
        CallExample(
            STEP_HEAD,
            ("hidden_states",),
            ("hidden_states",),
            "def get_top_tokens(self, hidden_states):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[spec_step_idx], hidden_states)\n",
        ),
        tmp_path,
    )
    assert analysis.consistency == Consistency.UNPROVEN
    assert analysis.reason == (
        "get_top_tokens defined; get_top_tokens of ExampleMTP " + AT.format(4) + " is written differently from "
        "compute_logits of ExampleMTP " + AT.format(2) + "; run `mtp-audit verify`"
    )


def test_a_statement_that_diverges_and_a_caller_that_does_too(tmp_path: Path):
    analysis = _analyse(
        CallExample(
            "def compute_logits(self, hidden_states, spec_step_idx=0):\n"
            "    logits = self.logits_processor(self.heads[spec_step_idx], hidden_states)\n"
            '    logits.masked_fill_(self.suppressed, -float("inf"))\n'
            "    return logits\n",
            ("hidden_states",),
            LOGITS_WITH_STEP,
            "def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
            "    return self.logits_processor.get_top_tokens(self.heads[spec_step_idx], hidden_states)\n",
        ),
        tmp_path,
    )
    assert (analysis.consistency, analysis.rule) == (Consistency.DIVERGENT, "MTP203")
    # the statement first (it decides the tokens), then the call site
    assert analysis.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + ": logits masked after the head "
        'call (line 4: `logits.masked_fill_(self.suppressed, -float("inf"))`); get_top_tokens of ExampleMTP '
        + AT.format(6)
        + " ignores it; also, ExampleSpeculator (speculator.py:3) calls get_top_tokens(hidden_states) but "
        "compute_logits(hidden_states, spec_step_idx=spec_step_idx) (speculator.py:2) on the same path, and "
        "compute_logits reads spec_step_idx (line 3: `logits = self.logits_processor(self.heads[spec_step_idx], "
        "hidden_states)`)"
    )
