"""``mtp-audit verify``: plan from the static analysis, run the workers, judge, report.

This side never imports torch or vLLM; the workers do, one process per TP
rank (gloo on CPU, NCCL when CUDA is there), with the vLLM tree under test
first on ``PYTHONPATH``.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..lifecycle import die_with_parent
from ..model import DrafterRecord, SourceTree, Status

WORKER_TIMEOUT_S = 600


@dataclass
class TargetOutcome:
    record: DrafterRecord
    tp: int | None = None
    verdict: str = "not verified"  # "pass", "MISMATCH", "not verified"
    detail: str = ""
    cases: list[dict] = field(default_factory=list)  # rank 0's case records
    recipe: list[dict] | None = None


def check_environment() -> None:
    missing = [name for name in ("torch",) if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(
            f"verify needs {', '.join(missing)} in this Python ({sys.executable}); install the extra: "
            "pip install 'mtp-audit[verify]' (a CPU torch; vLLM itself comes from PATH or the installed package)"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_workers(tree: SourceTree, targets: list[dict], tp: int, scratch: Path) -> list[dict]:
    plan = scratch / "plan.json"
    plan.write_text(json.dumps({"targets": targets}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree.root), os.environ.get("PYTHONPATH", "")]),
           "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"), "PYTHONUNBUFFERED": "1"}
    port = _free_port()
    processes = []
    for rank in range(tp):
        out = scratch / f"rank{rank}.json"
        log = (scratch / f"rank{rank}.log").open("w")
        command = [sys.executable, "-m", "mtp_audit.verify.worker", str(plan), str(rank), str(tp), str(port), str(out)]
        processes.append((subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            preexec_fn=functools.partial(die_with_parent, os.getpid())), out, log))
    outputs = []
    for process, out, log in processes:
        try:
            code = process.wait(timeout=WORKER_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            for other, _, _ in processes:
                other.kill()
            raise UsageError(f"verify workers did not finish in {WORKER_TIMEOUT_S} s (TP {tp})") from None
        log.close()
        if code != 0 or not out.exists():
            text = (scratch / out.name.replace(".json", ".log")).read_text(errors="replace").strip().splitlines()
            tail = " | ".join(text[-3:]) if text else "no output"
            raise UsageError(f"the verify worker could not run vLLM here (TP {tp}, exit {code}): {tail}. "
                             "Install the verify extra (pip install 'mtp-audit[verify]') or fix the import error.")
        outputs.append(json.loads(out.read_text()))
    return outputs


def judge(record: DrafterRecord, tp: int, ranks: list[dict], index: int) -> TargetOutcome:
    outcome = TargetOutcome(record, tp)
    results = [r["results"][index] for r in ranks]
    reasons = [r["not_verified"] for r in results if r["not_verified"]]
    if reasons:
        outcome.detail = reasons[0]
        return outcome
    outcome.cases = results[0]["cases"]
    outcome.recipe = results[0]["recipe"]
    for position, case in enumerate(outcome.cases):
        if case["mismatch"]:
            outcome.verdict, outcome.detail = "MISMATCH", _describe(case)
            return outcome
        ids = [r["cases"][position]["ids"] for r in results]
        if any(other != ids[0] for other in ids[1:]):
            outcome.verdict = "MISMATCH"
            outcome.detail = f"{_label(case)}: TP ranks returned different ids ({ids[0][:4]} vs {ids[1][:4]} ...)"
            return outcome
    if not outcome.cases or not all(c["has_logits"] for c in outcome.cases):
        outcome.detail = "rank 0 got no logits to compare with"
        return outcome
    outcome.verdict = "pass"
    outcome.detail = f"{sum(c['batch'] for c in outcome.cases)} rows in {len(outcome.cases)} cases"
    return outcome


def _label(case: dict) -> str:
    step = "" if case["step"] is None else f", spec_step_idx={case['step']}"
    return f"{case['dtype']} {case['case']} batch={case['batch']}{step}"


def _describe(case: dict) -> str:
    found = case["mismatch"]
    if "row" not in found:
        return f"{_label(case)}: {found['detail']}"
    return (f"{_label(case)}: row {found['row']}: compute_logits(...).argmax(-1) = {found['argmax_id']} "
            f"(logit {found['argmax_logit']:.6g}), get_top_tokens = {found['get_top_tokens_id']} "
            f"(logit {found['get_top_tokens_logit']:.6g}); {found['rows']} row(s) differ")


def verify(tree: SourceTree, records: list[DrafterRecord], tps: list[int]) -> list[TargetOutcome]:
    check_environment()
    outcomes: list[TargetOutcome] = []
    runnable: list[DrafterRecord] = []
    for record in records:
        if record.status != Status.SUPPORTED:
            outcomes.append(TargetOutcome(record, detail=f"no get_top_tokens to verify ({record.status.value}: "
                                                        f"{record.reason}); run `mtp-audit fix` first"))
        else:
            runnable.append(record)
    targets = [{"module": r.module, "cls": r.cls, "arch": r.arch} for r in runnable]
    if not targets:
        return outcomes
    with tempfile.TemporaryDirectory(prefix="mtp-audit-verify-") as scratch:
        for tp in tps:
            folder = Path(scratch) / f"tp{tp}"
            folder.mkdir()
            ranks = run_workers(tree, targets, tp, folder)
            outcomes.extend(judge(record, tp, ranks, index) for index, record in enumerate(runnable))
    return outcomes


def outcomes_json(outcomes: list[TargetOutcome]) -> list[dict]:
    """The verify results as plain data (``verify --json``, read back by ``fix --pr-body``)."""
    return [{
        "arch": o.record.arch, "class": o.record.cls, "platforms": o.record.platforms, "tp": o.tp,
        "verdict": o.verdict, "detail": o.detail, "cases": len(o.cases),
        "rows": sum(c["batch"] for c in o.cases),
    } for o in outcomes]
