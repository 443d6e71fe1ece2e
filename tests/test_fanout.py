"""Worker processes never change a result: any job count, with or without the cache, errors included."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.fanout import Ahead, WarmWorker, chunk_entries, warm_worker
from mtp_audit.model import RegistryEntry

pytestmark = pytest.mark.integration


def _scan(tree, *extra, env=None):
    result = run_cli("scan", str(tree), "--format", "json", "--fail-on", "never", *extra, env=env)
    return result.returncode, result.stdout, result.stderr


def test_scan_is_identical_at_any_job_count_with_and_without_cache(vllm_release, tmp_path):
    tree = vllm_release("0.34.0")
    serial = _scan(tree, "--no-cache", "--jobs", "1")
    assert serial[0] == 0, serial[2]
    assert '"status": "missing_fixable"' in serial[1]
    for jobs in ("2", "3", "4", "8", "0"):
        assert _scan(tree, "--no-cache", "--jobs", jobs) == serial, f"--jobs {jobs}"
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    assert _scan(tree, "--jobs", "2", env=env) == serial  # cold: workers fill the facts cache
    [results] = (tmp_path / "cache").glob("*/results")
    shutil.rmtree(results)  # keep the facts, drop the whole-result cache
    assert _scan(tree, "--jobs", "1", env=env) == serial  # facts written by workers, read serially
    assert _scan(tree, "--jobs", "2", env=env) == serial  # warm: the result cache answers


def test_fix_diff_is_identical_at_any_job_count(vllm_release):
    tree = vllm_release("0.34.0")
    diffs = [
        run_cli("fix", str(tree), "--all", "--diff", "--no-cache", "--quiet", "--jobs", jobs) for jobs in ("1", "2")
    ]
    assert diffs[0].stdout.count("+    def get_top_tokens(") >= 40, diffs[0].stderr
    assert [(d.returncode, d.stdout) for d in diffs[1:]] == [(diffs[0].returncode, diffs[0].stdout)]


def _broken_release(vllm_release, tmp_path, appended: str):
    """0.34.0 with ``appended`` at the end of deepseek_mtp.py; its one-process scan, which must
    name that file's syntax error."""
    tree = tmp_path / "vllm-tree"
    shutil.copytree(vllm_release("0.34.0"), tree)
    broken = tree / "vllm/model_executor/models/deepseek_mtp.py"
    broken.write_text(broken.read_text() + appended)
    serial = _scan(tree, "--no-cache", "--jobs", "1")
    assert serial[0] == 2
    assert "deepseek_mtp.py" in serial[2] and "syntax error" in serial[2]
    return tree, serial


def test_an_error_met_by_a_worker_is_reported_as_without_workers(vllm_release, tmp_path):
    tree, serial = _broken_release(vllm_release, tmp_path, "\nBROKEN = (\n")
    for jobs in ("2", "4"):  # round one in two workers, and in four
        assert _scan(tree, "--no-cache", "--jobs", jobs) == serial, f"--jobs {jobs}"


def test_a_syntax_error_in_a_part_the_cut_drops_is_found_as_without_workers(vllm_release, tmp_path):
    """Workers read registry modules' facts before another worker has checked that the whole file
    compiles; a file that does not must end as the one-process scan ends it."""
    tree, serial = _broken_release(
        vllm_release, tmp_path, "\n\nclass Unwatched:\n    def helper(self):\n        return )\n"
    )
    for jobs in ("2", "4"):  # round one in two workers (one checks the syntax), and in four
        assert _scan(tree, "--no-cache", "--jobs", jobs) == serial, f"--jobs {jobs}"
        env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / f"cache-{jobs}")}
        assert _scan(tree, "--jobs", jobs, env=env) == serial  # nothing unchecked was cached
        assert _scan(tree, "--jobs", "1", env=env) == serial


def test_chunks_keep_a_module_together_and_cover_every_entry():
    entries = [RegistryEntry(f"A{i}", f"m{i % 5}", f"C{i}", "r") for i in range(23)]
    chunks = chunk_entries(entries, 3)
    assert sorted(p for chunk in chunks for p in chunk) == list(range(23))
    owners = {entries[p].module: n for n, chunk in enumerate(chunks) for p in chunk}
    assert all(owners[entries[p].module] == n for n, chunk in enumerate(chunks) for p in chunk)
    assert chunk_entries(entries[:2], 8) == [[0], [1]]


