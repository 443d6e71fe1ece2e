"""The default terminal report, in the style of ruff and mypy.

One line per finding, ``path:line: label arch (class) [platforms]``, grouped by
label, most severe first, ending with a summary line. Records that need no
action (``mirror``, ``equivalent``) are counted, not listed, unless asked for.
Reasons go below their line, indented, as long as the whole report stays
within a line budget; past it, whole groups' reasons are left to ``--verbose``
(missing_fixable first), and the report says so.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass

from ..model import PLATFORMS, DrafterRecord, ScanResult, Status
from ..templating import counted
from .callers import describe_caller

# Most severe first; the order groups are printed in.
ORDER = (
    "divergent",
    "missing_manual",
    "unproven",
    "missing_fixable",
    "not_applicable",
    "supported",
    "mirror",
    "equivalent",
)
# Whose reasons are dropped first when the report is over budget: a missing_fixable reason only
# describes the mirror that fix writes; the others say what a person must decide.
REASON_PRIORITY = (
    "divergent",
    "missing_manual",
    "unproven",
    "not_applicable",
    "missing_fixable",
    "supported",
    "mirror",
    "equivalent",
)
COLLAPSED = frozenset({"supported", "mirror", "equivalent"})
HINT = {
    "divergent": "get_top_tokens selects other tokens than compute_logits",
    "missing_manual": "no safe mirror: get_top_tokens must be written by hand",
    "unproven": "cannot be decided statically; `mtp-audit verify` can",
    "missing_fixable": "`mtp-audit fix --model NAME` writes the mirror",
    "not_applicable": "nothing to mirror, or never called",
    "supported": "get_top_tokens present",
    "mirror": "get_top_tokens mirrors compute_logits",
    "equivalent": "a recognised equivalent of compute_logits",
}
STYLE = {
    "divergent": "bold red",
    "missing_manual": "red",
    "unproven": "yellow",
    "missing_fixable": "yellow",
    "not_applicable": "dim",
    "supported": "green",
    "mirror": "green",
    "equivalent": "green",
}
LINE_BUDGET = 140
INDENT = "    "


@dataclass(frozen=True)
class Line:
    text: str
    label: str | None = None  # the word to colour, when the line names one


def label_of(record: DrafterRecord) -> str:
    """The status, or for a supported record its consistency (what ``--fail-on`` names)."""
    if record.status == Status.SUPPORTED and record.consistency is not None:
        return record.consistency.value
    return record.status.value


def state_of(record: DrafterRecord) -> str:
    """``status[/consistency]``: what ``--compare`` and ``--by-model-type`` list for a record."""
    return record.status.value + (f"/{record.consistency.value}" if record.consistency else "")


def style_of_state(state: str) -> str:
    """A ``state_of`` label's colour: its consistency's where it has one (as ``label_of`` picks), else its
    status's; none for a word the report table does not know."""
    return STYLE.get(state.rpartition("/")[2], "")


def platforms_text(platforms: list[str]) -> str:
    return "all" if set(platforms) == set(PLATFORMS) else ",".join(platforms)


def headline(record: DrafterRecord) -> str:
    name = record.arch or "(unregistered)"
    if record.cls != record.arch:
        name += f" ({record.cls})"
    return f"{record.file}:{record.line}: {label_of(record)} {name} [{platforms_text(record.platforms)}]"


def _wrap(text: str, width: int | None, indent: str = "", hanging: str = INDENT) -> list[str]:
    """Wrapped at spaces only (a path or a name is never broken); later lines indented by ``indent``
    or, when there is none, by ``hanging``."""
    if width is None:
        return [indent + text]
    return textwrap.wrap(
        text,
        width,
        initial_indent=indent,
        subsequent_indent=indent or hanging,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent]


def _refusal(result: ScanResult, record: DrafterRecord, width: int | None) -> list[str]:
    """The line that takes the group's advice back for a record ``fix`` refuses: never left out."""
    reason = result.refused_by_fix(record)
    return _wrap(f"no safe mirror: `fix` refuses it ({reason})", width, INDENT) if reason else []


