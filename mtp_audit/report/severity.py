"""Which records are findings, for ``--fail-on`` and the exit code."""

from __future__ import annotations

from ..model import Consistency, DrafterRecord, Status

# Lowest to highest; "--fail-on X" fails on X and everything above it.
LEVELS = ("unproven", "missing_fixable", "missing_manual", "divergent")
DEFAULT_FAIL_ON = "missing_fixable"
NEVER = "never"


def level_of(record: DrafterRecord) -> str | None:
    if record.status in (Status.MISSING_FIXABLE, Status.MISSING_MANUAL):
        return record.status.value
    if record.consistency in (Consistency.DIVERGENT, Consistency.UNPROVEN):
        return record.consistency.value
    return None


def findings(records: list[DrafterRecord], fail_on: str) -> list[DrafterRecord]:
    if fail_on == NEVER:
        return []
    threshold = LEVELS.index(fail_on)
    return [r for r in records if (lvl := level_of(r)) is not None and LEVELS.index(lvl) >= threshold]