def test_an_inheritance_cycle_reads_the_same_at_any_job_count(tmp_path):
    """A cycle is described from the class analysed, never from whichever was analysed first."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    models = tree / "vllm/model_executor/models"
    (models / "cycle_a.py").write_text("from .cycle_b import CycleB\n\n\nclass CycleA(CycleB):\n    pass\n")
    (models / "cycle_b.py").write_text("from .cycle_a import CycleA\n\n\nclass CycleB(CycleA):\n    pass\n")
    rows = ['    "CycleAModel": ("cycle_a", "CycleA"),', '    "CycleBModel": ("cycle_b", "CycleB"),']
    for n in range(16):  # enough drafters for workers to be used
        (models / f"toy{n}_mtp.py").write_text(
            f"class Toy{n}MTP:\n    def compute_logits(self, hidden_states):\n"
            "        return self.logits_processor(self.lm_head, hidden_states)\n"
        )
        rows.append(f'    "Toy{n}MTPModel": ("toy{n}_mtp", "Toy{n}MTP"),')
    registry = models / "registry.py"
    registry.write_text(
        registry.read_text().replace(
            "_SPECULATIVE_DECODING_MODELS = {", "_SPECULATIVE_DECODING_MODELS = {\n" + "\n".join(rows), 1
        )
    )
    serial = _scan(tree, "--no-cache", "--jobs", "1")
    assert serial[0] == 0, serial[2]
    assert "inheritance cycle through CycleB" in serial[1] and "inheritance cycle through CycleA" in serial[1]
    assert _scan(tree, "--no-cache", "--jobs", "2") == serial


def _square(n: int) -> int:
    return n * n


def _fail(n: int) -> int:
    raise ValueError(f"task {n} failed")


def _slow_warm_up() -> None:
    time.sleep(120)


def test_a_warm_worker_returns_results_in_order_and_raises_task_errors():
    with warm_worker(2, lambda: None) as worker:
        assert isinstance(worker, WarmWorker)
        assert worker.map(_square, list(range(7))) == [n * n for n in range(7)]
        with pytest.raises(ValueError, match="task 1 failed"):
            worker.map(_fail, [1])
        assert worker.map(_square, [3]) == [9]  # still serving after a failed task
        assert worker.ask(_square, 5) == 25  # answered by the worker itself, between maps
        with pytest.raises(ValueError, match="task 2 failed"):
            worker.ask(_fail, 2)
        assert worker.map(_square, [4, 6]) == [16, 36]
    with warm_worker(1, lambda: None) as worker:
        assert worker is None  # one job: the caller does the work itself


def test_a_warm_worker_given_no_work_is_stopped_not_waited_for():
    start = time.monotonic()
    with warm_worker(2, _slow_warm_up):
        pass
    assert time.monotonic() - start < 60  # not the warm-up's 120 s


def test_work_done_ahead_returns_its_result_or_error_and_an_unasked_one_is_stopped():
    ahead = Ahead(_square, 7)
    assert ahead.result() == 49
    ahead.close()
    failing = Ahead(_fail, 3)
    with pytest.raises(ValueError, match="task 3 failed"):
        failing.result()
    failing.close()
    start = time.monotonic()
    unasked = Ahead(_slow_warm_up)
    unasked.close()  # killed, not waited for
    assert time.monotonic() - start < 60 and not unasked._process.is_alive()


def test_the_blast_radius_index_read_ahead_is_the_one_read_here(tmp_path):
    """fix reads BaseNames in a forked process while it scans: the same index as one read in process."""
    from mtp_audit.apply.inheritors import BaseNames

    tree = build_tree(FIXTURES / "scan" / "delegation_cross_file", tmp_path / "tree")
    ahead = Ahead(BaseNames, tree, tree / "vllm")
    here = BaseNames(tree, tree / "vllm")
    there = ahead.result()
    ahead.close()
    assert (there.modules, there.aliases) == (here.modules, here.aliases) and here.modules


_FIX_PROBE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from mtp_audit.apply.write import unified_diff\n"
    "from mtp_audit.fix import plan_fix\n"
    "from mtp_audit.cache import FactsCache\n"
    "from mtp_audit.locate import locate\n"
    "result = plan_fix(locate(Path(sys.argv[1])), None, True, FactsCache(), None, 2)\n"
    "sys.stdout.write(''.join(unified_diff(r) for r in result.rewrites))\n"
    "print('libcst' in sys.modules)\n"
)


def _fix_probe(tree, env) -> str:
    """The diff ``fix --all`` plans at two jobs in a fresh process, and whether that process imported libcst."""
    done = subprocess.run(
        [sys.executable, "-c", _FIX_PROBE, str(tree)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_fix_from_cached_analyses_leaves_libcst_to_the_workers(vllm_release, tmp_path):
    """The parent scans and plans from the caches; only the forked rewriter imports libcst."""
    tree = vllm_release("0.34.0")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    first = run_cli("fix", str(tree), "--all", "--diff", "--quiet", "--jobs", "2", env=env)
    assert first.stdout.count("+    def get_top_tokens(") >= 40, first.stderr
    assert _fix_probe(tree, env) == first.stdout + "False\n"


def test_fix_after_a_scan_asks_the_warm_worker_for_the_mirrors_it_plans(vllm_release, tmp_path):
    """After a scan alone, no mirror is cached: the plan's blast-radius checks need them, and the
    warm worker (which has libcst) computes them, so the parent still never imports libcst; the
    diff is the one-process fix's."""
    tree = vllm_release("0.34.0")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("scan", str(tree), "--quiet", "--fail-on", "never", env=env).returncode == 0
    serial = run_cli("fix", str(tree), "--all", "--diff", "--quiet", "--no-cache", "--jobs", "1")
    assert serial.stdout.count("+    def get_top_tokens(") >= 40, serial.stderr
    assert _fix_probe(tree, env) == serial.stdout + "False\n"


