"""The fix pipeline: scan -> select -> plan (blast radius) -> synthesize -> check -> write.

Only synthesis and insertion need libcst (0.6 s to import), and with cached
facts the scan and the plan need none: with ``jobs`` above one, the workers
that rewrite are forked first and import libcst while this process scans
and plans; what the plan asks that no cache holds (the mirrors its
blast-radius checks compare, after a scan alone) the warm worker answers
(``memo.delegated``), so this process never imports libcst.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .apply.changes import FileJob, Rewrite, UnsafeRewrite
from .apply.inheritors import BaseNames, base_names_of, expect_base_names, find_inheritors, name_clashes
from .apply.placement import prefer_drafter_only
from .apply.plan import Action, Plan, Reanalyses, classes_read, make_plan
from .apply.result import FixResult
from .apply.write import write_all
from .cache import FactsCache, digest
from .classify import memo
from .classify.analysis import Insertion
from .errors import UsageError, no_drafter_found
from .fanout import Ahead, WarmWorker, warm_worker
from .index.encoding import NotDecodable, decode_source
from .index.fact_types import ModuleFacts
from .model import ClassKey, Consistency, DrafterRecord, ScanAnswers, SourceTree, Status, refusal_key
from .resolve.registry import PLUGIN_HEURISTIC
from .scan import Resolution, Scanner, scan
from .select import names_of, select
from .templating import PRE_HEAD, defined_name


def plan_fix(
    tree: SourceTree,
    models: list[str] | None,
    sweep_all: bool,
    cache: FactsCache | None,
    model_types: dict[str, list[str]] | None = None,
    jobs: int = 1,
    factor_pre_head: bool = False,
    earlier: ScanAnswers | None = None,
    only: set[tuple[str | None, str, str]] | None = None,
) -> FixResult:
    """``jobs`` workers rewrite the files; the scan stays in this process, whose analyses the
    blast-radius check reuses. ``factor_pre_head``: long pre-head blocks go into a shared helper.
    ``earlier``: the import-chain and call-contract answers of a scan of the same files (see ``scan``).
    ``only``: of the records ``models`` selects, those with these (architecture, class, file) alone
    (``pre-commit``: the definitions a commit touches, not the architecture's others)."""
    memo.use_cache(cache)  # before forking: the workers read cached mirrors too
    with (
        warm_worker(jobs, _load_rules_and_rewriter) as worker,
        memo.delegated(_asking(worker), _spreading(worker, jobs)),
        _base_names_ahead(tree, jobs) as base_names,
    ):
        result, scanner, resolutions = scan(tree, cache, earlier=earlier, notes=False)
        if base_names is not None:
            expect_base_names(scanner, base_names)
        if result.parse_errors:  # as scan: an input error, exit 2, and nothing is written
            raise UsageError(f"{_unreadable(result.parse_errors)}; nothing written, fix the file(s) and run fix again")
        if not tree.is_vllm and not result.records and not result.unresolved:  # as scan: the wrong folder
            raise UsageError(no_drafter_found(tree.root, PLUGIN_HEURISTIC))
        if sweep_all:
            records = [r for r in result.records if r.status == Status.MISSING_FIXABLE]
        else:
            records = select(
                result.records, models or [], single_module=True, model_types=model_types, unresolved=result.unresolved
            )
        if only is not None:
            records = [r for r in records if (r.arch, r.cls, r.file) in only]
        loosely = _loosely_named(records, models or [], model_types or {})
        reanalyses = Reanalyses()  # the blast-radius analyses, shared by the plan's rounds and the placement's
        plan, refusal = _plan(tree, scanner, resolutions, records, loosely=loosely, reanalyses=reanalyses)
        inheritors = find_inheritors(scanner, resolutions, plan.insertions)
        notes = prefer_drafter_only(scanner, resolutions, plan, inheritors, reanalyses)
        if notes:  # methods moved: they reach other classes now
            inheritors = find_inheritors(scanner, resolutions, plan.insertions)
        clashes = _helper_clashes(scanner, plan.insertions) if factor_pre_head else None
        while True:
            rewrites, failures = _rewrites(scanner, plan.insertions, worker, jobs, clashes)
            if not failures:
                kept = [i.target for i in plan.insertions]
                return FixResult(
                    tree,
                    plan,
                    rewrites,
                    refusal,
                    [i for i in inheritors if i.base in kept],
                    [n for n in notes if all(k in kept for k in n.into)],
                    _left_for_a_human(result.records) if sweep_all else [],
                    _untouched(result.records) if sweep_all else [],
                    result.unresolved if sweep_all else [],
                    scanner.caller_notes(),  # a cached scan's, else read now (0.05 s on vLLM 0.34)
                    scanner.runner_notes(),
                )
            for outcome in plan.outcomes:  # a drafter is fixed whole or not at all
                # a method not in the plan's own (a copy dropped for the owner's) is the owner's to write
                needed = [i.target if i in plan.insertions else i.source.owner for i in outcome.insertions]
                failed = [failures[k] for k in needed if k in failures]
                if outcome.action == Action.FIX and failed:
                    outcome.action, outcome.reason = Action.REFUSED, failed[0]
            _drop_refused(plan)


SHOWN_ERRORS = 3  # files named in fix's one-line error; ``scan`` lists every one


def _unreadable(errors: list[tuple[str, str]]) -> str:
    """The files the scan could not read, for one line: a tree of symlinks may name hundreds."""
    named = "; ".join(f"{file}: {message}" for file, message in errors[:SHOWN_ERRORS])
    more = len(errors) - SHOWN_ERRORS
    return named + (f"; and {more} more file{'s' * (more != 1)} (`mtp-audit scan` lists them)" if more > 0 else "")


def _plan(
    tree: SourceTree,
    scanner: Scanner,
    resolutions: list[Resolution],
    records: list[DrafterRecord],
    loosely: frozenset[str] = frozenset(),
    reanalyses: Reanalyses | None = None,
) -> tuple[Plan, str | None]:
    """What fix decides before writing anything: the plan (blast radius included), with the plugin's
    fixes kept in the plugin, files whose comments hold bytes their codec cannot read refused (a
    rewrite could not keep them), and the refusal of everything when no vLLM was found to run with.
    ``loosely``, ``reanalyses``: see ``make_plan``."""
    plan = make_plan(scanner, resolutions, records, loosely, reanalyses)
    refusal = _without_a_vllm(tree)
    if refusal and not _refuse_all(plan, refusal):
        refusal = None  # nothing to write anyway
    _keep_plugin_fixes_in_plugins(tree, plan)
    _refuse_text_a_rewrite_cannot_keep(scanner, plan)
    return plan, refusal


def refusals_alone(
    tree: SourceTree, scanner: Scanner, resolutions: list[Resolution], records: list[DrafterRecord]
) -> dict[str, str]:
    """Why ``fix --model NAME`` refuses each missing_fixable record it refuses, planned alone as that
    command plans it (``refusal_key`` -> reason), so that no report advises a fix that cannot run."""
    refused: dict[str, str] = {}
    fixable = [r for r in records if r.status == Status.MISSING_FIXABLE]
    reanalyses = classes_read(scanner, resolutions) if len(fixable) > 1 else Reanalyses()  # one pass, then small plans
    planned: list[tuple[str, Plan]] = []
    for record in fixable:
        plan, _ = _plan(tree, scanner, resolutions, [record], reanalyses=reanalyses)
        reasons = [o.reason for o in plan.outcomes if o.action == Action.REFUSED]
        if reasons:
            refused[refusal_key(record)] = reasons[0]
        elif plan.insertions:
            inheritors = find_inheritors(scanner, resolutions, plan.insertions)
            prefer_drafter_only(scanner, resolutions, plan, inheritors, reanalyses)
            planned.append((refusal_key(record), plan))
    refused.update(_refused_when_written(scanner, planned))
    return refused


def _refused_when_written(scanner: Scanner, planned: list[tuple[str, Plan]]) -> dict[str, str]:
    """Why rewriting the files refuses each plan, as ``fix`` finds when it writes (a one-line class body, a
    ``torch`` the new annotations cannot read, a rewrite the gate rejects): the files rewritten in memory,
    nothing written. Plans that put the same methods into the same classes are rewritten together (one ruff
    run); one that puts another method into a class already taken goes to a pass of its own."""
    passes: list[tuple[dict[ClassKey, Insertion], list[tuple[str, Plan]]]] = []
    for key, plan in planned:
        fits = (p for p in passes if all(p[0].get(i.target, i) == i for i in plan.insertions))
        chosen, members = next(fits, None) or ({}, [])
        if not members:
            passes.append((chosen, members))
        chosen.update({i.target: i for i in plan.insertions})
        members.append((key, plan))
    refused = {}
    for chosen, members in passes:
        try:
            _, failures = _rewrites(scanner, list(chosen.values()), None, 1)
        except UsageError as error:  # a file that cannot be read now: fix stops there
            failures = {target: str(error) for target in chosen}
        for key, plan in members:
            failed = [failures[i.target] for i in plan.insertions if i.target in failures]
            if failed:
                refused[key] = failed[0]
    return refused


def _loosely_named(
    records: list[DrafterRecord], models: list[str], model_types: dict[str, list[str]]
) -> frozenset[str]:
    """The records (``refusal_key``) that no ``--model`` name asks for alone: each name that selects one is
    neither its architecture nor its class and selects other architectures too (a module or folder
    several drafters share, ``deepseek_v4``; a model type)."""

    def archs(name: str) -> set[str]:
        by_name = {r.arch or r.cls for r in records if name in names_of(r)}
        return by_name or set(model_types.get(name, []))

    loose = set()
    for record in records:
        own = {(record.arch or "").lower(), record.cls.lower()}  # its architecture or class: asked for by name
        names = [m.lower() for m in models if m.lower() in names_of(record)] or [
            m.lower() for m in models if (record.arch or "") in model_types.get(m.lower(), [])
        ]
        if names and all(name not in own and len(archs(name)) > 1 for name in names):
            loose.add(refusal_key(record))
    return frozenset(loose)


def _left_for_a_human(records: list[DrafterRecord]) -> list[DrafterRecord]:
    """The findings no sweep can settle: no mechanical mirror is safe, or the method diverges."""
    return [r for r in records if r.status == Status.MISSING_MANUAL or r.consistency == Consistency.DIVERGENT]


def _untouched(records: list[DrafterRecord]) -> list[DrafterRecord]:
    """What a sweep leaves alone for good reason: the method is there (and does not diverge), or no
    speculator calls it or there is nothing to mirror."""
    left = _left_for_a_human(records)
    return [r for r in records if r.status in (Status.SUPPORTED, Status.NOT_APPLICABLE) and r not in left]


def _without_a_vllm(tree: SourceTree) -> str | None:
    """Why nothing may be written into a plugin directory: no vLLM it runs with was found, and that
    vLLM decides what a ``get_top_tokens`` may call. None when one was (the scan checked that its
    LogitsProcessor has get_top_tokens, as it checks a vLLM tree's)."""
    if tree.is_vllm:
        return None
    if tree.runs_with is None:
        return (
            "no vLLM found that this plugin runs with (none installed): pass --vllm PATH|VERSION; a "
            "get_top_tokens calls its LogitsProcessor.get_top_tokens"
        )
    return None


def _refuse_all(plan: Plan, reason: str) -> int:
    """Refuse every planned fix; how many there were."""
    refused = [o for o in plan.outcomes if o.action == Action.FIX]
    for outcome in refused:
        outcome.action, outcome.reason, outcome.insertions = Action.REFUSED, reason, []
    plan.insertions = []
    return len(refused)


def _keep_plugin_fixes_in_plugins(tree: SourceTree, plan: Plan) -> None:
    """A plugin's drafter is fixed in the plugin: a mirror that would go into a vLLM class (its
    ``compute_logits`` inherited from vLLM) changes every in-tree drafter built on that class,
    on deployments without the plugin too; that is a change to vLLM, not to the plugin."""
    for outcome in plan.outcomes:
        if outcome.action != Action.FIX or (tree.is_vllm and outcome.record.source == "vllm"):
            continue
        into_vllm = [i.target for i in outcome.insertions if i.target.module.split(".")[0] == "vllm"]
        if into_vllm:
            where = ", ".join(f"{k.name} ({k.module})" for k in into_vllm)
            outcome.action, outcome.insertions = Action.REFUSED, []
            outcome.reason = (
                f"the mirror would go into vLLM's {where}, where compute_logits is defined; a fix of "
                f"{outcome.record.source}'s drafter writes only into the plugin: give "
                f"{outcome.record.cls} its own get_top_tokens by hand, or fix vLLM"
            )
    _drop_refused(plan)


def _refuse_text_a_rewrite_cannot_keep(scanner: Scanner, plan: Plan) -> None:
    """A file Python imports although a comment holds bytes its codec cannot decode (the scan read
    it as Python does): a rewrite keeps every other byte of the file, which its text cannot hold, so
    a drafter whose method would go there is refused, saying so."""
    undecodable: dict[str, str | None] = {}
    for outcome in plan.outcomes:
        if outcome.action != Action.FIX:
            continue
        for insertion in outcome.insertions:
            facts = scanner.index.facts(insertion.target.module)
            if facts is None:
                continue
            if facts.path not in undecodable:
                undecodable[facts.path] = _undecodable(scanner.tree.root / facts.path)
            why = undecodable[facts.path]
            if why is not None:
                outcome.action, outcome.insertions = Action.REFUSED, []
                outcome.reason = (
                    f"unsafe rewrite refused: {facts.path}: {why} in a comment (Python imports it), which a "
                    "rewrite cannot keep byte for byte; add get_top_tokens by hand"
                )
                break
    _drop_refused(plan)


def _drop_refused(plan: Plan) -> None:
    """The plan's insertions less those only refused drafters needed (a drafter is fixed whole or not at all)."""
    kept = {i.target for o in plan.outcomes if o.action == Action.FIX for i in o.insertions}
    plan.insertions = [i for i in plan.insertions if i.target in kept]


def _undecodable(path: Path) -> str | None:
    """Why ``path``'s bytes are not text in its codec; None when they are (or cannot be read: the
    rewrite says so)."""
    try:
        decode_source(path.read_bytes())
    except NotDecodable as error:
        return str(error)
    except OSError:
        return None
    return None


@contextmanager
def _base_names_ahead(tree: SourceTree, jobs: int) -> Iterator[Callable[[], BaseNames] | None]:
    """With several jobs, the text index of the blast radius (``BaseNames``: every file of the package
    read, ~0.2 s) read by a forked process while this one scans; it is stopped if never asked for."""
    if jobs <= 1:
        yield None
        return
    ahead = Ahead(base_names_of, tree)
    try:
        yield ahead.result
    finally:
        ahead.close()


def _named_in_tree(root: Path, relative: str) -> str:
    """The file at ``relative`` named by its own path in the tree, not one through a link (to the file
    or to a folder above it): a diff or patch through a link would replace the link, and git refuses a
    path beyond one. A file outside the tree keeps the name it was reached by."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(root / relative)
    if os.path.commonpath([real, real_root]) != real_root:
        return relative
    return os.path.relpath(real, real_root).replace(os.sep, "/")


def _asking(worker: WarmWorker | None) -> memo.Delegate | None:
    """Missing rule answers computed by ``worker`` (which keeps them for its forks); None: here."""
    return functools.partial(worker.ask, memo.answer_here) if worker else None


def _spreading(worker: WarmWorker | None, jobs: int) -> memo.Spread | None:
    """A task run on ``jobs`` parts of a list of questions in the worker's forks, which then hands their
    answers to the worker itself too (its later forks rewrite with them); None: no worker."""
    if worker is None:
        return None

    def spread(task: Callable[[list], dict], items: list) -> list[dict]:
        count = max(1, min(jobs, len(items)))
        answers = worker.map(task, [items[start::count] for start in range(count)])
        worker.ask(_keep_answers, answers)
        return answers

    return spread


def _keep_answers(answers: list[dict]) -> None:
    for part in answers:
        memo.keep_answers(part)


def _load_rules_and_rewriter() -> None:
    """The warm worker's import: the rules, for the answers the plan asks of it, and the rewriter."""
    memo.load_rules()
    from .apply import rewrite  # noqa: F401


def _rewrite_chunk(jobs: list[FileJob]) -> list[Rewrite | UnsafeRewrite]:
    from .apply.rewrite import rewrite_files

    if not any(job.factor_pre_head for job in jobs):
        return rewrite_files(jobs)
    from .apply.factoring import factors, rewrite_factored

    factored = [job.factor_pre_head and any(factors(i) for i in job.insertions) for job in jobs]
    plain = iter(rewrite_files([job for job, f in zip(jobs, factored) if not f]))
    outcomes: list[Rewrite | UnsafeRewrite] = []
    for job, factor in zip(jobs, factored):
        if not factor:
            outcomes.append(next(plain))
            continue
        try:
            outcomes.append(rewrite_factored(job.path, job.source, job.insertions, job.binds_torch, job.helper_clashes))
        except UnsafeRewrite as error:
            outcomes.append(error)
    return outcomes


def _binds_torch(facts: ModuleFacts) -> bool:
    """``torch`` bound at run time to the torch module on every platform, whatever path the module took (an import
    under TYPE_CHECKING is not; nor one beside another binding, ``torch = None`` under an ``if`` or an ``except``)."""
    return all(
        bool(targets := names.get("torch", [])) and all(t.kind == "module" and t.a == "torch" for t in targets)
        for platform, names in facts.bindings.items()
        if platform not in facts.import_errors
    )


def _chunks(jobs: list[FileJob], count: int) -> list[list[FileJob]]:
    """``count`` chunks of about equal bytes (largest file first to the lightest chunk)."""
    chunks: list[list[FileJob]] = [[] for _ in range(count)]
    sizes = [0] * count
    for job in sorted(jobs, key=lambda j: -len(j.source)):
        lightest = sizes.index(min(sizes))
        chunks[lightest].append(job)
        sizes[lightest] += len(job.source)
    return [chunk for chunk in chunks if chunk]


def _helper_clashes(scanner: Scanner, insertions: list[Insertion]) -> dict[ClassKey, str]:
    """For ``--factor-pre-head``: the classes that may own the helper (their own compute_logits is
    mirrored) and bind its name, themselves, in a subclass or in a base, with where (``name_clashes``)."""
    owners = [i.target for i in insertions if i.source.owner == i.target]
    return name_clashes(scanner, owners, defined_name(PRE_HEAD))


def _rewrites(
    scanner: Scanner,
    insertions: list[Insertion],
    worker: WarmWorker | None,
    jobs: int,
    helper_clashes: dict[ClassKey, str] | None = None,
) -> tuple[list[Rewrite], dict]:
    """Rewrite every touched file, in the worker's forks when there is one (one ruff run per chunk).
    ``helper_clashes``: None without ``--factor-pre-head``, else what ``_helper_clashes`` found."""
    by_module: dict[str, list[Insertion]] = {}
    for insertion in insertions:
        by_module.setdefault(insertion.target.module, []).append(insertion)
    by_file: dict[tuple[int, int], list[tuple[ModuleFacts, list[Insertion]]]] = {}
    for module, group in sorted(by_module.items()):
        facts = scanner.index.facts(module)
        assert facts is not None
        by_file.setdefault(_file_identity(scanner.tree.root / facts.path, facts.path), []).append((facts, group))
    files = []
    encodings = {}
    failures: dict[ClassKey, str] = {}
    for same_file in by_file.values():
        facts = same_file[0][0]
        named = _named_in_tree(scanner.tree.root, facts.path)
        group, conflict = _one_insertion_per_class(same_file)
        if conflict:
            failures.update({i.target: conflict for _, g in same_file for i in g})
            continue
        try:
            data = (scanner.tree.root / named).read_bytes()
            source, encodings[named] = decode_source(data)
        except (OSError, NotDecodable) as error:
            raise UsageError(
                f"{named}: cannot be read ({getattr(error, 'strerror', None) or error}); nothing written"
            ) from None
        _check_analysed(scanner, [f for f, _ in same_file], data, named)
        clashes = {i.target: helper_clashes[i.target] for i in group if i.target in (helper_clashes or {})}
        files.append(FileJob(named, source, group, _binds_torch(facts), helper_clashes is not None, clashes))
    if not files:
        return [], failures
    if worker is None:
        outcomes = {job.path: outcome for job, outcome in zip(files, _rewrite_chunk(files))}
    else:
        chunks = _chunks(files, jobs)
        outcomes = {
            job.path: outcome
            for chunk, done in zip(chunks, worker.map(_rewrite_chunk, chunks))
            for job, outcome in zip(chunk, done)
        }
    rewrites = []
    for job in files:
        outcome = outcomes[job.path]
        if isinstance(outcome, UnsafeRewrite) and len(job.insertions) > 1:
            outcome, refused = _without_the_refused(job, outcome)
            failures.update(refused)
        if isinstance(outcome, UnsafeRewrite):
            failures.update(
                {i.target: f"unsafe rewrite refused: {outcome}" for i in job.insertions if i.target not in failures}
            )
        else:
            outcome.encoding = encodings[job.path]
            rewrites.append(outcome)
    return rewrites, failures


def _check_analysed(scanner: Scanner, modules: list[ModuleFacts], data: bytes, named: str) -> None:
    """The bytes a rewrite starts from are the bytes the scan analysed (their content hash, recorded as
    the scan read each module): the mirror is built from the analysed ``compute_logits``, so an edit
    saved since would get a method mirrored from text the file no longer has."""
    content = digest(data)
    if any(scanner.index.observed.get(facts.path) != content for facts in modules):
        raise UsageError(f"{named} changed since it was analysed; nothing written, run fix again")


def _without_the_refused(job: FileJob, refusal: UnsafeRewrite) -> tuple[Rewrite | UnsafeRewrite, dict[ClassKey, str]]:
    """A file refused with several classes planned: each class tried alone, so that one class's refusal
    (a one-line body, a helper name it binds) names that class and does not stop the others; the file
    with the classes that pass alone, and the refused ones with their own reasons. Where no class is
    refused alone, the refusal stands for them all; so it does for the classes left when they fail
    together."""
    refused: dict[ClassKey, str] = {}
    for insertion in job.insertions:
        [alone] = _rewrite_chunk([dataclasses.replace(job, insertions=[insertion])])
        if isinstance(alone, UnsafeRewrite):
            refused[insertion.target] = f"unsafe rewrite refused: {alone}"
    kept = [i for i in job.insertions if i.target not in refused]
    if not refused or not kept:
        return refusal, refused
    [outcome] = _rewrite_chunk([dataclasses.replace(job, insertions=kept)])
    return outcome, refused


def _file_identity(path: Path, relative: str) -> tuple[int, int]:
    """The file ``path`` really is (device, inode): two modules may be one file through a symlink."""
    try:
        info = path.stat()
    except OSError as error:
        raise UsageError(f"{relative}: cannot be read ({error.strerror}); nothing written") from None
    return info.st_dev, info.st_ino


def _one_insertion_per_class(
    same_file: list[tuple[ModuleFacts, list[Insertion]]],
) -> tuple[list[Insertion], str | None]:
    """The insertions of modules that are one file, each class once (each module plans the same class at
    the same line); a refusal naming both paths when two of them would write different methods there."""
    kept: dict[tuple[str, int], tuple[str, Insertion]] = {}
    for facts, group in same_file:
        for insertion in group:
            key = (insertion.target.name, insertion.target.line)
            if key not in kept:
                kept[key] = facts.path, insertion
            elif _written(kept[key][1]) != _written(insertion):
                return [], (
                    f"{kept[key][0]} and {facts.path} are one file (a link), and class {key[0]} (line {key[1]}) "
                    "would get a different method from each; add it by hand"
                )
    return [insertion for _, insertion in kept.values()], None


def _written(insertion: Insertion) -> tuple[str, str, int]:
    """What decides the method an insertion writes: the compute_logits it mirrors, and where that is."""
    source = insertion.source
    return source.method.text, source.owner.name, source.owner.line


def refuse_paths_outside(result: FixResult, option: str) -> None:
    """``--diff`` and ``--patches`` name each file by its path in the tree, which ``git apply`` and
    ``git am`` take only inside the one repository they run in: a file of a plugin installed
    elsewhere (its path absolute) is refused with both ways out, before anything is printed."""
    outside = [r.path for r in result.rewrites if Path(r.path).is_absolute()]
    if outside:
        raise UsageError(
            f"{option}: {', '.join(outside)} lie{'s' * (len(outside) == 1)} outside {result.tree.root} (a plugin "
            "installed elsewhere), and git applies a diff only to paths of the repository it runs in; run "
            f"`mtp-audit fix PLUGIN_SOURCE_DIR {option} ...` on the plugin's own tree, `--no-plugins` for "
            "vLLM's, or fix without --diff/--patches to write the files in place; nothing written"
        )


def write_fix(result: FixResult) -> None:
    write_all(result.tree.root, result.rewrites, result.tree.plugin_folders)
