"""The fix pipeline: scan -> select -> plan (blast radius) -> synthesize -> check -> write."""

from __future__ import annotations

from dataclasses import dataclass

from .apply.plan import Plan, make_plan
from .apply.rewrite import Rewrite, UnsafeRewrite, mirror_requests, rewrite_file
from .apply.write import write_all
from .classify.analysis import Insertion
from .fanout import map_in_workers
from .index.cache import FactsCache
from .model import SourceTree, Status
from .scan import Scanner, scan
from .select import select
from .synthesize.mirror import format_methods


@dataclass
class FixResult:
    tree: SourceTree
    plan: Plan
    rewrites: list[Rewrite]


def plan_fix(tree: SourceTree, models: list[str] | None, sweep_all: bool,
             cache: FactsCache | None, model_types: dict[str, list[str]] | None = None,
             jobs: int = 1) -> FixResult:
    """``jobs`` workers rewrite the files; the scan stays in this process, whose analyses the
    blast-radius check reuses."""
    result, scanner, resolutions = scan(tree, cache)
    if sweep_all:
        records = [r for r in result.records if r.status == Status.MISSING_FIXABLE]
    else:
        records = select(result.records, models or [], single_module=True, model_types=model_types)
    plan = make_plan(scanner, resolutions, records)
    while True:
        rewrites, failures = _rewrites(scanner, plan.insertions, jobs)
        if not failures:
            return FixResult(tree, plan, rewrites)
        for outcome in plan.outcomes:  # a drafter is fixed whole or not at all
            failed = [failures[i.target] for i in outcome.insertions if i.target in failures]
            if outcome.action == "fix" and failed:
                outcome.action, outcome.reason = "refused", failed[0]
        kept = {i.target for o in plan.outcomes if o.action == "fix" for i in o.insertions}
        plan.insertions = [i for i in plan.insertions if i.target in kept]


# Fewer files than this and forking costs more than it saves.
MIN_FILES_FOR_WORKERS = 4


def _rewrites(scanner: Scanner, insertions: list[Insertion], jobs: int) -> tuple[list[Rewrite], dict]:
    """Rewrite every touched file; all new methods are formatted in one ruff run."""
    by_module: dict[str, list[Insertion]] = {}
    for insertion in insertions:
        by_module.setdefault(insertion.target.module, []).append(insertion)
    files = []
    for module, group in sorted(by_module.items()):
        facts = scanner.index.facts(module)
        assert facts is not None
        source = (scanner.tree.root / facts.path).read_bytes().decode("utf-8")
        files.append((facts, source, group, mirror_requests(source, group)))
    formatted = iter(format_methods([request for *_, requests in files for request in requests]))
    planned_files = [(facts, source, group, [next(formatted) for _ in requests])
                    for facts, source, group, requests in files]

    def rewrite(position: int) -> Rewrite | UnsafeRewrite:
        facts, source, group, methods = planned_files[position]
        try:
            return rewrite_file(facts.path, source, facts, group, methods)
        except UnsafeRewrite as error:
            return error

    if jobs > 1 and len(files) >= MIN_FILES_FOR_WORKERS:
        outcomes = map_in_workers(rewrite, len(files), jobs)
    else:
        outcomes = [rewrite(position) for position in range(len(files))]
    rewrites, failures = [], {}
    for (_, _, group, _), outcome in zip(planned_files, outcomes):
        if isinstance(outcome, UnsafeRewrite):
            failures.update({i.target: f"unsafe rewrite refused: {outcome}" for i in group})
        else:
            rewrites.append(outcome)
    return rewrites, failures


def write_fix(result: FixResult) -> None:
    write_all(result.tree.root, result.rewrites)
