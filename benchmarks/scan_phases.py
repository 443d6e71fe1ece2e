"""Where a one-process cold scan's CPU goes, phase by phase, against bench_scan.py's baseline.

The cold target (0.25x of the baseline) is a ratio of wall-clock times. On P CPUs no way of
spreading the work beats the work itself divided by P, so the one-process scan's CPU seconds,
divided by P and by the baseline, is a lower bound of that ratio (start-up, the libcst import
and the hand-over between processes make the real figure higher). This script measures it:
``mtp-audit scan --format json --jobs 1`` with an empty cache, each phase's CPU seconds
(exclusive: a phase that runs inside another is counted in itself only), interleaved with the
baseline for several repetitions, and prints the medians and the bound for 1 to 16 CPUs.

    python benchmarks/scan_phases.py [--vllm-version 0.34.0] [--repeat 5]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_scan import BASELINE, release_to_measure  # this script's folder is first on sys.path

# The scan's own command, run in this child with each phase's functions wrapped: (module, class or
# None, function, phase). Functions bound by name elsewhere (``from .memo import load_rules``) are
# replaced there too.
CHILD = """
import sys, time
started = time.process_time()
import json, os
from mtp_audit import cli
PHASES = [
    ("mtp_audit.scan", "Scanner", "entries", "the registry"),
    ("mtp_audit.scan", "Scanner", "walk_import_chains", "import chains of the registry modules"),
    ("mtp_audit.index.modules", "ModuleIndex", "_read", "module facts (read, cut, parse)"),
    ("mtp_audit.scan", "Scanner", "resolve", "resolution, MROs, the classes' own chains"),
    ("mtp_audit.classify.memo", None, "load_rules", "the libcst import"),
    ("mtp_audit.resolve.callers", "CallerIndex", "__init__", "the speculators read (parsed, indexed)"),
    ("mtp_audit.scan", "Scanner", "contract", "call contracts"),
    ("mtp_audit.scan", "Scanner", "caller_notes", "the speculators' notes"),
    ("mtp_audit.classify.analysis", "Analyzer", "analyze", "classification"),
    ("mtp_audit.cache.store", "Store", "save", "cache writes"),
]
spent = {}
inner = []  # per open phase, the CPU seconds of the phases run inside it

def timed(function, phase):
    def wrapper(*args, **kwargs):
        began = time.process_time()
        inner.append(0.0)
        try:
            return function(*args, **kwargs)
        finally:
            took = time.process_time() - began
            spent[phase] = spent.get(phase, 0.0) + took - inner.pop()
            if inner:
                inner[-1] += took
    return wrapper

for module_name, class_name, name, phase in PHASES:
    module = sys.modules.get(module_name) or __import__(module_name, fromlist=["_"])
    owner = getattr(module, class_name) if class_name else module
    original = getattr(owner, name)
    wrapped = timed(original, phase)
    setattr(owner, name, wrapped)
    if class_name is None:
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("mtp_audit") and getattr(other, name, None) is original:
                setattr(other, name, wrapped)
sys.argv = ["mtp-audit", "scan", sys.argv[1], "--format", "json", "--jobs", "1"]
before = time.process_time()
spent["start-up (interpreter and imports)"] = before - started
try:
    cli.main()
except SystemExit:
    pass
ended = time.process_time()
total = ended - started
ran = sum(seconds for phase, seconds in spent.items() if not phase.startswith("start-up"))
spent["the rest (records, output, result cache)"] = ended - before - ran
with open(os.environ["PHASES_OUT"], "w") as handle:
    json.dump({"total": total, "phases": spent}, handle)
"""

CPUS = (1, 2, 4, 8, 16)
COLD_TARGET = 0.25


def main() -> None:
    args, root = release_to_measure(__doc__)
    work = Path(tempfile.mkdtemp(prefix="mtp-audit-phases-"))
    cache, out = work / "cache", work / "phases.json"
    env = {**os.environ, "MTP_AUDIT_CACHE_DIR": str(cache), "NO_COLOR": "1", "PHASES_OUT": str(out)}
    baseline: list[float] = []
    totals: list[float] = []
    phases: dict[str, list[float]] = {}
    try:
        for _ in range(args.repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", BASELINE, str(root)], env=env, check=True)
            baseline.append(time.perf_counter() - start)
            shutil.rmtree(cache, ignore_errors=True)
            subprocess.run([sys.executable, "-c", CHILD, str(root)], env=env, check=True, stdout=subprocess.DEVNULL)
            measured = json.loads(out.read_text())
            totals.append(measured["total"])
            for phase, seconds in measured["phases"].items():
                phases.setdefault(phase, []).append(seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    base, total = statistics.median(baseline), statistics.median(totals)
    print(f"vLLM {args.vllm_version}: one-process cold scans (--jobs 1), {args.repeat} interleaved with the baseline")
    print(f"{'phase (CPU seconds, medians)':52} {'min':>6} {'median':>7} {'max':>6} {'share':>6}")
    for phase, values in sorted(phases.items(), key=lambda item: -statistics.median(item[1])):
        median = statistics.median(values)
        print(f"{phase:52} {min(values):6.2f} {median:7.2f} {max(values):6.2f} {median / total:6.0%}")
    print(f"{'total CPU of the scan process':52} {min(totals):6.2f} {total:7.2f} {max(totals):6.2f}")
    print(f"{'baseline (ast.parse, wall seconds)':52} {min(baseline):6.2f} {base:7.2f} {max(baseline):6.2f}")
    bounds = ", ".join(f"{cpus} CPUs {total / cpus / base:.2f}x" for cpus in CPUS)
    print(f"lower bound of scan cold / baseline, the CPU split perfectly: {bounds}")
    need = COLD_TARGET * base
    print(
        f"the cold target ({COLD_TARGET}x) on P CPUs needs at most {need:.2f} x P CPU seconds of work "
        f"(2 CPUs: {2 * need:.2f} s, {2 * need / total:.0%} of today's)"
    )


if __name__ == "__main__":
    main()
