"""Integration: the patch series of vLLM 0.34.0 applies with ``git am`` and its tests pass on this CPU."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli

pytestmark = pytest.mark.integration
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _checkout(root: Path, into: Path) -> Path:
    shutil.copytree(root / "vllm", into / "vllm")
    subprocess.run([*GIT, "init", "-q"], cwd=into, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=into, check=True)
    subprocess.run([*GIT, "commit", "-qm", "vLLM"], cwd=into, check=True)
    return into


@pytest.mark.parametrize("flags", [(), ("--factor-pre-head",)], ids=["insertion", "factor-pre-head"])
def test_series_034_applies_and_equals_fix(vllm_release, tmp_path, flags):
    root = vllm_release("0.34.0")
    tree = _checkout(root, tmp_path / "git")
    out = tmp_path / "out"
    series = run_cli("fix", str(tree), "--all", "--patches", str(out), *flags)
    assert series.returncode == 1, series.stderr  # NemotronHMTP is refused (blast radius)
    patches = sorted(out.glob("*.patch"))
    applied = subprocess.run(
        [*GIT, "am", "--keep-non-patch", *map(str, patches)], cwd=tree, capture_output=True, text=True, check=False
    )
    assert applied.returncode == 0, applied.stderr

    reference = tmp_path / "reference"
    shutil.copytree(root / "vllm", reference / "vllm")
    assert run_cli("fix", str(reference), "--all", *flags).returncode == 1
    for path in (reference / "vllm").rglob("*.py"):
        assert path.read_bytes() == (tree / path.relative_to(reference)).read_bytes(), path

    for patch in patches:  # one family per patch: its files are no other patch's
        files = set(re.findall(r"^diff --git a/(\S+) b/", patch.read_text(), flags=re.MULTILINE))
        others = {
            f
            for p in patches
            if p != patch
            for f in re.findall(r"^diff --git a/(\S+) b/", p.read_text(), flags=re.MULTILINE)
        }
        assert not files & others, patch.name
    index = (out / "README.md").read_text()
    # K3's DSpark drafter is not fixed (no speculator calls get_top_tokens on it, MTP201), so its
    # non-drafter subclass inherits nothing; every non-drafter inheritor the fix reports is listed.
    assert "`SpecializedK3DSparkForCausalLM`" not in index
    reported = re.findall(r"blast radius: (\w+) \([^)]*not a drafter\)", " ".join(series.stderr.split()))
    assert all(f"`{name}`" in index for name in reported)
    assert "goes into MTPMixin with the compute_logits of CausalMixin inlined" in index
    transformers = next(p for p in patches if "Transformers" in p.name).read_text()
    assert "transformers/causal.py" not in transformers
    v4 = next(p for p in patches if "DeepSeekV4MTP" in p.name).read_text()
    assert v4.count("+    def _pre_head(") == (2 if flags else 0)


def test_two_families_tests_pass_on_cpu(vllm_release, tmp_path):
    tree = _checkout(vllm_release("0.34.0"), tmp_path / "git")
    out = tmp_path / "out"
    run_cli("fix", str(tree), "--model", "deepseek_mtp", "--model", "TransformersForMTP", "--patches", str(out))
    patches = sorted(out.glob("*.patch"))
    assert len(patches) == 2
    subprocess.run([*GIT, "am", "-q", *map(str, patches)], cwd=tree, check=True)
    tests = sorted(str(p) for p in (tree / "tests/v1/spec_decode").glob("test_*.py"))
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        capture_output=True,
        text=True,
        check=False,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree), "VLLM_TARGET_DEVICE": "cpu"},
    )
    assert run.returncode == 0, run.stdout[-3000:]
    assert " passed" in run.stdout and "skipped" not in run.stdout, run.stdout[-500:]
