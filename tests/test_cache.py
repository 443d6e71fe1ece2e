"""Caches never change a result: with, without, cold, warm, and after files change."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import FIXTURES, build_tree, run_cli


def scan_json(tree, *extra, env=None) -> dict:
    result = run_cli("scan", str(tree), "--format", "json", *extra, env=env)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", ["dispatch_getattr", "consistency", "delegation_cross_file"])
def test_same_result_with_and_without_cache(case, tmp_path):
    tree = build_tree(FIXTURES / "scan" / case, tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    uncached = scan_json(tree, "--no-cache", env=env)
    cold = scan_json(tree, env=env)
    assert (tmp_path / "cache" / "results").is_dir(), "the cold scan stored no result"
    warm = scan_json(tree, env=env)
    assert uncached == cold == warm


def test_result_cache_sees_a_changed_file(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "delegation_cross_file", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    before = scan_json(tree, env=env)
    assert before["drafters"][0]["status"] == "missing_fixable"
    predictor = tree / "vllm/model_executor/models/split_predictor.py"
    predictor.write_text(predictor.read_text().replace(
        "return self.logits_processor(lm_head, hidden_states)",
        "logits = self.logits_processor(lm_head, hidden_states)\n        return logits * 2",
    ))
    after = scan_json(tree, env=env)
    assert after["drafters"][0]["status"] == "missing_manual"
    assert after == scan_json(tree, "--no-cache", env=env)


def test_result_cache_sees_a_new_module(tmp_path):
    """A module that appears where resolution once found nothing changes the answer."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    registry = tree / "vllm/model_executor/models/registry.py"
    registry.write_text(registry.read_text().replace('"ToyMTPModel": ("toy_mtp", "ToyMTP"),',
                                                     '"ToyMTPModel": ("toy_mtp", "ToyMTP"),\n'
                                                     '    "LaterMTPModel": ("later_mtp", "LaterMTP"),'))
    first = scan_json(tree, env=env)
    assert [u["arch"] for u in first["unresolved"]] == ["LaterMTPModel"]
    (tree / "vllm/model_executor/models/later_mtp.py").write_text(
        "class LaterMTP:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n")
    second = scan_json(tree, env=env)
    assert not second["unresolved"]
    assert {r["arch"] for r in second["drafters"]} == {"ToyMTPModel", "LaterMTPModel"}


@pytest.mark.parametrize("case", ["consistency", "delegation_cross_file", "manual_shapes"])
def test_cached_classification_needs_no_libcst_and_changes_nothing(case, tmp_path):
    """With facts and classification answers cached, a scan whose result is not cached
    classifies without importing libcst, and says exactly what a scan without caches says."""
    tree = build_tree(FIXTURES / "scan" / case, tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    uncached = scan_json(tree, "--no-cache", env=env)
    assert scan_json(tree, env=env) == uncached
    assert (tmp_path / "cache" / "shapes").is_dir(), "no classification answer was stored"
    shutil.rmtree(tmp_path / "cache" / "results")
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "mtp_audit", "scan", str(tree), "--format",
                             "json"], capture_output=True, text=True, env={**os.environ, **env}, check=False)
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout) == uncached
    assert "libcst" not in result.stderr
