"""Scan speed and memory against a baseline measured in the same run.

(a) baseline: CPython ``ast.parse`` of every ``.py`` under
    ``vllm/model_executor/models`` and ``vllm/models``, in one process;
(b) ``mtp-audit scan --format json``, cold (empty facts cache), with the
    default worker processes (one per CPU), and once more with ``--jobs 1``;
(c) the same, warm;
(d) ``mtp-audit fix --all --diff`` (warm cache).

The tool's bytecode is compiled first, as a pip install of the wheel leaves
it (an editable install under ``PYTHONDONTWRITEBYTECODE=1`` would otherwise
compile mtp_audit's modules in every run, ~0.09 s, which no user pays twice).
Each is a fresh process; the four are interleaved for several repetitions,
and the script prints min / median / max wall time, the ratio of each median
to the baseline's, and the peak RSS of each (from ``wait4``). Targets (issue
5): cold <= 0.25x, warm <= 0.08x, fix --all --diff <= 0.5x, RSS <= 300 MB.

    python benchmarks/bench_scan.py [--vllm-version 0.34.0] [--repeat 5]
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mtp_audit
from mtp_audit.sources import release_tree

BASELINE = """
import ast, pathlib, sys
root = pathlib.Path(sys.argv[1]) / "vllm"
for folder in ("model_executor/models", "models"):
    for path in sorted((root / folder).rglob("*.py")):
        ast.parse(path.read_bytes())
"""

TARGETS = {"scan cold": 0.25, "scan warm": 0.08, "fix --all --diff": 0.5}
RSS_LIMIT_MB = 300


def run(command: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one child process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed with exit code {code}")
    return elapsed, usage.ru_maxrss / 1024


def release_to_measure(description: str) -> tuple[argparse.Namespace, Path]:
    """The command line (``--vllm-version``, ``--repeat``) and the release's tree, with the tool's
    bytecode compiled first (see above)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm-version", default="0.34.0")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    root = release_tree(args.vllm_version)
    if not compileall.compile_dir(Path(mtp_audit.__file__).parent, quiet=1):
        raise SystemExit("could not compile mtp_audit's bytecode")
    return args, root


def main() -> None:
    args, root = release_to_measure(__doc__)
    files = sum(1 for f in ("model_executor/models", "models") for _ in (root / "vllm" / f).rglob("*.py"))
    cache = Path(tempfile.mkdtemp(prefix="mtp-audit-bench-"))
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(cache), "NO_COLOR": "1"}
    tool = [sys.executable, "-m", "mtp_audit"]
    commands = {
        "baseline (ast.parse)": [sys.executable, "-c", BASELINE, str(root)],
        "scan cold": [*tool, "scan", str(root), "--format", "json"],
        "scan cold --jobs 1": [*tool, "scan", str(root), "--format", "json", "--jobs", "1"],
        "scan warm": [*tool, "scan", str(root), "--format", "json"],
        "fix --all --diff": [*tool, "fix", str(root), "--all", "--diff"],
    }
    times: dict[str, list[float]] = {name: [] for name in commands}
    rss: dict[str, float] = {name: 0.0 for name in commands}
    try:
        for _ in range(args.repeat):
            for name, command in commands.items():
                if name.startswith("scan cold"):
                    shutil.rmtree(cache, ignore_errors=True)
                seconds, peak = run(command, env)
                times[name].append(seconds)
                rss[name] = max(rss[name], peak)
    finally:
        shutil.rmtree(cache, ignore_errors=True)

    base = statistics.median(times["baseline (ast.parse)"])
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"vLLM {args.vllm_version}: {files} files; {args.repeat} interleaved repetitions; {cpus} usable CPUs")
    print(f"{'measure':22} {'min':>7} {'median':>7} {'max':>7} {'ratio':>7} {'target':>7} {'peak RSS':>9}")
    for name, values in times.items():
        median = statistics.median(values)
        target = TARGETS.get(name)
        verdict = "" if target is None else ("ok" if median / base <= target else "MISSED")
        print(
            f"{name:22} {min(values):7.2f} {median:7.2f} {max(values):7.2f} {median / base:6.2f}x "
            f"{'' if target is None else f'{target:.2f}x':>7} {rss[name]:7.0f}MB {verdict}"
        )
    print(f"peak RSS limit {RSS_LIMIT_MB} MB: {'ok' if max(rss.values()) <= RSS_LIMIT_MB else 'MISSED'}")


if __name__ == "__main__":
    main()
