"""``fix --patches``: the series applies with ``git am`` and gives the tree ``fix`` writes."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli

SERIES = FIXTURES / "fix" / "series"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _git_checkout(tree: Path) -> None:
    subprocess.run([*GIT, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*GIT, "commit", "-qm", "base"], cwd=tree, check=True)


def _python_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "vllm").rglob("*.py"))}


@pytest.fixture
def series(tmp_path: Path) -> tuple[Path, Path, subprocess.CompletedProcess]:
    if shutil.which("git") is None:
        pytest.fail("git is needed to apply the series")
    tree = build_tree(SERIES, tmp_path / "tree", "input")
    _git_checkout(tree)
    out = tmp_path / "out"
    result = run_cli("fix", str(tree), "--all", "--patches", str(out))
    return tree, out, result


def test_series_applies_in_order_and_equals_fix(series, tmp_path):
    tree, out, result = series
    assert result.returncode == 0, result.stderr
    before = _python_files(tree)
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True, check=True).stdout
        == ""
    ), "--patches wrote into the tree"
    patches = sorted(out.glob("*.patch"))
    applied = subprocess.run(
        [*GIT, "am", "--keep-non-patch", *map(str, patches)], cwd=tree, capture_output=True, text=True, check=False
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr

    reference = build_tree(SERIES, tmp_path / "reference", "input")
    assert run_cli("fix", str(reference), "--all").returncode == 0
    after = _python_files(tree)
    assert {k: v for k, v in after.items() if not k.startswith("tests/")} == _python_files(reference)
    assert after != before

    log = subprocess.run(
        ["git", "log", "--format=%s", f"-{len(patches)}"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert all(re.fullmatch(r"\[Spec Decode\] .+: implement get_top_tokens\(\)", s) for s in log), log
    rescan = run_cli("scan", str(tree), "--format", "json", "--fail-on", "never")
    assert '"missing_fixable"' not in rescan.stdout
    assert '"unproven"' not in rescan.stdout and '"divergent"' not in rescan.stdout


def test_each_patch_is_one_family_with_its_test(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    touched = {}
    for patch in sorted(out.glob("*.patch")):
        text = patch.read_text()
        files = re.findall(r"^diff --git a/(\S+) b/", text, flags=re.MULTILINE)
        touched[patch.name] = files
        tests = [f for f in files if f.startswith("tests/v1/spec_decode/")]
        assert len(tests) == 1, files
        assert "## Purpose" in text and "## Test Plan" in text and "## Test Result" in text
        assert f"pytest -q {tests[0]}" in text
    # Three families from the tree: the platform package, and the predictor with both the wrapper
    # it serves and the lite drafter whose delegate inherits from it.
    families = sorted(tuple(f for f in files if not f.startswith("tests/")) for files in touched.values())
    assert families == [
        (
            "vllm/model_executor/models/wrap_lite_mtp.py",
            "vllm/model_executor/models/wrap_mtp.py",
            "vllm/model_executor/models/wrap_predictor.py",
        ),
        ("vllm/models/plat/amd/mtp.py", "vllm/models/plat/nvidia/mtp.py"),
    ]


def test_index_lists_inheritors_that_are_not_drafters(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    index = (out / "README.md").read_text()
    non_drafters = index.split("## Classes that inherit a written method and are not drafters")[1].split("##")[0]
    assert "`ScorerPredictor`" in non_drafters and "`WrapPredictor`" in non_drafters
    assert "WrapLitePredictor" not in non_drafters  # a drafter's delegate is part of the drafter
    for patch in out.glob("*.patch"):
        assert f"[{patch.name}]({patch.name})" in index
    assert "blast radius: ScorerPredictor" in " ".join(result.stderr.split())


def test_generated_test_is_valid_python_naming_each_drafter(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    plat = next(p for p in out.glob("*.patch") if "PlatMTP" in p.name).read_text()
    added = "\n".join(
        line[1:]
        for line in plat.split("+++ b/tests/v1/spec_decode/")[1].splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )
    compile(added, "generated_test.py", "exec")
    assert '("vllm.models.plat.amd.mtp", "PlatMTP", False)' in added
    assert '("vllm.models.plat.nvidia.mtp", "PlatMTP", False)' in added


def test_patches_refuse_a_folder_holding_a_series(series):
    tree, out, _ = series
    again = run_cli("fix", str(tree), "--all", "--patches", str(out))
    assert again.returncode == 2 and "already holds a patch series" in again.stderr


def test_a_crlf_file_applies_with_keep_cr(tmp_path):
    case = FIXTURES / "fix" / "crlf"
    tree = build_tree(case, tmp_path / "tree", "input")
    _git_checkout(tree)
    out = tmp_path / "out"
    result = run_cli("fix", str(tree), *(case / "args.txt").read_text().split(), "--patches", str(out))
    assert result.returncode == 0, result.stderr
    assert "git am --keep-non-patch --keep-cr *.patch" in (out / "README.md").read_text()
    applied = subprocess.run(
        [*GIT, "am", "--keep-non-patch", "--keep-cr", *map(str, sorted(out.glob("*.patch")))],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    for path in (case / "expected").rglob("*.py"):
        assert (tree / path.relative_to(case / "expected")).read_bytes() == path.read_bytes()
