"""The verify report: one row per drafter, TP size and case group."""

from __future__ import annotations

from collections import defaultdict

from rich.table import Table

from ..verify.run import TargetOutcome

STYLE = {"pass": "green", "MISMATCH": "bold red", "not verified": "yellow"}


def render_verify(outcomes: list[TargetOutcome], console) -> None:
    table = Table(title="mtp-audit verify: get_top_tokens vs compute_logits(...).argmax(-1)", title_justify="left",
                  expand=True)
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
        if outcome.verdict != "pass" or not groups:
            table.add_row(*head, "-", "-", "-", f"[{style}]{outcome.verdict}[/]", outcome.detail)
            continue
        for (dtype, case), cases in groups.items():
            rows = sum(c["batch"] for c in cases)
            table.add_row(*head, dtype, case, str(rows), f"[{style}]pass[/]",
                          f"batches {sorted({c['batch'] for c in cases})}"
                          + (f", steps {sorted({c['step'] for c in cases})}" if cases[0]["step"] is not None else ""))
    console.print(table)
