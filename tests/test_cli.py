"""Command-line behaviour: exit codes, messages, formats (fixture trees only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli


def tree_of(case: str, tmp_path: Path) -> Path:
    return build_tree(FIXTURES / "scan" / case, tmp_path / case)


def test_exit_codes_follow_fail_on(tmp_path):
    tree = tree_of("consistency", tmp_path)  # supported only: equivalent, mirror, unproven, divergent
    assert run_cli("scan", str(tree)).returncode == 1  # divergent is a finding by default
    assert run_cli("scan", str(tree), "--model", "PlainEagle").returncode == 0
    assert run_cli("scan", str(tree), "--model", "HandWrittenMTP").returncode == 0
    assert run_cli("scan", str(tree), "--model", "HandWrittenMTP", "--fail-on", "unproven").returncode == 1
    assert run_cli("scan", str(tree), "--fail-on", "never").returncode == 0


def test_unknown_model_lists_candidates(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    result = run_cli("scan", str(tree), "--model", "toy_mpt")
    assert result.returncode == 2
    assert "matches no drafter" in result.stderr and "toy" in result.stderr
    assert result.stdout == ""
    mistyped = run_cli("fix", str(tree), "--model", "toymtpmodle")  # matched without case, named with it
    assert "--model toymtpmodle matches no drafter; did you mean: ToyMTPModel, ToyMTP" in mistyped.stderr


def test_model_naming_an_unresolved_architecture_reports_it(tmp_path):
    """A registered architecture that does not resolve is no unknown name: scan reports it as unresolved (exit 1),
    fix says why it does not resolve; with --model, an unresolved architecture not selected does not count."""
    tree = tree_of("same_failure_every_platform", tmp_path)  # GhostMTPModel unresolved, OrphanMTPModel a record
    ghost = run_cli("scan", str(tree), "--model", "GhostMTPModel")
    assert ghost.returncode == 1
    assert "matches no drafter" not in ghost.stderr
    assert "GhostMTPModel -> vllm.model_executor.models.ghost_mtp.GhostMTP does not resolve" in ghost.stderr
    fixed = run_cli("fix", str(tree), "--model", "GhostMTPModel", "--diff")
    assert "matches no drafter" not in fixed.stderr and "GhostMTP is not defined" in fixed.stderr
    orphan = run_cli("scan", str(tree), "--model", "OrphanMTPModel", "--fail-on", "divergent")
    assert orphan.returncode == 0 and "GhostMTPModel" not in orphan.stderr


def test_ambiguous_model_for_fix(tmp_path):
    tree = tree_of("dispatch_getattr", tmp_path)
    # both packages define an "mtp" file; a class name unique to each is fine, a shared name is not
    (tree / "vllm/model_executor/models/registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "A": ("vllm.models.lazy", "LazyMTP"),\n'
        '    "B": ("vllm.models.table", "LazyMTP"),\n'
        "}\n"
    )
    (tree / "vllm/models/table/nvidia/mtp.py").write_text(
        (tree / "vllm/models/table/nvidia/mtp.py").read_text().replace("TableMTP", "LazyMTP")
    )
    (tree / "vllm/models/table/__init__.py").write_text("from .nvidia.mtp import LazyMTP\n")
    result = run_cli("fix", str(tree), "--model", "LazyMTP", "--diff")
    assert result.returncode == 2
    assert "ambiguous" in result.stderr and "vllm.models.lazy" in result.stderr
    advice = result.stderr.rsplit("Give one of: ", 1)[1].strip().rstrip(".").split(", ")
    assert advice == ["A", "B"]  # the shared class name is no advice: each name given selects one alone
    for name in advice:
        alone = run_cli("fix", str(tree), "--model", name, "--diff")
        assert alone.returncode in (0, 1) and "ambiguous" not in alone.stderr


def test_json_shape_matches_contract(tmp_path):
    tree = tree_of("delegation", tmp_path)
    doc = json.loads(run_cli("scan", str(tree), "--format", "json").stdout)
    assert set(doc) >= {"tool", "tool_version", "root", "vllm_version", "drafters"}
    assert doc["tool"] == "mtp-audit" and doc["root"] == str(tree) and doc["vllm_version"] == "0.99.0"
    [record] = doc["drafters"]
    assert set(record) >= {
        "arch",
        "class",
        "module",
        "file",
        "line",
        "platforms",
        "status",
        "compute_logits",
        "get_top_tokens",
        "delegates",
        "consistency",
        "reason",
    }
    assert record["compute_logits"] == {
        "class": "ToyDelegMTP",
        "file": "vllm/model_executor/models/toy_deleg_mtp.py",
        "line": 21,
    }


def test_markdown_and_table(tmp_path):
    tree = tree_of("manual_shapes", tmp_path)
    markdown = run_cli("scan", str(tree), "--format", "markdown").stdout
    assert markdown.startswith("### get_top_tokens audit of vLLM 0.99.0")
    assert "| missing_manual |  | MaskMTP | `MaskMTP` |" in markdown
    table = run_cli("scan", str(tree)).stdout
    assert "missing_manual (5)" in table and "missing_fixable (1)" in table and "not_applicable (2)" in table


def test_not_a_tree(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_cli("scan", str(empty))
    assert result.returncode == 2 and "no Python files" in result.stderr
    missing = run_cli("scan", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr


def test_fix_needs_a_target(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    result = run_cli("fix", str(tree))
    assert result.returncode == 2 and "--model" in result.stderr


def test_fix_diff_and_check_write_nothing(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    path = tree / "vllm/model_executor/models/toy_mtp.py"
    original = path.read_bytes()
    diff = run_cli("fix", str(tree), "--model", "toy", "--diff")
    assert diff.returncode == 0 and "+    def get_top_tokens(" in diff.stdout
    check = run_cli("fix", str(tree), "--model", "toy", "--check")
    assert check.returncode == 1
    assert path.read_bytes() == original
    assert run_cli("fix", str(tree), "--model", "toy").returncode == 0
    assert run_cli("fix", str(tree), "--model", "toy", "--check").returncode == 0


def _local_vllm_wheel(tree: Path, version: str, into: Path) -> Path:
    """A wheel of the fixture tree's ``vllm/`` that pip can "download" from a folder, offline."""
    import zipfile

    into.mkdir(parents=True, exist_ok=True)
    wheel = into / f"vllm-{version}-py3-none-any.whl"
    info = f"vllm-{version}.dist-info"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path in sorted((tree / "vllm").rglob("*.py")):
            archive.write(path, path.relative_to(tree).as_posix())
        archive.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        archive.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return wheel