def _hint(result: ScanResult, label: str, records: list[DrafterRecord]) -> str:
    refused = sum(result.refused_by_fix(r) is not None for r in records) if label == "missing_fixable" else 0
    return HINT[label] + (f", except for {refused} that it refuses (why, below each)" if refused else "")


def _details(record: DrafterRecord, width: int | None, verbose: bool) -> list[str]:
    lines = _wrap(record.reason, width, INDENT)
    if verbose:
        for caller in record.callers:
            lines += _wrap(describe_caller(caller), width, INDENT)
    return lines


def render_concise(
    result: ScanResult, width: int | None, verbose: bool = False, show_all: bool = False, budget: int = LINE_BUDGET
) -> list[Line]:
    groups: dict[str, list[DrafterRecord]] = {}
    for record in result.records:
        groups.setdefault(label_of(record), []).append(record)
    shown = [label for label in ORDER if groups.get(label) and (show_all or label not in COLLAPSED)]
    heads = {
        label: [
            Line(h, label)
            for record in groups[label]
            for h in _wrap(headline(record), width, hanging="  ") + _refusal(result, record, width)
        ]
        for label in shown
    }
    details = {label: {id(record): _details(record, width, verbose) for record in groups[label]} for label in shown}
    summary = _summary(result, groups, shown, width)
    total = sum(len(h) + 2 for h in heads.values()) + len(summary)  # a heading and a blank line per group
    with_reasons = set(shown)
    if not verbose:
        for label in sorted(shown, key=REASON_PRIORITY.index, reverse=True):
            if total + sum(len(d) for lbl in with_reasons for d in details[lbl].values()) <= budget:
                break
            with_reasons.discard(label)
    hidden = [label for label in shown if label not in with_reasons]
    out: list[Line] = []
    for label in shown:
        records = groups[label]
        out += [
            Line(t, label)
            for t in _wrap(f"{label} ({len(records)}): {_hint(result, label, records)}", width, hanging="")
        ]
        for record in records:
            first, *rest = _wrap(headline(record), width, hanging="  ")
            out.append(Line(first, label))
            out += [Line(t) for t in rest + _refusal(result, record, width)]
            if label in with_reasons:
                out += [Line(t) for t in details[label][id(record)]]
        out.append(Line(""))
    if hidden:
        note = f"Reasons of {', '.join(hidden)} records left out to keep this short: --verbose shows them."
        out += [Line(t) for t in _wrap(note, width, hanging="")]
    return out + summary


def _summary(
    result: ScanResult, groups: dict[str, list[DrafterRecord]], shown: list[str], width: int | None
) -> list[Line]:
    counts = Counter({label: len(records) for label, records in groups.items()})
    parts = [f"{counts[label]} {label}" for label in ORDER if counts[label]]
    version = f"vLLM {result.tree.vllm_version}" if result.tree.vllm_version else str(result.tree.root)
    count = len(result.records)
    text = f"{version}: {counted(count, 'record')}" + (f": {', '.join(parts)}" if parts else "")
    if result.unresolved:
        text += f"; {len(result.unresolved)} unresolved (see the warnings)"
    unlisted = [label for label in ORDER if counts[label] and label not in shown]
    if unlisted:
        text += f"; {', '.join(unlisted)} not listed (--show-all lists them)"
    return [Line(t) for t in _wrap(text + ".", width, hanging="")]


def print_concise(lines: list[Line], console, styles: dict[str, str] = STYLE) -> None:
    """Each line as it is (already wrapped); the label coloured when colour is on."""
    from rich.text import Text

    for line in lines:
        text = Text(line.text)
        if line.label:
            text.highlight_words([line.label], styles[line.label])
        console.print(text, soft_wrap=True, no_wrap=True, overflow="ignore", crop=False)
