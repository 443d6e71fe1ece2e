"""Integration: scan and fix real vLLM releases (sources downloaded once, cached, never committed)."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration


def registered_archs(root: Path) -> set[str]:
    """The _SPECULATIVE_DECODING_MODELS keys, read independently of mtp-audit."""
    tree = ast.parse((root / "vllm/model_executor/models/registry.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "_SPECULATIVE_DECODING_MODELS":
            return {k.value for k in node.value.keys}
    raise AssertionError("no registry")


def scan_json(root: Path) -> dict:
    result = run_cli("scan", str(root), "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def records(doc: dict, arch: str) -> list[dict]:
    return [r for r in doc["drafters"] if r["arch"] == arch]


def by_platform(doc: dict, arch: str) -> dict[str, dict]:
    return {p: r for r in records(doc, arch) for p in r["platforms"]}


@pytest.fixture(scope="module")
def scanned_034(vllm_release):
    root = vllm_release("0.34.0")
    return root, scan_json(root)


def test_every_registered_arch_is_reported(scanned_034):
    root, doc = scanned_034
    assert registered_archs(root) <= {r["arch"] for r in doc["drafters"]}
    assert doc["vllm_version"] == "0.34.0"
    assert not doc["unresolved"] and not doc["errors"]
    # Transformers-backend MTP entries live in another registry dict
    assert {"TransformersForMTP", "TransformersMoEForMTP"} <= {r["arch"] for r in doc["drafters"]}


def test_known_statuses_034(scanned_034):
    _, doc = scanned_034
    [nemotron] = records(doc, "NemotronHMTPModel")
    assert nemotron["status"] == "missing_fixable" and nemotron["class"] == "NemotronHMTP"
    assert nemotron["platforms"] == ["cpu", "cuda", "rocm", "tpu", "xpu"]

    [deepseek] = records(doc, "DeepSeekMTPModel")
    assert deepseek["status"] == "missing_fixable"
    assert [d["class"] for d in deepseek["delegates"]] == ["DeepSeekMultiTokenPredictor"]

    for arch in ("Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3"):
        [eagle3] = records(doc, arch)
        assert eagle3["status"] == "supported" and eagle3["consistency"] == "equivalent"
        assert eagle3["get_top_tokens"]["class"] == "LocalArgmaxMixin"
        assert eagle3["compute_logits"]["class"] == "Eagle3LlamaForCausalLM"

    v4 = by_platform(doc, "DeepSeekV4MTPModel")
    assert v4["rocm"]["status"] == "supported" and v4["rocm"]["consistency"] == "mirror"
    assert v4["cuda"]["status"] == v4["xpu"]["status"] == "missing_fixable"
    assert v4["cuda"]["file"] != v4["xpu"]["file"]
    assert v4["cpu"]["status"] == "not_applicable"

    [transcribe] = records(doc, "Nemotron3_5TranscribeMTPModel")
    assert transcribe["status"] == "missing_manual" and "masked" in transcribe["reason"]
    [gemma] = records(doc, "Gemma4MTPModel")  # the mask after the head, and masked_embedding asserted
    assert gemma["consistency"] == "divergent" and "index_fill_" in gemma["reason"]
    assert "asserts self.masked_embedding" in gemma["reason"]
    assert {c["speculator"] for c in gemma["callers"]} == {"Gemma4Speculator"}
    for arch in ("DSparkDraftModel", "K3DSparkModel", "DFlash2BeamDraftModel"):  # DSpark/DFlash2 draft otherwise
        assert {r["status"] for r in records(doc, arch)} == {"not_applicable"}, arch
        assert all(
            r["rule"] in ("MTP201", None) and not any(c["line"] for c in r["callers"]) for r in records(doc, arch)
        )
    [cohere] = records(doc, "EagleCohereForCausalLM")  # a LoRA and a plain head, mirrored arm by arm
    assert cohere["status"] == "missing_fixable" and "each of 2 arms" in cohere["reason"]
    for inkling in records(doc, "InklingMTPModel"):  # logits by hand, cut to the processor's org_vocab_size
        assert inkling["consistency"] == "unproven", inkling  # which 0.34.0's processor masks past: verify decides
        assert "torch.addmm" in inkling["reason"] and "org_vocab_size entries of the vocabulary" in inkling["reason"]
        assert (
            "masks every id from org_vocab_size on (vllm/model_executor/layers/logits_processor.py:"
            in (inkling["reason"])
        )
        assert "spec_step_idx" not in inkling["reason"]
    assert "tpu" not in by_platform(doc, "KimiK3MTPModel")
    assert set(by_platform(doc, "MistralLarge4DSparkModel")) == {"cuda", "rocm"}
    assert set(by_platform(doc, "Qwen4ExpMTP")) == {"cpu", "cuda", "rocm"}


def _copy(root: Path, tmp_path: Path) -> Path:
    target = tmp_path / "vllm-tree"
    shutil.copytree(root / "vllm", target / "vllm")
    return target


def _diff_lines(a: Path, b: Path) -> list[str]:
    result = subprocess.run(["diff", "-u", str(a), str(b)], capture_output=True, text=True, check=False)
    return [line for line in result.stdout.splitlines()[2:] if line[:1] in "+-" and not line.startswith("@@")]


def test_fix_nemotron_033_reproduces_upstream_change(vllm_release, tmp_path):
    root = vllm_release("0.33.0")
    tree = _copy(root, tmp_path)
    rel = "vllm/model_executor/models/nemotron_h_mtp.py"
    preview = run_cli("fix", str(tree), "--model", "nemotron_h", "--diff")
    assert preview.returncode == 0, preview.stderr
    assert "+    def get_top_tokens(" in preview.stdout
    assert (tree / rel).read_bytes() == (root / rel).read_bytes(), "--diff wrote"

    done = run_cli("fix", str(tree), "--model", "nemotron_h")
    assert done.returncode == 0, done.stderr
    added = _diff_lines(root / rel, tree / rel)
    assert added == [
        "+    def get_top_tokens(",
        "+        self,",
        "+        hidden_states: torch.Tensor,",
        "+    ) -> torch.Tensor:",
        "+        assert self.lm_head is not None, (",
        '+            "lm_head not initialized - must be shared from target model"',
        "+        )",
        "+        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)",
        "+",
    ]
    text = (tree / rel).read_text()
    assert text.index("def get_top_tokens") > text.index("def compute_logits")
    snapshot = (tree / rel).read_bytes()
    assert run_cli("fix", str(tree), "--model", "nemotron_h").returncode == 0
    assert (tree / rel).read_bytes() == snapshot
    [after] = records(scan_json(tree), "NemotronHMTPModel")
    assert after["status"] == "supported" and after["consistency"] == "mirror"
    assert run_cli("fix", str(tree), "--model", "nemotron_h", "--check").returncode == 0


def test_fix_nemotron_034_stops_for_the_transcribe_subclass(vllm_release, tmp_path):
    root = vllm_release("0.34.0")
    tree = _copy(root, tmp_path)
    result = run_cli("fix", str(tree), "--model", "nemotron_h")
    assert result.returncode == 1
    message = " ".join(result.stderr.split())
    assert "refused" in message and "Nemotron3_5TranscribeMTPModel" in message and "divergent" in message
    rel = "vllm/model_executor/models/nemotron_h_mtp.py"
    assert (tree / rel).read_bytes() == (root / rel).read_bytes()


def test_fix_deepseek_mtp_writes_wrapper_and_predictor(vllm_release, tmp_path):
    root = vllm_release("0.34.0")
    tree = _copy(root, tmp_path)
    assert run_cli("fix", str(tree), "--model", "deepseek_mtp").returncode == 0
    text = (tree / "vllm/model_executor/models/deepseek_mtp.py").read_text()
    assert "return self.model.get_top_tokens(hidden_states, spec_step_idx)" in text
    assert "mtp_layer.shared_head.head, mtp_layer.shared_head(hidden_states)" in text.split("def get_top_tokens")[1]
    doc = scan_json(tree)
    [deepseek] = records(doc, "DeepSeekMTPModel")
    assert deepseek["status"] == "supported" and deepseek["consistency"] == "mirror"


def test_fix_all_034(vllm_release, tmp_path):
    root = vllm_release("0.34.0")
    tree = _copy(root, tmp_path)
    before = scan_json(tree)
    fixable = {(r["arch"], r["file"]) for r in before["drafters"] if r["status"] == "missing_fixable"}
    result = run_cli("fix", str(tree), "--all")
    assert result.returncode == 1  # NemotronHMTP is refused (blast radius), the rest is written
    after = scan_json(tree)
    still = {(r["arch"], r["file"]) for r in after["drafters"] if r["status"] == "missing_fixable"}
    assert still == {("NemotronHMTPModel", "vllm/model_executor/models/nemotron_h_mtp.py")}
    for r in after["drafters"]:
        if (r["arch"], r["file"]) in fixable - still:
            assert r["status"] == "supported" and r["consistency"] == "mirror", r
            assert any(c["line"] for c in r["callers"]), f"{r['arch']}: written, but no speculator calls it"
    # No fix makes a drafter divergent: the divergent ones (Gemma4's mask) were so before.
    divergent = {(r["arch"], r["file"]) for r in before["drafters"] if r["consistency"] == "divergent"}
    assert divergent == {(a, f) for a, f in divergent if a in ("Gemma4MTPModel", "InklingMTPModel")}
    assert {(r["arch"], r["file"]) for r in after["drafters"] if r["consistency"] == "divergent"} == divergent
    touched = [
        str(p) for p in (tree / "vllm").rglob("*.py") if p.read_bytes() != (root / p.relative_to(tree)).read_bytes()
    ]
    assert len(touched) > 30
    ruff = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "--check", *touched],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ruff.returncode == 0, ruff.stdout
    for path in touched:
        compile(Path(path).read_text(), path, "exec")
    again = run_cli("fix", str(tree), "--all", "--check")  # nothing left to write, NemotronHMTP still refused
    assert (
        again.returncode == 1
        and "would write 0 methods into 0 files; 1 refused (NemotronHMTPModel: blast radius)"
        in " ".join(again.stderr.split())
    )


def test_a_drafter_refused_on_two_records_is_one_refusal(vllm_release):
    """0.34.0's DFlash2BeamDraftModel has two records (two platform files), each refused (no speculator
    calls get_top_tokens): the summary said "2 refused (DFlash2BeamDraftModel: not_applicable,
    DFlash2BeamDraftModel: not_applicable)"."""
    tree = vllm_release("0.34.0")
    result = run_cli("fix", str(tree), "--model", "DFlash2BeamDraftModel", "--check")
    assert result.returncode == 1
    assert "0 files; 1 refused (DFlash2BeamDraftModel: not_applicable)." in " ".join(result.stderr.split())


