"""The exit-code policy as a matrix: every command and mode, on fixture trees, against POLICY.

Each case names the POLICY rule it exercises, so the table in docs/exit-codes.md
(printed from POLICY) and the behaviour cannot drift apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.report import exit_codes
from mtp_audit.report.exit_codes import ACTION, ERROR, OK, POLICY

DOCS = Path(__file__).resolve().parents[1] / "docs"
TOY = "vllm/model_executor/models/toy_mtp.py"


def tree_of(kind: str, case: str, tmp_path: Path) -> Path:
    return build_tree(FIXTURES / kind / case, tmp_path / case, "input" if kind == "fix" else "")


def plugin_without_drafters(tmp_path: Path) -> Path:
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "layers.py").write_text("class Linear:\n    pass\n")
    return tmp_path / "plugin"


# (rule command, expected code, tree: (fixture kind, case) or a builder, arguments after the tree)
MATRIX = [
    ("scan", OK, ("scan", "consistency"), ["scan", "--fail-on", "never"]),
    ("scan", OK, ("scan", "consistency"), ["scan", "--model", "PlainEagle"]),
    ("scan", ACTION, ("scan", "consistency"), ["scan"]),
    ("scan", ACTION, ("scan", "direct_head"), ["scan", "--format", "json"]),
    ("scan", ACTION, ("scan", "direct_head"), ["scan", "--format", "sarif"]),
    ("scan", ERROR, plugin_without_drafters, ["scan"]),
    ("fix", OK, ("scan", "direct_head"), ["fix", "--model", "toy"]),
    ("fix --diff", OK, ("scan", "direct_head"), ["fix", "--model", "toy", "--diff"]),
    ("fix --check", ACTION, ("scan", "direct_head"), ["fix", "--model", "toy", "--check"]),
    ("fix", ACTION, ("scan", "manual_shapes"), ["fix", "--model", "MaskMTP"]),
    ("fix --diff", ACTION, ("scan", "manual_shapes"), ["fix", "--model", "MaskMTP", "--diff"]),
    ("fix --check", ACTION, ("scan", "manual_shapes"), ["fix", "--model", "MaskMTP", "--check"]),
    ("fix", ACTION, ("fix", "refusals"), ["fix", "--all"]),
    ("fix --diff", ACTION, ("fix", "refusals"), ["fix", "--all", "--diff"]),
    ("fix --check", ACTION, ("fix", "refusals"), ["fix", "--all", "--check"]),
    # a not_applicable drafter (a stub, no compute_logits) is skipped, never refused
    ("fix", OK, ("scan", "manual_shapes"), ["fix", "--model", "NoLogitsMTP"]),
    ("fix --diff", OK, ("scan", "manual_shapes"), ["fix", "--model", "StubMTP", "--diff"]),
    ("fix --check", OK, ("scan", "manual_shapes"), ["fix", "--model", "StubMTP", "--check"]),
    ("every command", ERROR, ("scan", "direct_head"), ["scan", "--model", "nothing_like_it"]),
    ("every command", ERROR, ("scan", "direct_head"), ["scan", "--format", "yaml"]),
    ("every command", ERROR, ("scan", "direct_head"), ["fix"]),
    ("every command", ERROR, ("scan", "direct_head"), ["fix", "--model", "toy", "--all"]),
    ("every command", ERROR, ("scan", "direct_head"), ["verify", "--model", "toy", "--tp", "two"]),
    ("every command", ERROR, ("scan", "direct_head"), ["verify", "--model", "toy", "--tp", "1,1000000"]),
    ("every command", ERROR, ("scan", "direct_head"), ["scan", "--no-such-option"]),
    ("every command", ERROR, ("scan", "direct_head"), ["fix", "--all", "--jobs", "many"]),
]


@pytest.mark.parametrize("rule, code, source, args", MATRIX, ids=[f"{' '.join(a)}->{c}" for _, c, _, a in MATRIX])
def test_exit_code(rule, code, source, args, tmp_path):
    assert any(r.command == rule and r.code == code for r in POLICY), f"no POLICY rule for {rule} -> {code}"
    tree = source(tmp_path) if callable(source) else tree_of(*source, tmp_path)
    command, *rest = args
    result = run_cli(command, str(tree), *rest)
    assert result.returncode == code, result.stderr
    if code == ERROR:  # says why in one line on stderr (typer's boxed usage errors too), writes nothing
        said = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("note: ")]
        assert len(said) == 1 and said[0].startswith("mtp-audit: ") and not result.stdout, result.stderr
    refused = re.search(r"^refused: ", result.stderr, re.MULTILINE)
    if refused:
        assert code == ACTION
    if "NoLogitsMTP" in args or "StubMTP" in args:
        assert re.search(r"^skipped: ", result.stderr, re.MULTILINE) and not refused


def test_fix_check_after_a_fix_is_clean(tmp_path):
    tree = tree_of("scan", "direct_head", tmp_path)
    assert run_cli("fix", str(tree), "--model", "toy").returncode == OK
    assert run_cli("fix", str(tree), "--model", "toy", "--check").returncode == OK


@pytest.mark.parametrize("files, code", [([TOY], ACTION), (["vllm/model_executor/models/registry.py"], OK)])
def test_pre_commit(files, code, tmp_path):
    tree = tree_of("scan", "direct_head", tmp_path)
    assert any(r.command == "pre-commit" and r.code == code for r in POLICY)
    assert run_cli("pre-commit", *files, cwd=tree).returncode == code


@pytest.mark.parametrize("fix", [False, True])
def test_pre_commit_of_a_file_that_does_not_parse_is_an_input_error(fix, tmp_path):
    """It exited 0 saying nothing: the drafter the file defines was not judged at all."""
    tree = tree_of("scan", "direct_head", tmp_path)
    (tree / TOY).write_text((tree / TOY).read_text() + "x = (\n")
    assert any(r.command == "pre-commit" and r.code == ERROR for r in POLICY)
    result = run_cli("pre-commit", *(["--fix"] if fix else []), TOY, cwd=tree)
    assert result.returncode == ERROR
    assert result.stderr.startswith(f"error: {TOY}: syntax error, line ") and "fix it and commit again" in result.stderr
    assert run_cli("pre-commit", "vllm/model_executor/models/registry.py", cwd=tree).returncode == OK  # not changed


def test_pre_commit_names_a_drafter_fix_refuses_and_does_not_fail_on_it(tmp_path):
    """PrivateHeadBase has no safe mirror alone (blast radius): the hook says why, as fix does, and does
    not count it; PrivateHeadSub, which fix writes, is a finding. Each advice given then works."""
    tree = tree_of("fix", "blast_radius_private_name", tmp_path)
    model = "vllm/model_executor/models/private_head.py"
    result = run_cli("pre-commit", model, cwd=tree)
    assert result.returncode == ACTION, result.stderr
    assert "`mtp-audit fix --model PrivateHeadBaseModel` writes it" not in result.stderr
    refused = (FIXTURES / "fix" / "blast_radius_private_name" / "expected_stderr.txt").read_text().strip()
    assert re.search(
        rf"^note: {model}:5: PrivateHeadBaseModel .* refuses it \({re.escape(refused)}: ", result.stderr, re.MULTILINE
    ), result.stderr
    assert "`mtp-audit fix --model PrivateHeadSubModel` writes it" in result.stderr
    assert run_cli("fix", str(tree), "--model", "PrivateHeadSubModel").returncode == OK
    again = run_cli("pre-commit", model, cwd=tree)  # PrivateHeadSub has its own method now: no blast radius
    assert again.returncode == ACTION and "`mtp-audit fix --model PrivateHeadBaseModel` writes it" in again.stderr
    assert run_cli("fix", str(tree), "--model", "PrivateHeadBaseModel").returncode == OK
    assert run_cli("pre-commit", model, cwd=tree).returncode == OK


@pytest.mark.parametrize("link", [False, True], ids=["an absolute path elsewhere", "a symlink out of the checkout"])
def test_pre_commit_skips_a_file_that_resolves_outside_the_checkout(link, tmp_path):
    """It can define no drafter of this tree: one note, and the other files are still checked."""
    tree = tree_of("scan", "direct_head", tmp_path)
    elsewhere = tmp_path / "elsewhere.py"
    elsewhere.write_text("x = 1\n")
    given = "vllm/model_executor/models/linked_helper.py" if link else str(elsewhere)
    if link:
        (tree / given).symlink_to(elsewhere)
    result = run_cli("pre-commit", given, TOY, cwd=tree)
    assert result.returncode == ACTION, result.stderr
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: skipped {given}: it resolves outside the checkout {tree.resolve()}"]
    assert "ToyMTPModel (ToyMTP) has no get_top_tokens" in result.stderr
    assert run_cli("pre-commit", given, cwd=tree).returncode == OK


def test_pre_commit_outside_a_checkout_is_an_input_error(tmp_path):
    result = run_cli("pre-commit", "x.py", cwd=plugin_without_drafters(tmp_path))
    assert result.returncode == ERROR and "vLLM checkout" in result.stderr


@pytest.mark.parametrize(
    "verdicts, code",
    [
        (["pass", "pass"], OK),
        (["pass", "MISMATCH"], ACTION),
        (["pass", "not verified"], ERROR),
        (["MISMATCH", "not verified"], ACTION),
        ([], OK),
    ],
)
def test_verify_policy(verdicts, code):
    assert exit_codes.verify_exit(verdicts) == code
    assert any(r.command == "verify" and r.code == code for r in POLICY)


def test_docs_print_the_policy():
    assert exit_codes.markdown_table() in (DOCS / "exit-codes.md").read_text()
