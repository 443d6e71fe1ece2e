"""What a person sees at the terminal: the reports of a real release fit 80 columns."""

from __future__ import annotations

import json
import re

import pytest

from conftest import FIXTURES, build_tree, run_cli

COLOUR = re.compile(r"\x1b\[(?:\d+;)*(?:3[0-8]|9[0-7])(?:;\d+)*m")  # a foreground colour


@pytest.mark.integration
def test_default_report_of_034_at_80_columns(vllm_release):
    vllm_release("0.34.0")
    env = {"COLUMNS": "80"}
    doc = json.loads(run_cli("scan", "--vllm-version", "0.34.0", "--format", "json").stdout)
    default = run_cli("scan", "--vllm-version", "0.34.0", env=env)
    verbose = run_cli("scan", "--vllm-version", "0.34.0", "--verbose", env=env)
    assert default.returncode == verbose.returncode == 1
    lines = default.stdout.splitlines()
    assert len(lines) < 150 and max(map(len, lines)) <= 80
    assert max(map(len, verbose.stdout.splitlines())) <= 80
    flat = " ".join(verbose.stdout.split())
    for record in doc["drafters"]:
        if record["status"] != "supported" or record["consistency"] in ("unproven", "divergent"):
            where = f"{record['file']}:{record['line']}:"
            assert where in default.stdout, where  # every finding has its line by default
            assert " ".join(record["reason"].split()) in flat, where  # and its reason, at least with --verbose
    assert lines[-1].endswith(".") and "89 records" in " ".join(lines[-4:])


@pytest.mark.integration
def test_table_of_034_at_80_columns(vllm_release):
    vllm_release("0.34.0")
    table = run_cli("scan", "--vllm-version", "0.34.0", "--format", "table", env={"COLUMNS": "80"}).stdout
    lines = table.splitlines()
    assert max(map(len, lines)) <= 80
    for line in lines:
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) >= 2 and cells[0]:
            first = cells[0]  # the stacked column: a path piece ends at a "/" or is a whole file:line
            if "/" in first:
                assert first.endswith("/") or re.search(r"\.py:\d+$", first), line
    reason_widths = [len(line.split("│")[2]) for line in lines if line.count("│") == 3]
    assert reason_widths and min(reason_widths) >= 30  # the reason column keeps room to be read


@pytest.mark.integration
@pytest.mark.parametrize("columns", [40, 60])
def test_table_of_034_on_narrow_terminals_keeps_every_file_name_whole(vllm_release, columns):
    """At 40 columns the stacked column (16 wide) broke ``bailing_moe_v3_mtp.py:231`` inside the name,
    at 60 ``nemotron3_5_transcribe.py:634`` before its line; the reason goes below the fields then."""
    vllm_release("0.34.0")
    env = {"COLUMNS": str(columns)}
    doc = json.loads(run_cli("scan", "--vllm-version", "0.34.0", "--format", "json").stdout)
    table = run_cli("scan", "--vllm-version", "0.34.0", "--format", "table", env=env).stdout
    assert max(map(len, table.splitlines())) <= columns
    cells = {cell.strip() for line in table.splitlines() for cell in line.split("│")}
    for record in doc["drafters"]:
        name = f"{record['file']}:{record['line']}".rpartition("/")[2]
        assert any(cell.endswith(name) for cell in cells), name


def test_a_dumb_terminal_gets_its_own_width(monkeypatch):
    """rich takes a TERM=dumb terminal for 80 x 25 when given a width alone: a table 80 wide on a
    60-column Emacs shell, every row wrapped."""
    from mtp_audit.report.terminal import console

    monkeypatch.setenv("TERM", "dumb")
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as rich sees it (pytest captures stdout)
    monkeypatch.setenv("COLUMNS", "60")
    assert console().is_dumb_terminal and console().size.width == 60


def test_no_color_is_respected(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "consistency", tmp_path / "tree")
    coloured = run_cli("scan", str(tree), env={"NO_COLOR": "", "FORCE_COLOR": "1"}).stdout
    assert COLOUR.search(coloured)
    plain = run_cli("scan", str(tree), env={"NO_COLOR": "1", "FORCE_COLOR": "1"}).stdout
    assert not COLOUR.search(plain)
    table = run_cli("scan", str(tree), "--format", "table", env={"NO_COLOR": "1", "FORCE_COLOR": "1"}).stdout
    assert not COLOUR.search(table)


def test_concise_report_does_not_advise_a_fix_that_fix_refuses(tmp_path):
    """The missing_fixable group says fix writes the mirror; for a drafter fix refuses alone (blast
    radius) it says so under its line, with fix's reason, whatever the line budget leaves out."""
    tree = build_tree(FIXTURES / "fix" / "blast_radius_private_name", tmp_path / "tree", "input")
    refused = (FIXTURES / "fix" / "blast_radius_private_name" / "expected_stderr.txt").read_text().strip()
    for _ in range(2):  # cold, then from the result cache
        lines = run_cli("scan", str(tree), env={"COLUMNS": "100000"}).stdout.splitlines()
        assert lines[0] == (
            "missing_fixable (2): `mtp-audit fix --model NAME` writes the mirror, except for 1 that it refuses "
            "(why, below each)"
        )
        assert lines[1].endswith("missing_fixable PrivateHeadBaseModel (PrivateHeadBase) [all]")
        assert lines[2].startswith(f"    no safe mirror: `fix` refuses it ({refused}: ")
        assert "refuses" not in "\n".join(lines[3:])


def test_fix_total_counts_a_drafter_refused_for_two_reasons_once():
    """A drafter with a record per platform file, each refused for its own reason, is one refusal that
    names both reasons (it was counted once per reason); drafters refused alike stay one each."""
    from mtp_audit.apply.plan import Action, Outcome, Plan
    from mtp_audit.apply.result import FixResult
    from mtp_audit.locate import locate
    from mtp_audit.model import DrafterRecord, Status
    from mtp_audit.report.fix_summary import fix_total

    def refused(arch: str, file: str, reason: str) -> Outcome:
        record = DrafterRecord(arch, arch, "m", file, 1, ["cuda"], Status.MISSING_FIXABLE, "")
        return Outcome(record, Action.REFUSED, reason)

    outcomes = [
        refused("TwoFiles", "a.py", "blast radius: Sub inherits it and diverges"),
        refused("TwoFiles", "b.py", "not_applicable: no speculator calls get_top_tokens"),
        refused("Other", "c.py", "blast radius: Sub2 inherits it"),
        refused("Other", "d.py", "blast radius: Sub3 inherits it"),
    ]
    result = FixResult(locate(FIXTURES / "scan" / "alias_mro"), Plan(outcomes, []), [])
    assert fix_total(result, written=False) == (
        "fix: would write 0 methods into 0 files; 2 refused "
        "(TwoFiles: blast radius and not_applicable, Other: blast radius)."
    )
