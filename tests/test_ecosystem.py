"""Model types, release comparison, PR bodies, quiet mode."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, build_tree, run_cli


def test_model_type_selects_its_drafter(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "model_types", tmp_path / "tree")
    mapping = run_cli("scan", str(tree), "--by-model-type")
    assert mapping.returncode == 0
    assert mapping.stdout.splitlines() == [
        "toy_mtp: ToyMTPModel (missing_fixable)",
        "toy_v3: ToyMTPModel (missing_fixable)",
        "toy_v3_lite: ToyMTPModel (missing_fixable)",
    ]
    doc = json.loads(run_cli("scan", str(tree), "--model", "toy_v3_lite", "--format", "json").stdout)
    assert [r["arch"] for r in doc["drafters"]] == ["ToyMTPModel"]
    diff = run_cli("fix", str(tree), "--model", "toy_v3", "--diff")
    assert diff.returncode == 0 and "+    def get_top_tokens(" in diff.stdout


def test_pr_body_and_quiet(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "delegation", tmp_path / "tree")
    body = tmp_path / "pr.md"
    result = run_cli("fix", str(tree), "--all", "--quiet", "--pr-body", str(body))
    assert result.returncode == 0 and result.stderr == ""
    text = body.read_text()
    for heading in ("## Purpose", "## Test Plan", "## Test Result"):
        assert heading in text
    assert "| `ToyDelegMTPModel` | `ToyDelegMTP` | cpu, cuda, rocm, tpu, xpu |" in text
    assert "mtp-audit fix --all" in text and "mtp-audit verify --model ToyDelegMTPModel --tp 1,2" in text
    assert run_cli("scan", str(tree), "--quiet").stdout == ""


@pytest.mark.integration
def test_compare_two_releases(vllm_release):
    vllm_release("0.33.0"), vllm_release("0.34.0")
    result = run_cli("scan", "--compare", "0.33.0", "0.34.0", "--format", "json")
    assert result.returncode == 0, result.stderr
    changes = {c["arch"]: c for c in json.loads(result.stdout)["changes"]}
    assert changes["Nemotron3_5TranscribeMTPModel"]["before"] == "absent"
    assert changes["Nemotron3_5TranscribeMTPModel"]["after"] == "missing_manual"
    assert "NemotronHMTPModel" not in changes  # missing_fixable in both
