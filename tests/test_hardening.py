"""Bad input: one clear line on stderr, the right exit code, nothing written, no traceback."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli

MODELS = "vllm/model_executor/models"


def tree_of(case: str, tmp_path: Path) -> Path:
    return build_tree(FIXTURES / "scan" / case, tmp_path / case)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_clean_failure(result, code: int, *needles: str) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr


def test_vllm_without_registry(tmp_path):
    tree = tmp_path / "broken"
    (tree / "vllm/model_executor/models").mkdir(parents=True)
    (tree / "vllm/__init__.py").write_text("")
    assert_clean_failure(run_cli("scan", str(tree)), 2, "has no model_executor/models/registry.py")


def test_registry_not_a_literal(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    (tree / MODELS / "registry.py").write_text("_SPECULATIVE_DECODING_MODELS = dict(build())\n")
    assert_clean_failure(run_cli("scan", str(tree)), 2, "registry.py", "not a dict literal")


def test_syntax_error_in_one_model_file_keeps_the_rest(tmp_path):
    tree = tree_of("manual_shapes", tmp_path)
    registry = tree / MODELS / "registry.py"
    registry.write_text(registry.read_text().replace("}", '    "BrokenMTP": ("broken_mtp", "BrokenMTP"),\n}'))
    (tree / MODELS / "broken_mtp.py").write_text("class BrokenMTP(:\n    pass\n")
    result = run_cli("scan", str(tree), "--format", "json")
    assert_clean_failure(result, 2, "broken_mtp.py", "syntax error")
    assert '"arch": "MaskMTP"' in result.stdout  # the rest is still reported


@pytest.mark.parametrize(
    "head",
    [b'"""caf\xe9"""\n', b'NAME = "caf\xe9"\n', b"# coding: utf-8\nNAME = 'caf\xe9'\n"],
    ids=["docstring", "string", "cookie"],
)
def test_non_utf8_bytes_python_rejects(head, tmp_path):
    tree = tree_of("direct_head", tmp_path)
    model = tree / MODELS / "toy_mtp.py"
    model.write_bytes(head + model.read_bytes())
    assert_clean_failure(run_cli("scan", str(tree)), 2, "toy_mtp.py", "not UTF-8")


@pytest.mark.parametrize(
    "head", [b"# Soci\xe9t\xe9\n", b"# -*- coding: utf-8 -*-\nimport os  # caf\xe9\n"], ids=["no cookie", "cookie"]
)
def test_non_utf8_bytes_only_in_comments_are_read_as_python_imports_them(head, tmp_path):
    """CPython's tokenizer never decodes a comment: the module imports, so it is analysed; fix, which
    keeps a file's bytes and cannot keep those, refuses the drafter saying why, and so does the scan."""
    tree = tree_of("direct_head", tmp_path)
    model = tree / MODELS / "toy_mtp.py"
    model.write_bytes(head + model.read_bytes())
    before = model.read_bytes()
    result = run_cli("scan", str(tree), "--format", "json")
    assert result.returncode == 1 and not result.stderr, result.stderr
    [record] = json.loads(result.stdout)["drafters"]
    assert (record["class"], record["status"]) == ("ToyMTP", "missing_fixable")
    fixed = run_cli("fix", str(tree), "--model", "ToyMTPModel")
    assert fixed.returncode == 1 and model.read_bytes() == before
    assert "unsafe rewrite refused: vllm/model_executor/models/toy_mtp.py: not UTF-8 (" in fixed.stderr
    assert "no safe mirror: `fix` refuses it (unsafe rewrite refused" in run_cli("scan", str(tree)).stdout


def test_a_coding_cookie_on_an_old_mac_files_second_line_is_read_as_python_reads_it(tmp_path):
    """CR-only line ends: CPython's tokenizer ends the cookie's line at the lone CR (tokenize.detect_encoding, over
    BytesIO.readline, does not): the cp1252 docstring is text, and fix writes the method in the file's codec and
    line ends."""
    tree = tree_of("direct_head", tmp_path)
    model = tree / MODELS / "toy_mtp.py"
    text = model.read_text().replace(HEAD_CALL, f'"""The head\u2019s logits."""\n        {HEAD_CALL}')
    model.write_bytes(("# coding: cp1252\n" + text).replace("\n", "\r").encode("cp1252"))
    fixed = run_cli("fix", str(tree), "--model", "ToyMTPModel")
    assert fixed.returncode == 0, fixed.stderr
    written = model.read_bytes()
    assert b"\n" not in written and b"\x92" in written and b"def get_top_tokens" in written
    compile(written, str(model), "exec")  # CPython takes it, cookie and all


