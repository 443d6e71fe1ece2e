"""The ``mtp-audit`` command line: parse options, run a pipeline, render, exit.

The pipeline modules (libcst costs 0.3 s to import) and rich are imported
where they are used: a warm scan answers from the result cache without them.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from contextlib import nullcontext
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import __version__
from .errors import InternalError, UsageError
from .index.results import ResultCache, default_cache_dir
from .locate import locate
from .model import ScanResult, SourceTree, Status
from .report.json_report import render_json
from .report.severity import DEFAULT_FAIL_ON, LEVELS, NEVER, findings
from .select import select
from .sources import release_tree

app = typer.Typer(
    name="mtp-audit",
    help="Audit vLLM speculative-decoding drafters for get_top_tokens() and write the missing method.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"


FailOn = Enum("FailOn", {name: name for name in (*LEVELS, NEVER)}, type=str)  # type: ignore[misc]

PathArg = Annotated[
    Optional[Path],
    typer.Argument(help="A vLLM checkout, a vllm package directory or a directory of model files. "
                        "Default: the current directory if it is a vLLM checkout, else the installed vllm."),
]
ModelOpt = Annotated[
    Optional[list[str]],
    typer.Option("--model", "-m", help="Module stem (nemotron_h, nemotron_h_mtp), architecture or class name."),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the facts cache.")]
JobsOpt = Annotated[int, typer.Option(
    "--jobs", "-j", min=0, help="Worker processes for a scan that is not cached: 0 = one per CPU (at most 8), 1 = none.")]
VersionOpt = Annotated[
    Optional[str],
    typer.Option("--vllm-version", help="Audit a released vLLM by number (e.g. 0.34.0): its wheel's sources "
                                        "are downloaded once with pip --no-deps and cached, never installed."),
]


def resolve_tree(path: Optional[Path], vllm_version: Optional[str], quiet: bool = False):
    if path is not None and vllm_version:
        raise UsageError("give PATH or --vllm-version, not both")
    return locate(release(vllm_version, quiet) if vllm_version else path)


def release(version: str, quiet: bool = False) -> Path:
    """``release_tree``, saying on stderr (unless quiet) while a first download runs."""
    return release_tree(version, progress=None if quiet else _download_progress)


def _download_progress(message: str):
    """A spinner on a terminal; one line in a log, where a spinner would be noise."""
    if sys.stderr.isatty():  # not rich's is_terminal, which FORCE_COLOR makes true in logs too
        return console(stderr=True).status(message)
    print(f"mtp-audit: {message}", file=sys.stderr)
    return nullcontext()


def console(stderr: bool = False):
    """Pipes and CI logs get a wide table: wrapping a reason into a 1-char column helps nobody."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 200
    return Console(stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")) or None, width=width)


def _model_types(tree: SourceTree) -> dict[str, list[str]]:
    if not tree.is_vllm:
        return {}
    from .resolve.model_types import model_type_map

    assert tree.package_dir is not None
    return model_type_map(tree.package_dir)


def _print_model_types(tree: SourceTree, result: ScanResult) -> None:
    status: dict[str, set[str]] = {}
    for record in result.records:
        if record.arch:
            label = record.status.value + (f"/{record.consistency.value}" if record.consistency else "")
            status.setdefault(record.arch, set()).add(label)
    for model_type, archs in _model_types(tree).items():
        described = ", ".join(f"{a} ({', '.join(sorted(status.get(a, {'unregistered'})))})" for a in archs)
        print(f"{model_type}: {described}")


def run_scan(tree: SourceTree, no_cache: bool, jobs: int = 0) -> ScanResult:
    """The scan result: from the result cache when nothing it depends on changed."""
    results = None if no_cache or not tree.is_vllm else ResultCache(default_cache_dir())
    cached = results.load(tree) if results else None
    if cached is not None:
        return cached
    from .fanout import resolve_jobs
    from .index.cache import FactsCache
    from .index.results import Observed
    from .scan import scan

    result, scanner, _ = scan(tree, None if no_cache else FactsCache(), resolve_jobs(jobs))
    if results and not result.parse_errors:
        results.store(tree, Observed(dict(scanner.index.observed)), result)
    return result


def _render_scan(result: ScanResult, format: Format) -> None:
    if format == Format.json:
        sys.stdout.write(render_json(result) + "\n")
    elif format == Format.markdown:
        from .report.markdown import render_markdown

        sys.stdout.write(render_markdown(result))
    elif format in (Format.github, Format.sarif):
        from .report.ci_formats import render_github, render_sarif

        sys.stdout.write((render_github if format == Format.github else render_sarif)(result))
    else:
        from .report.table import render_table

        render_table(result, console())


@app.command("scan")
def scan_command(
    path: PathArg = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    fail_on: Annotated[FailOn, typer.Option(  # type: ignore[valid-type]
        "--fail-on", help="Exit 1 when a finding at or above this level exists "
                          f"({' < '.join(LEVELS)}; '{NEVER}' never fails).")] = DEFAULT_FAIL_ON,
    model: ModelOpt = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the exit code, and errors.")] = False,
    vllm_version: VersionOpt = None,
    compare: Annotated[Optional[tuple[str, str]], typer.Option(
        "--compare", help="Two released versions (e.g. 0.33.0 0.34.0): which drafters changed status.")] = None,
    by_model_type: Annotated[bool, typer.Option(
        "--by-model-type", help="Print the Hugging Face model_type -> drafter mapping of the speculative config.")] = False,
    no_cache: NoCacheOpt = False,
    jobs: JobsOpt = 0,
) -> None:
    """Report every registered drafter on every platform: supported, fixable, manual or not applicable."""
    if compare:
        from .report.compare import compare_releases, render_compare

        old, new = (run_scan(locate(release(v, quiet)), no_cache, jobs) for v in compare)
        changes = compare_releases(old, new)
        render_compare(changes, compare, format.value, console())
        raise typer.Exit(0)
    tree = resolve_tree(path, vllm_version, quiet)
    if not tree.is_vllm:
        print(f"note: {tree.root} has no vllm/ registry; scanning it as a plugin directory: drafter-named classes "
              "in drafter-named files (see README), reported with arch null", file=sys.stderr)
    result = run_scan(tree, no_cache, jobs)
    if by_model_type:
        _print_model_types(tree, result)
        raise typer.Exit(0)
    if model:
        result.records = select(result.records, model, single_module=False, model_types=_model_types(tree))
    for file, message in result.parse_errors:
        print(f"error: {file}: {message}; this file was skipped, fix it and scan again", file=sys.stderr)
    if not quiet:
        _render_scan(result, format)
    for u in result.unresolved:
        print(f"warning: {u.arch} -> {u.module}.{u.cls} does not resolve on {','.join(u.platforms)}: {u.reason}",
              file=sys.stderr)
    if result.parse_errors:
        raise typer.Exit(2)
    unresolved = bool(result.unresolved) and fail_on.value != NEVER
    raise typer.Exit(1 if findings(result.records, fail_on.value) or unresolved else 0)


@app.command("fix")
def fix_command(
    path: PathArg = None,
    model: ModelOpt = None,
    sweep_all: Annotated[bool, typer.Option("--all", help="Fix every missing_fixable drafter.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print the unified diff; write nothing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if a change is needed.")] = False,
    pr_body: Annotated[Optional[Path], typer.Option(
        "--pr-body", help="Write a pull-request description (Purpose / Test Plan / Test Result) to this file.")] = None,
    verify_report: Annotated[Optional[Path], typer.Option(
        "--verify-report", help="With --pr-body: a `verify --json` file whose results go under Test Result.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary table on stderr.")] = False,
    vllm_version: VersionOpt = None,
    no_cache: NoCacheOpt = False,
    jobs: JobsOpt = 0,
) -> None:
    """Write the mirrored get_top_tokens into missing_fixable drafters (safe fixes only)."""
    if verify_report is not None and pr_body is None:
        raise UsageError("--verify-report goes with --pr-body")
    if bool(model) == sweep_all:
        raise UsageError("fix needs --model NAME (repeatable) or --all, not both")
    if vllm_version and not (diff or check):
        raise UsageError("fix --vllm-version needs --diff or --check: the cached release sources stay untouched")
    from .apply.write import unified_diff
    from .fanout import resolve_jobs
    from .fix import plan_fix, write_fix
    from .index.cache import FactsCache
    from .report.fix_summary import render_fix_summary

    workers = resolve_jobs(jobs)
    tree = resolve_tree(path, vllm_version, quiet)
    result = plan_fix(tree, model, sweep_all, None if no_cache else FactsCache(), _model_types(tree), workers)
    if diff:
        for rewrite in result.rewrites:
            sys.stdout.write(unified_diff(rewrite))
    elif not check:
        write_fix(result)
    if not quiet:
        render_fix_summary(result, console(stderr=True), written=not (diff or check))
    if pr_body is not None:
        from .report.pr_body import write_pr_body

        targets = "--all" if sweep_all else " ".join(f"--model {name}" for name in model or [])
        write_pr_body(pr_body, result, f"mtp-audit fix {targets}", verify_report)
    refused = [o for o in result.plan.outcomes if o.action == "refused"]
    blocked_fixable = [o for o in refused if o.record.status == Status.MISSING_FIXABLE]
    if check:
        raise typer.Exit(1 if result.rewrites else 0)
    raise typer.Exit(1 if (blocked_fixable or (refused and not sweep_all)) else 0)


@app.command("verify")
def verify_command(
    path: PathArg = None,
    model: Annotated[Optional[list[str]], typer.Option("--model", "-m", help="The drafter to verify (repeatable).")] = None,
    sweep_all: Annotated[bool, typer.Option(
        "--all", help="Every drafter record that has a get_top_tokens (upstream's or one fix wrote).")] = False,
    tp: Annotated[str, typer.Option("--tp", help="Tensor-parallel sizes to run, comma-separated.")] = "1,2",
    emit_test: Annotated[Optional[Path], typer.Option(
        "--emit-test", help="Write a standalone pytest doing the same check for the (first) drafter.")] = None,
    json_out: Annotated[Optional[Path], typer.Option(
        "--json", help="Also write the results as JSON (fix --pr-body --verify-report reads it).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress, table or summary; only the exit code.")] = False,
    vllm_version: VersionOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Import the real vLLM code and prove get_top_tokens selects compute_logits(...).argmax(-1).

    Exit 0: no mismatch; 1: a mismatch; 2: usage error, or (with --model) a drafter that could not be verified.
    """
    from .report.verify_report import render_verify, verify_progress
    from .verify.emit import emit_test as write_test
    from .verify.run import outcomes_json, summary_line, verify

    if sweep_all == bool(model):
        raise UsageError("verify needs --model NAME ... or --all (not both)")
    try:
        sizes = sorted({int(x) for x in tp.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--tp takes sizes like 1,2, not {tp!r}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError("--tp needs at least one size of 1 or more")
    tree = resolve_tree(path, vllm_version, quiet)
    records = run_scan(tree, no_cache).records
    if sweep_all:
        records = [r for r in records if r.status == Status.SUPPORTED]
    else:
        records = select(records, model, single_module=True, model_types=_model_types(tree))
    with verify_progress(console(stderr=True), quiet) as progress:
        outcomes = verify(tree, records, sizes, progress)
    if not quiet:
        render_verify(outcomes, console(), detailed=not sweep_all)
    if json_out is not None:
        import json

        json_out.write_text(json.dumps({"vllm_version": tree.vllm_version, "summary": summary_line(outcomes),
                                        "results": outcomes_json(outcomes)}, indent=2) + "\n")
    mismatches = [o for o in outcomes if o.verdict == "MISMATCH"]
    unverified = [o for o in outcomes if o.verdict == "not verified"]
    if not quiet:
        for outcome in mismatches:
            print(f"MISMATCH {outcome.record.arch} {outcome.record.cls} TP {outcome.tp}: {outcome.detail}",
                  file=sys.stderr)
        for outcome in unverified:
            print(f"not verified: {outcome.record.arch} {outcome.record.cls} TP {outcome.tp or '-'}: {outcome.detail}",
                  file=sys.stderr)
        print(f"mtp-audit verify: {summary_line(outcomes)}", file=sys.stderr)
    if emit_test is not None:
        passing = [o for o in outcomes if o.verdict == "pass" and o.recipe is not None]
        if not passing:
            raise UsageError("--emit-test needs a passing drafter to write a test for")
        write_test(emit_test, passing[0])
        if not quiet:
            print(f"wrote {emit_test}", file=sys.stderr)
    if mismatches:
        raise typer.Exit(1)
    raise typer.Exit(2 if unverified and not sweep_all else 0)


@app.command("pre-commit")
def pre_commit_command(
    files: Annotated[Optional[list[Path]], typer.Argument(help="Changed files (pre-commit passes them).")] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Write the mirrors; exit 1 when a file changed.")] = False,
) -> None:
    """For pre-commit in a vLLM checkout: missing_fixable drafters in the changed files fail the hook."""
    tree = locate(None)
    if not tree.is_vllm:
        raise UsageError("the pre-commit hook runs in a vLLM checkout (no vllm/ registry in the current directory)")
    changed = {(Path.cwd() / f).resolve().relative_to(tree.root).as_posix() for f in files or []}
    records = [r for r in run_scan(tree, False).records
               if r.status == Status.MISSING_FIXABLE and ({r.file, r.compute_logits.file if r.compute_logits else ""}
                                                           | {d.file for d in r.delegates}) & changed]
    if not records:
        raise typer.Exit(0)
    for record in records:
        print(f"{record.file}:{record.line}: {record.arch or record.cls} ({record.cls}) has no get_top_tokens; "
              f"`mtp-audit fix --model {record.arch or record.cls}` writes it ({record.reason})", file=sys.stderr)
    if fix:
        from .fix import plan_fix, write_fix
        from .index.cache import FactsCache

        result = plan_fix(tree, [r.arch or r.cls for r in records], False, FactsCache())
        write_fix(result)
        for rewrite in result.rewrites:
            print(f"mtp-audit wrote get_top_tokens into {rewrite.path} ({', '.join(rewrite.classes)})", file=sys.stderr)
        for outcome in result.plan.outcomes:
            if outcome.action == "refused":
                print(f"refused {outcome.record.arch}: {outcome.reason}", file=sys.stderr)
    raise typer.Exit(1)


def main() -> None:
    try:
        app()
    except UsageError as error:
        print(f"mtp-audit: {error}", file=sys.stderr)
        sys.exit(2)
    except InternalError as error:
        print(f"mtp-audit: {error}", file=sys.stderr)
        if os.environ.get("MTP_AUDIT_DEBUG"):
            traceback.print_exception(error.cause)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as error:  # a bug of ours: one line, exit 2; MTP_AUDIT_DEBUG=1 shows the traceback
        print(f"mtp-audit: internal error: {type(error).__name__}: {error} (set MTP_AUDIT_DEBUG=1 for the "
              "traceback, and please report it)", file=sys.stderr)
        if os.environ.get("MTP_AUDIT_DEBUG"):
            traceback.print_exception(error)
        sys.exit(2)
    finally:
        # The process is about to exit: leave what is still alive to the OS. Teardown's
        # collections would take apart every class, function and fact in a cycle (libcst
        # alone defines hundreds of classes); frozen objects are left out of them. Teardown
        # of a cold scan: 0.14 s -> 0.015 s (medians of 6 runs). Exit handlers still run and
        # files are still flushed.
        gc.freeze()


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"mtp-audit {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
