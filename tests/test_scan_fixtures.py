"""Scan each fixture tree (one per code shape) and compare with its expected records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, UPDATE, build_tree, check_scan_json
from mtp_audit.errors import UsageError
from mtp_audit.locate import locate
from mtp_audit.scan import scan

CASES = sorted(p for p in (FIXTURES / "scan").iterdir() if p.is_dir())


def project(record: dict) -> dict:
    """The fields a fixture pins down (root-independent)."""
    keep = (
        "arch",
        "class",
        "module",
        "file",
        "line",
        "platforms",
        "status",
        "consistency",
        "compute_logits",
        "get_top_tokens",
        "reason",
    )
    out = {k: record[k] for k in keep}
    out["delegates"] = [d["class"] for d in record["delegates"]]
    if record["callers"]:
        out["callers"] = record["callers"]
    if record["unavailable_on"]:
        out["unavailable_on"] = record["unavailable_on"]
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_scan_fixture(case: Path, tmp_path: Path) -> None:
    tree = build_tree(case, tmp_path / "tree")
    expected_error = case / "expected_error.txt"
    if expected_error.exists():
        with pytest.raises(UsageError) as info:
            scan(locate(tree))
        assert expected_error.read_text().strip() in str(info.value)
        return
    result, _, _ = scan(locate(tree))
    assert not result.parse_errors
    unresolved_file = case / "expected_unresolved.txt"  # "ARCH on PLATFORMS: reason", one line each
    unresolved = [f"{u.arch} on {','.join(u.platforms)}: {u.reason}" for u in result.unresolved]
    assert unresolved == (unresolved_file.read_text().splitlines() if unresolved_file.exists() else [])
    notes_file = case / "expected_notes.txt"  # registry content the scan warns it cannot read
    assert result.registry_notes == (notes_file.read_text().splitlines() if notes_file.exists() else [])
    caller_notes_file = case / "expected_caller_notes.txt"  # speculators the scan says it does not follow
    expected_caller_notes = caller_notes_file.read_text().splitlines() if caller_notes_file.exists() else []
    assert result.caller_notes == expected_caller_notes
    runner_notes_file = case / "expected_runner_notes.txt"  # the model runner's choice the scan cannot read
    assert result.runner_notes == (runner_notes_file.read_text().splitlines() if runner_notes_file.exists() else [])
    from mtp_audit.report.json_report import render_json

    actual = [project(r) for r in check_scan_json(render_json(result))["drafters"]]
    expected_file = case / "expected.json"
    if UPDATE:
        expected_file.write_text(json.dumps(actual, indent=2) + "\n")
    assert actual == json.loads(expected_file.read_text())
