"""Caches never change a result: with, without, cold, warm, and after files change."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import mtp_audit
from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.model import Status


def scan_json(tree, *extra, env=None) -> dict:
    result = run_cli("scan", str(tree), "--format", "json", *extra, env=env)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("case", ["dispatch_getattr", "consistency", "delegation_cross_file"])
def test_same_result_with_and_without_cache(case, tmp_path):
    tree = build_tree(FIXTURES / "scan" / case, tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    uncached = scan_json(tree, "--no-cache", env=env)
    cold = scan_json(tree, env=env)
    assert list((tmp_path / "cache").glob("*/results")), "the cold scan stored no result"
    warm = scan_json(tree, env=env)
    assert uncached == cold == warm


def test_result_cache_sees_a_changed_file(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "delegation_cross_file", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    before = scan_json(tree, env=env)
    assert before["drafters"][0]["status"] == "missing_fixable"
    predictor = tree / "vllm/model_executor/models/split_predictor.py"
    predictor.write_text(
        predictor.read_text().replace(
            "return self.logits_processor(lm_head, hidden_states)",
            "logits = self.logits_processor(lm_head, hidden_states)\n        return logits * 2",
        )
    )
    after = scan_json(tree, env=env)
    assert after["drafters"][0]["status"] == "missing_manual"
    assert after == scan_json(tree, "--no-cache", env=env)


def test_a_file_read_twice_with_other_bytes_matches_no_file(tmp_path):
    """Saved between two reads of one scan: which bytes were analysed is not one answer, so neither
    a cached result nor fix's rewrite (which checks the analysed hash) may trust it."""
    from mtp_audit.cache import CHANGED, Observed
    from mtp_audit.index.modules import ModuleIndex
    from mtp_audit.locate import locate

    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    index = ModuleIndex(locate(tree))
    path = tree / "vllm/model_executor/models/toy_mtp.py"
    index.read_bytes(path)
    index.read_bytes(path)  # the same bytes again: still their hash
    assert Observed(dict(index.observed)).still_true(index.tree)
    path.write_text(path.read_text() + "# saved meanwhile\n")
    index.read_bytes(path)
    assert index.observed["vllm/model_executor/models/toy_mtp.py"] == CHANGED
    assert not Observed(dict(index.observed)).still_true(index.tree)


_REPLACEMENTS = {
    "a FIFO": lambda path: (path.unlink(), os.mkfifo(path)),
    "a folder": lambda path: (path.unlink(), path.mkdir()),
    "one byte more": lambda path: path.write_bytes(path.read_bytes() + b"\n"),
    "one byte less": lambda path: path.write_bytes(path.read_bytes()[:-1]),
}


@pytest.mark.parametrize(
    ("replace", "empty"),
    [*((name, False) for name in _REPLACEMENTS), ("a FIFO", True), ("a folder", True), ("one byte more", True)],
)
def test_a_file_the_result_read_is_a_change_once_replaced(replace, empty, tmp_path):
    """A cached result is checked against the bytes of every file it read: another file type in one's place
    is a change, and the check opens a FIFO without waiting for a writer (it would hang a warm scan). An
    empty file read: a FIFO without a writer reads as empty too, so only the file type tells them apart."""
    from mtp_audit.cache import Observed
    from mtp_audit.index.modules import ModuleIndex
    from mtp_audit.locate import locate

    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    index = ModuleIndex(locate(tree))
    path = tree / "vllm/model_executor/models/toy_mtp.py"
    if empty:
        path = path.with_name("__init__.py")
        path.write_bytes(b"")
    index.read_bytes(path)
    observed = Observed(dict(index.observed))
    assert observed.still_true(index.tree)
    _REPLACEMENTS[replace](path)
    assert not observed.still_true(index.tree)


