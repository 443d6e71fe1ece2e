"""Out-of-tree plugins: discovery from entry points, the effective registry, plugin source trees,
and the vLLM a plugin runs with. Fixture plugins of our own (tests/fixtures/plugins/site), then
a released one (vllm-ascend 0.9.1, whose general plugin re-registers DeepSeekMTPModel)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BASE, FIXTURES, build_tree, run_cli

PLUGINS = FIXTURES / "plugins"
SITE = PLUGINS / "site"
COND = PLUGINS / "conditional"  # a general plugin registering on some platforms only
TOY = ("vllm.model_executor.models.toy_mtp", "ToyMTP")
OTHER = {"module": "vllm.model_executor.models.other_mtp", "class": "OtherMTP"}


def vllm_tree(into: Path, *, local_argmax: bool = True) -> Path:
    """The fixture vLLM (two drafters) the plugins register over."""
    shutil.copytree(BASE, into)
    shutil.copytree(PLUGINS / "vllm", into / "vllm", dirs_exist_ok=True)
    if not local_argmax:  # a vLLM before 0.20
        (into / "vllm/model_executor/layers/logits_processor.py").write_text(
            "class LogitsProcessor:\n    def __call__(self, lm_head, hidden_states, embedding_bias=None):\n"
            "        raise NotImplementedError\n"
        )
    return into


def rows(stdout: str) -> list[tuple]:
    return sorted(
        (
            r["arch"],
            r["class"],
            tuple(r["platforms"]),
            r["status"],
            r["consistency"],
            r["source"],
            r["replaces"] and (r["replaces"]["module"], r["replaces"]["class"]),
        )
        for r in json.loads(stdout)["drafters"]
    )


def test_discovery_looks_for_metadata_only_where_importlib_metadata_would_find_it(tmp_path):
    """A folder with no .dist-info, .egg-info or .egg entry holds no distribution: discovery skips it
    (and a plain source tree is searched without importing importlib.metadata); a zip is left to it."""
    from mtp_audit.locate import _holds_metadata
    from mtp_audit.resolve.plugins import discover

    assert discover([tmp_path]) == [] and not _holds_metadata(tmp_path)
    assert not _holds_metadata(tmp_path / "missing")
    for name in ("x-1.0.dist-info", "Y.EGG-INFO", "z-2.0-py3.egg"):
        (tmp_path / name).mkdir()
        assert _holds_metadata(tmp_path)
        (tmp_path / name).rmdir()
    (tmp_path / "plugins.zip").write_bytes(b"")
    assert _holds_metadata(tmp_path / "plugins.zip")
    (tmp_path / "acme-1.0-py3.egg" / "EGG-INFO").mkdir(parents=True)
    assert _holds_metadata(tmp_path / "acme-1.0-py3.egg")  # an egg on sys.path holds its own metadata
    assert discover([tmp_path, SITE]) == discover([SITE])


def test_discovery_reads_entry_points_without_importing():
    from mtp_audit.resolve.plugins import GENERAL, PLATFORM, discover

    found = sorted(discover([SITE]), key=lambda d: d.name)  # in the order the directory lists them
    assert [(d.name, d.version) for d in found] == [("acme-npu", "0.3.0"), ("acme-vllm-plugin", "1.2.0")]
    assert found[0].entry_points == ((PLATFORM, "acme_npu", "acme_npu:register"),)
    assert found[1].entry_points == ((GENERAL, "acme", "acme_vllm:register"),)  # console_scripts left out
    assert found[1].location == SITE.resolve()
    assert not {"acme_vllm", "acme_npu"} & set(sys.modules)


def test_registrations_are_followed_through_helpers(tmp_path):
    from mtp_audit.index.modules import ModuleIndex
    from mtp_audit.locate import locate, with_plugins
    from mtp_audit.resolve.plugins import read_plugin

    tree = with_plugins(locate(vllm_tree(tmp_path / "v")), [SITE])
    npu, acme = sorted(tree.plugins, key=lambda d: d.name)
    index = ModuleIndex(tree)
    general = read_plugin(index, acme)
    # register -> registration.register_all -> _register_drafters (same module) and helpers.register_new
    # (another module, the class object imported inside the function); never_called is not reached
    assert [(r.arch, r.module, r.cls, r.file.rsplit("/", 1)[-1]) for r in general.registrations] == [
        ("OtherMTPModel", "acme_vllm.models.other_mtp", "AcmeOtherMTP", "registration.py"),
        ("AcmeForCausalLM", "acme_vllm.models.target", "AcmeForCausalLM", "registration.py"),
        ("AcmeNewMTPModel", "acme_vllm.models.new_mtp", "AcmeNewMTP", "helpers.py"),
    ]
    assert general.platforms == [] and general.skipped == []
    platform = read_plugin(index, npu)
    assert platform.platforms == ["acme"]  # device_name of the class its function returns
    assert [(r.arch, r.module, r.cls) for r in platform.registrations] == [
        ("ToyMTPModel", "acme_npu.models.mtp", "NpuToyMTP")
    ]


def test_effective_registry_with_installed_plugins(tmp_path):
    tree = vllm_tree(tmp_path / "v")
    result = run_cli("scan", str(tree), "--plugin-path", str(SITE), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    every = ("acme", "cpu", "cuda", "rocm", "tpu", "xpu")
    assert rows(result.stdout) == [
        # a new drafter architecture, from a helper of the general plugin, on every platform it loads on
        ("AcmeNewMTPModel", "AcmeNewMTP", every, "supported", "mirror", "acme-vllm-plugin 1.2.0", None),
        # the general plugin replaces OtherMTP everywhere: its subclass overrides compute_logits with
        # another head and inherits vLLM's get_top_tokens
        (
            "OtherMTPModel",
            "AcmeOtherMTP",
            every,
            "supported",
            "unproven",
            "acme-vllm-plugin 1.2.0",
            tuple(OTHER.values()),
        ),
        # the platform plugin replaces ToyMTP on its own platform only
        ("ToyMTPModel", "NpuToyMTP", ("acme",), "missing_fixable", None, "acme-npu 0.3.0", TOY),
        ("ToyMTPModel", "ToyMTP", every[1:], "missing_fixable", None, "vllm", None),
    ]
    drafters = json.loads(result.stdout)["drafters"]
    plugin_file = next(r["file"] for r in drafters if r["class"] == "AcmeNewMTP")
    assert plugin_file == str(SITE.resolve() / "acme_vllm/models/new_mtp.py")  # outside the root: absolute


def test_no_plugins_is_vllm_alone(tmp_path):
    tree = vllm_tree(tmp_path / "v")
    result = run_cli(
        "scan", str(tree), "--plugin-path", str(SITE), "--no-plugins", "--format", "json", "--fail-on", "never"
    )
    assert [(r[0], r[1], r[5]) for r in rows(result.stdout)] == [
        ("OtherMTPModel", "OtherMTP", "vllm"),
        ("ToyMTPModel", "ToyMTP", "vllm"),
    ]


def test_registrations_under_platform_conditions_apply_where_they_hold(tmp_path):
    """acme-cond registers under ``if current_platform.is_rocm()`` / an undecidable ``elif``, and
    past an early ``return`` on ``not is_cuda_alike()`` through a helper."""
    tree = vllm_tree(tmp_path / "v")
    result = run_cli("scan", str(tree), "--plugin-path", str(COND), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    source, toy, other = "acme-cond 0.1.0", TOY, tuple(OTHER.values())
    assert [(r[0], r[1], r[2], r[5], r[6]) for r in rows(result.stdout)] == [
        # past the early return: ROCm and CUDA only; the in-tree class keeps the rest
        ("OtherMTPModel", "CudaOtherMTP", ("cuda", "rocm"), source, other),
        ("OtherMTPModel", "OtherMTP", ("cpu", "tpu", "xpu"), "vllm", None),
        # an environment variable cannot be decided: registered and not, both kept, except on
        # ROCm, where the first branch is taken and the elif never runs
        ("ToyMTPModel", "FastToyMTP", ("cpu", "cuda", "tpu", "xpu"), source, toy),
        ("ToyMTPModel", "RocmToyMTP", ("rocm",), source, toy),
        ("ToyMTPModel", "ToyMTP", ("cpu", "cuda", "tpu", "xpu"), "vllm", None),
    ]


def plugin_source(into: Path) -> Path:
    """The general plugin as a source tree (an sdist's layout): pyproject, no dist-info."""
    shutil.copytree(SITE / "acme_vllm", into / "acme_vllm")
    (into / "pyproject.toml").write_text('[project]\nname = "acme-vllm-plugin"\nversion = "1.2.0"\n')
    (into / "acme_vllm/models/spare_mtp.py").write_text(
        "from torch import nn\n\n\nclass SpareMTP(nn.Module):\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    return into


def test_scan_of_a_plugin_source_tree_names_architectures(tmp_path):
    vllm = vllm_tree(tmp_path / "v")
    source = plugin_source(tmp_path / "src")
    result = run_cli("scan", str(source), "--vllm", str(vllm), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    assert f"running with vLLM 0.99.0 at {vllm}" in result.stderr
    found = {
        (r["arch"], r["class"], r["source"], r["replaces"] and r["replaces"]["class"])
        for r in json.loads(result.stdout)["drafters"]
    }
    assert found == {
        ("OtherMTPModel", "AcmeOtherMTP", "acme-vllm-plugin 1.2.0", "OtherMTP"),
        ("AcmeNewMTPModel", "AcmeNewMTP", "acme-vllm-plugin 1.2.0", None),
        # every register_model call of a source tree counts, reached from an entry point or not
        ("UnreachedMTPModel", "UnreachedMTP", "acme-vllm-plugin 1.2.0", None),
        # a drafter-named class in a file no registration names: the name heuristics
        (None, "SpareMTP", "vllm", None),
    }


def test_fix_into_a_plugin_follows_the_vllm_it_runs_with(tmp_path):
    source = plugin_source(tmp_path / "src")
    with_argmax = vllm_tree(tmp_path / "new")
    result = run_cli("fix", str(source), "--vllm", str(with_argmax), "--model", "UnreachedMTPModel", "--diff")
    assert result.returncode == 0, result.stderr
    assert "+        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)" in result.stdout
    old = vllm_tree(tmp_path / "old", local_argmax=False)
    for command in ("scan", "fix"):  # as for that vLLM's own tree: nothing to opt into, an input error
        result = run_cli(
            command, str(source), "--vllm", str(old), *(["--model", "UnreachedMTPModel"] * (command == "fix"))
        )
        assert result.returncode == 2, result.stderr
        assert "which this plugin runs with, has no LogitsProcessor.get_top_tokens" in result.stderr
    assert "def get_top_tokens" not in (source / "acme_vllm/models/unreached_mtp.py").read_text()


def test_vllm_option_is_for_plugin_directories(tmp_path):
    result = run_cli("scan", str(vllm_tree(tmp_path / "v")), "--vllm", "0.34.0")
    assert result.returncode == 2 and "plugin directory" in result.stderr


# A released plugin: vllm-ascend 0.9.1 registers its own DeepSeekMTPModel from the function of its
# vllm.general_plugins entry point, through vllm_ascend.models.register_model; its platform plugin
# names NPUPlatform, device name "npu".
ASCEND = ("vllm-ascend", "0.9.1")
ASCEND_MTP = ("DeepSeekMTPModel", "CustomDeepSeekMTP", "vllm-ascend 0.9.1")


@pytest.fixture(scope="module")
def ascend_wheel() -> Path:
    """The released wheel, downloaded once with pip --no-deps and cached beside vLLM's sources."""
    from mtp_audit.errors import UsageError
    from mtp_audit.sources import released_wheel

    try:
        return released_wheel(*ASCEND)
    except UsageError as error:  # no network and no cache: say so, do not pass silently
        pytest.fail(f"could not get {ASCEND[0]} {ASCEND[1]}: {error}")


@pytest.fixture(scope="module")
def ascend_installed(ascend_wheel, tmp_path_factory) -> Path:
    """vllm-ascend 0.9.1 installed without dependencies into a --target directory."""
    target = tmp_path_factory.mktemp("ascend-target")
    # Its own interpreter and platform tags: the scan reads the files, never imports them.
    tags = wheel_tags(ascend_wheel)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--disable-pip-version-check",
            "--no-index",
            "--only-binary=:all:",
            *tags,
            "--target",
            str(target),
            str(ascend_wheel),
        ],
        check=True,
    )
    return target


def wheel_tags(wheel: Path) -> list[str]:
    """pip options that accept ``wheel`` on any interpreter: its own Python version and platform."""
    python, _, platforms = wheel.stem.split("-")[-3:]
    version = python.removeprefix("cp").removeprefix("py")
    options = ["--python-version", f"{version[0]}.{version[1:]}" if len(version) > 1 else version]
    for platform in platforms.split("."):
        options += ["--platform", platform]
    return options


def released_rows(stdout: str, arch: str) -> list[tuple]:
    return [
        (r["arch"], r["class"], r["source"], r["replaces"], r["platforms"])
        for r in json.loads(stdout)["drafters"]
        if r["arch"] == arch
    ]


def test_released_plugin_replaces_an_in_tree_drafter(ascend_installed, vllm_release):
    release = vllm_release("0.34.0")
    result = run_cli(
        "scan",
        "--vllm-version",
        "0.34.0",
        "--plugin-path",
        str(ascend_installed),
        "--format",
        "json",
        "--fail-on",
        "never",
    )
    assert result.returncode == 0, result.stderr
    replaced = {"module": "vllm.model_executor.models.deepseek_mtp", "class": "DeepSeekMTP"}
    assert released_rows(result.stdout, "DeepSeekMTPModel") == [
        (*ASCEND_MTP, replaced, ["cpu", "cuda", "npu", "rocm", "tpu", "xpu"])
    ]
    alone = run_cli("scan", str(release), "--format", "json", "--fail-on", "never")
    in_tree = {r["arch"] for r in json.loads(alone.stdout)["drafters"]}
    with_plugin = json.loads(result.stdout)["drafters"]
    assert {r["arch"] for r in with_plugin} == in_tree  # next to every in-tree record
    assert [r["class"] for r in json.loads(alone.stdout)["drafters"] if r["arch"] == "DeepSeekMTPModel"] == [
        "DeepSeekMTP"
    ]


def test_released_plugin_in_the_installed_environment(ascend_installed):
    import importlib.metadata

    try:
        installed = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no vllm installed in this environment (pip install --no-deps vllm==0.34.0)")
    root = Path(__file__).resolve().parent.parent
    env = {"PYTHONPATH": f"{root}:{ascend_installed}"}  # the plugin's --target dir on sys.path
    result = run_cli("scan", "--format", "json", "--fail-on", "never", "--no-cache", env=env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["vllm_version"] == installed
    [row] = released_rows(result.stdout, "DeepSeekMTPModel")
    assert row[:3] == ASCEND_MTP and row[3]["class"] == "DeepSeekMTP"
    result = run_cli("scan", "--format", "json", "--fail-on", "never", "--no-cache", "--no-plugins", env=env)
    assert [r[1] for r in released_rows(result.stdout, "DeepSeekMTPModel")] == ["DeepSeekMTP"]


@pytest.fixture(scope="module")
def ascend_source(ascend_wheel, tmp_path_factory) -> Path:
    """The released plugin's source tree (its wheel unpacked: the Python files and the dist-info)."""
    import zipfile

    into = tmp_path_factory.mktemp("ascend-src")
    with zipfile.ZipFile(ascend_wheel) as archive:
        archive.extractall(into, [n for n in archive.namelist() if n.endswith((".py", ".txt", "METADATA"))])
    return into


def test_scan_of_a_released_plugin_tree_names_its_drafter(ascend_source, vllm_release):
    vllm_release("0.34.0")
    result = run_cli("scan", str(ascend_source), "--vllm", "0.34.0", "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    drafters = json.loads(result.stdout)["drafters"]
    assert [(r["arch"], r["class"], r["file"]) for r in drafters if r["arch"]] == [
        ("DeepSeekMTPModel", "CustomDeepSeekMTP", "vllm_ascend/models/deepseek_mtp.py")
    ]
    assert not [r for r in drafters if r["arch"] is None]  # its one MTP file is registered


def test_fix_into_a_released_plugin_whose_vllm_lacks_get_top_tokens(ascend_source, vllm_release):
    vllm_release("0.11.0")  # before 0.20: no LogitsProcessor.get_top_tokens
    result = run_cli("fix", str(ascend_source), "--vllm", "0.11.0", "--model", "DeepSeekMTPModel")
    assert result.returncode == 2
    assert "vLLM 0.11.0, which this plugin runs with, has no LogitsProcessor.get_top_tokens" in result.stderr
    assert "def get_top_tokens" not in (ascend_source / "vllm_ascend/models/deepseek_mtp.py").read_text()


def test_fix_of_an_installed_plugin_writes_into_the_plugin(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    tree = vllm_tree(tmp_path / "v")
    result = run_cli("fix", str(tree), "--plugin-path", str(site), "--model", "NpuToyMTP")
    assert result.returncode == 0, result.stderr
    # the inherited compute_logits uses only self: the mirror goes into the plugin's class
    assert "def get_top_tokens" in (site / "acme_npu/models/mtp.py").read_text()
    assert "def get_top_tokens" not in (tree / "vllm/model_executor/models/toy_mtp.py").read_text()
    rescan = run_cli("scan", str(tree), "--plugin-path", str(site), "--format", "json", "--model", "NpuToyMTP")
    [record] = json.loads(rescan.stdout)["drafters"]
    assert (record["status"], record["consistency"], record["source"]) == ("supported", "mirror", "acme-npu 0.3.0")


@pytest.mark.parametrize("mode", ["--diff", "--patches"])
def test_a_diff_or_series_of_a_plugin_outside_the_tree_is_refused(mode, tmp_path):
    """git applies a diff to paths of its own repository: a plugin file outside the vLLM tree cannot be
    named in one, so --diff and --patches refuse it (exit 2, nothing printed or written), saying how else."""
    site = shutil.copytree(SITE, tmp_path / "site")
    tree = vllm_tree(tmp_path / "v")
    out = [str(tmp_path / "series")] if mode == "--patches" else []
    result = run_cli("fix", str(tree), "--plugin-path", str(site), "--model", "NpuToyMTP", mode, *out)
    assert result.returncode == 2 and not result.stdout and not (tmp_path / "series").exists(), result.stderr
    [said] = [line for line in result.stderr.splitlines() if line.startswith("mtp-audit: ")]
    assert said.startswith(f"mtp-audit: {mode}: {site.resolve()}/acme_npu/models/mtp.py lies outside {tree}")
    assert "PLUGIN_SOURCE_DIR" in said and "def get_top_tokens" not in (site / "acme_npu/models/mtp.py").read_text()


def test_fix_of_a_released_plugin_stays_out_of_vllm(ascend_source, vllm_release):
    vllm_release("0.34.0")
    # CustomDeepSeekMTP inherits compute_logits (a delegation) from vLLM's DeepSeekMTP; its predictor's
    # CustomLogitsProcessor overrides _get_logits, which 0.34.0's LogitsProcessor runs for its call alone
    result = run_cli("fix", str(ascend_source), "--vllm", "0.34.0", "--model", "DeepSeekMTPModel", "--diff")
    assert result.returncode == 1
    said = " ".join(result.stderr.replace("│", " ").split())
    assert "refused: DeepSeekMTPModel (CustomDeepSeekMTP)" in said and "missing_manual" in said
    assert "CustomLogitsProcessor._get_logits (vllm_ascend/ops/logits_processor.py:40)" in said
    assert "runs for its call (forward -> _get_logits), not for its get_top_tokens" in said
    assert "would write 0 methods into 0 files" in said
    assert result.stdout == ""  # no diff: nothing written into the plugin, nor into vLLM


def test_result_cache_follows_the_plugins(tmp_path):
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    tree = vllm_tree(tmp_path / "v")
    scan = ("scan", str(tree), "--format", "json", "--fail-on", "never")
    with_plugins = rows(run_cli(*scan, "--plugin-path", str(site)).stdout)
    assert rows(run_cli(*scan).stdout) != with_plugins  # not the cached answer of the other set
    assert rows(run_cli(*scan, "--plugin-path", str(site)).stdout) == with_plugins
    helpers = site / "acme_vllm/helpers.py"  # a plugin file the result depends on
    helpers.write_text(helpers.read_text().replace('"AcmeNewMTPModel"', '"AcmeRenamedMTPModel"'))
    archs = [r[0] for r in rows(run_cli(*scan, "--plugin-path", str(site)).stdout)]
    assert "AcmeRenamedMTPModel" in archs and "AcmeNewMTPModel" not in archs


def scan_with(tree: Path, *sites: Path, fmt: str = "json") -> subprocess.CompletedProcess:
    paths = [option for site in sites for option in ("--plugin-path", str(site))]
    return run_cli("scan", str(tree), *paths, "--format", fmt, "--fail-on", "never")


def test_a_later_registration_of_an_architecture_replaces_the_earlier_one(tmp_path):
    """acme-seq registers ToyMTPModel twice in a row, and OtherMTPModel once, then again on ROCm only:
    as vLLM's ModelRegistry, the later call wins, per platform."""
    result = scan_with(vllm_tree(tmp_path / "v"), PLUGINS / "sequential")
    assert result.returncode == 0, result.stderr
    every, source = ("cpu", "cuda", "rocm", "tpu", "xpu"), "acme-seq 0.1.0"
    assert [(r[0], r[1], r[2], r[5], r[6]) for r in rows(result.stdout)] == [
        ("OtherMTPModel", "AnyOtherMTP", ("cpu", "cuda", "tpu", "xpu"), source, tuple(OTHER.values())),
        ("OtherMTPModel", "RocmOtherMTP", ("rocm",), source, tuple(OTHER.values())),
        ("ToyMTPModel", "SecondToyMTP", every, source, TOY),
    ]


def test_a_plugin_whose_module_fails_to_import_registers_nothing(tmp_path):
    """vLLM logs "Failed to load plugin" and never calls the function: ToyMTP stays, and a warning says why."""
    result = scan_with(vllm_tree(tmp_path / "v"), PLUGINS / "broken")
    assert [(r[0], r[1], r[5]) for r in rows(result.stdout)] == [
        ("OtherMTPModel", "OtherMTP", "vllm"),
        ("ToyMTPModel", "ToyMTP", "vllm"),
    ]
    [warning] = result.stderr.splitlines()
    assert warning.startswith("warning: plugin acme-broken 0.1.0: entry point acme_broken (acme_broken:register)")
    assert "fails to import" in warning and "acme_broken/unparsable.py: cannot parse" in warning


def test_an_entry_point_name_taken_twice_keeps_the_one_found_last(tmp_path):
    """vLLM keeps loaded plugins in a dict by entry-point name: of two distributions naming theirs
    ``register``, only the one importlib.metadata finds last (the later search path) is called."""
    tree = vllm_tree(tmp_path / "v")
    first, second = PLUGINS / "collide_first", PLUGINS / "collide_second"
    for order, kept, shadowed in (((first, second), "Second", "first"), ((second, first), "First", "second")):
        result = scan_with(tree, *order)
        toy = [(r[1], r[5]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"]
        assert toy == [(f"{kept}ToyMTP", f"acme-{kept.lower()} 0.1.0")]
        [warning] = result.stderr.splitlines()
        assert warning.startswith(f"warning: plugin acme-{shadowed} 0.1.0: entry point register (acme_{shadowed}")
        assert "is shadowed by" in warning


def test_an_entry_point_whose_function_is_missing_does_not_shadow_an_earlier_one(tmp_path):
    """acme-missing's ``register`` names a function its module lacks: ``plugin.load()`` raises AttributeError,
    vLLM logs "Failed to load plugin" and keeps acme-first's ``register`` of the same name."""
    result = scan_with(vllm_tree(tmp_path / "v"), PLUGINS / "collide_first", PLUGINS / "collide_missing")
    toy = [(r[1], r[5]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"]
    assert toy == [("FirstToyMTP", "acme-first 0.1.0")]
    [warning] = result.stderr.splitlines()
    assert warning.startswith(
        "warning: plugin acme-missing 0.1.0: entry point register (acme_missing:register_models) names no function"
    )
    assert warning.endswith("raises AttributeError: vLLM never calls it and its registrations do not apply")


def test_a_plugin_package_is_read_from_the_first_folder_python_imports_it_from(tmp_path):
    """A developer's checkout of acme_first (no dist-info) ahead of the installed copy on the search path:
    ``plugin.load()`` imports the checkout's package, whose register names another class."""
    checkout = tmp_path / "checkout" / "acme_first"
    checkout.mkdir(parents=True)
    (checkout / "__init__.py").write_text(
        "from vllm import ModelRegistry\n\n\ndef register():\n"
        '    ModelRegistry.register_model("ToyMTPModel", "acme_first.models_v2:CheckoutToyMTP")\n'
    )
    (checkout / "models_v2.py").write_text(
        "from torch import nn\n\n\nclass CheckoutToyMTP(nn.Module):\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    tree, site = vllm_tree(tmp_path / "v"), PLUGINS / "collide_first"
    for order, cls, folder in (
        ((checkout.parent, site), "CheckoutToyMTP", checkout),
        ((site, checkout.parent), "FirstToyMTP", site),
    ):
        result = scan_with(tree, *order)
        toy = [(r[1], r[5]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"]
        assert toy == [(cls, "acme-first 0.1.0")], result.stderr
        [record] = [r for r in json.loads(result.stdout)["drafters"] if r["arch"] == "ToyMTPModel"]
        assert Path(record["file"]).resolve().is_relative_to(folder.resolve())


def test_in_tree_drafters_are_used_on_a_plugin_platform_too(tmp_path):
    """acme-bare adds the platform "bare" and registers nothing: vLLM's drafters run there."""
    tree = vllm_tree(tmp_path / "v")
    result = scan_with(tree, PLUGINS / "bare_platform")
    every = ("bare", "cpu", "cuda", "rocm", "tpu", "xpu")
    assert [(r[0], r[1], r[2]) for r in rows(result.stdout)] == [
        ("OtherMTPModel", "OtherMTP", every),
        ("ToyMTPModel", "ToyMTP", every),
    ]
    markdown = scan_with(tree, PLUGINS / "bare_platform", fmt="markdown").stdout
    assert "bare, cpu, cuda, rocm, tpu, xpu" in markdown


def test_a_plugin_path_that_does_not_exist_is_a_usage_error(tmp_path):
    result = scan_with(vllm_tree(tmp_path / "v"), tmp_path / "no-such-site")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        f"mtp-audit: --plugin-path {tmp_path / 'no-such-site'}: no such directory"
    ]


def test_two_plugins_over_one_in_tree_drafter_name_it_as_replaced(tmp_path):
    """docs/json.md: ``replaces`` is the in-tree class, also when another plugin registered over it first."""
    site = tmp_path / "site"
    shutil.copytree(PLUGINS / "collide_first", site)
    shutil.copytree(PLUGINS / "collide_second", site, dirs_exist_ok=True)
    points = site / "acme_second-0.1.0.dist-info/entry_points.txt"
    points.write_text(points.read_text().replace("register =", "second ="))  # no name taken twice
    result = scan_with(vllm_tree(tmp_path / "v"), site)
    [toy] = [r for r in rows(result.stdout) if r[0] == "ToyMTPModel"]
    assert toy[6] == TOY


def test_a_helper_in_another_package_of_the_distribution_is_followed(tmp_path):
    """acme-two ships acme_two and acme_two_models (top_level.txt); its entry point calls into the second."""
    result = scan_with(vllm_tree(tmp_path / "v"), PLUGINS / "two_packages")
    toy = [(r[1], r[5], r[6]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"]
    assert toy == [("TwoToyMTP", "acme-two 0.1.0", TOY)]


def test_a_plugin_drafter_is_judged_with_the_processor_of_the_vllm_it_runs_with(tmp_path):
    """A cut to ``org_vocab_size`` beside a get_top_tokens of that processor: where the vLLM the
    plugin runs with masks those ids in LogitsProcessor.get_top_tokens, not provably different."""
    case = FIXTURES / "scan" / "processor_masks_outside_vocab"
    vllm = build_tree(case, tmp_path / "v")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    shutil.copy(case / "vllm/model_executor/models/cut_mtp.py", plugin / "cut_mtp.py")
    result = run_cli("scan", str(plugin), "--vllm", str(vllm), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    records = {r["class"]: r for r in json.loads(result.stdout)["drafters"]}
    processor = vllm / "vllm/model_executor/layers/logits_processor.py"
    assert records["CutToProcessorMTP"]["consistency"] == "unproven"
    assert f"masks every id from org_vocab_size on ({processor}:" in records["CutToProcessorMTP"]["reason"]
    assert records["CutToConfigMTP"]["consistency"] == "divergent"  # a cut to another size is still a cut


def test_a_plugin_whose_vllm_has_no_processor_file_says_so_and_reads_it_once_it_appears(tmp_path):
    case = FIXTURES / "scan" / "processor_masks_outside_vocab"
    vllm = build_tree(case, tmp_path / "v")
    processor = vllm / "vllm/model_executor/layers/logits_processor.py"
    kept = processor.read_text()
    processor.unlink()
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    shutil.copy(case / "vllm/model_executor/models/cut_mtp.py", plugin / "cut_mtp.py")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}

    def consistency() -> tuple[str, str]:
        done = run_cli("scan", str(plugin), "--vllm", str(vllm), "--format", "json", "--fail-on", "never", env=env)
        assert done.returncode == 0, done.stderr
        records = {r["class"]: r for r in json.loads(done.stdout)["drafters"]}
        return records["CutToProcessorMTP"]["consistency"], done.stderr

    verdict, stderr = consistency()
    assert verdict == "divergent" and f"{processor} cannot be read" in stderr
    processor.write_text(kept)
    assert consistency()[0] == "unproven"  # the cached result knew the file was absent


def test_a_plugin_processor_subclass_is_judged_by_what_the_processor_of_its_vllm_runs(tmp_path):
    """Which overrides make a processor's call and get_top_tokens differ is read from the vLLM the plugin
    runs with; where that processor cannot be read, an override of any method it may run is taken to."""
    case = FIXTURES / "scan" / "processor_paths"
    vllm = build_tree(case, tmp_path / "v")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    shutil.copy(case / "vllm/model_executor/models/toy_paths_mtp.py", plugin / "toy_paths_mtp.py")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}

    def records() -> tuple[dict[str, dict], str]:
        done = run_cli("scan", str(plugin), "--vllm", str(vllm), "--format", "json", "--fail-on", "never", env=env)
        assert done.returncode == 0, done.stderr
        return {r["class"]: r for r in json.loads(done.stdout)["drafters"]}, done.stderr

    read, _ = records()
    assert read["ToySharedHeadMTP"]["status"] == "missing_fixable"  # _apply_head: both run it
    assert read["ToySoftCapMTP"]["status"] == "missing_manual"
    assert "SoftCappingLogitsProcessor._soft_cap (toy_paths_mtp.py:17)" in read["ToySoftCapMTP"]["reason"]
    processor = vllm / "vllm/model_executor/layers/logits_processor.py"
    processor.unlink()
    unread, stderr = records()
    assert f"{processor} cannot be read" in stderr
    assert unread["ToySharedHeadMTP"]["status"] == "missing_manual"
    taken = (
        "SharedHeadLogitsProcessor._apply_head (toy_paths_mtp.py:32) overrides a method vLLM's LogitsProcessor "
        "may run for its call or its get_top_tokens (that class could not be read"
    )
    assert taken in unread["ToySharedHeadMTP"]["reason"]


def test_a_plugin_source_tree_is_judged_by_the_speculators_of_the_vllm_it_runs_with(tmp_path):
    """The same plugin and the same vLLM give the same verdicts however the tool is run: the plugin's
    drafters are held by that vLLM's speculators, and one that never calls get_top_tokens leaves them
    nothing to fix."""
    vllm = vllm_tree(tmp_path / "v")
    spec = vllm / "vllm/v1/worker/gpu/spec_decode"
    spec.mkdir(parents=True)
    for package in (vllm / "vllm/v1", vllm / "vllm/v1/worker", vllm / "vllm/v1/worker/gpu"):
        (package / "__init__.py").touch()
    (spec / "__init__.py").write_text(
        "def init_speculator(vllm_config, device):\n"
        "    from .full_logits import FullLogitsSpeculator\n\n"
        "    return FullLogitsSpeculator(vllm_config, device)\n"
    )
    (spec / "full_logits.py").write_text(
        "class FullLogitsSpeculator:\n"
        "    def propose(self, hidden_states):\n"
        "        return self.model.compute_logits(hidden_states).argmax(dim=-1)\n"
    )
    source = plugin_source(tmp_path / "src")
    result = run_cli("scan", str(source), "--vllm", str(vllm), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    drafters = {r["class"]: r for r in json.loads(result.stdout)["drafters"]}
    unreached = drafters["UnreachedMTP"]
    assert unreached["status"] == "not_applicable", unreached["reason"]
    assert "no speculator that can hold it calls get_top_tokens: FullLogitsSpeculator" in unreached["reason"]
    assert [c["speculator"] for c in unreached["callers"]] == ["FullLogitsSpeculator"]
    diff = run_cli("fix", str(source), "--vllm", str(vllm), "--all", "--diff")
    assert "def get_top_tokens" not in diff.stdout


def test_a_folder_of_several_installed_plugins_credits_each_drafter_to_its_own(tmp_path):
    """A ``pip install --target`` folder holding two distributions, scanned as a plugin directory: each
    registration is credited to the distribution whose package holds it (its top_level.txt, else the
    package its entry points name), as --plugin-path credits them."""
    vllm = vllm_tree(tmp_path / "v")
    site = tmp_path / "site"
    shutil.copytree(SITE, site)
    result = run_cli("scan", str(site), "--vllm", str(vllm), "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    sources = {r["class"]: r["source"] for r in json.loads(result.stdout)["drafters"] if r["source"] != "vllm"}
    assert sources == {
        "AcmeNewMTP": "acme-vllm-plugin 1.2.0",
        "AcmeOtherMTP": "acme-vllm-plugin 1.2.0",
        "NpuToyMTP": "acme-npu 0.3.0",
        "UnreachedMTP": "acme-vllm-plugin 1.2.0",
    }


def test_plugins_installed_editable_are_found_without_running_their_finder(tmp_path):
    """``pip install -e``: a src layout is on sys.path through a ``.pth`` path line, a flat layout
    through setuptools' finder, whose MAPPING is read, never run. Both plugins' drafters replace vLLM's."""
    editable = shutil.copytree(PLUGINS / "editable", tmp_path / "editable")
    template = (editable / "finder_template.py").read_text()
    finder = template.replace("FLAT_PROJECT", repr(str(editable / "flat_project" / "acme_flat")))
    (editable / "site" / "__editable___acme_flat_0_1_0_finder.py").write_text(finder)
    result = scan_with(vllm_tree(tmp_path / "v"), editable / "site")
    assert result.returncode == 0 and not result.stderr, result.stderr
    assert [(r[0], r[1], r[3], r[5]) for r in rows(result.stdout)] == [
        ("OtherMTPModel", "FlatOtherMTP", "missing_manual", "acme-flat 0.1.0"),
        ("ToyMTPModel", "SrcToyMTP", "missing_manual", "acme-src 0.1.0"),
    ]


@pytest.mark.parametrize(
    ("allowed", "toy"),
    [
        ("register", ("SecondToyMTP", "acme-second 0.1.0")),  # both entry points are named register
        ("other,register", ("SecondToyMTP", "acme-second 0.1.0")),
        ("other", ("ToyMTP", "vllm")),
        ("", ("ToyMTP", "vllm")),
    ],
)
def test_vllm_plugins_names_the_entry_points_vllm_loads(tmp_path, allowed, toy):
    """vLLM loads an entry point only where ``VLLM_PLUGINS`` (split at commas) names it, none where it is set and
    empty; a warning names those it leaves out. A cached result of a scan without it is not served."""
    tree = vllm_tree(tmp_path / "v")
    sites = PLUGINS / "collide_first", PLUGINS / "collide_second"
    unfiltered = scan_with(tree, *sites)
    assert [(r[1], r[5]) for r in rows(unfiltered.stdout) if r[0] == "ToyMTPModel"] == [
        ("SecondToyMTP", "acme-second 0.1.0")
    ]
    paths = [option for site in sites for option in ("--plugin-path", str(site))]
    result = run_cli("scan", str(tree), *paths, "--format", "json", "--fail-on", "never", env={"VLLM_PLUGINS": allowed})
    assert [(r[1], r[5]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"] == [toy]
    left_out = "register (acme-first 0.1.0), register (acme-second 0.1.0)"
    assert ("left out: " + left_out in result.stderr) == ("register" not in allowed.split(","))


def test_a_distribution_hides_a_later_one_of_its_name_even_without_entry_points(tmp_path):
    """``importlib.metadata.entry_points`` keeps the first distribution of each name on the path: a copy without
    vLLM entry points found first hides the plugin's entry points from vLLM."""
    shadow = tmp_path / "shadow"
    (shadow / "acme_first-0.0.1.dist-info").mkdir(parents=True)
    (shadow / "acme_first-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-first\n")
    (shadow / "acme_first-0.0.1.dist-info" / "entry_points.txt").write_text("[console_scripts]\nacme = acme:main\n")
    result = scan_with(vllm_tree(tmp_path / "v"), shadow, PLUGINS / "collide_first")
    assert [(r[1], r[5]) for r in rows(result.stdout) if r[0] == "ToyMTPModel"] == [("ToyMTP", "vllm")]
