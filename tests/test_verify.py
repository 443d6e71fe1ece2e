"""verify on real vLLM code (CPU torch, vLLM installed without its CUDA stack: see README)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration

if importlib.util.find_spec("torch") is None:
    pytest.fail(
        "verify tests need the verify extra: pip install -e '.[test,verify]' && pip install --no-deps "
        "vllm==0.34.0 (README)",
        pytrace=False,
    )


def _fixed_copy(vllm_release, version: str, model: str, tmp_path: Path) -> Path:
    tree = tmp_path / f"vllm-{version}"
    shutil.copytree(vllm_release(version) / "vllm", tree / "vllm")
    assert run_cli("fix", str(tree), "--model", model).returncode == 0
    return tree


def _results(path: Path) -> list[dict]:
    return json.loads(path.read_text())["results"]


def test_nemotron_033_passes_at_tp_1_and_2_and_emits_a_test(vllm_release, tmp_path):
    tree = _fixed_copy(vllm_release, "0.33.0", "nemotron_h", tmp_path)
    emitted = tree / "tests" / "test_nemotron_h_mtp_top_tokens.py"
    emitted.parent.mkdir()
    report = tmp_path / "verify.json"
    result = run_cli(
        "verify", str(tree), "--model", "nemotron_h", "--tp", "1,2", "--emit-test", str(emitted), "--json", str(report)
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 results: 2 passed, 0 mismatched, 0 not verified" in result.stderr
    body = tmp_path / "pr.md"
    preview = run_cli(
        "fix",
        str(vllm_release("0.33.0")),
        "--model",
        "nemotron_h",
        "--diff",
        "--pr-body",
        str(body),
        "--verify-report",
        str(report),
    )
    assert preview.returncode == 0, preview.stderr
    assert "| `NemotronHMTPModel` | `NemotronHMTP` | cpu, cuda, rocm, tpu, xpu | 2 | pass | 2664 |" in body.read_text()
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ NemotronHMTPModel")]
    assert len(rows) == 20 and all(" pass " in row for row in rows)  # 2 TP x 2 dtypes x 5 cases
    for case in ("random", "ties", "padding", "large", "winners"):
        assert any(case in row for row in rows)
    text = emitted.read_text()
    assert text.startswith("# SPDX-License-Identifier: Apache-2.0\n")
    assert "from vllm.model_executor.models.nemotron_h_mtp import NemotronHMTP" in text
    assert "plain ``pytest THIS_FILE``" in text


def test_emitted_deepseek_test_passes_with_plain_pytest(vllm_release, tmp_path):
    """Nothing set: no PYTHONPATH, no VLLM_TARGET_DEVICE; pytest run from the checkout."""
    tree = _fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path)
    emitted = tree / "test_deepseek_mtp_top_tokens.py"
    result = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1", "--emit-test", str(emitted))
    assert result.returncode == 0, result.stdout + result.stderr
    calls = "".join(emitted.read_text().split())
    assert "in[[None,None],[0,0],[1,1],[2,2],[3,3],[4,4],[5,5],]:" in calls  # both call forms, steps past the layers
    env = {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", emitted.name],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "24 passed" in run.stdout  # random, ties, padding and large inputs; two dtypes; three batches
    # A get_top_tokens that breaks ties the other way (the last of equal logits): random inputs alone
    # passed it; the ties case catches it.
    with emitted.open("a") as test:
        test.write(LAST_OF_TIES)
    for selected, code in (("ties", 1), ("random and dtype0", 0)):  # dtype0: float32
        again = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", emitted.name, "-k", selected],
            capture_output=True,
            text=True,
            cwd=tree,
            env=env,
            check=False,
        )
        assert again.returncode == code, (selected, again.stdout[-3000:])


LAST_OF_TIES = """

def _last_of_ties(self, hidden_states, **kwargs):
    logits = self.compute_logits(hidden_states, **kwargs)
    return logits.shape[-1] - 1 - logits.flip(-1).argmax(dim=-1)