def test_facts_stored_later_are_filed_under_the_bytes_they_were_read_from(tmp_path):
    """A worker stores facts another process read (``store_facts``): an edit saved in between must not file
    the old facts under the new bytes, which every later cached scan would then trust (QA cache #1)."""
    from mtp_audit.cache import MISSING, FactsCache
    from mtp_audit.index.fact_types import ModuleFacts
    from mtp_audit.index.modules import ModuleIndex
    from mtp_audit.locate import locate

    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    module, path = "vllm.model_executor.models.toy_mtp", tree / "vllm/model_executor/models/toy_mtp.py"
    cache = FactsCache(tmp_path / "cache")
    index = ModuleIndex(locate(tree), cache)
    index.store_later = True
    before = path.read_bytes()
    assert index.facts(module) is not None and index.unstored == [module]
    path.write_text(path.read_text() + "\n\nclass Added:\n    pass\n")  # saved meanwhile
    index.store_facts(index.unstored)
    assert cache.load(path.read_bytes(), module, False, ModuleFacts) is MISSING
    assert cache.load(before, module, False, ModuleFacts) is not MISSING  # the bytes they came from
    index.read_bytes(path)  # the other bytes, read once more (as the syntax check does): then not at all
    cache_after = FactsCache(tmp_path / "cache2")
    index.cache = cache_after
    index.store_facts([module])
    assert cache_after.load(before, module, False, ModuleFacts) is MISSING


def test_result_cache_sees_a_new_module(tmp_path):
    """A module that appears where resolution once found nothing changes the answer."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    registry = tree / "vllm/model_executor/models/registry.py"
    registry.write_text(
        registry.read_text().replace(
            '"ToyMTPModel": ("toy_mtp", "ToyMTP"),',
            '"ToyMTPModel": ("toy_mtp", "ToyMTP"),\n    "LaterMTPModel": ("later_mtp", "LaterMTP"),',
        )
    )
    first = scan_json(tree, env=env)
    assert [u["arch"] for u in first["unresolved"]] == ["LaterMTPModel"]
    (tree / "vllm/model_executor/models/later_mtp.py").write_text(
        "class LaterMTP:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    second = scan_json(tree, env=env)
    assert not second["unresolved"]
    assert {r["arch"] for r in second["drafters"]} == {"ToyMTPModel", "LaterMTPModel"}


def test_cached_fix_refusals_see_a_new_module_no_scan_reads(tmp_path):
    """The concise report's "fix refuses it" is planned with the blast radius, which reads every file of the
    package: a new non-drafter subclass in a module nothing imports moves the mirror (placement) to where fix
    writes it, and the cached report says so too."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    models = tree / "vllm/model_executor/models"
    (models / "registry.py").write_text(
        '_SPECULATIVE_DECODING_MODELS = {"BackendForMTP": ("backend_models", "BackendForMTP")}\n'
    )
    (models / "backend_causal.py").write_text(
        "try:\n    import torch\nexcept ImportError:\n    torch = None\nfrom torch import nn\n\n\n"
        "class CausalMixin(nn.Module):\n    def compute_logits(self, hidden_states):\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states, self.lm_head.bias)\n"
        "        return logits\n"
    )
    (models / "backend_mtp.py").write_text(
        "import torch\n\nfrom .backend_causal import CausalMixin\n\n\nclass MTPMixin(CausalMixin):\n"
        "    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        return super().compute_logits(hidden_states)\n"
    )
    (models / "backend_models.py").write_text(
        "from .backend_mtp import MTPMixin\n\n\nclass BackendForMTP(MTPMixin): ...\n"
    )
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    refused = run_cli("scan", str(tree), env=env)
    assert "except for 1 that it refuses" in refused.stdout  # the mirror would go into backend_causal.py
    (tree / "vllm/extra").mkdir()
    (tree / "vllm/extra/__init__.py").write_text("")
    (tree / "vllm/extra/causal.py").write_text(
        "from vllm.model_executor.models.backend_causal import CausalMixin\n\n\n"
        "class BackendForCausalLM(CausalMixin): ...\n"
    )
    written = run_cli("fix", str(tree), "--model", "BackendForMTP", "--check", env=env)
    assert written.returncode == 1 and "refused" not in written.stderr.split("fix:")[0]  # a change needed, no refusal
    cached = run_cli("scan", str(tree), env=env)
    assert "that it refuses" not in cached.stdout, cached.stdout


