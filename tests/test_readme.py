"""README.md: its example outputs are today's real output, and its links stay inside the repository."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.integration
def test_readme_examples_are_current(vllm_release):
    for version in ("0.33.0", "0.34.0"):
        vllm_release(version)
    sys.path.insert(0, str(REPO / "scripts"))
    try:
        from readme_examples import README, render
    finally:
        sys.path.pop(0)
    current = README.read_text()
    assert render(current) == current, (
        "README.md's examples differ from a fresh run: run `python scripts/readme_examples.py` and review the diff"
    )


@pytest.mark.parametrize(
    "page", [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.relative_to(REPO).as_posix()
)
def test_links_stay_in_the_repository(page):
    text = page.read_text()
    assert "../shared" not in text and "CONTRACT.md" not in text
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        resolved = (page.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(REPO), f"{page.name} links outside the repository: {target}"
        assert resolved.exists(), f"{page.name} links to a missing file: {target}"