def test_read_only_file_is_refused_and_nothing_is_written(tmp_path):
    tree = tree_of("delegation_cross_file", tmp_path)
    target = tree / MODELS / "split_predictor.py"
    target.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    before = snapshot(tree)
    try:
        assert_clean_failure(run_cli("fix", str(tree), "--all"), 2, "split_predictor.py", "read-only")
        assert snapshot(tree) == before  # the other file of the same fix was not written either
    finally:
        target.chmod(0o644)


def test_file_changed_between_analysis_and_write(tmp_path, monkeypatch):
    from mtp_audit.errors import UsageError
    from mtp_audit.fix import plan_fix, write_fix
    from mtp_audit.locate import locate

    tree = tree_of("direct_head", tmp_path)
    result = plan_fix(locate(tree), ["toy"], False, None)
    path = tree / MODELS / "toy_mtp.py"
    path.write_text(path.read_text() + "\n# edited meanwhile\n")
    edited = path.read_bytes()
    with pytest.raises(UsageError, match="changed since it was analysed"):
        write_fix(result)
    assert path.read_bytes() == edited


@pytest.mark.parametrize("jobs", [1, 2])
def test_an_edit_saved_after_the_scan_read_the_file_refuses_the_fix(tmp_path, monkeypatch, jobs):
    """The mirror is built from the compute_logits the scan analysed: an edit saved between the scan's
    read and the rewrite (here, a mask after the head) must refuse the run, not get a stale mirror."""
    from mtp_audit import fix
    from mtp_audit.errors import UsageError
    from mtp_audit.locate import locate

    tree = tree_of("direct_head", tmp_path)
    path = tree / MODELS / "toy_mtp.py"
    masked = path.read_text().replace(
        "        return self.logits_processor(self.lm_head, hidden_states)\n",
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        '        logits[..., 0] = float("-inf")\n'
        "        return logits\n",
    )
    rewrites = fix._rewrites

    def saved_then_rewritten(*args, **kwargs):  # the user saves right as the rewrite starts
        path.write_text(masked)
        return rewrites(*args, **kwargs)

    monkeypatch.setattr(fix, "_rewrites", saved_then_rewritten)
    with pytest.raises(UsageError, match="toy_mtp.py changed since it was analysed; nothing written"):
        fix.plan_fix(locate(tree), ["toy"], False, None, jobs=jobs)
    assert path.read_text() == masked


def _symlink_out(tree: Path, tmp_path: Path) -> Path:
    """Move toy_mtp.py out of the tree, leaving a symlink to it; the real file."""
    link = tree / MODELS / "toy_mtp.py"
    real = tmp_path / "elsewhere" / "toy_mtp.py"
    real.parent.mkdir()
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    return real


