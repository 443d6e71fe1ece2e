"""What ``fix`` did, on stderr: one line per drafter (the detail wrapped below it), the files, a total."""

from __future__ import annotations

from ..apply.plan import Action
from ..apply.result import FixResult
from ..model import Consistency, DrafterRecord, Status
from .concise import INDENT, Line, _wrap, platforms_text, print_concise

LABEL = {
    Action.FIX: ("fixed", "would fix"),
    Action.SUPPORTED: ("already supported",) * 2,
    Action.SKIPPED: ("skipped",) * 2,
    Action.REFUSED: ("refused",) * 2,
}
STYLE = {"fixed": "green", "would fix": "green", "already supported": "dim", "skipped": "dim", "refused": "red"}


def fix_summary_lines(result: FixResult, written: bool, width: int | None) -> list[Line]:
    lines: list[Line] = []
    for outcome in result.plan.outcomes:
        label = LABEL[outcome.action][0 if written else 1]
        r = outcome.record
        name = (r.arch or "(unregistered)") + (f" ({r.cls})" if r.cls != r.arch else "")
        first, *rest = _wrap(f"{label}: {name} [{platforms_text(r.platforms)}]", width)
        lines.append(Line(first, label))
        lines += [Line(t) for t in rest]
        if outcome.action != Action.SUPPORTED:
            lines += [Line(t) for t in _wrap(outcome.reason, width, INDENT)]
    verb = "wrote" if written else "would write"
    for rewrite in result.rewrites:
        extra = " and `import torch`" if rewrite.added_import else ""
        lines += [
            Line(t)
            for t in _wrap(f"{verb} {rewrite.path}: get_top_tokens in {', '.join(rewrite.classes)}{extra}", width)
        ]
    for note in result.placement_notes:
        lines += [Line(t) for t in _wrap(f"placement: {note}", width)]
    for inheritor in result.inheritors:
        where = f"{inheritor.file}:{inheritor.cls.line}"
        lines += [
            Line(t)
            for t in _wrap(
                f"blast radius: {inheritor.cls.name} ({where}, {inheritor.role}) inherits "
                f"get_top_tokens from {inheritor.base.name} on {','.join(inheritor.platforms)}: {inheritor.result}",
                width,
            )
        ]
    return lines + [Line(t) for t in _wrap(fix_total(result, written), width, hanging="")]


def fix_total(result: FixResult, written: bool) -> str:
    """``fix: wrote 57 methods into 41 files; 1 refused (NemotronHMTPModel: blast radius); ...``."""
    methods = sum(len(rewrite.classes) for rewrite in result.rewrites)
    files = len(result.rewrites)
    verb = "wrote" if written else "would write"
    parts = [f"{verb} {methods} method{'s' * (methods != 1)} into {files} file{'s' * (files != 1)}"]
    # a drafter refused on several platforms' records (one per file) is one refusal, with each of its reasons
    refused: dict[str, dict[str, None]] = {}
    for o in result.plan.outcomes:
        if o.action == Action.REFUSED:
            refused.setdefault(o.record.arch or o.record.cls, {})[o.reason.split(":", 1)[0]] = None
    named = [f"{drafter}: {' and '.join(reasons)}" for drafter, reasons in refused.items()]
    parts.append(f"{len(refused)} refused" + (f" ({', '.join(named)})" if named else ""))
    for action, label in ((Action.SKIPPED, "skipped (not_applicable)"), (Action.SUPPORTED, "already supported")):
        count = sum(o.action == action for o in result.plan.outcomes)
        if count:
            parts.append(f"{count} {label}")
    if result.left:
        manual = sum(r.status == Status.MISSING_MANUAL for r in result.left)
        kinds = []
        if manual:
            kinds.append(f"{manual} missing_manual")
        if manual < len(result.left):
            kinds.append(f"{len(result.left) - manual} divergent")
        parts.append(f"left for a human: {', '.join(kinds)} (`mtp-audit scan` says why)")
    if result.untouched:
        parts.append(f"not touched: {untouched_counts(result.untouched)}")
    if result.unresolved:
        archs = ", ".join(sorted({u.arch or u.cls for u in result.unresolved}))
        parts.append(f"not resolved to a class, so not judged: {archs} (`mtp-audit scan` says why)")
    return "fix: " + "; ".join(parts) + "."


def untouched_counts(records: list[DrafterRecord]) -> str:
    """``33 supported, 2 unproven (`mtp-audit verify` decides), 13 not_applicable``."""
    unproven = sum(r.consistency == Consistency.UNPROVEN for r in records)
    supported = sum(r.status == Status.SUPPORTED for r in records) - unproven
    not_applicable = sum(r.status == Status.NOT_APPLICABLE for r in records)
    counts = [
        f"{supported} supported" if supported else "",
        f"{unproven} unproven (`mtp-audit verify` decides)" if unproven else "",
        f"{not_applicable} not_applicable" if not_applicable else "",
    ]
    return ", ".join(c for c in counts if c)


def render_fix_summary(result: FixResult, console, written: bool, width: int | None) -> None:
    print_concise(fix_summary_lines(result, written, width), console, STYLE)
