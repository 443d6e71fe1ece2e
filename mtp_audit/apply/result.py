"""What ``fix`` decided and would write: the data the writer and the reports read.

Here, not in ``fix``, so that rendering a fix (``report/``) imports data, not the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import DrafterRecord, SourceTree, Unresolved
from .changes import Rewrite
from .inheritors import Inheritor
from .placement import Moved
from .plan import Plan


@dataclass
class FixResult:
    tree: SourceTree
    plan: Plan
    rewrites: list[Rewrite]
    refusal: str | None = None  # why nothing may be written at all (a plugin's vLLM lacks get_top_tokens)
    inheritors: list[Inheritor] = field(default_factory=list)  # every class the written methods reach
    placement_notes: list[Moved] = field(default_factory=list)  # methods moved off bases non-drafters inherit
    # what a --all sweep leaves for a human: missing_manual, and a get_top_tokens that diverges
    left: list[DrafterRecord] = field(default_factory=list)
    # what a --all sweep had no reason to touch: supported (unproven ones included) and not_applicable
    untouched: list[DrafterRecord] = field(default_factory=list)
    # registered architectures a --all sweep could not resolve to a class: nothing of them was judged
    unresolved: list[Unresolved] = field(default_factory=list)
    # what the speculators' selection does not follow, and why the model runner's choice is unread
    # (``ScanResult.caller_notes``, ``runner_notes``): drafters judged without some caller
    caller_notes: list[str] = field(default_factory=list)
    runner_notes: list[str] = field(default_factory=list)