def test_a_first_download_says_so_unless_quiet(tmp_path):
    wheels = tmp_path / "wheels"
    _local_vllm_wheel(tree_of("direct_head", tmp_path), "0.99.0", wheels)
    env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels)}

    loud = run_cli(
        "scan",
        "--vllm-version",
        "0.99.0",
        "--format",
        "json",
        env={**env, "MTP_AUDIT_SOURCES_DIR": str(tmp_path / "loud")},
    )
    assert loud.returncode in (0, 1), loud.stderr
    assert "downloading the vllm==0.99.0 wheel with pip, once" in loud.stderr
    assert (tmp_path / "loud" / "0.99.0" / "vllm" / "__init__.py").is_file()
    assert json.loads(loud.stdout)["drafters"]

    again = run_cli(
        "scan",
        "--vllm-version",
        "0.99.0",
        "--format",
        "json",
        env={**env, "MTP_AUDIT_SOURCES_DIR": str(tmp_path / "loud")},
    )
    assert "downloading" not in again.stderr and again.stdout == loud.stdout

    quiet = run_cli(
        "scan", "--vllm-version", "0.99.0", "--quiet", env={**env, "MTP_AUDIT_SOURCES_DIR": str(tmp_path / "quiet")}
    )
    assert quiet.returncode == loud.returncode and quiet.stderr == ""