def test_symlink_out_of_the_tree_is_not_read_unless_asked_and_never_written(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    real = _symlink_out(tree, tmp_path)
    before = real.read_bytes()
    scanned = run_cli("scan", str(tree), "--format", "json")
    assert_clean_failure(scanned, 2, "toy_mtp.py", "outside the tree", "--follow-symlinks")
    assert '"file": "vllm/model_executor/models/toy_mtp.py"' in scanned.stdout  # named in errors
    assert run_cli("scan", str(tree), "--follow-symlinks").returncode == 1  # read when asked
    assert_clean_failure(run_cli("fix", str(tree), "--model", "toy"), 2, "outside the tree")
    assert_clean_failure(run_cli("fix", str(tree), "--all", "--follow-symlinks"), 2, "outside", "nothing written")
    assert real.read_bytes() == before


def test_fix_names_a_few_unreadable_files_and_counts_the_rest(tmp_path):
    """A tree of symlinks (``cp -rs``) leaves every file unread: fix's one line names three and counts
    the others, which scan lists one per line."""
    tree = tree_of("dispatch_platform_names", tmp_path / "real")
    farm = tmp_path / "farm"
    for path in sorted(tree.rglob("*.py")):
        (farm / path.relative_to(tree)).parent.mkdir(parents=True, exist_ok=True)
        (farm / path.relative_to(tree)).symlink_to(path)
    scanned = run_cli("scan", str(farm))
    unread = len([line for line in scanned.stderr.splitlines() if line.startswith("error: ")])
    assert unread > 4  # (each drafter that does not resolve is a warning that says why too)
    fixed = run_cli("fix", str(farm), "--all")
    assert_clean_failure(fixed, 2, f"and {unread - 3} more files (`mtp-audit scan` lists them)", "nothing written")
    assert fixed.stderr.count("outside the tree") == 3


def test_symlinked_directory_out_of_the_tree_is_never_written(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    models = tree / MODELS
    real = tmp_path / "elsewhere-models"
    models.rename(real)
    models.symlink_to(real, target_is_directory=True)
    before = snapshot(real)
    assert_clean_failure(run_cli("fix", str(tree), "--all", "--follow-symlinks"), 2, "outside", "nothing written")
    assert snapshot(real) == before


def test_symlink_inside_the_tree_is_fixed_where_it_lives(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    link = tree / MODELS / "toy_mtp.py"
    real = tree / "vllm" / "real_toy.py"
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    assert run_cli("fix", str(tree), "--model", "toy").returncode == 0
    assert link.is_symlink() and "def get_top_tokens" in real.read_text()


def test_scan_and_fix_never_import_the_scanned_code(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    marker = tmp_path / "imported"
    model = tree / MODELS / "toy_mtp.py"
    model.write_text(f"open({str(marker)!r}, 'w').close()\n" + model.read_text())
    (tree / "vllm/__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    assert run_cli("scan", str(tree)).returncode == 1
    assert run_cli("fix", str(tree), "--model", "toy").returncode == 0
    assert not marker.exists()


def test_plugin_directory_note(tmp_path):
    tree = tree_of("plugin_dir", tmp_path)
    result = run_cli("scan", str(tree), "--format", "json")
    assert "scanning it as a plugin directory" in result.stderr
    assert '"arch": null' in result.stdout


def test_internal_error_names_the_file(tmp_path, monkeypatch):
    from mtp_audit.errors import InternalError
    from mtp_audit.index import modules
    from mtp_audit.locate import locate
    from mtp_audit.scan import scan

    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(modules, "extract_facts", explode)
    with pytest.raises(InternalError, match=r"internal error while processing vllm/.*: RuntimeError: boom"):
        scan(locate(tree_of("direct_head", tmp_path)))


@pytest.mark.skipif(os.geteuid() != 0, reason="root ignores permission bits; the mode check must not")
def test_read_only_respected_even_as_root(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    target = tree / MODELS / "toy_mtp.py"
    target.chmod(0o444)
    assert_clean_failure(run_cli("fix", str(tree), "--model", "toy"), 2, "read-only")


def _edit_toy(tree: Path, edit) -> Path:
    path = tree / MODELS / "toy_mtp.py"
    path.write_text(edit(path.read_text()))
    return path


HEAD_CALL = "return self.logits_processor(self.lm_head, hidden_states)"


@pytest.mark.parametrize(
    "expression",
    ["hidden_states" + ".t()" * 300, " + ".join(["hidden_states"] * 900)],
    ids=["300-chained-calls", "900-term-sum"],
)
def test_deep_expressions_that_cpython_compiles_are_scanned_and_fixed(tmp_path, expression):
    tree = tree_of("direct_head", tmp_path)
    path = _edit_toy(tree, lambda s: s.replace(HEAD_CALL, f"x = {expression}\n        {HEAD_CALL}"))
    compile(path.read_text(), str(path), "exec")  # CPython takes it
    assert_clean_failure(run_cli("scan", str(tree)), 1)
    assert_clean_failure(run_cli("fix", str(tree), "--all"), 0)
    assert "def get_top_tokens" in path.read_text()


@pytest.mark.parametrize(
    "expression",
    [" + ".join(["hidden_states"] * 20_000), "hidden_states" + "[0]" * 5_000, " if c else ".join(["h"] * 3_000)],
    ids=["20000-term-sum", "5000-subscripts", "3000-conditionals"],
)
def test_an_expression_too_deep_for_libcst_is_named_not_parsed(tmp_path, expression):
    """libcst's parse grows with the square of the nesting (hours for 20,000 terms): such a method is
    missing_manual, saying why, and fix refuses it, in seconds."""
    tree = tree_of("direct_head", tmp_path)
    path = _edit_toy(tree, lambda s: s.replace(HEAD_CALL, f"x = {expression}\n        {HEAD_CALL}"))
    before = path.read_bytes()
    scan = run_cli("scan", str(tree), "--format", "json")
    assert scan.returncode == 1, scan.stderr
    [record] = json.loads(scan.stdout)["drafters"]
    assert record["status"] == "missing_manual"
    assert "`compute_logits` holds an expression nested more than 1000 deep (line 7 of the method)" in record["reason"]
    assert_clean_failure(run_cli("fix", str(tree), "--all"), 0)
    assert path.read_bytes() == before


def test_a_1200_deep_inheritance_chain_resolves_in_linear_time(tmp_path):
    from mtp_audit.index.facts import extract_facts
    from mtp_audit.lifecycle import on_big_stack
    from mtp_audit.locate import locate
    from mtp_audit.scan import scan

    def chain(source: str, depth: int = 1200) -> str:
        out = source.replace("class ToyMTP(nn.Module):", "class Base0(nn.Module):")
        out += "".join(f"\n\nclass Base{i}(Base{i - 1}):\n    pass\n" for i in range(1, depth))
        return out + f"\n\nclass ToyMTP(Base{depth - 1}):\n    pass\n"

    tree = tree_of("direct_head", tmp_path)
    _edit_toy(tree, chain)
    extract_facts("x = 1\n", "m", "m.py", False)  # imports done before the clock starts
    began = time.perf_counter()
    results = []
    on_big_stack(lambda: results.append(scan(locate(tree))[0]))  # as the CLI runs it
    assert time.perf_counter() - began < 20  # was 194 s at 700 deep (cubic C3)
    [record] = results[0].records
    assert record.status.value == "missing_fixable" and record.compute_logits.cls == "Base0"
    assert_clean_failure(run_cli("scan", str(tree)), 1)  # the CLI's recursion limit copes too


def test_a_file_cpython_cannot_compile_is_named_and_the_rest_reported(tmp_path):
    tree = tree_of("call_contract", tmp_path)
    (tree / MODELS / "toy_dspark.py").write_text(
        (tree / MODELS / "toy_dspark.py").read_text() + "\nX = " + "-" * 50000 + "1\n"
    )
    result = run_cli("scan", str(tree), "--format", "json")
    assert_clean_failure(result, 2, "toy_dspark.py", "too deeply nested")
    assert '"errors"' in result.stdout and '"status"' in result.stdout


def test_a_syntax_error_outside_any_class_is_named_by_scan_and_fix(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    _edit_toy(tree, lambda s: s + "\n\ndef broken(:\n    pass\n")
    before = snapshot(tree)
    scanned = run_cli("scan", str(tree), "--format", "json")
    assert_clean_failure(scanned, 2, "toy_mtp.py", "syntax error")
    assert "toy_mtp.py" in scanned.stdout.split('"errors"')[1]
    fixed = run_cli("fix", str(tree), "--all")
    assert_clean_failure(fixed, 2, "toy_mtp.py", "syntax error", "nothing written")
    assert "internal error" not in fixed.stderr
    assert snapshot(tree) == before


@pytest.mark.parametrize("module", ["..secrets", ".", "/etc/passwd", "models..toy", ""])
def test_registry_module_names_that_leave_the_package_are_refused(tmp_path, module):
    tree = tree_of("direct_head", tmp_path)
    (tree / MODELS / "registry.py").write_text(f'_SPECULATIVE_DECODING_MODELS = {{"X": ({module!r}, "ToyMTP")}}\n')
    result = run_cli("scan", str(tree))
    assert_clean_failure(result, 2, "registry.py", "not a dotted module name")
    assert len(result.stderr.strip().splitlines()) == 1


def test_unreadable_model_file_is_named_and_the_rest_reported(tmp_path, monkeypatch):
    from mtp_audit.index import modules
    from mtp_audit.locate import locate
    from mtp_audit.scan import scan

    tree = tree_of("delegation_cross_file", tmp_path)
    read_bytes = modules.ModuleIndex.read_bytes

    def refuse(self, path):  # as a file with mode 000 for a user who is not root
        if path.name == "split_predictor.py":
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(self, path)

    monkeypatch.setattr(modules.ModuleIndex, "read_bytes", refuse)
    result, _, _ = scan(locate(tree))
    assert (
        "vllm/model_executor/models/split_predictor.py",
        "cannot be read (Permission denied)",
    ) in result.parse_errors
    assert result.records or result.unresolved  # the rest is reported


def _without_root_read_override() -> list[str]:
    """A command prefix under which permissions bind (root reads any folder; setpriv drops that)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions cannot be made to bind")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--"]


@pytest.fixture
def unsearchable(tmp_path):
    """chmod 000 folders, given back their mode at the end so that tmp_path can be removed."""
    folders: list[Path] = []
    yield folders.append
    for folder in folders:
        folder.chmod(0o755)


def test_an_unreadable_folder_is_named_as_unreadable_not_missing(tmp_path, unsearchable):
    prefix = _without_root_read_override()
    run = [*prefix, sys.executable, "-m", "mtp_audit", "scan", "--no-cache", "--format", "json"]
    environment = {**os.environ, "NO_COLOR": "1"}
    plugin = tmp_path / "plug" / "my_plugin"
    plugin.mkdir(parents=True)
    (plugin / "acme_mtp.py").write_text("class AcmeMTP:\n    pass\n")
    unsearchable(plugin)
    plugin.chmod(0)
    result = subprocess.run([*run, str(plugin.parent)], capture_output=True, text=True, env=environment)
    assert (result.returncode, result.stderr) == (2, f"mtp-audit: {plugin}: cannot be read (Permission denied)\n")
    # in a vLLM tree: a dispatch package whose folder cannot be searched is unreadable (exit 2), not "no module"
    tree = tree_of("direct_head", tmp_path)
    gamma = tree / "vllm/models/gamma"
    gamma.mkdir(parents=True)
    (gamma / "__init__.py").write_text((tree / MODELS / "toy_mtp.py").read_text())
    registry = tree / MODELS / "registry.py"
    registry.write_text(registry.read_text().replace("{", '{"GammaMTPModel": ("vllm.models.gamma", "ToyMTP"), ', 1))
    unsearchable(gamma)
    gamma.chmod(0)
    result = subprocess.run([*run, str(tree)], capture_output=True, text=True, env=environment)
    assert result.returncode == 2, result.stderr
    assert json.loads(result.stdout)["errors"] == [
        {"file": "vllm/models/gamma/__init__.py", "message": "cannot be read (Permission denied)"}
    ]


def test_unreadable_registry_is_one_line_exit_2(tmp_path, monkeypatch):
    from mtp_audit.errors import UsageError
    from mtp_audit.index import modules
    from mtp_audit.locate import locate
    from mtp_audit.scan import scan

    read_bytes = modules.ModuleIndex.read_bytes

    def refuse(self, path):
        if path.name == "registry.py":
            raise PermissionError(13, "Permission denied", str(path))
        return read_bytes(self, path)

    monkeypatch.setattr(modules.ModuleIndex, "read_bytes", refuse)
    with pytest.raises(UsageError, match="registry.py: cannot be read"):
        scan(locate(tree_of("direct_head", tmp_path)))


def test_an_os_error_reaching_the_cli_is_named_not_internal(tmp_path):
    """An unreadable directory on the way (EACCES from stat): the CLI names the path."""
    tree = tree_of("direct_head", tmp_path)
    script = (
        "import os, sys\n"
        "real = os.path.realpath\n"
        "def realpath(path, *args, **kwargs):\n"
        "    if os.path.basename(path) == 'models':  # where a scan resolves the model files' folder\n"
        "        raise PermissionError(13, 'Permission denied', str(path))\n"
        "    return real(path, *args, **kwargs)\n"
        "os.path.realpath = realpath\n"
        "from mtp_audit.cli import main\n"
        f"sys.argv = ['mtp-audit', 'scan', {str(tree)!r}]\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert_clean_failure(result, 2, "vllm/model_executor/models", "Permission denied")
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    "prefix, name", [(b"\xef\xbb\xbf", "bom"), (b"# -*- coding: latin-1 -*-\n# caf\xe9\n", "latin-1")]
)
def test_encodings_read_like_cpython_and_written_back_the_same(tmp_path, prefix, name):
    tree = tree_of("direct_head", tmp_path)
    path = tree / MODELS / "toy_mtp.py"
    path.write_bytes(prefix + path.read_bytes())
    assert_clean_failure(run_cli("scan", str(tree)), 1)
    assert_clean_failure(run_cli("fix", str(tree), "--all"), 0)
    data = path.read_bytes()
    assert data.startswith(prefix) and b"def get_top_tokens" in data
    compile(data, str(path), "exec")


@pytest.mark.parametrize("args", [["scan", "--format", "json"], ["fix", "--all", "--diff"]])
def test_closed_stdout_is_one_line_exit_2_for_text_and_bytes(tmp_path, args):
    """``fix --diff`` writes the files' own bytes (``sys.stdout.buffer``): guarded as text output is."""
    tree = tree_of("direct_head", tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "mtp_audit", args[0], str(tree), *args[1:]],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        preexec_fn=lambda: os.close(1),
    )
    assert_clean_failure(result, 2, "standard output is closed")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, code", [(["scan", "--format", "json"], 2), (["fix", "--model", "ToyMTPModel", "--check"], 1)]
)
def test_closed_stderr_keeps_stdout_clean(tmp_path, args, code):
    """With fd 2 closed, Python's ``sys.stderr`` is None and ``print(file=None)`` writes to stdout: errors
    and warnings went into the JSON report, and ``fix --check`` died on ``isatty``."""
    tree = tree_of("direct_head", tmp_path)
    if args[0] == "scan":
        (tree / MODELS / "broken.py").write_text("def broken(:\n")
        registry = tree / MODELS / "registry.py"
        registry.write_text(registry.read_text().replace("}", '    "BrokenModel": ("broken", "Broken"),\n}'))
    result = subprocess.run(
        [sys.executable, "-m", "mtp_audit", args[0], str(tree), *args[1:]],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        check=False,
        preexec_fn=lambda: os.close(2),
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},  # the width then comes from stderr
    )
    assert result.returncode == code
    if args[0] == "scan":
        assert json.loads(result.stdout)["drafters"]
    else:
        assert result.stdout == ""


CTRL_C_WHILE_IMPORTING = """
import os, signal, sys
class CtrlCOnTyper:
    def find_spec(self, name, path=None, target=None):
        if name == "typer":
            os.kill(os.getpid(), signal.SIGINT)  # as if the user pressed Ctrl-C while typer imports
        return None
sys.meta_path.insert(0, CtrlCOnTyper())
sys.argv = ["mtp-audit", "scan", "."]
from mtp_audit.__main__ import main
main()
"""


def test_a_ctrl_c_while_the_command_imports_is_one_line_exit_130():
    done = subprocess.run([sys.executable, "-c", CTRL_C_WHILE_IMPORTING], capture_output=True, text=True)
    assert done.returncode == 130 and done.stderr == "mtp-audit: interrupted\n", done.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_full_disk_on_stdout_is_one_line_exit_2(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "mtp_audit", "scan", str(tree), "--format", "json"],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    assert_clean_failure(result, 2, "No space left on device")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    ("args", "code"),
    [
        (["scan", "{missing}"], 2),  # an input error
        (["scan", "--bogus"], 2),  # a usage error
        (["fix", "{tree}", "--all", "--diff"], 0),  # nothing refused: its summary goes to stderr
        (["fix", "{tree}", "--all"], 0),  # every file written
    ],
)
def test_an_unwritable_stderr_leaves_the_exit_code_alone(tmp_path, args, code):
    """What the command says on stderr is lost, but its exit code still says what it did: the failed
    write ended a fix that wrote every file as an input error, and that message failing in turn gave
    exit 1, which says "refused"."""
    tree = tree_of("direct_head", tmp_path)
    args = [a.format(tree=tree, missing=tmp_path / "missing") for a in args]
    with open("/dev/full", "w") as full:
        result = subprocess.run(
            [sys.executable, "-m", "mtp_audit", *args], stdout=subprocess.PIPE, stderr=full, text=True, check=False
        )
    assert result.returncode == code
    if args[:1] == ["fix"] and "--diff" not in args:
        assert "def get_top_tokens" in (tree / "vllm/model_executor/models/toy_mtp.py").read_text()


@pytest.mark.parametrize("unbuffered", ["1", ""])
@pytest.mark.parametrize("format", ["json", "markdown", "table"])
def test_a_short_write_of_the_output_is_exit_2_buffered_or_not(format, unbuffered, tmp_path):
    """A file-size limit cuts a write short (a full disk does too): unbuffered (PYTHONUNBUFFERED, CI images), the
    text layer dropped the rest of one big write without an error, and the command exited 0 with half a document."""
    resource = pytest.importorskip("resource")
    tree = tree_of("direct_head", tmp_path)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONUNBUFFERED"}
    env.update({"PYTHONUNBUFFERED": unbuffered} if unbuffered else {})
    with open(tmp_path / "out", "w") as out:
        result = subprocess.run(
            [sys.executable, "-m", "mtp_audit", "scan", str(tree), "--format", format, "--fail-on", "never"],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200)),
            check=False,
        )
    assert_clean_failure(result, 2, "writing to standard output failed")


@pytest.mark.parametrize("format", ["json", "concise"])
def test_a_reader_that_goes_away_ends_the_command_quietly_as_git_and_ruff_do(format, tmp_path):
    """``scan | head``: no error line; the process ends by SIGPIPE (141 in a shell), as git's and ruff's do."""
    tree = tree_of("direct_head", tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "mtp_audit", "scan", str(tree), "--format", format],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.close()  # the reader went away before the output
    err = process.stderr.read()
    assert process.wait() == -signal.SIGPIPE and err == "", err


def test_a_ctrl_c_after_the_command_has_ended_changes_nothing(tmp_path):
    """The output is out and the exit code decided: Ctrl-C during exit must not add an
    "Exception ignored" line nor turn the exit into a death by SIGINT."""
    tree = tree_of("direct_head", tmp_path)
    script = (
        "import atexit, os, signal, sys\n"
        "from mtp_audit.cli import main\n"
        "atexit.register(os.kill, os.getpid(), signal.SIGINT)\n"
        f"sys.argv = ['mtp-audit', 'scan', {str(tree)!r}, '--format', 'json']\n"
        "main()\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stderr) == (1, ""), result.stderr
    assert json.loads(result.stdout)["drafters"][0]["status"] == "missing_fixable"


SCRATCH_THEN_CTRL_C = """
import os, sys, threading, time
from mtp_audit.lifecycle import interrupted, scratch_directory
with scratch_directory("mtp-audit-test-") as scratch:
    print(scratch, flush=True)
    def worker():  # a worker process still writing into it while the parent exits
        while True:
            try:
                open(os.path.join(scratch, "rank0.log"), "a").write("x")
            except OSError:
                pass
            time.sleep(0.001)
    threading.Thread(target=worker, daemon=True).start()
    time.sleep(0.05)
    interrupted()  # what Ctrl-C ends in: os._exit(130), no context exits
"""


def test_a_ctrl_c_leaves_no_scratch_directory(tmp_path):
    """verify's scratch directory (plans, rank logs) goes with the command, also when Ctrl-C ends it."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", SCRATCH_THEN_CTRL_C], capture_output=True, text=True, env=env)
    assert done.returncode == 130 and done.stderr == "mtp-audit: interrupted\n"
    scratch = Path(done.stdout.strip())
    assert scratch.parent == tmp_path and not scratch.exists()
    assert list(tmp_path.iterdir()) == []


CTRL_C_WHILE_DOWNLOADING = """
import os, signal, sys, time
from pathlib import Path
from mtp_audit import sources
from mtp_audit.lifecycle import handle_ctrl_c
handle_ctrl_c()
signum = int(sys.argv[1])  # SIGINT: the user presses Ctrl-C; SIGTERM: kill, a CI job's timeout
def stalled(spec, into, pattern="*.whl"):
    (Path(into) / "vllm-9.9.9-py3-none-any.whl.part").write_bytes(b"x")  # what pip has fetched so far
    os.kill(os.getpid(), signum)
    time.sleep(5)
sources._download = stalled
from mtp_audit.cli import main
sys.argv = ["mtp-audit", "scan", "--vllm-version", "9.9.9"]
main()
"""


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "mtp-audit: interrupted\n"), (signal.SIGTERM, 143, "mtp-audit: terminated\n")],
)
def test_a_ctrl_c_during_a_download_leaves_nothing_in_the_sources_cache(tmp_path, signum, code, said):
    """The download's scratch directory (where pip puts the partial wheel) went with ``os._exit``'s skipped
    context exits; it is a lifecycle scratch directory now, removed by the Ctrl-C handler. SIGTERM
    left it (and verify's) in place: it is answered as Ctrl-C is."""
    env = {**os.environ, "MTP_AUDIT_SOURCES_DIR": str(tmp_path)}
    command = [sys.executable, "-c", CTRL_C_WHILE_DOWNLOADING, str(int(signum))]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == code and done.stderr.endswith(said), done.stderr
    assert list(tmp_path.iterdir()) == []


WORKER_KILLED = """
import sys
from concurrent.futures.process import BrokenProcessPool
import mtp_audit.cli as cli
def killed(*args, **kwargs):
    raise BrokenProcessPool("A process in the process pool was terminated abruptly")
cli.run_scan = killed
sys.argv = ["mtp-audit", "scan", sys.argv[1]]
cli.main()
"""


def test_a_worker_killed_from_outside_is_no_internal_error(tmp_path):
    """The OOM killer or a kill -9 of a worker: one line saying what happened and what to do, not
    "internal error ... please report it"."""
    tree = tree_of("direct_head", tmp_path)
    done = subprocess.run([sys.executable, "-c", WORKER_KILLED, str(tree)], capture_output=True, text=True)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "mtp-audit: a worker process died before it answered (killed from outside, or out of memory); "
        "run the command again, or with --jobs 1 for one process\n"
    )


CTRL_C_IN_A_CALLBACK = """
import sys
from mtp_audit.lifecycle import Interrupted, handle_ctrl_c
handle_ctrl_c()
class Finalized:
    def __del__(self):
        raise Interrupted  # Ctrl-C arriving while Python runs a callback: it cannot raise it
Finalized()
class Broken:
    def __del__(self):
        raise ValueError("a real bug")
Broken()
"""


def test_a_ctrl_c_inside_a_callback_prints_no_traceback():
    """Ctrl-C arriving in an import's module-lock callback printed "Exception ignored ... Traceback"
    after "mtp-audit: interrupted" (fault checks); other unraisable errors are still reported."""
    done = subprocess.run([sys.executable, "-c", CTRL_C_IN_A_CALLBACK], capture_output=True, text=True)
    assert done.returncode == 0
    assert "Interrupted" not in done.stderr and "ValueError: a real bug" in done.stderr


def _finished_first(make: str):
    """A ``sources._download`` that, while ours runs, lets another process finish the same entry first
    (``make``: what it leaves, under the entry folder), then returns our own wheel."""
    import zipfile

    def download(requirement: str, into: Path, pattern: str = "*.whl") -> Path:
        from mtp_audit import sources

        name, _, version = requirement.partition("==")
        theirs = sources.sources_dir() / (version if name == "vllm" else f"wheels/{name}-{version}") / make
        theirs.parent.mkdir(parents=True)
        theirs.write_text("theirs")
        wheel = into / f"{name}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("vllm/__init__.py", "ours")
        return wheel

    return download


@pytest.mark.parametrize(
    ("fetch", "left"),
    [
        (lambda sources: sources.release_tree("0.34.0") / "vllm/__init__.py", "vllm/__init__.py"),
        (lambda sources: sources.released_wheel("acme", "0.1.0"), "acme-0.1.0-py3-none-any.whl"),
    ],
    ids=["release_tree", "released_wheel"],
)
def test_a_download_finished_first_by_another_process_is_kept(fetch, left, tmp_path, monkeypatch):
    """Two scans of one release with an empty sources cache (a CI matrix): the second to finish keeps
    the first one's entry, which that process may be reading, and drops its own."""
    from mtp_audit import sources

    monkeypatch.setenv("MTP_AUDIT_SOURCES_DIR", str(tmp_path / "sources"))
    monkeypatch.setattr(sources, "_download", _finished_first(left))
    path = fetch(sources)
    assert path.name == Path(left).name and path.read_text() == "theirs"
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".download-")] == []


