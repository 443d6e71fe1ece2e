"""``mtp-audit verify``: plan from the static analysis, run the workers, judge, report.

This side never imports torch or vLLM; the workers do, one process per TP
rank (gloo on CPU, NCCL when CUDA is there), with the vLLM tree under test
first on ``PYTHONPATH``. Each worker imports vLLM once and runs every target;
records that use the same class definition share one target.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UsageError
from ..lifecycle import die_with_parent, scratch_directory
from ..model import DrafterRecord, SourceTree, Status, StrEnum
from .constants import FOREIGN_VLLM_EXIT, HIDDEN, MAX_VARIANTS, NOT_RUN_AS_CALLED, WORKER_TIMEOUT_S


class Verdict(StrEnum):
    """What verify concludes of one drafter at one TP size (and of each configuration it built)."""

    PASS = "pass"
    MISMATCH = "MISMATCH"
    NOT_VERIFIED = "not verified"


@dataclass
class TargetOutcome:
    record: DrafterRecord
    tp: int | None = None
    verdict: Verdict = Verdict.NOT_VERIFIED
    detail: str = ""
    cases: list[dict] = field(default_factory=list)  # rank 0's compared cases, every variant
    recipe: list[dict] | None = None
    variants: list[dict] = field(default_factory=list)  # {"variant", "verdict", "detail", "rows"}
    forms: list[str] = field(default_factory=list)
    seconds: float = 0.0  # rank 0's time on this drafter's class (shared by records of one class)
    set_up_s: float = 0.0  # rank 0's vLLM import and distributed set-up, once per TP size
    not_run: list[str] = field(default_factory=list)  # configurations past MAX_VARIANTS, by their choices
    not_taken: list[str] = field(default_factory=list)  # config branches of the two methods no configuration took


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


def call_forms(records: list[DrafterRecord]) -> list[dict]:
    """The call forms of every caller of these records (one class definition); [] lets the
    worker use the default forms. A caller that never calls get_top_tokens adds none."""
    forms: dict[tuple, dict] = {}
    for record in records:
        for caller in record.callers:
            if caller.get_top_tokens_args is None:
                continue
            key = (tuple(caller.get_top_tokens_args), tuple(caller.compute_logits_args or ()))
            label = f"{caller.speculator} ({Path(caller.file).name}:{caller.line})"
            if key in forms:
                if label not in forms[key]["label"]:
                    forms[key]["label"] += f", {label}"
                continue
            forms[key] = {
                "label": label,
                "get_top_tokens": list(caller.get_top_tokens_args),
                "compute_logits": list(caller.compute_logits_args) if caller.compute_logits_args is not None else None,
            }
    return list(forms.values())


def worker_path(root: Path, inherited: str) -> str:
    """PYTHONPATH of a worker: the tree under test first, then the mtp_audit this process runs (the
    worker is started from an empty folder), then what was set already; no empty entry, which would
    put the current directory, and any vLLM in it, on the path."""
    ours = str(Path(__file__).resolve().parents[2])
    entries = [str(root), ours, *inherited.split(os.pathsep)]
    return os.pathsep.join(dict.fromkeys(entry for entry in entries if entry))


def worker_interpreter() -> list[str]:
    """``python -m``, without the working directory at the front of ``sys.path`` where Python can
    leave it off (``-P``, 3.11+); before that the worker's working directory is the scratch folder."""
    return [sys.executable, *(["-P"] if sys.version_info >= (3, 11) else []), "-m"]


def run_workers(
    tree: SourceTree,
    targets: list[dict],
    tp: int,
    scratch: Path,
    advance: Callable[[int], None] | None = None,
    timeout_s: float = WORKER_TIMEOUT_S,
) -> list[dict]:
    plan = scratch / "plan.json"
    progress = scratch / "progress"
    plan.write_text(json.dumps({"targets": targets, "progress": str(progress), "root": str(tree.root)}))
    env = {
        **os.environ,
        "PYTHONPATH": worker_path(tree.root, os.environ.get("PYTHONPATH", "")),
        "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        "PYTHONUNBUFFERED": "1",
    }
    port = _free_port()
    processes = []
    for rank in range(tp):
        out = scratch / f"rank{rank}.json"
        log = (scratch / f"rank{rank}.log").open("w")
        command = [*worker_interpreter(), "mtp_audit.verify.worker", str(plan), str(rank), str(tp), str(port), str(out)]
        processes.append(
            (
                subprocess.Popen(
                    command,
                    cwd=scratch,
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    preexec_fn=functools.partial(die_with_parent, os.getpid()),
                ),
                out,
                log,
            )
        )
    try:
        return _collect(processes, progress, advance, scratch, tp, len(targets), timeout_s)
    finally:  # on a timeout, a failed rank or Ctrl-C: no worker left running, no log left open
        for process, _, log in processes:
            if process.poll() is None:
                process.kill()
            process.wait()
            log.close()


