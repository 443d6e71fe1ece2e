"""``mtp-audit verify --all --tp 1,2`` on a fixed vLLM release: total time, and what each drafter costs.

A copy of the release's sources (``~/.cache/mtp-audit/vllm-src/X``, fetched if missing) is
made in a temporary directory, ``mtp-audit fix --all`` writes the missing methods into it (a
PATH is fixed in place, so never point it at the cache itself), then ``verify --all --json``
runs once, timed. From the JSON it prints the coverage (the share of records with a
``get_top_tokens`` whose tensors were compared at every TP size), each TP size's set-up
(vLLM import and process group, paid once per worker), and the per-drafter cost after it:
median, max and the slowest classes (records of one class share one run). Target (issue
14): under 5 minutes in all on a 2-core CPU machine.

    python benchmarks/bench_verify.py [--vllm-version 0.34.0] [--tp 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from mtp_audit.sources import release_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vllm-version", default="0.34.0")
    parser.add_argument("--tp", default="1,2")
    options = parser.parse_args()
    source = release_tree(options.vllm_version)
    with tempfile.TemporaryDirectory(prefix="bench-verify-") as scratch:
        tree = Path(scratch) / "vllm-tree"
        shutil.copytree(source / "vllm", tree / "vllm")
        fix = subprocess.run(
            [sys.executable, "-m", "mtp_audit", "fix", str(tree), "--all", "--quiet"],
            capture_output=True,
            text=True,
            check=False,
        )
        if fix.returncode not in (0, 1):
            sys.exit(f"fix --all failed: {fix.stderr.strip()}")
        report = Path(scratch) / "verify.json"
        load_before = os.getloadavg()[0]
        began = time.perf_counter()
        verify = subprocess.run(
            [
                sys.executable,
                "-m",
                "mtp_audit",
                "verify",
                str(tree),
                "--all",
                "--tp",
                options.tp,
                "--json",
                str(report),
                "--quiet",
            ],
            env={**os.environ, "NO_COLOR": "1"},
            capture_output=True,
            text=True,
            check=False,
        )
        total = time.perf_counter() - began
        if not report.exists():
            sys.exit(f"verify wrote no report (exit {verify.returncode}): {verify.stderr.strip()[-2000:]}")
        data = json.loads(report.read_text())
    results = data["results"]
    print(
        f"vLLM {options.vllm_version} after fix --all: verify --all --tp {options.tp}: {total:.1f} s in all "
        f"(exit {verify.returncode}, {os.cpu_count()} CPUs, load average {load_before:.1f} before, "
        f"{os.getloadavg()[0]:.1f} after)"
    )
    print(data["summary"])
    records = sorted({(r["arch"], r["module"], r["class"]) for r in results})
    compared = {(r["arch"], r["module"], r["class"]) for r in results if r["verdict"] != "not verified"}
    everywhere = [
        key
        for key in records
        if all(r["verdict"] != "not verified" for r in results if (r["arch"], r["module"], r["class"]) == key)
    ]
    print(
        f"coverage: tensors compared for {len(compared)}/{len(records)} records "
        f"({100 * len(compared) / max(len(records), 1):.0f}%), at every TP size for {len(everywhere)}"
    )
    blocked = Counter(r["reason"] for r in results if r["verdict"] == "not verified")
    for reason, count in blocked.most_common():
        print(f"  not verified ({count}): {reason}")
    for tp in sorted({r["tp"] for r in results}):
        rows = [r for r in results if r["tp"] == tp]
        per_class = {(r["module"], r["class"]): r["seconds"] for r in rows}
        costs = sorted(per_class.values())
        slowest = sorted(per_class.items(), key=lambda item: -item[1])[:3]
        print(
            f"TP {tp}: set-up {rows[0]['set_up_s']:.1f} s; then {len(costs)} classes in {sum(costs):.1f} s: "
            f"median {statistics.median(costs):.2f} s, max {costs[-1]:.2f} s per class; slowest: "
            + ", ".join(f"{cls} {seconds:.1f} s" for (_, cls), seconds in slowest)
        )


if __name__ == "__main__":
    main()