def test_a_directory_with_no_drafter_is_an_input_error(tmp_path):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "layers.py").write_text("class Linear:\n    pass\n")
    result = run_cli("scan", str(plugin))
    assert result.returncode == 2 and result.stdout == ""
    assert "no drafter found" in result.stderr and "registry.py" in result.stderr and "*_mtp*" in result.stderr
    assert len(result.stderr.splitlines()) == 1  # the error alone, as for every input error (no plugin note)


def test_quiet_keeps_only_the_exit_code_and_errors_for_a_plugin_directory():
    plugin = FIXTURES / "scan" / "plugin_dir"
    loud = run_cli("scan", str(plugin), "--fail-on", "never")
    quiet = run_cli("scan", str(plugin), "--fail-on", "never", "--quiet")
    assert loud.stderr.startswith("note: ") and quiet.returncode == loud.returncode == 0
    assert quiet.stdout == quiet.stderr == ""


def test_by_model_type_names_an_unresolved_architecture_and_a_file_that_does_not_parse(tmp_path):
    """Both were labelled "unregistered", the parse error went unsaid and the exit code was 0."""
    tree = tree_of("model_types", tmp_path)
    registry = tree / "vllm/model_executor/models/registry.py"
    registry.write_text(registry.read_text().replace('("toy_mtp", "ToyMTP")', '("toy_mtp", "NoSuchClass")'))
    doc = json.loads(run_cli("scan", str(tree), "--by-model-type", "--format", "json").stdout)
    assert {"arch": "ToyMTPModel", "status": ["unresolved"]} in doc["model_types"]["toy_v3"]
    (tree / "vllm/model_executor/models/toy_mtp.py").write_text("x = (\n")
    broken = run_cli("scan", str(tree), "--by-model-type")
    assert broken.returncode == 2
    assert broken.stderr.startswith("error: vllm/model_executor/models/toy_mtp.py: syntax error, line 1")


def test_by_model_type_in_every_format(tmp_path):
    tree = tree_of("model_types", tmp_path)
    doc = json.loads(run_cli("scan", str(tree), "--by-model-type", "--format", "json").stdout)
    assert doc["model_types"] and all(
        {"arch", "status"} <= set(row) for rows in doc["model_types"].values() for row in rows
    )
    markdown = run_cli("scan", str(tree), "--by-model-type", "--format", "markdown").stdout
    assert markdown.startswith("| model_type | arch | status |")
    text = run_cli("scan", str(tree), "--by-model-type").stdout
    model_type = next(iter(doc["model_types"]))
    assert text.startswith(f"{model_type}: ") and f"`{model_type}`" in markdown
    table = run_cli("scan", str(tree), "--by-model-type", "--format", "table", env={"COLUMNS": "160"}).stdout
    assert "drafters by model_type" in table and "model_type" in table.splitlines()[2]
    table_rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in table.splitlines() if "│" in line]
    named = None
    for model_type, arch, status in table_rows:  # a model_type is named on its first row only
        named = model_type or named
        assert {"arch": arch, "status": status.split(", ")} in doc["model_types"][named]
    assert len(table_rows) == sum(len(rows) for rows in doc["model_types"].values())
    for fmt in ("github", "sarif"):
        rejected = run_cli("scan", str(tree), "--by-model-type", "--format", fmt)
        assert rejected.returncode == 2 and "--by-model-type prints" in rejected.stderr