def _collect(processes, progress: Path, advance, scratch: Path, tp: int, total: int, timeout_s: float) -> list[dict]:
    """Each rank's results, once every rank has exited; past ``timeout_s``, a UsageError."""
    deadline = time.monotonic() + timeout_s
    done = 0
    while any(process.poll() is None for process, _, _ in processes):
        done = _advance(progress, done, advance)
        if time.monotonic() > deadline:
            raise UsageError(
                f"verify workers did not finish in {timeout_s:g} s (TP {tp}; {done} of {total} drafter "
                "classes done): raise --timeout, or verify fewer drafters with --model"
            )
        time.sleep(0.1)
    _advance(progress, done, advance)
    outputs = []
    for process, out, log in processes:
        log.close()
        if process.returncode != 0 or not out.exists():
            text = (scratch / out.name.replace(".json", ".log")).read_text(errors="replace").strip().splitlines()
            tail = " | ".join(text[-3:]) if text else "no output"
            if process.returncode == FOREIGN_VLLM_EXIT:
                raise UsageError(f"verify refused to run (TP {tp}): {text[-1] if text else 'no output'}")
            raise UsageError(
                f"the verify worker could not run vLLM here (TP {tp}, exit {process.returncode}): "
                f"{tail}. Install the verify extra (pip install 'mtp-audit[verify]') or fix the "
                "import error."
            )
        outputs.append(json.loads(out.read_text()))
    return outputs


def _advance(progress: Path, done: int, advance: Callable[[int], None] | None) -> int:
    """How many targets rank 0 has finished; those since the last look reported to ``advance``."""
    if not progress.exists():
        return done
    now = len(progress.read_text().split())
    if advance is not None and now > done:
        advance(now - done)
    return now


def judge(record: DrafterRecord, tp: int, ranks: list[dict], index: int) -> TargetOutcome:
    """Every variant on every rank: a mismatch anywhere is a mismatch; a pass needs compared tensors."""
    outcome = TargetOutcome(
        record, tp, seconds=ranks[0]["results"][index].get("seconds", 0.0), set_up_s=ranks[0].get("set_up_s", 0.0)
    )
    results = [r["results"][index] for r in ranks]
    reasons = [r["not_verified"] for r in results if r["not_verified"]]
    if reasons:
        outcome.detail = reasons[0]
        return outcome
    outcome.recipe = results[0]["recipe"]
    mismatches = []
    for position, variant in enumerate(results[0]["variants"]):
        others = [r["variants"][position] for r in results[1:] if position < len(r["variants"])]
        if len(others) != len(results) - 1 or any(len(o["cases"]) != len(variant["cases"]) for o in others):
            summary = {
                "variant": variant["variant"],
                "verdict": Verdict.MISMATCH,
                "kind": "ranks",
                "rows": 0,
                "detail": "TP ranks ran different cases (one rank failed where another did not)",
            }
        else:
            summary = _judge_variant(variant, others)
        outcome.variants.append(summary)
        outcome.forms = sorted({c["form"] for c in variant["cases"]} | set(outcome.forms))
        if summary["verdict"] == Verdict.MISMATCH:
            mismatches.append(summary)
        elif summary["verdict"] == Verdict.PASS:
            outcome.cases.extend(c for c in variant["cases"] if c["kind"] == "tokens")
    ran = [v for v in outcome.variants if v["verdict"] != Verdict.NOT_VERIFIED]
    unbuilt = [v for v in outcome.variants if v["verdict"] == Verdict.NOT_VERIFIED]
    tail = "".join(dict.fromkeys(f"; not run: {v['variant']}: {v['detail']}" for v in unbuilt))
    if mismatches:
        outcome.verdict = Verdict.MISMATCH
        outcome.detail = "; ".join(f"[{m['variant']}] {m['detail']}" for m in mismatches)
        return outcome
    unreproduced = results[0].get("unreproduced") or []
    if unreproduced:  # a form not run as called proves nothing of it, whatever the others did
        ran_too = f"; the other call forms ran: {_ran(outcome, ran, results[0]['variants'])}" if outcome.cases else ""
        outcome.detail = NOT_RUN_AS_CALLED + "; ".join(unreproduced) + ran_too + tail
        return outcome
    if not ran:
        ops = results[0].get("ops") or []
        outcome.detail = (
            f"custom op(s) {', '.join(ops)} in compute_logits, with no implementation that runs on this machine; "
            if ops
            else ""
        )
        blocked = dict.fromkeys(f"[{v['variant']}] {v['detail']}" for v in unbuilt)
        outcome.detail += "; ".join(blocked) or "no variant ran"
        return outcome
    outcome.not_run = results[0].get("left_out") or []
    outcome.not_taken = results[0].get("not_taken") or []
    unexplored = _unexplored(outcome)
    if unexplored:  # a pass would claim configurations or branches that never ran
        outcome.detail = (
            unexplored + "; the configurations that ran: " + _ran(outcome, ran, results[0]["variants"]) + tail
        )
        return outcome
    outcome.verdict = Verdict.PASS
    outcome.detail = _ran(outcome, ran, results[0]["variants"]) + tail
    return outcome