def test_a_name_several_drafters_share_skips_the_uncalled_and_a_divergent_one_is_refused(vllm_release):
    """``--model deepseek_v4`` (the folder DeepSeekV4MTP and the DSpark drafters share) refused the DSpark
    drafters no speculator calls, so it could never pass --check; ``--model Gemma4MTPModel`` said
    "already supported", exit 0, of a get_top_tokens that diverges."""
    tree = vllm_release("0.34.0")
    shared = run_cli("fix", str(tree), "--model", "deepseek_v4", "--diff")
    assert shared.returncode == 0, shared.stderr
    assert "0 refused" in shared.stderr and "skipped (not_applicable)" in shared.stderr
    alone = run_cli("fix", str(tree), "--model", "DSparkDraftModel", "--diff")
    assert alone.returncode == 1 and "1 refused (DSparkDraftModel: not_applicable)" in " ".join(alone.stderr.split())
    divergent = run_cli("fix", str(tree), "--model", "Gemma4MTPModel", "--check")
    assert divergent.returncode == 1 and "1 refused (Gemma4MTPModel: divergent)" in " ".join(divergent.stderr.split())


def test_step3p5_031_refused_naming_the_call_site(vllm_release, tmp_path):
    """0.31.0's Step3p5MTPProposer calls get_top_tokens(hidden_states) but compute_logits(...,
    spec_step_idx=...): a drafter-only mirror would draft every step with layer 0's head."""
    tree = _copy(vllm_release("0.31.0"), tmp_path)
    [step] = records(scan_json(tree), "Step3p5MTP")
    assert step["status"] == "missing_manual" and step["rule"] == "MTP203"
    assert "Step3p5MTPProposer (vllm/v1/spec_decode/step3p5.py:266)" in step["reason"]
    proposer = [c for c in step["callers"] if c["speculator"] == "Step3p5MTPProposer"]
    assert proposer and proposer[0]["get_top_tokens_args"] == ["hidden_states"]
    assert proposer[0]["compute_logits_args"] == ["hidden_states", "spec_step_idx=spec_step_idx"]
    before = {p: p.read_bytes() for p in (tree / "vllm").rglob("*.py")}
    result = run_cli("fix", str(tree), "--model", "step3p5")
    assert result.returncode == 1 and "Step3p5MTPProposer" in " ".join(result.stderr.split())
    assert {p: p.read_bytes() for p in (tree / "vllm").rglob("*.py")} == before