_ASKS_PROBE = (
    "import sys\n"
    "from pathlib import Path\n"
    "from mtp_audit import fanout\n"
    "from mtp_audit.classify import memo\n"
    "from mtp_audit.fix import plan_fix\n"
    "from mtp_audit.cache import FactsCache\n"
    "from mtp_audit.locate import locate\n"
    "asked, ask = [], fanout.WarmWorker.ask\n"
    "def counted(worker, task, *args):\n"
    "    if task is memo.answer_here:\n"
    "        asked.append(args[0].rpartition('.')[2])\n"
    "    return ask(worker, task, *args)\n"
    "fanout.WarmWorker.ask = counted\n"
    "plan_fix(locate(Path(sys.argv[1])), None, True, FactsCache(), None, 2)\n"
    "print(sorted(set(asked)))\n"
)


def test_fix_after_a_scan_has_its_planned_mirrors_answered_at_once_in_the_warm_workers_forks(vllm_release, tmp_path):
    """The mirrors no cache holds, and what the blast-radius checks ask of them, are computed in the warm
    worker's forks all at once (``memo.answer_elsewhere``), not asked one by one; the diff is unchanged
    (the test above)."""
    tree = vllm_release("0.34.0")
    env = {"MTP_AUDIT_CACHE_DIR": str(tmp_path / "cache")}
    assert run_cli("scan", str(tree), "--quiet", "--fail-on", "never", env=env).returncode == 0
    done = subprocess.run(
        [sys.executable, "-c", _ASKS_PROBE, str(tree)], capture_output=True, text=True, env={**os.environ, **env}
    )
    assert done.returncode == 0, done.stderr
    asked = done.stdout.strip()
    assert asked.startswith("[") and not any(r in asked for r in ("'mirror_text'", "'top_tokens_shape'")), asked


def _exit_without_answer() -> None:
    os._exit(3)


def test_work_done_ahead_by_a_process_that_dies_says_so():
    ahead = Ahead(_exit_without_answer)
    with pytest.raises(RuntimeError, match=r"ended without an answer \(exit code 3\)"):
        ahead.result()
    ahead.close()
