"""verify on small drafters (tests/fixtures/verify/configured_drafters.py), run by one worker at TP 1:
the processor class the drafter builds, configurations past the cap, config values compared with literals,
views of a per-step container, and configurations that build the same thing."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

if importlib.util.find_spec("torch") is None or importlib.util.find_spec("vllm") is None:
    pytest.fail("these tests need the verify extra and vLLM installed (README)", pytrace=False)

FIXTURES = Path(__file__).parent / "fixtures" / "verify"
MODULE = "configured_drafters"
CLASSES = (
    "ProcessorSubclassDrafter",
    "ManyFlagsDrafter",
    "StringPolicyDrafter",
    "UnreachedBranchDrafter",
    "AliasedLayersDrafter",
    "UnreadAliasDrafter",
    "NestedPointsDrafter",
    "PrunedVocabDrafter",
    "FullVocabDrafter",
    "FullVocabThroughBaseDrafter",
    "DraftVocabHeadDrafter",
    "ProtocolFirstDrafter",
    "HfConfigDrafter",
)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict:
    from mtp_audit.model import DrafterRecord, SourceTree, Status
    from mtp_audit.verify.run import judge, run_workers

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv("PYTHONPATH", str(FIXTURES))
    site = Path(importlib.util.find_spec("vllm").origin).parents[1]
    targets = [{"module": MODULE, "cls": cls, "forms": []} for cls in CLASSES]
    try:
        ranks = run_workers(SourceTree(site, site / "vllm", None), targets, 1, tmp_path_factory.mktemp("verify"))
    finally:
        monkeypatch.undo()
    out = {}
    for index, cls in enumerate(CLASSES):
        record = DrafterRecord(None, cls, MODULE, "", 0, [], Status.SUPPORTED, "")
        out[cls] = (judge(record, 1, ranks, index), ranks[0]["results"][index])
    return out


def test_the_processor_subclass_the_drafter_builds_runs_its_override(outcomes):
    outcome, result = outcomes["ProcessorSubclassDrafter"]
    assert outcome.verdict == "MISMATCH", outcome.detail
    assert any(step["kind"] == "logits_processor_subclass" for step in result["variants"][0]["recipe"])


def test_configurations_past_the_cap_are_named_and_never_a_pass(outcomes):
    from mtp_audit.verify.constants import MAX_VARIANTS

    outcome, result = outcomes["ManyFlagsDrafter"]
    assert outcome.verdict == "not verified", outcome.detail
    assert len(result["variants"]) == MAX_VARIANTS
    assert "config.mask_special_tokens=2" in outcome.not_run
    assert f"past the cap of {MAX_VARIANTS}" in outcome.detail and "config.mask_special_tokens=2" in outcome.detail


def test_a_config_value_compared_with_a_string_is_tried_with_it(outcomes):
    outcome, _ = outcomes["StringPolicyDrafter"]
    assert outcome.verdict == "MISMATCH", outcome.detail
    assert "config.special_token_policy='suppress'" in outcome.detail


def test_a_config_branch_no_value_takes_is_named(outcomes):
    outcome, _ = outcomes["UnreachedBranchDrafter"]
    assert outcome.verdict == "not verified", outcome.detail
    [branch] = outcome.not_taken
    assert "configured_drafters.py:" in branch
    assert "if self.config.special_token_count > 5: its body never ran" in branch


def test_a_view_of_the_step_layers_shares_them(outcomes):
    outcome, result = outcomes["AliasedLayersDrafter"]
    assert outcome.verdict == "pass", outcome.detail
    assert any(step["kind"] == "steps_view" for step in result["recipe"])


def test_a_container_alias_not_read_is_not_verified_naming_it(outcomes):
    outcome, _ = outcomes["UnreadAliasDrafter"]
    assert outcome.verdict == "not verified", outcome.detail
    assert "cannot build UnreadAliasDrafter._mtp_layers = [layer for layer in self.layers.values()" in outcome.detail


def test_each_configuration_runs_once(outcomes):
    outcome, result = outcomes["NestedPointsDrafter"]
    labels = [variant["variant"] for variant in result["variants"]]
    assert len(labels) == len(set(labels)) == 6, labels
    assert outcome.verdict == "pass", outcome.detail


def _variants(result: dict) -> list[str]:
    return [variant["variant"] for variant in result["variants"]]


def test_what_only_a_base_init_the_drafter_never_runs_sets_is_no_configuration(outcomes):
    """verify builds what the ``__init__`` that runs can set: a base's ``__init__`` that the drafter's own
    never calls (``nn.Module.__init__(self)`` in its place) adds no configuration, so a get_top_tokens that is
    right for every configuration that can run is not a mismatch (it was, under a map never built)."""
    pruned, pruned_result = outcomes["PrunedVocabDrafter"]
    assert pruned.verdict == "MISMATCH", pruned.detail  # under its map, its get_top_tokens returns draft ids
    assert any("draft_id_to_target_id=map" in label for label in _variants(pruned_result))
    full, full_result = outcomes["FullVocabDrafter"]
    assert full.verdict == "pass", full.detail
    assert not any("draft_id_to_target_id" in label for label in _variants(full_result))
    for name in ("FullVocabThroughBaseDrafter", "ProtocolFirstDrafter"):  # Base.__init__(self), super(P, self)
        outcome, result = outcomes[name]
        assert outcome.verdict == "MISMATCH", outcome.detail  # the pruning __init__ runs: the map is built
        assert any("draft_id_to_target_id=map" in label for label in _variants(result)), name


def test_a_config_read_off_another_object_is_built_as_a_config(outcomes):
    """``self.config = vllm_config.hf_config`` reads like ``self.x = config.x``, but is the config itself:
    built as one, so ``getattr(self.config, "final_logit_softcapping", None)`` is tried both ways."""
    outcome, result = outcomes["HfConfigDrafter"]
    assert outcome.verdict == "pass", outcome.detail
    assert _variants(result) == ["config.final_logit_softcapping=None", "config.final_logit_softcapping=2"]


def test_a_config_size_that_sizes_the_head_is_its_rows_not_a_slice_to_try(outcomes):
    """A config attribute that slices the logits is tried inside the vocabulary, unless the ``__init__``
    sizes the head with it: then it is the head's rows (trying half of them cut the logits alone, and a
    right get_top_tokens was a mismatch)."""
    outcome, result = outcomes["DraftVocabHeadDrafter"]
    assert outcome.verdict == "pass", outcome.detail
    assert _variants(result) == ["default"]


DECORATED = """
import functools


