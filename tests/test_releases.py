"""Every release from 0.20.0 to 0.34.0 scans without a crash, and reports every registered drafter."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from test_real_vllm import registered_archs

pytestmark = pytest.mark.integration

RELEASES = [
    "0.17.0",  # the first release with LogitsProcessor.get_top_tokens
    "0.17.1",
    "0.18.0",
    "0.18.1",
    "0.19.0",
    "0.19.1",
    "0.20.0",
    "0.20.1",
    "0.20.2",
    "0.21.0",
    "0.22.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.0",
    "0.25.1",
    "0.26.0",
    "0.27.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
    "0.34.0",
]


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
    seen: dict[str, set[str]] = {}
    for record in doc["drafters"]:
        assert record["reason"], record
        assert record["platforms"], record
        platforms = set(record["platforms"])
        assert not platforms & seen.get(record["arch"], set()), record  # one class per platform
        seen.setdefault(record["arch"], set()).update(platforms)
        assert not platforms & {u["platform"] for u in record["unavailable_on"]}, record
        if record["status"] == "not_applicable":  # a module that cannot be imported is no verdict
            assert "import raises" not in record["reason"], record


def test_drafter_whose_import_chain_raises_on_xpu_028(vllm_release):
    """Dots3 Note's MTP module imports deepseek_v32, whose package raises on XPU, and (through its attention
    module) ``from fa_utils import compile_flash_attn_varlen_func_from_specs``, which fa_utils binds only on
    CUDA, ROCm and XPU (an ImportError on CPU and TPU): no drafter on those three."""
    result = run_cli("scan", str(vllm_release("0.28.0")), "--format", "json", "--model", "Dots3NoteMTPModel")
    records = [r for r in json.loads(result.stdout)["drafters"] if r["arch"] == "Dots3NoteMTPModel"]
    assert len(records) == 1
    (record,) = records
    assert record["platforms"] == ["cuda", "rocm"]
    assert record["status"] != "not_applicable" and "no compute_logits" not in record["reason"]
    unavailable = {u["platform"]: u["reason"] for u in record["unavailable_on"]}
    assert sorted(unavailable) == ["cpu", "tpu", "xpu"]
    assert "vllm/models/dots3_note/nvidia/mtp.py:" in unavailable["xpu"]
    assert unavailable["xpu"].endswith("deepseek_v32 does not yet support XPU.")
    for platform in ("cpu", "tpu"):
        assert (
            "vllm/v1/attention/backends/mla/prefill/flash_attn.py: import raises ImportError (line 18): cannot "
            "import name compile_flash_attn_varlen_func_from_specs from vllm.v1.attention.backends.fa_utils, which "
            "binds it only on cuda, rocm, xpu" in unavailable[platform]
        )


def test_release_without_local_argmax_is_refused(vllm_release):
    root = vllm_release("0.11.0")
    result = run_cli("scan", str(root))
    assert result.returncode == 2
    assert "vLLM 0.11.0 has no LogitsProcessor.get_top_tokens" in result.stderr
    assert result.stdout == ""
