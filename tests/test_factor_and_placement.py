"""``--factor-pre-head`` and the drafter-only placement: what the gate refuses, what the scan reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.apply.changes import UnsafeRewrite
from mtp_audit.apply.factoring import check_factored, rewrite_factored
from mtp_audit.fix import plan_fix
from mtp_audit.locate import locate


def _consistency(tree: Path) -> dict[str, tuple[str, str | None]]:
    scanned = run_cli("scan", str(tree), "--format", "json", "--fail-on", "never")
    assert scanned.returncode == 0, scanned.stderr
    return {r["class"]: (r["status"], r["consistency"]) for r in json.loads(scanned.stdout)["drafters"]}


@pytest.fixture
def long_head(tmp_path: Path):
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head", tmp_path / "tree", "input")
    result = plan_fix(locate(tree), ["LongHeadMTPModel"], False, None)
    (insertions,) = [[i for i in result.plan.insertions if i.target.module.endswith("long_head_mtp")]]
    path = "vllm/model_executor/models/long_head_mtp.py"
    return tree, path, (tree / path).read_text(), insertions


def test_factored_rewrite_passes_its_gate_and_scans_as_mirror(long_head):
    tree, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    assert rewrite.new.count("self._pre_head(layer, hidden_states)") == 2
    assert rewrite.new.count("def _pre_head(self, layer, hidden_states: torch.Tensor) -> torch.Tensor:") == 1
    (tree / path).write_text(rewrite.new)
    assert _consistency(tree)["LongHeadMTP"] == ("supported", "mirror")


def test_gate_refuses_a_helper_that_is_not_the_old_block(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.new = rewrite.new.replace("layer.fold(hidden_states, layer.fold_scale)", "layer.fold(hidden_states)")
    with pytest.raises(UnsafeRewrite, match="with _pre_head inlined"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_gate_refuses_a_change_outside_compute_logits(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.new = rewrite.new.replace(
        "    def load_weights(self, weights):\n", "    def load_weights(self, weights):  # noqa\n"
    )
    with pytest.raises(UnsafeRewrite, match="outside compute_logits"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_without_the_flag_compute_logits_is_untouched(tmp_path):
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head", tmp_path / "tree", "input")
    result = run_cli("fix", str(tree), "--all", "--diff")
    assert result.returncode == 0, result.stderr
    assert "_pre_head" not in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]


def test_a_super_caller_takes_the_method_and_the_base_stays_untouched(tmp_path):
    tree = build_tree(FIXTURES / "fix" / "placement_mixin", tmp_path / "tree", "input")
    result = run_cli("fix", str(tree), "--all")
    assert result.returncode == 0, result.stderr
    stderr = " ".join(result.stderr.split())
    assert "placement: get_top_tokens goes into MTPMixin with the compute_logits of CausalMixin inlined" in stderr
    assert "BackendForCausalLM" in stderr  # named as the reason
    assert "get_top_tokens" not in (tree / "vllm/model_executor/models/backend_causal.py").read_text()
    assert _consistency(tree)["BackendForMTP"] == ("supported", "mirror")