def _unexplored(outcome: TargetOutcome) -> str:
    """What the configurations run left out: configurations past the cap, branches no value tried took."""
    parts = []
    if outcome.not_run:
        parts.append(
            f"{len(outcome.not_run)} configuration(s) not run, past the cap of {MAX_VARIANTS}: "
            + " | ".join(outcome.not_run)
        )
    if outcome.not_taken:
        parts.append("branch(es) no configuration took: " + "; ".join(outcome.not_taken))
    return "; ".join(parts)


def _ran(outcome: TargetOutcome, ran: list[dict], variants: list[dict]) -> str:
    """What the configurations that ran compared: rows, cases, their names and scope."""
    widths = sorted({c.get("width", HIDDEN) for c in outcome.cases} - {HIDDEN})
    shape = "".join(f"; hidden states of {w} values a row, as compute_logits reshapes them" for w in widths)
    scope_notes = "".join(
        dict.fromkeys(
            f"; {note}"
            for position, variant in enumerate(variants)
            if outcome.variants[position]["verdict"] == Verdict.PASS
            for note in variant.get("scope", [])
        )
    )
    return (
        f"{sum(c['batch'] for c in outcome.cases)} rows in {len(outcome.cases)} cases; "
        f"{len(ran)} configuration(s): " + " | ".join(v["variant"] for v in ran) + shape + scope_notes
    )


def _judge_variant(variant: dict, others: list[dict]) -> dict:
    """The first mismatch of each call form (a TypeError in one form does not hide the tensors of another)."""
    summary = {
        "variant": variant["variant"],
        "verdict": Verdict.NOT_VERIFIED,
        "rows": 0,
        "detail": "; ".join(variant["notes"]) or "no case ran",
    }
    found: dict[str, str] = {}
    for position, case in enumerate(variant["cases"]):
        ids = [case["ids"], *(o["cases"][position]["ids"] for o in others)]
        if case["mismatch"]:
            found.setdefault(case["form"], _describe(case))
        elif any(other != ids[0] for other in ids[1:]):
            found.setdefault(
                case["form"], f"{_label(case)}: TP ranks returned different ids ({ids[0][:4]} vs {ids[1][:4]} ...)"
            )
    compared = [c for c in variant["cases"] if c["kind"] == "tokens" and c["has_logits"]]
    rows = sum(c["batch"] for c in compared)
    if found:
        return {
            **summary,
            "verdict": Verdict.MISMATCH,
            "rows": rows,
            "detail": "; ".join(found.values()) + f" ({len(compared)} cases compared tensors)",
        }
    if compared and len(compared) == len([c for c in variant["cases"] if c["kind"] == "tokens"]):
        notes = f"; {summary['detail']}" if variant["notes"] else ""
        return {**summary, "verdict": Verdict.PASS, "rows": rows, "detail": f"{len(compared)} cases{notes}"}
    if variant["cases"] and not compared:
        summary["detail"] = "rank 0 got no logits to compare with"
    return summary


def _label(case: dict) -> str:
    step = "" if case["step"] is None else f", spec_step_idx={case['step']}"
    passed = case.get("steps_passed") or [case["step"]] * 2
    if passed[0] != passed[1]:  # the caller computes another step for one call (spec_step_idx + 1)
        step += f" (compute_logits gets {passed[0]}, get_top_tokens {passed[1]})"
    return f"{case['dtype']} {case['case']} batch={case['batch']}{step} ({case['form']})"


def _describe(case: dict) -> str:
    found = case["mismatch"]
    if "row" not in found:
        return f"{_label(case)}: {found['detail']}"
    got = found["get_top_tokens_logit"]
    where = f"logit {got:.6g}" if got is not None else f"outside compute_logits' {found['vocab']} ids"
    return (
        f"{_label(case)}: row {found['row']}: compute_logits(...).argmax(-1) = {found['argmax_id']} "
        f"(logit {found['argmax_logit']:.6g}), get_top_tokens = {found['get_top_tokens_id']} "
        f"({where}); {found['rows']} row(s) differ"
    )