@pytest.mark.parametrize("version", ["0.20.0", "0.33.0", "0.34.0"])
def test_logits_as_input_is_the_one_flag_of_the_call_alone(vllm_release, version):
    """Read off each release's LogitsProcessor: ``logits_as_input`` picks a branch of its call alone; up to 0.33
    the call alone reads ``org_vocab_size`` too (it cuts the logits to it; 0.34's get_top_tokens masks from it);
    scale and soft_cap, read by both paths, are no such flag (a drafter passing them keeps its mirror)."""
    from mtp_audit.index.processor import processor_paths
    from mtp_audit.locate import LOGITS_PROCESSOR

    source = (vllm_release(version) / "vllm" / LOGITS_PROCESSOR).read_text()
    paths = processor_paths(source, "logits_processor.py")
    assert paths is not None
    found = [(f.param, f.position, f.default, f.path, f.how, f.fallback) for f in paths.flags]
    cut = [("org_vocab_size", 1, "None", "call", "reads", ("vocab_size", 0))]
    assert found == [("logits_as_input", 3, "False", "call", "tests", None), *(cut if version != "0.34.0" else [])]
    assert paths.flags[0].test.startswith("forward, logits_processor.py:")
    # and its get_top_tokens alone raises for a scale that is not positive
    assert [(g.param, g.position, g.path, g.test) for g in paths.guards] == [
        ("scale", 2, "get_top_tokens", "self.scale <= 0.0 and self.scale != 1.0")
    ]
    assert [paths.guards[0].raises_for(v) for v in (-1.0, 0.0, 0.5, 1.0, 30)] == [True, True, False, False, False]