DeepSeekMTP.get_top_tokens = _last_of_ties
"""


def test_the_worker_imports_the_vllm_at_path_not_the_one_in_the_working_directory(vllm_release, tmp_path):
    """Run from inside another checkout, verify still tests PATH's code: no ``-m`` cwd entry, no empty
    PYTHONPATH entry."""
    tree = _fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path)
    elsewhere = tmp_path / "another-checkout"
    (elsewhere / "vllm").mkdir(parents=True)
    (elsewhere / "vllm" / "__init__.py").write_text('raise ImportError("the vllm of the working directory")\n')
    import mtp_audit

    ours = {"PYTHONPATH": str(Path(mtp_audit.__file__).parents[1])}  # this mtp_audit, not the installed one
    result = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1", cwd=elsewhere, env=ours)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "working directory" not in result.stderr


def test_a_vllm_imported_from_outside_the_tree_is_refused_naming_both(tmp_path):
    from mtp_audit.verify.run import worker_path
    from mtp_audit.verify.worker import foreign_vllm

    tree = tmp_path / "tree"
    assert foreign_vllm(str(tree / "vllm" / "__init__.py"), str(tree)) is None
    refusal = foreign_vllm("/elsewhere/vllm/__init__.py", str(tree))
    assert "/elsewhere/vllm/__init__.py" in refusal and str(tree.resolve() / "vllm") in refusal
    entries = worker_path(tree, "").split(os.pathsep)
    assert entries[0] == str(tree) and "" not in entries


def test_a_patch_test_skips_a_platform_module_that_raises_on_import(tmp_path):
    """vllm/platforms/rocm.py asserts CUDA at import: any exception, not only ImportError, is a skip."""
    from mtp_audit.verify.emit import render_family_test

    (tmp_path / "cuda_only_mtp.py").write_text('raise AssertionError("Torch not compiled with CUDA enabled")\n')
    test = tmp_path / "test_cuda_only_get_top_tokens.py"
    test.write_text(render_family_test("CudaOnly", [("cuda_only_mtp", "CudaOnlyMTP", False)]))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", test.name],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "6 skipped" in run.stdout and "AssertionError: Torch not compiled with CUDA enabled" in run.stdout


def test_deepseek_passes_and_planted_wrong_mirrors_are_caught(vllm_release, tmp_path):
    tree = _fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path)
    good = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1,2")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "steps [0, 1, 2, 3, 4, 5]" in good.stdout  # past the 3 layers too: the drafter wraps them

    path = tree / "vllm/model_executor/models/deepseek_mtp.py"
    fixed = path.read_text()
    head, mirror = fixed.split("    def get_top_tokens(", 1)
    skips_norm = mirror.replace(
        "mtp_layer.shared_head.head, mtp_layer.shared_head(hidden_states)",
        "mtp_layer.shared_head.head, hidden_states",
        1,
    )
    assert skips_norm != mirror
    path.write_text(head + "    def get_top_tokens(" + skips_norm)  # skips the shared head's RMSNorm
    bad = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1")
    assert bad.returncode == 1
    assert "MISMATCH" in bad.stderr and "compute_logits(...).argmax(-1) = " in bad.stderr
    assert "get_top_tokens = " in bad.stderr and "logit " in bad.stderr

    # Right at step 0, wrong at every later step: the first layer's head for every step.
    first_layer_only = mirror.replace(
        "current_step_idx = spec_step_idx % self.num_mtp_layers", "current_step_idx = 0 * spec_step_idx", 1
    )
    assert first_layer_only != mirror
    path.write_text(head + "    def get_top_tokens(" + first_layer_only)
    report = tmp_path / "steps.json"
    late = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1", "--json", str(report))
    assert late.returncode == 1, late.stdout + late.stderr
    detail = _results(report)[0]["detail"]
    assert "spec_step_idx=1" in detail and "spec_step_idx=0)" not in detail
    assert "row " in detail and "get_top_tokens = " in detail

    # Right at every step below the layer count; a step past it clamped to the last layer, not wrapped.
    clamps = mirror.replace(
        "current_step_idx = spec_step_idx % self.num_mtp_layers",
        "current_step_idx = min(spec_step_idx, self.num_mtp_layers - 1)",
        1,
    )
    assert clamps != mirror
    path.write_text(head + "    def get_top_tokens(" + clamps)
    report = tmp_path / "clamps.json"
    clamped = run_cli("verify", str(tree), "--model", "DeepSeekMTPModel", "--tp", "1", "--json", str(report))
    assert clamped.returncode == 1, clamped.stdout + clamped.stderr
    detail = _results(report)[0]["detail"]
    assert "spec_step_idx=3" in detail and "spec_step_idx=2)" not in detail


def test_a_caller_that_passes_the_step_to_compute_logits_only_is_compared_as_it_calls(vllm_release, tmp_path):
    """A drafter-only mirror under such a caller selects step 0's tokens at every step: a mismatch."""
    from mtp_audit.cli import run_scan
    from mtp_audit.locate import locate
    from mtp_audit.model import CallerRecord
    from mtp_audit.verify.run import verify

    tree = locate(_fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path))
    record = next(r for r in run_scan(tree, True).records if r.arch == "DeepSeekMTPModel")
    record.callers = [
        CallerRecord(
            "StepOnlyToLogits",
            "vllm/v1/spec_decode/x.py",
            10,
            ("hidden_states",),
            ("hidden_states", "spec_step_idx=spec_step_idx"),
        )
    ]
    [outcome] = verify(tree, [record], [1])
    assert outcome.verdict == "MISMATCH", outcome.detail
    assert outcome.forms == ["StepOnlyToLogits (x.py:10)"]
    assert "spec_step_idx=1" in outcome.detail and "spec_step_idx=0 " not in outcome.detail


