"""Shared test helpers: fixture trees, real vLLM releases (downloaded once, cached)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
BASE = FIXTURES / "_base"
UPDATE = bool(os.environ.get("MTP_AUDIT_UPDATE_FIXTURES"))
NEWEST = "0.34.0"


def build_tree(case: Path, into: Path, subdir: str = "") -> Path:
    """Copy the shared base (when the case is a vLLM tree), then the case's own files over it."""
    into.mkdir(parents=True, exist_ok=True)
    source = case / subdir if subdir else case
    borrowed = case / f"{subdir}_from.txt"  # e.g. a fix case whose input is a scan fixture's tree
    if subdir and borrowed.is_file():
        source = FIXTURES / borrowed.read_text().strip()
    if (source / "vllm").is_dir():
        shutil.copytree(BASE, into, dirs_exist_ok=True)
    for item in source.iterdir():
        if item.is_dir():
            shutil.copytree(item, into / item.name, dirs_exist_ok=True)
    return into


SCAN_SCHEMA = Path(__file__).resolve().parents[1] / "docs" / "schema" / "scan.schema.json"


def check_scan_json(text: str) -> dict:
    """The document, after validating it against docs/schema/scan.schema.json (every scan JSON the
    suite produces goes through here)."""
    import jsonschema

    document = json.loads(text)
    jsonschema.validate(document, json.loads(SCAN_SCHEMA.read_text()), cls=jsonschema.Draft202012Validator)
    return document


def _is_scan_json(args: tuple[str, ...]) -> bool:
    words = " ".join(args).replace("=", " ").split()
    json_format = any(a in ("--format", "-f") and b == "json" for a, b in itertools.pairwise(words))
    return bool(words) and words[0] == "scan" and json_format and not {"--compare", "--by-model-type"} & set(words)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "NO_COLOR": "1", **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "mtp_audit", *args], capture_output=True, text=True, cwd=cwd, env=full_env, check=False
    )
    if _is_scan_json(args) and result.stdout:
        check_scan_json(result.stdout)
    return result


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Every test gets its own facts cache: no test sees another's entries; and the environment's
    settings that change what the commands print are the test's own."""
    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path_factory.mktemp("facts-cache")))
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)  # which plugins vLLM loads: a test sets it where it asks
    # The width of the output: a test sets COLUMNS where it asks; a runner's own (pytest-xdist's workers
    # export COLUMNS=80, a developer's shell may too) would wrap what the tests read as one line.
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(autouse=True)
def _fresh_answers():
    """Every test classifies afresh: ``classify.memo`` keeps each rule's answers in the process, so a
    test would otherwise get the answers an earlier test computed, and a changed rule (a mutant, in a
    mutation run, which forks from a process that ran the suite) would go unseen. The mirror rule's
    answers (``synthesize.answers``) are kept the same way: a fingerprint of the mirror cached by
    the unmutated ``method_checks.normalize`` would be compared with one the mutant computes."""
    from mtp_audit.classify import memo
    from mtp_audit.synthesize import answers

    for module in (memo, answers):
        for answer in vars(module).values():
            if callable(getattr(answer, "cache_clear", None)):
                answer.cache_clear()


@pytest.fixture(scope="session")
def vllm_release():
    """Path of a real vLLM release's sources (``vllm/**/*.py``), downloaded once into the cache."""
    from mtp_audit.sources import release_tree

    def get(version: str = NEWEST) -> Path:
        try:
            return release_tree(version)
        except Exception as error:  # no network and no cache: say so, do not pass silently
            pytest.fail(f"could not get vLLM {version} sources: {error}")

    return get