@dataclass
class Progress:
    """What the caller shows while workers run: ``start(tp, total)``, then ``advance(n)``."""

    start: Callable[[int, int], None]
    advance: Callable[[int], None]


def _next_step(record: DrafterRecord) -> str:
    """What to do for a drafter without a method: fix writes only a missing_fixable one's."""
    if record.status == Status.MISSING_FIXABLE:
        return f"run `mtp-audit fix --model {record.arch or record.cls}` first"
    if record.status == Status.NOT_APPLICABLE:
        return "none is needed: no speculator calls one"
    return "fix writes none here: write it by hand, then verify it"


def verify(
    tree: SourceTree,
    records: list[DrafterRecord],
    tps: list[int],
    progress: Progress | None = None,
    timeout_s: float = WORKER_TIMEOUT_S,
) -> list[TargetOutcome]:
    check_environment()
    outcomes: list[TargetOutcome] = []
    groups: dict[tuple[str, str], list[DrafterRecord]] = {}
    for record in records:
        if record.status != Status.SUPPORTED:
            outcomes.append(
                TargetOutcome(
                    record,
                    detail=f"no get_top_tokens to verify ({record.status.value}: {record.reason}); "
                    + _next_step(record),
                )
            )
        else:
            groups.setdefault((record.module, record.cls), []).append(record)
    targets = [
        {"module": module, "cls": cls, "forms": call_forms(members)} for (module, cls), members in groups.items()
    ]
    if not targets:
        return outcomes
    with scratch_directory("mtp-audit-verify-") as scratch:
        for tp in tps:
            folder = Path(scratch) / f"tp{tp}"
            folder.mkdir()
            if progress is not None:
                progress.start(tp, len(targets))
            ranks = run_workers(tree, targets, tp, folder, progress.advance if progress else None, timeout_s)
            for index, members in enumerate(groups.values()):
                outcomes.extend(judge(record, tp, ranks, index) for record in members)
    order = {id(r): i for i, r in enumerate(records)}
    return sorted(outcomes, key=lambda o: (order[id(o.record)], o.tp or 0))


def reason_kind(outcome: TargetOutcome) -> str:
    """A short, countable name for why an outcome is not verified (the summary line groups by it)."""
    detail = outcome.detail
    match = re.match(r"importing \S+ failed: (\w+): (.*?)(?: \((at [^)]*)\))?$", detail, re.DOTALL)
    if match:
        message = re.sub(r"\s+", " ", match.group(2))[:70]
        return f"import {match.group(1)}: {message}" + (f" ({match.group(3)})" if match.group(3) else "")
    if outcome.not_run:
        return f"configurations past the cap of {MAX_VARIANTS}"
    if outcome.not_taken:
        return "a config branch no configuration took"
    match = re.match(r"custom op\(s\) (.*?) in compute_logits", detail)
    if match:
        return f"custom op {match.group(1)}"
    match = re.search(r"cannot build (\S+)", detail)
    if match:
        return f"cannot build {match.group(1)}"
    if detail.startswith("no get_top_tokens"):
        return "no get_top_tokens"
    if detail.startswith(NOT_RUN_AS_CALLED):
        return "a caller's argument only its run time holds"
    return re.sub(r"\s+", " ", detail)[:80]


def summary_line(outcomes: list[TargetOutcome]) -> str:
    """passed / mismatched / not verified (by reason), counted per record and TP size."""
    verdicts = Counter(o.verdict for o in outcomes)
    reasons = Counter(reason_kind(o) for o in outcomes if o.verdict == Verdict.NOT_VERIFIED)
    line = (
        f"{len(outcomes)} results: {verdicts[Verdict.PASS]} passed, {verdicts[Verdict.MISMATCH]} mismatched, "
        f"{verdicts[Verdict.NOT_VERIFIED]} not verified"
    )
    if reasons:
        line += " (" + "; ".join(f"{count} {reason}" for reason, count in reasons.most_common()) + ")"
    return line


def outcomes_json(outcomes: list[TargetOutcome]) -> list[dict]:
    """The verify results as plain data (``verify --json``, read back by ``fix --pr-body``)."""
    return [
        {
            "arch": o.record.arch,
            "class": o.record.cls,
            "module": o.record.module,
            "platforms": o.record.platforms,
            "tp": o.tp,
            "verdict": o.verdict,
            "detail": o.detail,
            "cases": len(o.cases),
            "rows": sum(c["batch"] for c in o.cases),
            "forms": o.forms,
            "variants": o.variants,
            "configurations_not_run": o.not_run,
            "branches_not_taken": o.not_taken,
            "reason": reason_kind(o) if o.verdict == Verdict.NOT_VERIFIED else None,
            "seconds": round(o.seconds, 3),
            "set_up_s": round(o.set_up_s, 3),
        }
        for o in outcomes
    ]
