"""verify evaluates each caller's arguments as that caller would, or says it cannot (no torch needed)."""

from __future__ import annotations

import pytest

from mtp_audit.verify.arguments import CallArgument, CallEnvironment

STEPPED = {"compute_logits": ("hidden_states", "spec_step_idx"), "get_top_tokens": ("hidden_states", "spec_step_idx")}
CALLED = ("hidden_states", "spec_step_idx=spec_step_idx")


@pytest.mark.parametrize(
    ("get_top_tokens", "step", "expected"),
    [
        (("hidden_states", "spec_step_idx=spec_step_idx + 1"), 2, (["H"], {"spec_step_idx": 3})),
        (("hidden_states", "spec_step_idx=spec_step_idx - 1"), 0, (["H"], {"spec_step_idx": -1})),
        (("hidden_states", "spec_step_idx=2 * spec_step_idx % 3"), 2, (["H"], {"spec_step_idx": 1})),
        (("hidden_states", "spec_step_idx"), 4, (["H", 4], {})),
        (("hidden_states=hidden_states", "spec_step_idx=0"), 4, ([], {"hidden_states": "H", "spec_step_idx": 0})),
        (("hidden_states",), 4, (["H"], {})),
    ],
)
def test_arguments_are_evaluated_with_the_step_and_the_hidden_states(get_top_tokens, step, expected):
    environment = CallEnvironment.of(get_top_tokens, CALLED, STEPPED)
    assert environment.step == "spec_step_idx" and environment.per_step
    assert environment.bind("get_top_tokens", "H", step) == expected
    assert environment.bind("compute_logits", "H", step) == (["H"], {"spec_step_idx": step})


@pytest.mark.parametrize(
    ("get_top_tokens", "named"),
    [
        (("hidden_states", "spec_step_idx=self.draft_step"), "spec_step_idx=self.draft_step"),
        (("self.last_hidden_states", "spec_step_idx=spec_step_idx"), "self.last_hidden_states"),
        (("hidden_states", "spec_step_idx=cur"), "spec_step_idx=cur"),
        (("hidden_states[:n]", "spec_step_idx=spec_step_idx"), "hidden_states[:n]"),
        (("hidden_states * 2", "spec_step_idx=spec_step_idx"), "hidden_states * 2"),
        (("hidden_states", "spec_step_idx=spec_step_idx // 0"), "spec_step_idx=spec_step_idx // 0"),
        (("hidden_states", "*extra"), "*extra"),
        (("hidden_states", "**kwargs"), "**kwargs"),
    ],
)
def test_an_argument_only_the_caller_holds_is_named_never_stood_in_for(get_top_tokens, named):
    with pytest.raises(CallArgument, match="get_top_tokens's argument") as raised:
        CallEnvironment.of(get_top_tokens, CALLED, STEPPED)
    assert named in str(raised.value)


def test_the_step_variable_is_what_the_step_parameter_receives_by_position_too():
    environment = CallEnvironment.of(("h", "step"), ("h", "step"), STEPPED)
    assert environment.step == "step"
    assert environment.bind("get_top_tokens", "H", 5) == (["H", 5], {})


def test_a_step_passed_to_one_call_only_is_the_step_variable():
    environment = CallEnvironment.of(CALLED, ("hidden_states",), STEPPED)
    assert environment.passed_step("get_top_tokens", 3) == 3 and environment.passed_step("compute_logits", 3) is None


def test_a_name_another_parameter_receives_is_not_the_step():
    parameters = {"compute_logits": ("hidden_states", "sampling_metadata"), "get_top_tokens": ("hidden_states",)}
    with pytest.raises(CallArgument, match="sampling_metadata"):
        CallEnvironment.of(("hidden_states",), ("hidden_states", "sampling_metadata"), parameters)


def test_a_caller_form_not_run_as_called_makes_the_record_not_verified_whatever_the_others_did():
    from mtp_audit.model import DrafterRecord, Status
    from mtp_audit.verify.run import Verdict, judge, summary_line

    record = DrafterRecord("A", "A", "m", "f.py", 1, ["cpu"], Status.SUPPORTED, "")
    case = {"kind": "tokens", "has_logits": True, "ids": [1], "mismatch": None, "batch": 7, "form": "P (p.py:3)"}
    case |= {"dtype": "float32", "case": "random", "step": None}
    variant = {"variant": "default", "cases": [case], "notes": [], "scope": []}
    unreproduced = "S (s.py:9): get_top_tokens's argument spec_step_idx=self.draft_step cannot be evaluated"
    result = {"not_verified": None, "recipe": [], "variants": [variant], "unreproduced": [unreproduced]}
    outcome = judge(record, 1, [{"results": [result]}], 0)
    assert outcome.verdict == Verdict.NOT_VERIFIED
    assert (
        outcome.detail.startswith("not run as called: S (s.py:9)")
        and "the other call forms ran: 7 rows" in outcome.detail
    )
    assert summary_line([outcome]).endswith("1 not verified (1 a caller's argument only its run time holds)")


def test_a_mismatch_naming_an_id_compute_logits_never_produces_says_so():
    """An id past compute_logits' vocabulary has no logit to show: said as outside it, not as ``logit nan``."""
    from mtp_audit.verify.run import _describe

    def case(logit: float | None) -> dict:
        found = {"row": 0, "argmax_id": 208, "get_top_tokens_id": 1040 if logit is None else 9, "argmax_logit": -23.6}
        found |= {"get_top_tokens_logit": logit, "vocab": 1040, "rows": 3}
        return {"dtype": "float32", "case": "random", "batch": 7, "step": None, "form": "positional", "mismatch": found}

    assert "get_top_tokens = 1040 (outside compute_logits' 1040 ids); 3 row(s) differ" in _describe(case(None))
    assert "get_top_tokens = 9 (logit -30.5); 3 row(s) differ" in _describe(case(-30.5))