def test_a_download_another_process_is_running_is_waited_for_not_repeated(tmp_path, monkeypatch):
    """Two processes asking for one release at once (a test run's workers): the second waits on the cache
    folder's lock, says so, and takes the entry the first installed; it downloads nothing."""
    import fcntl
    import threading

    from mtp_audit import sources

    folder = tmp_path / "sources"
    folder.mkdir()
    monkeypatch.setenv("MTP_AUDIT_SOURCES_DIR", str(folder))
    downloads, said, got = [], [], []
    monkeypatch.setattr(sources, "_download", lambda *args: downloads.append(args))

    @contextlib.contextmanager
    def progress(text):
        said.append(text)
        yield

    theirs = os.open(folder, os.O_RDONLY)  # the first process, downloading
    fcntl.flock(theirs, fcntl.LOCK_EX)
    second = threading.Thread(target=lambda: got.append(sources.release_tree("0.34.0", progress=progress)), daemon=True)
    try:
        second.start()
        for _ in range(200):  # until it waits (a loaded machine may take a while to get there)
            if said:
                break
            time.sleep(0.05)
        assert second.is_alive() and said == [f"waiting for another process's download into {folder}"]
        (folder / "0.34.0" / "vllm").mkdir(parents=True)
        (folder / "0.34.0" / "vllm" / "__init__.py").write_text("theirs")
    finally:
        os.close(theirs)  # the first process ends: its lock goes with it
    second.join(10)
    assert got == [folder / "0.34.0"] and downloads == []
    assert sorted(p.name for p in folder.iterdir()) == ["0.34.0"]  # no lock file left


