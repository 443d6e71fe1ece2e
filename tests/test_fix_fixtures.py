"""Run ``mtp-audit fix`` on each fixture tree and compare with the expected files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, UPDATE, build_tree, run_cli

CASES = sorted(p for p in (FIXTURES / "fix").iterdir() if p.is_dir())


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _ruff_clean(data: bytes) -> bool:
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--isolated", "--check", "-"],
        input=data,
        capture_output=True,
        check=False,
    )
    return result.returncode == 0


def _ruff(data: bytes, *options: str) -> subprocess.CompletedProcess:
    """``ruff check`` of ``data`` alone (no project configuration), with ``options``."""
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", *options, "-"],
        input=data,
        capture_output=True,
        check=False,
    )


def _imports_sorted(data: bytes) -> bool:
    """ruff's isort check (I001) passes, vllm first-party as in vLLM's own configuration."""
    return _ruff(data, "--select", "I", "--config", "lint.isort.known-first-party = ['vllm']").returncode == 0


def _pyflakes_findings(data: bytes) -> str:
    """ruff's findings that a written method can add to a file (empty: none): a name never imported
    (F821, ``torch``), a local bound and never used (F841, F842: a pre-initialisation kept in a mirror
    that returns the head's result instead)."""
    result = _ruff(data, "--select", "F821,F841,F842", "--output-format", "concise")
    return "" if result.returncode == 0 else result.stdout.decode(errors="replace")


def _applied_diff(tree: Path, args: list[str], expected_exit: int, into: Path) -> Path:
    """A copy of ``tree`` with ``fix --diff`` applied by ``git apply``: the diff's bytes must be the
    files' bytes (their encoding, their newlines, an unended last line marked as git marks it)."""
    diff = subprocess.run(
        [sys.executable, "-m", "mtp_audit", "fix", str(tree), *args, "--diff"], capture_output=True, check=False
    )
    assert diff.returncode == expected_exit, diff.stderr
    shutil.copytree(tree, into)
    subprocess.run(["git", "init", "-q"], cwd=into, check=True)
    applied = subprocess.run(
        ["git", "apply", "--allow-empty", "-"], input=diff.stdout, cwd=into, capture_output=True, check=False
    )
    assert applied.returncode == 0, applied.stderr.decode(errors="replace")
    return into


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fix_fixture(case: Path, tmp_path: Path) -> None:
    tree = build_tree(case, tmp_path / "tree", "input")
    before = _files(tree)
    args = (case / "args.txt").read_text().split()
    expected_exit = int((case / "expected_exit").read_text()) if (case / "expected_exit").exists() else 0

    patched = _applied_diff(tree, args, expected_exit, tmp_path / "patched")

    result = run_cli("fix", str(tree), *args)
    assert result.returncode == expected_exit, result.stderr
    if (case / "expected_stderr.txt").exists():
        assert (case / "expected_stderr.txt").read_text().strip() in " ".join(result.stderr.split())

    after = _files(tree)
    changed = {path for path in after if after[path] != before.get(path)}
    expected_dir = case / "expected"
    if UPDATE:
        shutil.rmtree(expected_dir, ignore_errors=True)
        expected_dir.mkdir()
        for path in changed:
            (expected_dir / path).parent.mkdir(parents=True, exist_ok=True)
            (expected_dir / path).write_bytes(after[path])
    expected = _files(expected_dir)
    assert changed == set(expected), "files changed other than the expected ones"
    for path in changed:
        assert after[path] == expected[path], path
        if _ruff_clean(before[path]):
            assert _ruff_clean(after[path]), f"{path} is no longer ruff-format clean"
        if _imports_sorted(before[path]):
            assert _imports_sorted(after[path]), f"{path}: its imports are no longer sorted as isort sorts them"
        if not _pyflakes_findings(before[path]):
            assert not _pyflakes_findings(after[path]), f"{path}: {_pyflakes_findings(after[path])}"

    assert _files(patched) == after, "git apply of fix --diff does not give what fix writes"

    again = run_cli("fix", str(tree), *args)
    assert again.returncode == expected_exit, again.stderr
    assert _files(tree) == after, "a second fix changed the tree: not idempotent"

    if changed:
        rescan = run_cli("scan", str(tree), "--format", "json", "--fail-on", "missing_fixable")
        if expected_exit == 0:  # nothing refused: nothing fixable is left
            assert '"status": "missing_fixable"' not in rescan.stdout
        records = json.loads(rescan.stdout)["drafters"]
        reached = [d for d in records if d["get_top_tokens"] and d["get_top_tokens"]["file"] in changed]
        own = [d for d in reached if d["get_top_tokens"]["class"] == d["class"]]
        # a method the fix wrote is a mirror of the compute_logits Python keeps; a drafter inheriting it (judged by
        # its own compute_logits, as its callers call it) is left safe: a mirror, or a recognised equivalent
        assert all(d["consistency"] == "mirror" for d in own), [(d["class"], d["reason"]) for d in own]
        if expected_exit == 0:
            assert all(d["consistency"] in ("mirror", "equivalent") for d in reached), [
                (d["class"], d["reason"]) for d in reached
            ]