def test_a_caller_is_run_with_its_own_arguments_or_the_record_is_not_verified(vllm_release, tmp_path):
    """``spec_step_idx + 1`` really passes the next step (another layer: a mismatch); an attribute, another
    local or other hidden states cannot be reproduced here: not verified, naming the argument, never a pass."""
    from mtp_audit.cli import run_scan
    from mtp_audit.locate import locate
    from mtp_audit.model import CallerRecord
    from mtp_audit.verify.run import summary_line, verify

    tree = locate(_fixed_copy(vllm_release, "0.34.0", "deepseek_mtp", tmp_path))
    record = next(r for r in run_scan(tree, True).records if r.arch == "DeepSeekMTPModel")
    called = ("hidden_states", "spec_step_idx=spec_step_idx")

    def caller(name: str, line: int, *get_top_tokens: str) -> CallerRecord:
        return CallerRecord(name, "vllm/v1/spec_decode/x.py", line, get_top_tokens, called)

    record.callers = [caller("NextStep", 10, "hidden_states", "spec_step_idx=spec_step_idx + 1")]
    [outcome] = verify(tree, [record], [1])
    assert outcome.verdict == "MISMATCH", outcome.detail
    assert "spec_step_idx=0 (compute_logits gets 0, get_top_tokens 1)" in outcome.detail

    record.callers = [
        caller("Same", 10, *called),
        caller("Attribute", 20, "hidden_states", "spec_step_idx=self.draft_step"),
        caller("OtherHidden", 30, "self.last_hidden_states", "spec_step_idx=spec_step_idx"),
        caller("Local", 40, "hidden_states", "spec_step_idx=cur"),
    ]
    [outcome] = verify(tree, [record], [1])
    assert outcome.verdict == "not verified", outcome.detail
    for named in ("Attribute (x.py:20)", "self.draft_step", "OtherHidden (x.py:30)", "Local (x.py:40)", "=cur"):
        assert named in outcome.detail
    assert "the other call forms ran" in outcome.detail and outcome.forms == ["Same (x.py:10)"]
    assert "1 not verified" in summary_line([outcome])


def test_gemma4_upstream_divergence_is_found_with_its_configuration(vllm_release, tmp_path):
    report = tmp_path / "gemma.json"
    emitted = tmp_path / "test_gemma4_top_tokens.py"
    result = run_cli(
        "verify",
        str(vllm_release("0.34.0")),
        "--model",
        "Gemma4MTPModel",
        "--tp",
        "1",
        "--json",
        str(report),
        "--emit-test",
        str(emitted),
    )
    # a mismatch exits 1 with --emit-test too, and a drafter that mismatched gets no test
    assert result.returncode == 1, result.stdout + result.stderr
    assert not emitted.exists() and "no test written" in result.stderr
    [row] = _results(report)
    assert row["verdict"] == "MISMATCH"
    variants = {v["variant"]: v for v in row["variants"]}
    masked = variants["Gemma4MTP._suppress_idx=ids, Gemma4MTP.masked_embedding=Gemma4MTPMaskedEmbedder"]
    assert masked["verdict"] == "MISMATCH"
    assert "(Gemma4Speculator (speculator.py:580)): row " in masked["detail"]  # the caller's own call form
    assert "(logit -inf)" in masked["detail"]  # a suppressed token
    # Gemma4Speculator calls both methods with the hidden states only: no spec_step_idx= form is run
    assert "TypeError" not in masked["detail"] and masked["rows"] > 0
    # its LogitsProcessor(..., soft_cap=getattr(text_config, "final_logit_softcapping", None)): both ways
    for soft_cap in ("None", "2"):
        plain = variants[
            f"Gemma4MTP._suppress_idx=None, Gemma4MTP.masked_embedding=None, config.final_logit_softcapping={soft_cap}"
        ]
        assert plain["verdict"] == "MISMATCH" and "get_top_tokens raised AssertionError" in plain["detail"]