SPECULATOR_FOLDER = "vllm/v1/worker/gpu/spec_decode"
UNREADABLE_CALLER_FILES = {
    "a symlink out of the tree": (lambda path, outside: path.symlink_to(outside), "outside the tree"),
    "a symlink to a device": (lambda path, outside: path.symlink_to("/dev/zero"), "outside the tree"),
    "a FIFO": (lambda path, outside: os.mkfifo(path), "not a regular file"),
}


@pytest.mark.parametrize("kind", UNREADABLE_CALLER_FILES)
def test_speculator_files_are_read_as_model_files_are(kind, tmp_path):
    """The caller files get the model files' reader: not through a symlink out of the tree, only a
    regular file (a FIFO would hang the scan, /dev/zero fill memory); the file is named."""
    make, why = UNREADABLE_CALLER_FILES[kind]
    tree = build_tree(FIXTURES / "scan" / "speculator_configs", tmp_path / "tree")
    outside = tmp_path / "outside.py"
    outside.write_text("class XSpeculator:\n    pass\n")
    make(tree / SPECULATOR_FOLDER / "x.py", outside)
    scanned = subprocess.run(
        [sys.executable, "-m", "mtp_audit", "scan", str(tree), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert scanned.returncode == 2
    assert f"{SPECULATOR_FOLDER}/x.py: " in scanned.stderr and why in scanned.stderr


def test_an_undecodable_file_beside_the_speculators_that_no_path_reads_is_no_error(tmp_path):
    """A file of the speculator folders that names no speculator is set aside, decoded only if a
    drafting path calls into it: bytes its codec cannot read there are no input error of the scan."""
    tree = tree_of("call_contract", tmp_path)
    before = run_cli("scan", str(tree), "--format", "json", "--no-cache")
    folder = tree / "vllm/v1/worker/gpu/spec_decode"
    (folder / "notes.py").write_bytes(b"LABEL = '\xff'\n")
    after = run_cli("scan", str(tree), "--format", "json", "--no-cache")
    assert after.returncode == before.returncode != 2, after.stderr
    assert "notes.py" not in after.stderr and after.stdout == before.stdout


@pytest.mark.parametrize(("given", "folder"), [("0.34", "0.34.0"), ("0.34.0.0", "0.34.0"), ("0.34rc1", "0.34.0rc1")])
def test_a_release_number_pip_reads_as_another_is_that_release(given, folder, tmp_path, monkeypatch):
    """``--vllm-version 0.34`` downloaded the wheel again into a folder of its own: pip's 0.34 is 0.34.0."""
    from mtp_audit import sources

    monkeypatch.setenv("MTP_AUDIT_SOURCES_DIR", str(tmp_path))
    (tmp_path / folder / "vllm").mkdir(parents=True)
    (tmp_path / folder / "vllm" / "__init__.py").write_text("")

    def no_download(*args, **kwargs):
        raise AssertionError("downloaded again")

    monkeypatch.setattr(sources, "_download", no_download)
    assert sources.release_tree(given) == tmp_path / folder
