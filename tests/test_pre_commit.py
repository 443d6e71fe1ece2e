"""The pre-commit hooks, run by pre-commit itself against a temporary git repository."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli

REPO = Path(__file__).resolve().parents[1]
MODEL = "vllm/model_executor/models/toy_mtp.py"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def vllm_repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.fail("git is needed to test the pre-commit hooks")
    repo = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "checkout")
    git("init", "-q", cwd=repo)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "add", ".", cwd=repo)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", "base", cwd=repo)
    return repo


def try_repo(hook: str, repo: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home"), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(REPO), hook, "--files", MODEL, "--verbose"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )


def test_hook_fails_on_a_missing_fixable_drafter_and_fix_hook_writes_it(vllm_repo, tmp_path):
    result = try_repo("mtp-audit", vllm_repo, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ToyMTPModel" in result.stdout and "has no get_top_tokens" in result.stdout

    fixed = try_repo("mtp-audit-fix", vllm_repo, tmp_path)
    assert fixed.returncode == 1  # it modified a file: pre-commit's convention
    assert "def get_top_tokens" in (vllm_repo / MODEL).read_text()

    clean = try_repo("mtp-audit", vllm_repo, tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr


def test_fix_writes_only_the_definitions_the_commit_touches(tmp_path: Path) -> None:
    """One architecture, one class per platform folder: with only the AMD file changed, the hook writes the
    AMD class and leaves the NVIDIA file (not in the commit) as it was, though ``fix --model`` writes both."""
    from conftest import run_cli

    tree = build_tree(FIXTURES / "fix" / "series", tmp_path / "checkout", "input")
    amd, nvidia = (tree / f"vllm/models/plat/{folder}/mtp.py" for folder in ("amd", "nvidia"))
    before = nvidia.read_bytes()
    result = run_cli("pre-commit", "--fix", str(amd.relative_to(tree)), cwd=tree)
    assert result.returncode == 1, result.stderr  # it wrote a file: pre-commit's convention
    assert "def get_top_tokens" in amd.read_text() and nvidia.read_bytes() == before
    assert "wrote get_top_tokens into vllm/models/plat/amd/mtp.py" in result.stderr


def test_the_hook_run_from_a_subfolder_finds_its_checkout(tmp_path):
    """scan and fix find the checkout the current directory is in; the hook said it runs in a checkout,
    exit 2. The files it is given stay relative to where it runs."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    models = tree / "vllm" / "model_executor" / "models"
    result = run_cli("pre-commit", "toy_mtp.py", cwd=models)
    assert result.returncode == 1, result.stderr
    assert "vllm/model_executor/models/toy_mtp.py:" in result.stderr and "has no get_top_tokens" in result.stderr


@pytest.mark.parametrize("case", ["torch_bound_otherwise_refused", "torch_bound_in_class_refused"])
def test_a_drafter_fix_refuses_while_rewriting_is_no_finding_of_the_hook(case: str, tmp_path: Path) -> None:
    """A refusal that only rewriting the file finds (how ``torch`` is bound) is predicted as fix finds it: the
    concise report does not promise the mirror, and the hook notes it (exit 0) instead of failing every commit."""
    tree = build_tree(FIXTURES / "fix" / case, tmp_path / "checkout", "input")
    model = next((tree / "vllm/model_executor/models").glob("toy_*_mtp.py"))
    hook = run_cli("pre-commit", str(model.relative_to(tree)), cwd=tree)
    assert hook.returncode == 0, hook.stdout + hook.stderr
    assert "note:" in hook.stdout + hook.stderr and "refuses it (unsafe rewrite refused" in hook.stdout + hook.stderr
    report = run_cli("scan", str(tree), "--no-cache")
    assert "except for 1 that it refuses" in report.stdout and "`fix` refuses it (unsafe rewrite" in report.stdout