def test_options_that_would_be_ignored_are_usage_errors(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    for args, message in [
        (["--compare", "0.33.0", "0.34.0", str(tree)], "give no PATH or --vllm-version"),
        (["--compare", "0.33.0", "0.34.0", "--vllm-version", "0.34.0"], "give no PATH or --vllm-version"),
        (["--compare", "0.33.0", "0.34.0", "--format", "sarif"], "--compare prints"),
        (["--compare", "0.33.0", "0.34.0", "--model", "toy"], "--model"),
        ([str(tree), "--format", "json", "--verbose"], "--verbose goes with the concise report"),
        ([str(tree), "--format", "table", "--show-all"], "--show-all goes with the concise report"),
        ([str(tree), "--by-model-type", "--model", "toy"], "--model does not apply"),
        # the format was the default: the option does not go with --compare, whatever the format
        (["--compare", "0.33.0", "0.34.0", "--show-all"], "--show-all does not apply to --compare"),
        ([str(tree), "--by-model-type", "--verbose"], "--verbose does not apply to --by-model-type"),
        (["--compare", "0.33.0", "0.34.0", "--fail-on", "unproven"], "--fail-on does not apply to --compare"),
        ([str(tree), "--by-model-type", "--fail-on", "never"], "--fail-on does not apply to --by-model-type"),
        # given at its default value, it is still given: it would still be ignored
        (["--compare", "0.33.0", "0.34.0", "--fail-on", "missing_fixable"], "--fail-on does not apply to --compare"),
        ([str(tree), "--by-model-type", "--fail-on", "missing_fixable"], "--fail-on does not apply to --by-model-type"),
    ]:
        result = run_cli("scan", *args)
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert result.stdout == ""


def test_compare_in_every_format_it_takes(tmp_path):
    before = tree_of("direct_head", tmp_path / "a")
    after = tree_of("direct_head", tmp_path / "b")
    assert run_cli("fix", str(after), "--model", "toy").returncode == 0
    wheels = tmp_path / "wheels"
    _local_vllm_wheel(before, "0.97.0", wheels)
    _local_vllm_wheel(after, "0.98.0", wheels)
    env = {
        "PIP_NO_INDEX": "1",
        "PIP_FIND_LINKS": str(wheels),
        "MTP_AUDIT_SOURCES_DIR": str(tmp_path / "src"),
        "COLUMNS": "80",
    }
    compare = ("scan", "--compare", "0.97.0", "0.98.0")
    doc = json.loads(run_cli(*compare, "--format", "json", env=env).stdout)
    assert doc == {
        "from": "0.97.0",
        "to": "0.98.0",
        "changes": [
            {
                "arch": "ToyMTPModel",
                "platforms": ["cpu", "cuda", "rocm", "tpu", "xpu"],
                "before": "missing_fixable",
                "after": "supported/mirror",
            }
        ],
    }
    concise = run_cli(*compare, env=env).stdout
    assert concise == ("ToyMTPModel [all]: missing_fixable -> supported/mirror\n1 change from vLLM 0.97.0 to 0.98.0.\n")
    markdown = run_cli(*compare, "--format", "markdown", env=env).stdout
    assert "| ToyMTPModel | cpu, cuda, rocm, tpu, xpu | missing_fixable | supported/mirror |" in markdown
    table = run_cli(*compare, "--format", "table", env=env).stdout
    assert "ToyMTPModel" in table and max(len(line) for line in table.splitlines()) <= 80


def test_concise_report_fits_the_width_and_verbose_shows_every_reason(tmp_path):
    tree = tree_of("manual_shapes", tmp_path)
    doc = json.loads(run_cli("scan", str(tree), "--format", "json").stdout)
    short = run_cli("scan", str(tree), env={"COLUMNS": "60"}).stdout
    assert max(len(line) for line in short.splitlines()) <= 60
    assert short.splitlines()[-1].endswith(".") and "8 records" in short
    verbose = " ".join(run_cli("scan", str(tree), "--verbose", env={"COLUMNS": "60"}).stdout.split())
    for record in doc["drafters"]:
        assert f"{record['file']}:{record['line']}: {record['status']}" in verbose
        assert " ".join(record["reason"].split()) in verbose
    piped = run_cli("scan", str(tree)).stdout  # no COLUMNS, not a terminal: one line per record, unwrapped
    assert sum(line.startswith("vllm/") for line in piped.splitlines()) == len(doc["drafters"])


def test_supported_mirror_and_equivalent_are_counted_unless_show_all(tmp_path):
    tree = tree_of("consistency", tmp_path)
    default = run_cli("scan", str(tree)).stdout
    assert "MirrorMTP" not in default and "PlainEagle" not in default
    assert "1 mirror, 2 equivalent" in default and "--show-all" in default
    everything = run_cli("scan", str(tree), "--show-all").stdout
    assert ": mirror MirrorMTP [all]" in everything and ": equivalent PlainEagle [all]" in everything


def test_help_reads_well_at_80_columns():
    for command in ("scan", "fix", "verify", "pre-commit"):
        text = run_cli(command, "--help", env={"COLUMNS": "80"}).stdout
        assert max(len(line) for line in text.splitlines()) <= 80
        for word in ("missing_fixable", "missing_manual", "github", "divergent"):
            for line in text.splitlines():  # a choice is never broken across lines
                assert not (line.rstrip(" │").endswith(word[:5]) and word not in line), line
    scan_help = run_cli("scan", "--help", env={"COLUMNS": "80"}).stdout
    assert "model_type" in scan_help and scan_help.count("mtp-audit scan ") >= 3
    fix_help = " ".join(run_cli("fix", "--help", env={"COLUMNS": "80"}).stdout.replace("│", " ").split())
    assert "Only with --diff, --check or --patches" in fix_help


def test_fix_says_what_it_needs(tmp_path):
    tree = tree_of("direct_head", tmp_path)
    neither = run_cli("fix", str(tree))
    assert neither.returncode == 2 and "fix needs a target: --model NAME (repeatable) or --all" in neither.stderr
    both = run_cli("fix", str(tree), "--model", "toy", "--all")
    assert both.returncode == 2 and "not both" in both.stderr
    done = run_cli("fix", str(tree), "--model", "toy")
    assert done.stderr.splitlines()[-1] == "fix: wrote 1 method into 1 file; 0 refused."


def test_a_sweep_counts_what_it_leaves_for_a_human(tmp_path):
    """``fix --all`` writes only safe mirrors; its total still names the missing_manual and
    divergent drafters it left, so a sweep that writes nothing does not read as 'all done', and
    counts what it had no reason to touch (an unproven method is for ``verify`` to decide)."""
    manual = run_cli("fix", str(tree_of("manual_shapes", tmp_path / "manual")), "--all", "--check")
    assert manual.returncode == 1  # --check: the early-return drafter's file needs its mirror
    assert manual.stderr.splitlines()[-1] == (
        "fix: would write 1 method into 1 file; 0 refused; "
        "left for a human: 5 missing_manual (`mtp-audit scan` says why); not touched: 2 not_applicable."
    )
    divergent = run_cli("fix", str(tree_of("consistency", tmp_path / "divergent")), "--all", "--check")
    assert divergent.stderr.splitlines()[-1].endswith(
        "left for a human: 3 divergent (`mtp-audit scan` says why); "
        "not touched: 3 supported, 1 unproven (`mtp-audit verify` decides)."
    )
    masks = run_cli("fix", str(tree_of("mask_forms", tmp_path / "masks")), "--all", "--check")
    assert masks.stderr.splitlines()[-1] == (
        "fix: would write 0 methods into 0 files; 0 refused; left for a human: 6 divergent (`mtp-audit scan` "
        "says why); not touched: 2 unproven (`mtp-audit verify` decides)."
    )
    chosen = run_cli("fix", str(tree_of("direct_head", tmp_path / "one")), "--model", "toy")
    assert "left for a human" not in chosen.stderr  # --model: the user named what to fix


def test_a_model_type_standing_for_an_unresolved_architecture_reports_it(tmp_path):
    """``--model <model_type>`` stands for the architectures the speculative config maps it to, the
    unresolved ones too: reported as unresolved (exit 1), not dropped from the report and the exit code."""
    tree = tree_of("model_types", tmp_path)
    registry = tree / "vllm/model_executor/models/registry.py"
    registry.write_text(registry.read_text().replace('("toy_mtp", "ToyMTP")', '("toy_mtp", "NoSuchClass")'))
    result = run_cli("scan", str(tree), "--model", "toy_v3")
    assert result.returncode == 1, result.stderr
    assert "ToyMTPModel" in result.stderr and "does not resolve" in result.stderr


def test_vllms_package_under_another_name_is_a_usage_error_not_a_plugin_scan(tmp_path: Path) -> None:
    """A copy of the package in ``vllm-0.33.0``: its modules are ``vllm.*``, so it was scanned as a plugin
    directory (every record without an arch, the installed vLLM's version); now exit 2 saying what to give."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    (tree / "vllm").rename(tmp_path / "vllm-copy")
    result = run_cli("scan", str(tmp_path / "vllm-copy"), "--format", "json")
    assert result.returncode == 2 and result.stdout == ""
    assert "holds vLLM's package (model_executor/models/registry.py) under another name than vllm" in result.stderr


def test_a_folder_of_vllms_package_is_no_plugin_directory(tmp_path: Path) -> None:
    """``scan vllm/model_executor/models`` was read as a plugin directory, judged against the installed
    vLLM and without the tree's speculators: fix wrote a method the whole tree refuses. Exit 2, naming
    the tree to give."""
    tree = tree_of("direct_head", tmp_path)
    for command in ("scan", "fix"):
        args = ["--all", "--diff"] if command == "fix" else []
        result = run_cli(command, str(tree / "vllm" / "model_executor" / "models"), *args)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (
            f"mtp-audit: {tree / 'vllm/model_executor/models'}: is part of the vLLM package at {tree / 'vllm'}, "
            "whose drafters are judged with the rest of that tree (its registry, speculators and bases); "
            f"give {tree}, with --model to narrow it\n"
        )


def test_without_path_a_subfolder_of_a_checkout_scans_the_checkout(tmp_path: Path) -> None:
    """From ``vllm/`` of a checkout the installed vLLM was scanned, silently, under paths that look like
    the checkout's: the checkout the current directory is in is scanned, as git finds a repository."""
    tree = tree_of("direct_head", tmp_path)
    for cwd in (tree / "vllm", tree / "vllm" / "model_executor" / "models"):
        result = run_cli("scan", "--format", "json", cwd=cwd)
        assert result.returncode == 1, result.stderr
        assert json.loads(result.stdout)["root"] == str(tree)


def test_without_path_the_current_directorys_partial_vllm_is_not_taken_for_the_installed_one(tmp_path: Path) -> None:
    """``python -m`` puts the current directory first on ``sys.path``: a ``vllm/`` there without a registry (no
    checkout) was found as the installed package and stopped the scan with a false reason."""
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text("")
    result = run_cli("scan", "--format", "json", cwd=tmp_path)
    if "no vllm package is installed" in result.stderr:  # an environment without vLLM: nothing else to tell
        assert result.returncode == 2
        return
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout)["root"] != str(tmp_path)