@pytest.mark.parametrize("before", ["a regular file", "a symlink inside the tree"])
def test_result_cache_sees_a_model_file_become_a_symlink_out_of_the_tree(before, tmp_path):
    """The same bytes behind a symlink out of the tree are not read by a scan: a cached result
    that read them there is stale."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    model = tree / "vllm/model_executor/models/toy_mtp.py"
    outside = tmp_path / "outside_toy_mtp.py"
    outside.write_bytes(model.read_bytes())
    if before == "a symlink inside the tree":
        model.rename(tree / "toy_copy.py")
        model.symlink_to(tree / "toy_copy.py")
    assert run_cli("scan", str(tree), env=env).returncode == 1  # cached: the drafter read and reported
    model.unlink()
    model.symlink_to(outside)
    warm = run_cli("scan", str(tree), "--format", "json", env=env)
    cold = run_cli("scan", str(tree), "--format", "json", "--no-cache", env=env)
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert cold.returncode == 2 and "outside the tree" in cold.stderr


@pytest.mark.parametrize("case", ["consistency", "delegation_cross_file", "manual_shapes"])
def test_cached_classification_needs_no_libcst_and_changes_nothing(case, tmp_path):
    """With facts and classification answers cached, a scan whose result is not cached
    classifies without importing libcst, and says exactly what a scan without caches says."""
    tree = build_tree(FIXTURES / "scan" / case, tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    uncached = scan_json(tree, "--no-cache", env=env)
    assert scan_json(tree, env=env) == uncached
    assert list((tmp_path / "cache").glob("*/shapes")), "no classification answer was stored"
    [results] = (tmp_path / "cache").glob("*/results")
    shutil.rmtree(results)
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "mtp_audit", "scan", str(tree), "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert result.returncode in (0, 1), result.stderr
    assert json.loads(result.stdout) == uncached
    assert "libcst" not in result.stderr


def _entries(cache, namespace: str) -> list:
    return sorted(cache.glob(f"*/{namespace}/*/*.json"))


def test_editing_the_tool_invalidates_warm_caches(tmp_path):
    """An edited rule message in an editable install shows on the next scan, caches warm or not."""
    shutil.copytree(
        Path(mtp_audit.__file__).parent,
        tmp_path / "install" / "mtp_audit",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copytree(Path(mtp_audit.__file__).parent.parent / "templates", tmp_path / "install" / "templates")
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path / "install")}

    def scan() -> dict:  # run in tmp_path, so that `python -m` finds the copy, not the checkout
        result = run_cli("scan", str(tree), "--format", "json", env=env, cwd=tmp_path)
        assert result.returncode == 1, result.stderr
        return json.loads(result.stdout)

    before = scan()
    assert scan() == before  # warm: facts, answers and the result all cached
    shapes = tmp_path / "install" / "mtp_audit" / "classify" / "shapes.py"
    shapes.write_text(shapes.read_text().replace('f"logits computed by hand ({what}', 'f"logits made by hand ({what}'))
    after = scan()
    [by_hand] = [d for d in after["drafters"] if d["class"] == "ByHandMTP"]
    assert by_hand["reason"].startswith("logits made by hand (torch.matmul")
    assert len(list((tmp_path / "cache").iterdir())) == 2  # one generation of entries per version of the code


def test_a_changed_source_hash_misses_every_entry(tmp_path, monkeypatch):
    from mtp_audit.cache import source
    from mtp_audit.cache.store import MISSING, Store

    store = Store(tmp_path, "facts")
    path = store.path("module", True, "0" * 64)
    store.save(path, ["facts"])
    assert store.load(path, list) == ["facts"]
    monkeypatch.setattr(source, "source_hash", lambda: "f" * 64)
    other = Store(tmp_path, "facts")
    assert other.load(other.path("module", True, "0" * 64), list) is MISSING


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda mp, tmp: mp.setattr("sys.version", "3.99.0 (another build)"), id="another Python"),
        pytest.param(lambda mp, tmp: _other_libcst(mp, tmp), id="another libcst"),
    ],
)
def test_another_parser_reads_none_of_the_entries(tmp_path, monkeypatch, change):
    """Two interpreters or venvs sharing one cache folder: what one parser read (a syntax
    error, or its absence) is never served to the other."""
    from mtp_audit.cache import source

    before = source.source_hash.__wrapped__()
    change(monkeypatch, tmp_path)
    assert source.source_hash.__wrapped__() != before


def _other_libcst(monkeypatch, tmp_path):
    import importlib.machinery

    folder = tmp_path / "libcst"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "_version.py").write_text("__version__ = '0.0.1'\n")
    spec = importlib.machinery.ModuleSpec("libcst", None, origin=str(folder / "__init__.py"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: spec)


class _RunsCode:
    marker = Path(os.devnull)  # each test points it at a file of its own

    def __reduce__(self):
        return os.system, (f"touch {_RunsCode.marker}",)


BAD_ENTRIES = {
    "garbage": lambda path: path.write_bytes(os.urandom(300)),
    "truncated": lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2]),
    "pickle": lambda path: path.write_bytes(pickle.dumps(_RunsCode())),
    "foreign class": lambda path: path.write_text('{"c":"os:_wrap_close","v":[]}'),
    "foreign schema": lambda path: path.write_text('{"t":["mtp-audit-cache/0","x",1]}'),
    "a folder": lambda path: (path.unlink(), path.mkdir(), (path / "inside").write_text("x")),
    "a FIFO": lambda path: (path.unlink(), os.mkfifo(path)),
    "a symlink to a device": lambda path: (path.unlink(), path.symlink_to("/dev/zero")),
    "a symlink out of the cache": lambda path: (path.rename(f"{path}.moved"), path.symlink_to(f"{path}.moved")),
}


@pytest.mark.parametrize("damage", BAD_ENTRIES)
def test_a_bad_cache_entry_is_rebuilt_and_never_run(damage, tmp_path):
    _RunsCode.marker = tmp_path / "ran"
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    cache = tmp_path / "cache"
    env = {"MTP_AUDIT_CACHE_DIR": str(cache)}
    expected = scan_json(tree, env=env)
    damaged = [p for namespace in ("facts", "shapes", "results") for p in _entries(cache, namespace)]
    for path in damaged:
        BAD_ENTRIES[damage](path)
    result = run_cli("scan", str(tree), "--format", "json", env=env)
    assert json.loads(result.stdout) == expected
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warnings and all("cache" in line for line in warnings), result.stderr
    assert not _RunsCode.marker.exists(), "a cache entry ran code"
    rebuilt = run_cli("scan", str(tree), "--format", "json", env=env)
    assert json.loads(rebuilt.stdout) == expected and "warning" not in rebuilt.stderr


def test_an_entry_larger_than_the_limit_is_not_read(tmp_path, monkeypatch, capsys):
    from mtp_audit.cache import store

    entries = store.Store(tmp_path, "facts")
    path = entries.path("module", True, "0" * 64)
    entries.save(path, ["facts"])
    monkeypatch.setattr(store, "ENTRY_LIMIT", path.stat().st_size - 1)
    assert entries.load(path, list) is store.MISSING
    assert f"warning: ignoring cache entry {path} (unreadable: larger than " in capsys.readouterr().err


def test_pruning_removes_only_the_generations_the_tool_made(tmp_path):
    """The cache folder may hold other things, some named like a generation (24 hex digits)."""
    from mtp_audit.cache import store

    foreign = [tmp_path / f"65a1f0c2e4b0a1b2c3d4e5f{digit}" for digit in range(6)]
    for folder in foreign:
        folder.mkdir()
        (folder / "upload.bin").write_text("someone else's\n")
    generations = [tmp_path / (f"{digit}" * 24) for digit in range(5)]
    for age, folder in enumerate(generations):
        (folder / "facts").mkdir(parents=True)
        (folder / store.GENERATION_MARK).write_text(store.FORMAT)
        os.utime(folder, (1000 - age, 1000 - age))
    entries = store.Store(tmp_path, "facts")
    entries.save(entries.path("module", True, "0" * 64), ["facts"])
    assert all((folder / "upload.bin").read_text() == "someone else's\n" for folder in foreign)
    kept = generations[: store.GENERATIONS_KEPT - 1]
    assert sorted(p for p in tmp_path.iterdir() if p not in foreign) == sorted([*kept, entries.directory.parent])


UNUSABLE_CACHE_DIRS = {
    "a regular file": lambda blocker: blocker,
    "a folder inside a regular file": lambda blocker: blocker / "cache",
    "a name too long to look up": lambda blocker: blocker.parent / ("x" * 300) / "cache",
    "below a folder this user cannot enter": lambda blocker: _locked(blocker.parent / "locked") / "cache",
}


def _locked(folder: Path) -> Path:
    folder.mkdir(mode=0)
    return folder


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(where, marks=pytest.mark.skipif(os.geteuid() == 0, reason="root enters any folder"))
        if where.startswith("below")
        else where
        for where in UNUSABLE_CACHE_DIRS
    ],
)
def test_a_cache_directory_that_cannot_be_used_is_one_warning_and_the_scan_runs_without_it(where, tmp_path):
    """Whatever probing it raises (not a folder, a parent that cannot be entered, a name too long)."""
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    blocker = tmp_path / "cachefile"
    blocker.write_text("not a directory\n")
    cache = UNUSABLE_CACHE_DIRS[where](blocker)
    env = {"MTP_AUDIT_CACHE_DIR": str(cache)}
    expected = scan_json(tree, "--no-cache", env=env)
    for args in (["--jobs", "1"], ["--jobs", "4"], ["fix", "--all", "--diff"]):
        command = (
            ("scan", str(tree), "--format", "json", *args) if args[0] != "fix" else (*args[:1], str(tree), *args[1:])
        )
        result = run_cli(*command, env=env)
        if command[0] == "scan":
            assert json.loads(result.stdout) == expected
        [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
        assert warning.startswith(f"warning: cache directory {cache} cannot be used (")
        assert "cache entry" not in result.stderr
        quiet = run_cli(*command, "--quiet", env=env)
        assert quiet.stderr == "" and quiet.returncode == result.returncode
    assert blocker.read_text() == "not a directory\n"


def test_quiet_keeps_bad_cache_entries_to_itself(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    cache = tmp_path / "cache"
    env = {"MTP_AUDIT_CACHE_DIR": str(cache)}
    expected = scan_json(tree, env=env)
    for path in (p for namespace in ("facts", "shapes", "results") for p in _entries(cache, namespace)):
        path.write_bytes(b"garbage")
    result = run_cli("scan", str(tree), "--format", "json", "--quiet", env=env)
    assert result.stderr == "" and result.stdout == ""
    assert scan_json(tree, env=env) == expected


def test_entries_hold_only_data(tmp_path):
    """The codec writes JSON and reads back only mtp_audit's dataclasses and enums, fields set without
    running any constructor."""
    from mtp_audit.cache.codec import UnreadableEntry, dumps, loads

    _RunsCode.marker = tmp_path / "ran"
    from mtp_audit.classify.shape_types import LogitsKind, LogitsShape, Param, ParamKind
    from mtp_audit.model import ClassKey

    shape = LogitsShape(LogitsKind.HEAD, "head", "why", 3, [Param("x", None, ParamKind.POS)], rule_id="MTP101")
    value = {"shape": shape, ClassKey("m", "C", 1): (1, 2.5, None, True), "set": {"a"}, "path": Path("/x")}
    assert loads(dumps(value)) == value
    json.loads(dumps(value))
    for hostile in (
        pickle.dumps(_RunsCode()),
        b'{"c":"subprocess:Popen","v":[["true"]]}',
        b'{"e":"os:environ","v":1}',
        b'{"c":"mtp_audit.cache.store:Store","v":[]}',
        b"[" * 100000,
        b'{"r":0}',
        b'{"t":[{"d":[[],[]]},{"r":1}]}',
    ):
        with pytest.raises(UnreadableEntry):
            loads(hostile)
    assert not _RunsCode.marker.exists()


_KEY = '{"c":"mtp_audit.model:ClassKey","v":%s}'
_PARAM = '{"c":"mtp_audit.classify.shape_types:Param","v":%s}'
_POS = '{"e":"mtp_audit.classify.shape_types:ParamKind","v":"pos"}'
WRONG_TYPES = {
    "str for int": _KEY % '["m","C","1"]',
    "bool for int": _KEY % '["m","C",true]',
    "float for int": _KEY % '["m","C",1.5]',
    "NaN": _KEY % '["m","C",NaN]',
    "list for str": _KEY % '[["m"],"C",1]',
    "str for enum": _PARAM % '["x",null,"pos"]',
    "int for optional str": _PARAM % f'["x",3,{_POS}]',
    "int key of a dict": '{"c":"mtp_audit.cache:Observed","v":[{"m":[[1,"absent"]]}]}',
    "list value of a dict": '{"c":"mtp_audit.cache:Observed","v":[{"d":[["a.py"],[["x"]]]}]}',
    "tuple for list": '{"c":"mtp_audit.model:Unresolved","v":[null,"m","C",{"t":["cuda"]},"why"]}',
    "wrong item of a list": '{"c":"mtp_audit.model:Unresolved","v":[null,"m","C",["cuda",1],"why"]}',
    "another dataclass": '{"c":"mtp_audit.model:Location","v":["C","f.py",%s]}' % (_KEY % '["m","C",1]'),
}


@pytest.mark.parametrize("case", WRONG_TYPES)
def test_a_field_of_another_type_than_its_annotation_makes_the_entry_unreadable(case):
    """Every field is checked against its dataclass annotation, recursively, as it is read."""
    from mtp_audit.cache import Observed  # noqa: F401 (imported: the codec only builds classes already loaded)
    from mtp_audit.cache.codec import UnreadableEntry, loads
    from mtp_audit.classify.shape_types import Param  # noqa: F401

    with pytest.raises(UnreadableEntry):
        loads(WRONG_TYPES[case].encode())


def _retyped(entry: dict, case: str) -> None:
    """Give a stored scan result (``_ResultEntry``: observed, result, chains) a field of another type."""
    observed, result = entry["t"][2]["v"][:2]
    record = result["v"][1][0]["v"]  # ScanResult.records[0]
    if case == "status as a plain string":
        record[6] = "missing_fixable"
    elif case == "an int key among the files observed":
        observed["v"][0] = {"m": [[1, "absent"]]}
    else:
        record[4] = float("nan")  # DrafterRecord.line


@pytest.mark.parametrize(
    "case", ["status as a plain string", "an int key among the files observed", "a line that is NaN"]
)
def test_a_stored_result_with_a_field_of_another_type_is_rebuilt_with_one_warning(case, tmp_path):
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    cache = tmp_path / "cache"
    env = {"MTP_AUDIT_CACHE_DIR": str(cache)}
    expected = scan_json(tree, env=env)
    [path] = _entries(cache, "results")
    entry = json.loads(path.read_text())
    _retyped(entry, case)
    path.write_text(json.dumps(entry))
    result = run_cli("scan", str(tree), "--format", "json", env=env)
    assert result.returncode == 1 and json.loads(result.stdout) == expected
    assert len(result.stderr.splitlines()) == 1 and "ignoring cache entry" in result.stderr
    rebuilt = run_cli("scan", str(tree), "--format", "json", env=env)
    assert json.loads(rebuilt.stdout) == expected and rebuilt.stderr == ""


def test_an_object_held_twice_is_written_once_and_read_back_shared():
    """Facts share one bindings dict between platforms: the entry holds it once, and so does what is read."""
    from mtp_audit.cache.codec import dumps, loads
    from mtp_audit.model import ClassKey

    key = ClassKey("m", "C", 1)
    bindings = {"x": [key], "y": []}
    value = {"cuda": bindings, "rocm": bindings, "cpu": {"x": [key], "y": []}, "keys": (key, key)}
    data = dumps(value)
    assert data.count(b'"x"') == 2  # the shared dict once, the equal one again
    back = loads(data)
    assert back == value
    assert back["cuda"] is back["rocm"] and back["cpu"] is not back["cuda"]
    assert back["keys"][0] is back["keys"][1] is back["cuda"]["x"][0]


@pytest.mark.parametrize(
    ("fixture", "edited"),
    [
        ("import_chain", "vllm/model_executor/models/chain_helpers.py"),
        ("call_pairing", "vllm/v1/worker/gpu/spec_decode/__init__.py"),
    ],
)
def test_fix_after_a_scan_reuses_its_answers_while_nothing_changed(tmp_path, monkeypatch, fixture, edited):
    """fix takes a cached scan's import-chain and call-contract answers: it walks no import and reads
    no speculator, and plans and writes what it would without them; an edit to a file the scan read
    (a helper module, a speculator) withdraws them."""
    from mtp_audit.cache import FactsCache
    from mtp_audit.commands.trees import cached_answers, run_scan
    from mtp_audit.fix import plan_fix
    from mtp_audit.index.imports import ImportChains
    from mtp_audit.locate import locate
    from mtp_audit.resolve.callers import CallerIndex

    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    root = build_tree(FIXTURES / "scan" / fixture, tmp_path / "tree")
    tree = locate(root)
    run_scan(tree, no_cache=False, jobs=1)
    answers = cached_answers(tree, no_cache=False)
    assert answers is not None and answers.contracts
    if fixture == "import_chain":
        assert any(answers.chains.values()), "a failing chain is among the answers"
    else:
        assert any(reach.pairs for reaches in answers.contracts.values() for reach in reaches)
    assert cached_answers(tree, no_cache=True) is None

    walked: list[tuple[str, str]] = []
    walk = ImportChains._walk
    read: list[object] = []
    prepare = CallerIndex.__init__

    def counted_walk(self, start: str, platform: str):
        walked.append((start, platform))
        return walk(self, start, platform)

    def counted_prepare(self, *args, **kwargs):
        read.append(self)
        prepare(self, *args, **kwargs)

    monkeypatch.setattr(ImportChains, "_walk", counted_walk)
    monkeypatch.setattr(CallerIndex, "__init__", counted_prepare)

    def outcome(fix) -> list:
        return [(o.action, o.reason) for o in fix.plan.outcomes] + [(r.path, r.new) for r in fix.rewrites]

    seeded = plan_fix(tree, None, True, FactsCache(), {}, 1, False, answers)
    assert walked == [] and read == []
    plain = plan_fix(tree, None, True, FactsCache(), {}, 1, False, None)
    assert walked and read and outcome(seeded) == outcome(plain)
    assert any(r.new for r in plain.rewrites)

    path = root / edited
    path.write_text(path.read_text() + "# edited since the scan\n")
    assert cached_answers(tree, no_cache=False) is None


def test_a_result_stored_by_a_scan_that_took_earlier_answers_depends_on_what_they_read(tmp_path, monkeypatch):
    """The concise report re-scans a cached result to plan fix's refusals, seeded with its import-chain
    answers: the result it stores must still depend on the modules only those chains read (it stored
    only what it read itself, so an edit there was served the old answer)."""
    from mtp_audit.commands.trees import run_scan
    from mtp_audit.locate import locate

    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", str(tmp_path / "cache"))
    root = build_tree(FIXTURES / "scan" / "import_chain", tmp_path / "tree")
    tree = locate(root)

    def availability(result) -> list:
        return sorted((r.cls, r.status, tuple(sorted(r.platforms))) for r in result.records)

    run_scan(tree, no_cache=False, jobs=1)
    seeded = run_scan(tree, no_cache=False, jobs=1, fix_refusals=True)
    assert seeded.fix_refusals is not None
    assert ("ChainMTP", Status.MISSING_FIXABLE, ("cpu", "cuda", "rocm", "tpu")) in availability(seeded)
    package = root / "vllm/models/sparse_base/__init__.py"  # read only by the chain walks
    package.write_text(package.read_text().replace("if current_platform.is_xpu():", "if False:"))
    warm = run_scan(tree, no_cache=False, jobs=1)
    assert availability(warm) == availability(run_scan(tree, no_cache=True, jobs=1))
    assert ("ChainMTP", Status.MISSING_FIXABLE, ("cpu", "cuda", "rocm", "tpu", "xpu")) in availability(warm)


def _plugin_tree(tmp_path: Path) -> tuple[Path, Path]:
    """The fixture vLLM and a plugin folder (``--plugin-path``) whose entry point replaces ToyMTP."""
    tree = build_tree(FIXTURES / "plugins", tmp_path / "tree")
    site = tmp_path / "site"
    shutil.copytree(FIXTURES / "plugins" / "collide_first", site)
    package = site / "acme_first" / "__init__.py"
    package.write_text(package.read_text() + "\n\ndef register_nothing():\n    pass\n")
    return tree, site


def _register_nothing(site: Path) -> None:
    points = site / "acme_first-0.1.0.dist-info" / "entry_points.txt"
    points.write_text(points.read_text().replace("acme_first:register\n", "acme_first:register_nothing\n"))


def _import_extension(site: Path) -> None:
    package = site / "acme_first" / "__init__.py"
    package.write_text("import acme_first._C  # noqa: F401\n" + package.read_text())


def _new_speculator(tree: Path) -> None:
    folder = tree / "vllm/v1/worker/gpu/spec_decode/xnew"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "config.py").write_text(
        "from vllm.v1.worker.gpu.spec_decode.speculator_config import SpeculatorConfig\n\n\n"
        "class XNewConfig(SpeculatorConfig):\n"
        '    base_method = "eagle"\n'
        '    speculator_class = "vllm.v1.worker.gpu.spec_decode.xnew.speculator.XNewSpeculator"\n'
    )
    (folder / "speculator.py").write_text(
        "from ..speculator import BaseSpeculator\n\n\n"
        "class XNewSpeculator(BaseSpeculator):\n"
        "    def _generate_draft(self, hidden_states, step):\n"
        "        if self.use_local_argmax_reduction:\n"
        "            return self.model.get_top_tokens(hidden_states[:, :1])\n"
        "        return self.model.compute_logits(hidden_states).argmax(dim=-1)\n"
    )


# What a scan looks at besides the bytes of the files it reads: (tree, what to do before the cold scan,
# the change after it). Each change alters the answer, and a warm scan must see it.
OBSERVED_CHANGES = {
    "an entry point edited in entry_points.txt": (
        "plugin",
        lambda tree, site: None,
        lambda tree, site: _register_nothing(site),
    ),
    "a new speculator folder": (
        "speculator_configs",
        lambda tree, site: None,
        lambda tree, site: _new_speculator(tree),
    ),
    "a compiled extension built": (
        "plugin",
        lambda tree, site: _import_extension(site),
        lambda tree, site: (site / "acme_first" / "_C.cpython-312-x86_64-linux-gnu.so").touch(),
    ),
    "a namespace package made": (
        "plugin",
        lambda tree, site: _import_extension(site),
        lambda tree, site: (site / "acme_first" / "_C").mkdir(),
    ),
}


@pytest.mark.parametrize("change", OBSERVED_CHANGES)
def test_a_warm_scan_sees_every_change_of_what_the_scan_observed(change, tmp_path):
    """Listings, existence checks and plugin metadata decide the answer as much as file bytes do."""
    case, prepare, alter = OBSERVED_CHANGES[change]
    if case == "plugin":
        tree, site = _plugin_tree(tmp_path)
        extra: tuple[str, ...] = ("--plugin-path", str(site))
    else:
        tree, site, extra = build_tree(FIXTURES / "scan" / case, tmp_path / "tree"), tmp_path, ()
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    prepare(tree, site)
    before = run_cli("scan", str(tree), "--format", "json", *extra, env=env)
    alter(tree, site)
    warm = run_cli("scan", str(tree), "--format", "json", *extra, env=env)
    cold = run_cli("scan", str(tree), "--format", "json", "--no-cache", *extra, env=env)
    assert cold.stdout != before.stdout  # the change matters
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr)


def test_a_generation_removed_while_its_process_runs_gets_its_mark_back(tmp_path):
    """Another version's prune may remove it; made again by the next write, it is still prunable."""
    from mtp_audit.cache import store

    entries = store.Store(tmp_path, "facts")
    entries.save(entries.path("module", True, "0" * 64), ["facts"])
    generation = entries.directory.parent
    for key in ("0" * 64, "f" * 64):  # an entry folder this process made, and a new one
        shutil.rmtree(generation)
        entries.save(entries.path("module", True, key), ["facts"])
        assert (generation / store.GENERATION_MARK).read_text() == store.FORMAT


def test_cache_folders_given_with_a_tilde_are_in_the_home_folder(tmp_path, monkeypatch):
    """A CI file's ``MTP_AUDIT_CACHE_DIR: ~/x`` reaches the tool unexpanded (no shell in between)."""
    from mtp_audit import sources
    from mtp_audit.cache import default_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MTP_AUDIT_CACHE_DIR", "~/facts")
    monkeypatch.setenv("MTP_AUDIT_SOURCES_DIR", "~/sources")
    assert (default_cache_dir(), sources.sources_dir()) == (tmp_path / "facts", tmp_path / "sources")
