"""The verify report: one row per drafter, TP size and case group."""

from __future__ import annotations

import sys
from collections import defaultdict
from contextlib import contextmanager

from rich.progress import BarColumn, MofNCompleteColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table

from ..verify.run import Progress, TargetOutcome, Verdict

STYLE = {Verdict.PASS: "green", Verdict.MISMATCH: "bold red", Verdict.NOT_VERIFIED: "yellow"}


def render_verify(outcomes: list[TargetOutcome], console, detailed: bool = True) -> None:
    """One row per drafter and TP size; ``detailed`` splits a pass into its dtype and case groups."""
    table = Table(
        title="mtp-audit verify: get_top_tokens vs compute_logits(...).argmax(-1)", title_justify="left", expand=True
    )
    for column in ("arch", "class", "platforms", "TP", "dtype", "case", "rows", "result"):
        table.add_column(column, overflow="fold")
    table.add_column("detail", overflow="fold", ratio=2)
    for outcome in outcomes:
        record = outcome.record
        head = [record.arch or "(unregistered)", record.cls, ",".join(record.platforms), str(outcome.tp or "-")]
        groups: dict[tuple, list[dict]] = defaultdict(list)
        for case in outcome.cases:
            groups[(case["dtype"], case["case"])].append(case)
        style = STYLE[outcome.verdict]
        if outcome.verdict != Verdict.PASS or not groups or not detailed:
            rows = str(sum(c["batch"] for c in outcome.cases)) if outcome.cases else "-"
            table.add_row(*head, "-", "-", rows, f"[{style}]{outcome.verdict}[/]", outcome.detail)
            continue
        passing = " | ".join(v["variant"] for v in outcome.variants if v["verdict"] == Verdict.PASS)
        for (dtype, case), cases in groups.items():
            rows = sum(c["batch"] for c in cases)
            table.add_row(
                *head,
                dtype,
                case,
                str(rows),
                f"[{style}]pass[/]",
                f"batches {sorted({c['batch'] for c in cases})}"
                + (
                    f", steps {sorted({c['step'] for c in cases if c['step'] is not None})}"
                    if any(c["step"] is not None for c in cases)
                    else ""
                )
                + f"; configurations: {passing}",
            )
    console.print(table)


@contextmanager
def verify_progress(console, quiet: bool):
    """A rich progress bar on a terminal, plain lines in a log, nothing when quiet."""
    if quiet:
        yield None
        return
    if not console.is_terminal or not sys.stderr.isatty():
        counts = {"tp": 0, "done": 0, "total": 0}

        def start(tp: int, total: int) -> None:
            counts.update(tp=tp, done=0, total=total)
            print(f"mtp-audit verify: TP {tp}: importing vLLM, then {total} drafter classes", file=sys.stderr)

        def advance(count: int) -> None:
            counts["done"] += count
            print(f"mtp-audit verify: TP {counts['tp']}: {counts['done']}/{counts['total']}", file=sys.stderr)

        yield Progress(start, advance)
        return
    bar = RichProgress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = {"id": None}

    def start_bar(tp: int, total: int) -> None:
        if task["id"] is not None:
            bar.update(task["id"], completed=bar.tasks[task["id"]].total)
        task["id"] = bar.add_task(f"verify TP {tp}", total=total)

    with bar:
        yield Progress(start_bar, lambda count: bar.advance(task["id"], count))