def test_unfixed_drafter_is_not_verified(vllm_release):
    result = run_cli("verify", str(vllm_release("0.34.0")), "--model", "nemotron_h", "--tp", "1")
    assert result.returncode == 2
    assert "not verified" in result.stderr and "run `mtp-audit fix --model NemotronHMTPModel` first" in result.stderr


def test_all_and_model_together_is_a_usage_error(vllm_release):
    result = run_cli("verify", str(vllm_release("0.34.0")), "--all", "--model", "nemotron_h")
    assert result.returncode == 2 and "--model NAME ... or --all" in result.stderr


def test_summary_line_counts_by_reason():
    from mtp_audit.model import DrafterRecord, Status
    from mtp_audit.verify.run import TargetOutcome, summary_line

    record = DrafterRecord("A", "A", "m", "f.py", 1, ["cpu"], Status.SUPPORTED, "")
    outcomes = [
        TargetOutcome(record, 1, "pass"),
        TargetOutcome(record, 1, "MISMATCH"),
        TargetOutcome(record, 1, detail="importing m failed: ModuleNotFoundError: No module named 'x'"),
        TargetOutcome(record, 2, detail="importing m failed: ModuleNotFoundError: No module named 'x'"),
        TargetOutcome(record, 1, detail="[default] not built: cannot build A.b (read at model.b)"),
    ]
    assert summary_line(outcomes) == (
        "5 results: 1 passed, 1 mismatched, 3 not verified (2 import ModuleNotFoundError: No module named 'x'; "
        "1 cannot build A.b)"
    )


