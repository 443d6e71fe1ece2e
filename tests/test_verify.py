"""verify on real vLLM code (CPU torch, vLLM installed without its CUDA stack: see README)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration

if importlib.util.find_spec("torch") is None:
    pytest.fail("verify tests need the verify extra: pip install -e '.[test,verify]' && pip install --no-deps "
                "vllm==0.34.0 (README)", pytrace=False)


def _fixed_copy(vllm_release, version: str, model: str, tmp_path: Path) -> Path:
    tree = tmp_path / f"vllm-{version}"
    shutil.copytree(vllm_release(version) / "vllm", tree / "vllm")
    assert run_cli("fix", str(tree), "--model", model).returncode == 0
    return tree


def test_nemotron_033_passes_at_tp_1_and_2_and_emits_a_test(vllm_release, tmp_path):
    tree = _fixed_copy(vllm_release, "0.33.0", "nemotron_h", tmp_path)
    emitted = tmp_path / "test_nemotron_h_mtp_top_tokens.py"
    report = tmp_path / "verify.json"
    result = run_cli("verify", str(tree), "--model", "nemotron_h", "--tp", "1,2", "--emit-test", str(emitted),
                     "--json", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    body = tmp_path / "pr.md"
    preview = run_cli("fix", str(vllm_release("0.33.0")), "--model", "nemotron_h", "--diff", "--pr-body", str(body),
                      "--verify-report", str(report))
    assert preview.returncode == 0, preview.stderr
    assert "| `NemotronHMTPModel` | `NemotronHMTP` | cpu, cuda, rocm, tpu, xpu | 2 | pass | 584 |" in body.read_text()
    rows = [line for line in result.stdout.splitlines() if "NemotronHMTP" in line]
    assert len(rows) == 16 and all(" pass " in row for row in rows)  # 2 TP x 2 dtypes x 4 cases
    for case in ("random", "ties", "padding", "large"):
        assert any(case in row for row in rows)
    text = emitted.read_text()
    assert text.startswith("# SPDX-License-Identifier: Apache-2.0\n")
    assert "from vllm.model_executor.models.nemotron_h_mtp import NemotronHMTP" in text
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(emitted)],
                         capture_output=True, text=True, env={"PYTHONPATH": str(tree), "VLLM_TARGET_DEVICE": "cpu",
                                                              "PATH": "/usr/bin:/bin"}, check=False)
    assert run.returncode == 0, run.stdout[-2000:]
    assert "6 passed" in run.stdout


def test_deepseek_passes_and_a_planted_wrong_mirror_is_caught(vllm_release, tmp_path):
    tree = _fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path)
    good = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1,2")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "steps [0, 1, 2]" in good.stdout

    path = tree / "vllm/model_executor/models/deepseek_mtp.py"
    head, mirror = path.read_text().split("    def get_top_tokens(", 1)
    planted = mirror.replace("mtp_layer.shared_head.head, mtp_layer.shared_head(hidden_states)",
                             "mtp_layer.shared_head.head, hidden_states", 1)
    assert planted != mirror
    path.write_text(head + "    def get_top_tokens(" + planted)  # skips the shared head's RMSNorm
    bad = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1")
    assert bad.returncode == 1
    assert "MISMATCH" in bad.stderr and "compute_logits(...).argmax(-1) = " in bad.stderr
    assert "get_top_tokens = " in bad.stderr and "logit " in bad.stderr


def test_unfixed_drafter_is_not_verified(vllm_release):
    result = run_cli("verify", str(vllm_release("0.34.0")), "--model", "nemotron_h", "--tp", "1")
    assert result.returncode == 2
    assert "not verified" in result.stderr and "run `mtp-audit fix` first" in result.stderr


def test_missing_torch_is_a_clear_usage_error(monkeypatch):
    from mtp_audit.errors import UsageError
    from mtp_audit.verify import run

    monkeypatch.setattr(run.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'mtp-audit\[verify\]'"):
        run.check_environment()