def test_an_unreadable_or_twice_assigned_version_file(tmp_path: Path, monkeypatch) -> None:
    """``vllm_version`` is null where ``_version.py`` cannot be read (the scan needs nothing else from it), and the
    last of two assignments where it is, as Python keeps it."""
    from mtp_audit.locate import read_version

    (tmp_path / "vllm").mkdir()
    version = tmp_path / "vllm" / "_version.py"
    version.write_text('__version__ = "0.1.0"\n__version__ = "0.2.0"\n')
    assert read_version(tmp_path) == "0.2.0"

    def denied(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", denied)  # as root, chmod 000 would not stop a read
    assert read_version(tmp_path) is None


def test_fix_on_a_directory_with_no_drafter_is_a_usage_error_as_scan(tmp_path: Path) -> None:
    """A CI gate pointed at the wrong folder: scan stopped with exit 2, fix --check passed (0 methods, exit 0)."""
    (tmp_path / "util.py").write_text("def helper():\n    return 1\n")
    for args in (("scan",), ("fix", "--all", "--check"), ("fix", "--model", "foo")):
        result = run_cli(*args[:1], str(tmp_path), *args[1:])
        assert result.returncode == 2 and "no drafter found" in result.stderr, (args, result.stderr)


def test_records_of_one_class_on_other_platforms_keep_their_own_fix_refusals(tmp_path: Path) -> None:
    """A plugin's subclass of a class vLLM dispatches per platform is a record per group of platforms, each refused
    for its own reason: the concise report gave every one the reason of the last."""
    import dataclasses

    from mtp_audit.locate import locate
    from mtp_audit.model import refusal_key
    from mtp_audit.scan import scan

    result, _, _ = scan(locate(build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")))
    record = result.records[0]
    other = dataclasses.replace(record, platforms=["rocm"])
    assert refusal_key(record) != refusal_key(other)
    result.fix_refusals = {refusal_key(record): "the first reason", refusal_key(other): "the second reason"}
    assert (result.refused_by_fix(record), result.refused_by_fix(other)) == ("the first reason", "the second reason")


def test_no_command_is_a_usage_error_with_the_help_on_stderr():
    result = run_cli()
    assert (result.returncode, result.stdout) == (2, "")
    assert "Usage:" in result.stderr and "scan" in result.stderr


def test_one_record_is_one_record_and_a_sweep_names_what_does_not_resolve(tmp_path):
    table = run_cli("scan", str(tree_of("direct_head", tmp_path / "one")), "--format", "table").stdout
    assert "\n1 record: " in table
    # GhostMTPModel and NulledMTPModel are registered and do not resolve: the sweep says so, not passing over them
    swept = run_cli("fix", str(tree_of("same_failure_every_platform", tmp_path / "ghost")), "--all", "--check")
    assert swept.stderr.splitlines()[-1].endswith(
        "not resolved to a class, so not judged: GhostMTPModel, NulledMTPModel (`mtp-audit scan` says why)."
    ), swept.stderr


def test_a_registry_split_into_a_package_is_read_as_python_imports_it(tmp_path):
    """``vllm/model_executor/models/registry/__init__.py`` (its speculative dict in a submodule, imported
    relatively) is the registry as much as ``registry.py``: the same records, and the fix writes the same."""
    plain = tree_of("alias_mro", tmp_path / "plain")
    split = tree_of("alias_mro", tmp_path / "split")
    models = split / "vllm/model_executor/models"
    entries = (models / "registry.py").read_text()
    (models / "registry.py").unlink()
    (models / "registry").mkdir()
    (models / "registry/speculative.py").write_text(entries)
    (models / "registry/__init__.py").write_text(
        "from .speculative import _SPECULATIVE_DECODING_MODELS\n\n_VLLM_MODELS = {**_SPECULATIVE_DECODING_MODELS}\n"
    )
    before, after = (run_cli("scan", str(tree), "--format", "json", "--jobs", "1") for tree in (plain, split))
    assert after.returncode == before.returncode and after.stderr == before.stderr
    records = [json.loads(result.stdout)["drafters"] for result in (before, after)]
    assert records[0] and records[1] == records[0]
    # a stray registry.py beside the package is not what Python imports: the package wins
    (models / "registry.py").write_text("_SPECULATIVE_DECODING_MODELS = {}\n")
    again = run_cli("scan", str(split), "--format", "json", "--jobs", "1")
    assert json.loads(again.stdout)["drafters"] == records[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["scan", "--compare", "0.33.0", "0.34.0", "--no-plugins"], "--no-plugins does not apply to it"),
        (["scan", "--compare", "0.33.0", "0.34.0", "--vllm", "x", "--follow-symlinks"], "--vllm, --follow-symlinks do"),
        (["scan", "{plugin}", "--vllm", "{tree}/missing"], "no such directory, and not a vLLM version number"),
    ],
)
def test_tree_options_that_would_be_ignored_are_usage_errors(args, said, tmp_path):
    """--compare took --vllm, --plugin-path, --no-plugins and --follow-symlinks and ignored them; --vllm naming
    a path that is not there said "not a version number". (--no-plugins with --plugin-path leaves them all out,
    as README says.)"""
    tree = tree_of("direct_head", tmp_path)
    plugin = build_tree(FIXTURES / "scan" / "plugin_dir", tmp_path / "plugin")
    result = run_cli(*(a.format(tree=tree, plugin=plugin) for a in args))
    assert result.returncode == 2 and said in result.stderr and result.stdout == ""