def test_missing_torch_is_a_clear_usage_error(monkeypatch):
    from mtp_audit.errors import UsageError
    from mtp_audit.verify import run

    monkeypatch.setattr(run.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(UsageError, match=r"pip install 'mtp-audit\[verify\]'"):
        run.check_environment()


def test_deepseek_v4_runs_vllms_own_kernels_and_a_skipped_norm_weight_is_caught(vllm_release, tmp_path):
    """DeepSeek-V4 MTP takes (T, hc_mult * D) hidden states and collapses them with the hc_head custom op
    and a Triton RMSNorm kernel: the XPU drafter runs HCHeadOp's Triton implementation and the norm
    kernel in Triton's interpreter; the CUDA one calls a TileLang kernel that is not here (named)."""
    tree = tmp_path / "vllm-0.34.0"
    shutil.copytree(vllm_release("0.34.0") / "vllm", tree / "vllm")
    assert run_cli("fix", str(tree), "--model", "DeepSeekV4MTPModel").returncode == 0
    report = tmp_path / "v4.json"
    emitted = tree / "test_deepseek_v4_mtp_top_tokens.py"
    good = run_cli(
        "verify",
        str(tree),
        "--model",
        "DeepSeekV4MTPModel",
        "--tp",
        "1",
        "--json",
        str(report),
        "--emit-test",
        str(emitted),
    )
    rows = {row["module"].rsplit(".", 2)[1]: row for row in _results(report)}
    assert good.returncode == 2, good.stdout + good.stderr  # --model: not verified records are named, exit 2
    assert rows["xpu"]["verdict"] == "pass" and rows["xpu"]["rows"] > 0, rows["xpu"]["detail"]
    assert "hidden states of 128 values a row" in rows["xpu"]["detail"]  # hc_mult=2 rows of HIDDEN=64
    assert "custom op HCHeadOp ran its forward_hip" in rows["xpu"]["detail"]
    assert rows["nvidia"]["verdict"] == "not verified"
    assert rows["nvidia"]["reason"] == "custom op hc_head_fused_kernel_tilelang"
    assert rows["amd"]["verdict"] == "not verified" and "vllm/platforms/rocm.py" in rows["amd"]["detail"]
    # The emitted test rebuilds the config, the __init__'s parameters and the custom op; nothing set.
    text = emitted.read_text()
    assert "from vllm.models.deepseek_v4.xpu.mtp import DeepSeekV4MTP" in text and "_custom_op(HCHeadOp)" in text
    env = {"PATH": os.path.dirname(sys.executable) + ":/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", emitted.name],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert "12 passed" in run.stdout  # 4 cases x bfloat16 (float32 cannot run: hc_head returns bfloat16) x 3 batches

    path = tree / "vllm/models/deepseek_v4/xpu/mtp.py"
    head, mirror = path.read_text().split("    def get_top_tokens(", 1)
    unit_weight = mirror.replace(
        "mtp_layer.shared_head.norm.weight.data,", "torch.ones_like(mtp_layer.shared_head.norm.weight.data),", 1
    )
    assert unit_weight != mirror
    path.write_text(head + "    def get_top_tokens(" + unit_weight)  # the norm kernel without its weight
    bad = run_cli("verify", str(tree), "--model", "DeepSeekV4MTPModel", "--tp", "1", "--json", str(report))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    xpu = next(row for row in _results(report) if row["module"].endswith(".xpu.mtp"))
    assert xpu["verdict"] == "MISMATCH" and "get_top_tokens = " in xpu["detail"], xpu["detail"]


def test_a_tied_embedding_head_is_built_as_a_head(vllm_release, tmp_path):
    """EagleCohere's methods use the embedding as the head (hasattr(embed_tokens, "weight") picks the arm)."""
    tree = tmp_path / "vllm-0.34.0"
    shutil.copytree(vllm_release("0.34.0") / "vllm", tree / "vllm")
    assert run_cli("fix", str(tree), "--model", "EagleCohereForCausalLM").returncode == 0
    report = tmp_path / "cohere.json"
    result = run_cli("verify", str(tree), "--model", "EagleCohereForCausalLM", "--tp", "1", "--json", str(report))
    assert result.returncode == 0, result.stdout + result.stderr
    [row] = _results(report)
    assert row["verdict"] == "pass" and row["rows"] > 0


def test_the_logits_processor_is_built_with_the_arguments_of_init(vllm_release, tmp_path):
    """0.33.0 Inkling: LogitsProcessor(config.padded_vocab_size, org_vocab_size=config.vocab_size) and a
    compute_logits that cuts to org_vocab_size; 0.33.0's get_top_tokens masks only the shard padding, so
    ids past org_vocab_size come back. Built as LogitsProcessor(VOCAB), the cut was a no-op and it passed."""
    report = tmp_path / "inkling.json"
    result = run_cli(
        "verify", str(vllm_release("0.33.0")), "--model", "InklingMTPModel", "--tp", "1", "--json", str(report)
    )
    assert result.returncode == 1, result.stdout + result.stderr
    [row] = [r for r in _results(report) if r["module"].endswith("nvidia.mtp")]
    verdicts = {v["variant"]: v["verdict"] for v in row["variants"]}
    cut = [verdict for variant, verdict in verdicts.items() if "org_vocab_size=1000" in variant]
    assert "MISMATCH" in cut and "pass" not in cut  # (soft_cap and mup both set: compute_logits asserts, not run)
    assert any("config.final_logit_softcapping=2" in variant for variant in verdicts)  # soft_cap passed on


def _planted(vllm_release, tmp_path: Path, relative: str, old: str, new: str) -> Path:
    """A copy of 0.34.0 with one change in one file."""
    tree = tmp_path / "vllm-0.34.0"
    shutil.copytree(vllm_release("0.34.0") / "vllm", tree / "vllm")
    source = tree / "vllm" / relative
    text = source.read_text()
    assert text.count(old) == 1
    source.write_text(text.replace(old, new))
    return tree


def test_a_fixed_token_masked_after_the_head_is_caught_by_the_winners_case(vllm_release, tmp_path):
    """No random row makes token 0 the argmax; the winners case makes every id win a row in turn."""
    head_call = "return self.logits_processor(mtp_layer.shared_head.head, hidden_states)"
    masked = "logits = self.logits_processor(mtp_layer.shared_head.head, hidden_states)\n"
    masked += '        logits[:, 0] = -float("inf")\n        return logits'
    tree = _planted(vllm_release, tmp_path, "models/glm5next/common/mtp.py", head_call, masked)
    report = tmp_path / "glm.json"
    result = run_cli("verify", str(tree), "--model", "glm5next", "--tp", "1,2", "--json", str(report))
    assert result.returncode == 1, result.stdout + result.stderr
    rows = _results(report)
    assert {row["tp"] for row in rows} == {1, 2}
    for row in rows:
        assert row["verdict"] == "MISMATCH"
        assert "winners batch=1040" in row["detail"] and "get_top_tokens = 0 (logit -inf)" in row["detail"]


def test_a_config_slice_of_the_logits_is_tried_inside_the_vocabulary(vllm_release, tmp_path):
    """Nemotron3_5TranscribeMTP masks logits[..., config.speechlm_output_vocab_size:]; at the vocabulary size
    that masks nothing, so an inherited get_top_tokens that ignores it passed."""
    anchor = "    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:\n"
    inherited = (
        "    def get_top_tokens(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n\n"
    )
    tree = _planted(vllm_release, tmp_path, "model_executor/models/nemotron_h_mtp.py", anchor, inherited + anchor)
    report = tmp_path / "nemo.json"
    result = run_cli("verify", str(tree), "--model", "Nemotron3_5TranscribeMTP", "--tp", "1", "--json", str(report))
    assert result.returncode == 1, result.stdout + result.stderr
    [row] = _results(report)
    variants = {v["variant"]: v["verdict"] for v in row["variants"]}
    assert variants["Nemotron3_5TranscribeMTP.lm_head=head, config.speechlm_output_vocab_size=520"] == "MISMATCH"
    assert variants["Nemotron3_5TranscribeMTP.lm_head=head, config.speechlm_output_vocab_size=1040"] == "pass"


def test_workers_past_the_timeout_are_stopped_with_a_way_out(vllm_release, tmp_path):
    """``--timeout`` bounds each TP size's workers; past it they are killed and the error says how
    far they got and what to do (the worker needs seconds to import torch and vLLM)."""
    result = run_cli("verify", str(vllm_release("0.34.0")), "--all", "--tp", "1", "--timeout", "1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "verify workers did not finish in 1 s (TP 1; 0 of " in result.stderr
    assert "raise --timeout, or verify fewer drafters with --model" in result.stderr
    assert run_cli("verify", str(vllm_release("0.34.0")), "--all", "--timeout", "0").returncode == 2


def test_a_timeout_counts_finished_classes_even_without_a_progress_bar_and_leaves_no_worker(tmp_path, monkeypatch):
    """``--quiet`` has no progress bar, yet the count in the error is read from rank 0's progress file;
    the killed workers are waited for and their logs closed."""
    import mtp_audit.verify.run as run
    from mtp_audit.errors import UsageError
    from mtp_audit.model import SourceTree

    worker = tmp_path / "slow_worker.py"
    worker.write_text(
        "import json, sys, time\n"
        "plan = json.load(open(sys.argv[2]))\n"
        "open(plan['progress'], 'w').write('a b c\\n')\n"
        "time.sleep(60)\n"
    )
    monkeypatch.setattr(run, "worker_interpreter", lambda: [sys.executable, str(worker)])
    started: list = []
    real_popen = run.subprocess.Popen
    monkeypatch.setattr(run.subprocess, "Popen", lambda *a, **k: started.append(real_popen(*a, **k)) or started[-1])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    tree = SourceTree(tmp_path, tmp_path / "vllm", None)
    with pytest.raises(UsageError, match=r"did not finish in 1\.5 s \(TP 2; 3 of 5 drafter classes done\)"):
        run.run_workers(tree, [{}] * 5, 2, scratch, None, timeout_s=1.5)
    assert len(started) == 2 and all(p.returncode is not None for p in started)


def test_an_emitted_test_is_written_only_for_a_drafter_that_passed_at_every_tp_size():
    """A class that passed at TP 1 and mismatched at TP 2 (a shard-local argmax) gets no test: a passing
    one would vouch for what verify just found wrong; another module's class that passed everywhere does."""
    from types import SimpleNamespace

    from mtp_audit.verify.emit import to_emit
    from mtp_audit.verify.run import Verdict

    def outcome(module: str, tp: int, verdict: Verdict):
        record = SimpleNamespace(arch="ToyMTPModel", cls="ToyMTP", module=module)
        return SimpleNamespace(record=record, tp=tp, verdict=verdict, recipe=[])

    broken_tp2 = [outcome("vllm.a", 1, Verdict.PASS), outcome("vllm.a", 2, Verdict.MISMATCH)]
    assert to_emit(broken_tp2) is None
    other = outcome("vllm.b", 1, Verdict.PASS)
    assert to_emit([*broken_tp2, other, outcome("vllm.b", 2, Verdict.PASS)]) is other
    assert to_emit([outcome("vllm.a", 1, Verdict.PASS), outcome("vllm.a", 2, Verdict.NOT_VERIFIED)]) is None
