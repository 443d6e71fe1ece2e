"""The blast-radius check may skip a drafter whose analysis looks in none of the planned classes
(``apply.plan.classes_read``): the plans of each drafter alone (what pre-commit and the concise
report ask) must refuse exactly what they refuse without skipping, on every fix fixture that has a
blast radius and every scan fixture."""

from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree
from mtp_audit import fix
from mtp_audit.classify import memo
from mtp_audit.errors import UsageError
from mtp_audit.locate import locate
from mtp_audit.scan import scan

CASES = sorted([*(c for c in (FIXTURES / "fix").iterdir() if "blast_radius" in c.name), *(FIXTURES / "scan").iterdir()])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.parent.name}/{c.name}")
def test_skipping_unread_drafters_refuses_the_same(case: Path, tmp_path: Path, monkeypatch) -> None:
    subdir = "input" if case.parent.name == "fix" else ""
    tree = locate(build_tree(case, tmp_path / "tree", subdir))
    memo.use_cache(None)
    try:
        result, scanner, resolutions = scan(tree, None)
    except UsageError:  # a vLLM without LogitsProcessor.get_top_tokens, one the scan refuses (expected_error.txt)
        assert (case / "expected_error.txt").exists()
        pytest.skip("the scan stops with a usage error: nothing to plan")
    skipping = fix.refusals_alone(tree, scanner, resolutions, result.records)
    monkeypatch.setattr(fix, "classes_read", lambda *_: None)
    assert skipping == fix.refusals_alone(tree, scanner, resolutions, result.records)
    if case.parent.name == "fix" and (case / "expected_exit").read_text().strip() == "1":
        assert skipping  # a refusal to keep, so the comparison is not of two empty answers
