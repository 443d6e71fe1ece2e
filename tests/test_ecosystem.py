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


def test_pr_body_counts_drafters_not_platform_rows(tmp_path):
    """One architecture whose classes of two platform files both get a method is one drafter (two rows)."""
    tree = build_tree(FIXTURES / "scan" / "dispatch_if_elif", tmp_path / "tree")
    body = tmp_path / "pr.md"
    assert run_cli("fix", str(tree), "--all", "--diff", "--pr-body", str(body)).returncode == 0
    text = body.read_text()
    assert "Add `get_top_tokens()` to 1 speculative-decoding drafter," in text
    assert text.count("| `ForkMTPModel` |") == 2  # its CUDA/TPU and CPU/XPU classes


def test_the_pr_body_and_the_series_name_what_the_sweep_leaves_for_a_human(tmp_path):
    """The PR body listed refusals only: a reviewer was not told of the drafters the sweep leaves
    (missing_manual: a caller passes the step to compute_logits only; a divergent method)."""
    tree = build_tree(FIXTURES / "scan" / "call_contract", tmp_path / "tree")
    body, series = tmp_path / "pr.md", tmp_path / "series"
    run_cli("fix", str(tree), "--all", "--patches", str(series), "--pr-body", str(body), "--quiet")
    for text in (body.read_text(), (series / "README.md").read_text()):
        left = text.split("Left for a human", 1)[1]
        assert "- `ToyStepMTP` (ToyStepMTP, vllm/model_executor/models/toy_step_mtp.py" in left
        assert ": missing_manual: StepProposer" in left
        assert "- `ToyLayeredMTPModel` (ToyLayeredMTP, " in left and ": divergent: " in left


def test_fix_warns_of_the_speculators_it_judged_without_as_scan_does(tmp_path):
    """fix wrote mirrors for drafters judged without a speculator the scan could not follow, and said
    nothing: the warnings came from scan alone. Cold and from a cached scan alike."""
    case = FIXTURES / "scan" / "selection_unread_constructions"
    tree = build_tree(case, tmp_path / "tree")
    expected = [
        f"warning: speculator not followed: {note}"
        for note in (case / "expected_caller_notes.txt").read_text().splitlines()
    ]
    cache = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    cold = run_cli("fix", str(tree), "--all", "--diff", env=cache)
    run_cli("scan", str(tree), env=cache)  # leaves its result in the cache
    warm = run_cli("fix", str(tree), "--all", "--diff", env=cache)
    for done in (cold, warm):
        assert [line for line in done.stderr.splitlines() if line.startswith("warning:")] == expected
    assert run_cli("fix", str(tree), "--all", "--diff", "--quiet").stderr == ""


def test_a_series_with_nothing_to_write_claims_nothing(tmp_path):
    """On a tree already fixed, the PR body said "Add get_top_tokens() to 0 drafters" and that the scan
    reports every drafter above mirror, and the series' README said to `git am *.patch` (none)."""
    tree = build_tree(FIXTURES / "scan" / "delegation", tmp_path / "tree")
    assert run_cli("fix", str(tree), "--all", "--quiet").returncode == 0
    body, series = tmp_path / "pr.md", tmp_path / "series"
    done = run_cli("fix", str(tree), "--all", "--patches", str(series), "--pr-body", str(body), "--quiet")
    assert done.returncode == 0, done.stderr
    text = body.read_text()
    assert text.startswith("## Purpose\n\nNo change: `mtp-audit fix` writes no `get_top_tokens()` in this tree.")
    assert "Add `get_top_tokens()`" not in text and "every drafter above" not in text
    index = (series / "README.md").read_text()
    assert "git am" not in index and "None here: `mtp-audit fix` writes no method in this tree" in index
    assert sorted(p.name for p in series.iterdir()) == ["README.md"]


@pytest.mark.integration
def test_compare_two_releases(vllm_release):
    vllm_release("0.33.0"), vllm_release("0.34.0")
    result = run_cli("scan", "--compare", "0.33.0", "0.34.0", "--format", "json")
    assert result.returncode == 0, result.stderr
    changes = {c["arch"]: c for c in json.loads(result.stdout)["changes"]}
    assert changes["Nemotron3_5TranscribeMTPModel"]["before"] == "absent"
    assert changes["Nemotron3_5TranscribeMTPModel"]["after"] == "missing_manual"
    assert "NemotronHMTPModel" not in changes  # missing_fixable in both