def kept(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        return method(*args, **kwargs)

    return method


class Decorated:
    def __init__(self, flag):
        self.config = type("Config", (), {"flag": flag})()

    @kept
    @kept
    def compute_logits(self, hidden_states):
        if self.config.flag:
            return hidden_states * 2
        return hidden_states
"""


def test_an_untaken_config_branch_of_a_decorated_method_is_named_at_its_line(tmp_path: Path) -> None:
    """The traced lines are the file's; a decorated method's source starts at its first decorator, so
    the branch's line in the file is the source's line plus the decorator's line, less one. (In a
    process of its own, as verify's workers run: the branch reader imports vLLM.)"""
    (tmp_path / "decorated_drafter.py").write_text(DECORATED)
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1])\n"
        "from mtp_audit.verify.worker import ConfigBranches, torchvision_without_its_ops\n"
        "schemas = torchvision_without_its_ops()\n"
        "import decorated_drafter\n"
        "branches = ConfigBranches()\n"
        "with branches.tracing():\n"
        "    decorated_drafter.Decorated(flag=False).compute_logits(1)\n"
        "print(json.dumps(branches.not_taken()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, check=True)
    line = DECORATED.splitlines().index("        if self.config.flag:") + 1
    assert json.loads(done.stdout.splitlines()[-1]) == [
        f"decorated_drafter.py:{line}: if self.config.flag: its body never ran (config.flag as tried)"
    ]
