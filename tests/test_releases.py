"""Every release from 0.20.0 to 0.34.0 scans without a crash, and reports every registered drafter."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from test_real_vllm import registered_archs

pytestmark = pytest.mark.integration

RELEASES = ["0.20.0", "0.20.1", "0.20.2", "0.21.0", "0.22.0", "0.22.1", "0.23.0", "0.24.0", "0.25.0",
            "0.25.1", "0.26.0", "0.27.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0",
            "0.33.0", "0.34.0"]


@pytest.mark.parametrize("version", RELEASES)
def test_release_scans_cleanly(version, vllm_release):
    root = vllm_release(version)
    result = run_cli("scan", str(root), "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    assert "Traceback" not in result.stderr
    doc = json.loads(result.stdout)
    assert doc["vllm_version"] == version
    assert not doc["errors"] and not doc["unresolved"]
    assert registered_archs(root) <= {r["arch"] for r in doc["drafters"]}
    for record in doc["drafters"]:
        assert record["reason"], record
        assert record["platforms"], record


def test_release_without_local_argmax_is_refused(vllm_release):
    root = vllm_release("0.11.0")
    result = run_cli("scan", str(root))
    assert result.returncode == 2
    assert "vLLM 0.11.0 has no LogitsProcessor.get_top_tokens" in result.stderr
    assert result.stdout == ""
