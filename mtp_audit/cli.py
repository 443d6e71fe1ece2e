"""The ``mtp-audit`` command line: parse options, call ``commands`` and the pipeline, render, exit.

The pipeline modules (libcst costs 0.3 s to import) and rich are imported
where they are used: a warm scan answers from the result cache without them.
"""

from __future__ import annotations

import gc
import os
import sys
import traceback
from contextlib import nullcontext, redirect_stdout
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from . import __version__
from .commands.trees import cache_off, cached_answers, model_types, resolve_tree, run_scan
from .errors import InternalError, UsageError, no_drafter_found
from .locate import locate
from .model import ScanResult, Status
from .report import exit_codes
from .report.json_report import render_json
from .report.options import (
    check_fix_options,
    check_scan_options,
    check_verify_options,
    tp_sizes,
)
from .report.severity import DEFAULT_FAIL_ON, LEVELS, NEVER, findings
from .report.terminal import console, output_width
from .select import select, unresolved_named
from .sources import release_tree
from .templating import counted
from .verify.constants import WORKER_TIMEOUT_S

app = typer.Typer(
    name="mtp-audit",
    help="Audit vLLM speculative-decoding drafters for get_top_tokens() and write the missing method.",
    add_completion=True,
    pretty_exceptions_enable=False,
)


class Format(str, Enum):
    concise = "concise"
    table = "table"
    json = "json"
    markdown = "markdown"
    github = "github"
    sarif = "sarif"


FailOn = Enum("FailOn", {name: name for name in (*LEVELS, NEVER)}, type=str)  # type: ignore[misc]

PathArg = Annotated[
    Optional[Path],
    typer.Argument(
        metavar="PATH",
        help="A vLLM checkout, a vllm package directory or a directory of model files. "
        "Default: the current directory if it is a vLLM checkout, else the installed vllm.",
    ),
]
ModelOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--model",
        "-m",
        metavar="NAME",
        help="A drafter, case-insensitive: module stem (nemotron_h, "
        "nemotron_h_mtp), architecture (NemotronHMTPModel), class (NemotronHMTP) or Hugging Face "
        "model_type (deepseek_v3; see scan --by-model-type). Repeatable.",
    ),
]
NoCacheOpt = Annotated[bool, typer.Option("--no-cache", help="Do not read or write the facts cache.")]
JobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs",
        "-j",
        min=0,
        metavar="N",
        help="Worker processes for a scan that is not cached: 0 = one per CPU (at most 8), 1 = none.",
    ),
]
VERSION_HELP = (
    "Audit a released vLLM by number (e.g. 0.34.0) instead of PATH: its wheel's sources are "
    "downloaded once with pip --no-deps and cached, never installed."
)
VersionOpt = Annotated[Optional[str], typer.Option("--vllm-version", metavar="X.Y.Z", help=VERSION_HELP)]
FixVersionOpt = Annotated[
    Optional[str],
    typer.Option(
        "--vllm-version",
        metavar="X.Y.Z",
        help=VERSION_HELP + " Only with --diff, --check or --patches: the cached sources are never written.",
    ),
]

RunsWithOpt = Annotated[
    Optional[str],
    typer.Option(
        "--vllm",
        help="For a plugin directory: the vLLM it runs with, a path or a released version "
        "(default: the installed vllm). It decides what a fix may call.",
    ),
]
NoPluginsOpt = Annotated[
    bool,
    typer.Option(
        "--no-plugins",
        help="Leave out the installed plugins' registrations (vllm.general_plugins / "
        "vllm.platform_plugins entry points): vLLM's own registry only.",
    ),
]
PluginPathOpt = Annotated[
    Optional[list[Path]],
    typer.Option(
        "--plugin-path", help="Another directory where plugins are installed (e.g. a pip --target dir; repeatable)."
    ),
]

FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow-symlinks", help="Read model files that symlinks in the tree lead to outside it (never written)."
    ),
]


def release(version: str, quiet: bool = False) -> Path:
    """``release_tree``, saying on stderr (unless quiet) while a first download runs."""
    return release_tree(version, progress=_progress(quiet))


def _progress(quiet: bool):
    return None if quiet else _download_progress


def _say(quiet: bool, line: str) -> None:
    """A note or warning on stderr; ``--quiet`` keeps only the exit code and errors."""
    if not quiet:
        print(line, file=sys.stderr)


def _download_progress(message: str):
    """A spinner on a terminal; one line in a log, where a spinner would be noise."""
    if sys.stderr.isatty():  # not rich's is_terminal, which FORCE_COLOR makes true in logs too
        return console(stderr=True).status(message)
    print(f"mtp-audit: {message}", file=sys.stderr)
    return nullcontext()


def _render_scan(result: ScanResult, format: Format, verbose: bool, show_all: bool) -> None:
    if format == Format.concise:
        from .report.concise import print_concise, render_concise

        print_concise(render_concise(result, output_width(), verbose, show_all), console())
    elif format == Format.json:
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


SCAN_EXAMPLES = """Examples:

  mtp-audit scan --vllm-version 0.34.0

  mtp-audit scan ~/vllm --model nemotron_h --verbose

  mtp-audit scan --compare 0.33.0 0.34.0 --format markdown
"""


@app.command("scan", epilog=SCAN_EXAMPLES)
def scan_command(
    ctx: typer.Context,
    path: PathArg = None,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            "-f",
            metavar="FORMAT",
            help="concise (one line per finding), table, json, markdown, github (workflow annotations) or sarif.",
        ),
    ] = Format.concise,
    fail_on: Annotated[
        FailOn,
        typer.Option(  # type: ignore[valid-type]
            "--fail-on",
            metavar="LEVEL",
            help=f"Exit 1 when a finding at or above LEVEL exists: {', '.join(LEVELS)} (low to high) or {NEVER}.",
        ),
    ] = DEFAULT_FAIL_ON,
    model: ModelOpt = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="concise: every reason, and the speculators that call each drafter.")
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option("--show-all", help="concise: list the mirror and equivalent records too, not only their count."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the exit code, and errors.")] = False,
    vllm_version: VersionOpt = None,
    compare: Annotated[
        Optional[tuple[str, str]],
        typer.Option(
            "--compare",
            metavar="OLD NEW",
            help="Two released versions (e.g. 0.33.0 0.34.0): which drafters "
            "changed status. Takes no PATH or --vllm-version.",
        ),
    ] = None,
    by_model_type: Annotated[
        bool,
        typer.Option(
            "--by-model-type",
            help="Print the Hugging Face model_type -> drafter mapping of the speculative "
            "config, with each drafter's status.",
        ),
    ] = False,
    no_cache: NoCacheOpt = False,
    jobs: JobsOpt = 0,
    runs_with: RunsWithOpt = None,
    no_plugins: NoPluginsOpt = False,
    plugin_path: PluginPathOpt = None,
    follow_symlinks: FollowOpt = False,
) -> None:
    """Report every registered drafter on every platform: supported, fixable, manual or not applicable."""
    check_scan_options(
        format.value,
        compare is not None,
        by_model_type,
        path is not None or bool(vllm_version),
        bool(model),
        verbose,
        show_all,
        _given(ctx, "fail_on"),
        tuple(
            option
            for option, given in (
                ("--vllm", runs_with is not None),
                ("--plugin-path", bool(plugin_path)),
                ("--no-plugins", no_plugins),
                ("--follow-symlinks", follow_symlinks),
            )
            if given
        ),
    )
    no_cache = cache_off(no_cache, quiet)
    if compare:
        from .report.compare import compare_releases, render_compare

        old, new = (run_scan(locate(release(v, quiet)), no_cache, jobs) for v in compare)
        changes = compare_releases(old, new)
        if not quiet:
            render_compare(changes, compare, format.value, console(), output_width())
        raise typer.Exit(exit_codes.OK)
    tree = resolve_tree(
        path,
        vllm_version,
        _progress(quiet),
        runs_with=runs_with,
        plugins=not no_plugins,
        plugin_paths=plugin_path,
        follow_symlinks=follow_symlinks,
    )
    concise = format == Format.concise and not quiet and not by_model_type
    result = run_scan(tree, no_cache, jobs, fix_refusals=concise)  # the concise report advises fix
    if not tree.is_vllm:
        from .resolve.registry import PLUGIN_HEURISTIC

        if not result.records and not result.unresolved and not result.parse_errors:
            raise UsageError(no_drafter_found(tree.root, PLUGIN_HEURISTIC))
        with_vllm = (
            f"running with vLLM {tree.vllm_version or '(version unknown)'} at {tree.runs_with.root}"
            if tree.runs_with
            else "no vLLM found to run with (--vllm names one)"
        )
        _say(
            quiet,
            f"note: {tree.root} has no vllm/ registry; scanning it as a plugin directory ({with_vllm}): "
            f"architectures from its register_model calls, then {PLUGIN_HEURISTIC} that no registration "
            "names, reported with arch null",
        )
    for note in result.registry_notes:
        _say(quiet, f"warning: registry entry not read: {note}")
    for note in result.notes:
        _say(quiet, f"warning: {note}")
    _warn_of_callers(result.caller_notes, result.runner_notes, quiet)
    if by_model_type:
        from .report.model_types import model_type_rows, render_model_type_table, render_model_types

        for file, message in result.parse_errors:  # a drafter it defines is not judged: as a scan, exit 2
            print(f"error: {file}: {message}; this file was skipped, fix it and scan again", file=sys.stderr)
        if not quiet:
            rows = model_type_rows(model_types(tree), result)
            if format == Format.table:
                render_model_type_table(rows, console())
            else:
                sys.stdout.write(render_model_types(rows, format.value))
        raise typer.Exit(exit_codes.ERROR if result.parse_errors else exit_codes.OK)
    if model:
        types = model_types(tree)
        result.records = select(
            result.records, model, single_module=False, model_types=types, unresolved=result.unresolved
        )
        result.unresolved = unresolved_named(result.unresolved, model, types)
    for file, message in result.parse_errors:
        print(f"error: {file}: {message}; this file was skipped, fix it and scan again", file=sys.stderr)
    if not quiet:
        _render_scan(result, format, verbose, show_all)
    for u in result.unresolved:
        _say(quiet, f"warning: {u.arch} -> {u.module}.{u.cls} does not resolve on {','.join(u.platforms)}: {u.reason}")
    raise typer.Exit(
        exit_codes.scan_exit(
            len(findings(result.records, fail_on.value)),
            bool(result.unresolved),
            bool(result.parse_errors),
            fail_on.value == NEVER,
        )
    )


def _given(ctx: typer.Context, parameter: str) -> bool:
    """Was the option given (on the command line or by an environment variable), even at its default?"""
    source = ctx.get_parameter_source(parameter)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


@app.command("fix")
def fix_command(
    path: PathArg = None,
    model: ModelOpt = None,
    sweep_all: Annotated[bool, typer.Option("--all", help="Fix every missing_fixable drafter.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print the unified diff; write nothing.")] = False,
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if a change is needed.")] = False,
    pr_body: Annotated[
        Optional[Path],
        typer.Option(
            "--pr-body", help="Write a pull-request description (Purpose / Test Plan / Test Result) to this file."
        ),
    ] = None,
    verify_report: Annotated[
        Optional[Path],
        typer.Option(
            "--verify-report",
            help="With --pr-body or --patches: a `verify --json` file whose results go under Test Result.",
        ),
    ] = None,
    patches: Annotated[
        Optional[Path],
        typer.Option(
            "--patches",
            help="Write nothing into the tree: a `git am` series into this folder, one patch per model "
            "family (the change, its PR description, a test), and an index README.md.",
        ),
    ] = None,
    factor_pre_head: Annotated[
        bool,
        typer.Option(
            "--factor-pre-head",
            help="Move a pre-head block of more than 3 statements into one private helper "
            "(_pre_head) that compute_logits and get_top_tokens both call; compute_logits "
            "changes, and must equal its old self with the helper inlined.",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No summary on stderr.")] = False,
    vllm_version: FixVersionOpt = None,
    no_cache: NoCacheOpt = False,
    jobs: JobsOpt = 0,
    runs_with: RunsWithOpt = None,
    no_plugins: NoPluginsOpt = False,
    plugin_path: PluginPathOpt = None,
    follow_symlinks: FollowOpt = False,
) -> None:
    """Write the mirrored get_top_tokens into missing_fixable drafters (safe fixes only).

    Needs --model NAME (repeatable) or --all. Ends with a total: methods, files, refused (why), skipped.
    With --patches, writes a git am series instead, one patch per model family.
    """
    check_fix_options(
        bool(model),
        sweep_all,
        diff,
        check,
        pr_body is not None,
        patches is not None,
        verify_report is not None,
        bool(vllm_version),
    )
    from .apply.write import diff_bytes
    from .cache import FactsCache
    from .fanout import resolve_jobs
    from .fix import plan_fix, refuse_paths_outside, write_fix
    from .outputs import check_output
    from .report.fix_summary import render_fix_summary

    if pr_body is not None:
        check_output(pr_body, "--pr-body")
    if patches is not None:
        from .report.patches import check_patch_folder

        check_patch_folder(patches)
    report = None
    if verify_report is not None:
        from .report.pr_body import read_verify_report

        report = read_verify_report(verify_report)
    workers = resolve_jobs(jobs)
    no_cache = cache_off(no_cache, quiet)
    tree = resolve_tree(
        path,
        vllm_version,
        _progress(quiet),
        runs_with=runs_with,
        plugins=not no_plugins,
        plugin_paths=plugin_path,
        follow_symlinks=follow_symlinks,
        writes=not (diff or check or patches is not None),
    )
    if report is not None:
        from .report.pr_body import check_report_version

        check_report_version(report, tree.vllm_version)
    result = plan_fix(
        tree,
        model,
        sweep_all,
        None if no_cache else FactsCache(),
        model_types(tree),
        workers,
        factor_pre_head,
        cached_answers(tree, no_cache),
    )
    if result.refusal and not quiet:
        print(f"mtp-audit: no fix written into this plugin: {result.refusal}", file=sys.stderr)
    _warn_of_callers(result.caller_notes, result.runner_notes, quiet)  # drafters judged without some caller
    targets = "--all" if sweep_all else " ".join(f"--model {name}" for name in model or [])
    mode = " --factor-pre-head" if factor_pre_head else ""
    body = None
    if pr_body is not None:  # rendered (and --verify-report read) before anything is written
        from .report.pr_body import render_pr_body

        body = render_pr_body(result, f"mtp-audit fix{mode} {targets}", report)
    if diff or patches is not None:
        refuse_paths_outside(result, "--diff" if diff else "--patches")
    if diff:
        sys.stdout.flush()  # the diff goes to the buffer below, in each file's own bytes
        for rewrite in result.rewrites:
            sys.stdout.buffer.write(diff_bytes(rewrite))
        sys.stdout.buffer.flush()
    elif patches is not None:
        from .report.patches import write_patches

        series = write_patches(result, patches, f"mtp-audit fix{mode}", report)
        _say(quiet, f"wrote {counted(len(series), 'patch', 'patches')} and {patches / 'README.md'}")
    elif not check:
        write_fix(result)
    if not quiet:
        render_fix_summary(result, console(stderr=True), not (diff or check or patches), output_width(stderr=True))
    if pr_body is not None and body is not None:
        from .report.pr_body import write_pr_body

        write_pr_body(pr_body, body)
    fix_mode = "check" if check else "diff" if diff else "write"
    raise typer.Exit(exit_codes.fix_exit((o.action for o in result.plan.outcomes), len(result.rewrites), fix_mode))


@app.command("verify")
def verify_command(
    path: PathArg = None,
    model: Annotated[
        Optional[list[str]],
        typer.Option(
            "--model",
            "-m",
            metavar="NAME",
            help="The drafter to verify, named as for scan --model (module stem, "
            "architecture, class or model_type). Repeatable.",
        ),
    ] = None,
    sweep_all: Annotated[
        bool,
        typer.Option("--all", help="Every drafter record that has a get_top_tokens (upstream's or one fix wrote)."),
    ] = False,
    tp: Annotated[str, typer.Option("--tp", help="Tensor-parallel sizes to run, comma-separated.")] = "1,2",
    emit_test: Annotated[
        Optional[Path],
        typer.Option("--emit-test", help="Write a standalone pytest doing the same check for the (first) drafter."),
    ] = None,
    json_out: Annotated[
        Optional[Path],
        typer.Option("--json", help="Also write the results as JSON (fix --pr-body --verify-report reads it)."),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress, table or summary; only the exit code.")
    ] = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1,
            metavar="SECONDS",
            help="Stop the workers of one TP size after this long (exit 2, naming how many classes were done).",
            show_default=True,
        ),
    ] = WORKER_TIMEOUT_S,
    vllm_version: VersionOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Import the real vLLM code and prove get_top_tokens selects compute_logits(...).argmax(-1).

    Exit 0: no mismatch; 1: a mismatch; 2: usage error, or (with --model) a drafter that could not be verified.
    """
    from .report.verify_report import render_verify, verify_progress
    from .verify.emit import emit_test as write_test
    from .verify.emit import to_emit
    from .verify.run import Verdict, outcomes_json, summary_line, verify

    check_verify_options(bool(model), sweep_all)
    sizes = tp_sizes(tp)
    from .outputs import check_output, write_output

    for output, option in ((emit_test, "--emit-test"), (json_out, "--json")):
        if output is not None:
            check_output(output, option)
    no_cache = cache_off(no_cache, quiet)
    tree = resolve_tree(path, vllm_version, _progress(quiet))
    result = run_scan(tree, no_cache)
    if sweep_all:
        records = [r for r in result.records if r.status == Status.SUPPORTED]
    else:
        records = select(
            result.records, model, single_module=True, model_types=model_types(tree), unresolved=result.unresolved
        )
    with verify_progress(console(stderr=True), quiet) as progress:
        outcomes = verify(tree, records, sizes, progress, timeout)
    if not quiet:
        render_verify(outcomes, console(), detailed=not sweep_all)
    if json_out is not None:
        import json

        write_output(
            json_out,
            json.dumps(
                {
                    "vllm_version": tree.vllm_version,
                    "summary": summary_line(outcomes),
                    "results": outcomes_json(outcomes),
                },
                indent=2,
            )
            + "\n",
            "--json",
        )
    mismatches = [o for o in outcomes if o.verdict == Verdict.MISMATCH]
    unverified = [o for o in outcomes if o.verdict == Verdict.NOT_VERIFIED]
    if not quiet:
        for outcome in mismatches:
            print(
                f"MISMATCH {outcome.record.arch} {outcome.record.cls} TP {outcome.tp}: {outcome.detail}",
                file=sys.stderr,
            )
        for outcome in unverified:
            print(
                f"not verified: {outcome.record.arch} {outcome.record.cls} TP {outcome.tp or '-'}: {outcome.detail}",
                file=sys.stderr,
            )
        print(f"mtp-audit verify: {summary_line(outcomes)}", file=sys.stderr)
    code = exit_codes.verify_exit((o.verdict for o in outcomes), sweep_all)
    if emit_test is not None:
        passing = to_emit(outcomes)
        if passing is not None:
            write_test(emit_test, passing)
            if not quiet:
                print(f"wrote {emit_test}", file=sys.stderr)
        elif code == 0:
            raise UsageError("--emit-test needs a passing drafter to write a test for")
        else:  # the mismatch (1) or what could not be verified (2) decides the exit, as without --emit-test
            print(
                f"mtp-audit verify: no test written to {emit_test}: no drafter passed at every TP size", file=sys.stderr
            )
    raise typer.Exit(code)


@app.command("pre-commit")
def pre_commit_command(
    files: Annotated[Optional[list[Path]], typer.Argument(help="Changed files (pre-commit passes them).")] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Write the mirrors; exit 1 when a file changed.")] = False,
) -> None:
    """For pre-commit in a vLLM checkout: missing_fixable drafters in the changed files fail the hook."""
    from .commands.pre_commit import changed_files, checkout, fix_drafters, touched_drafters

    tree = checkout(Path.cwd(), writes=fix)
    no_cache = cache_off(False, False)
    changed, outside = changed_files(tree, Path.cwd(), files or [])
    for file in outside:
        print(f"note: skipped {file}: it resolves outside the checkout {tree.root}", file=sys.stderr)
    records, refused, unreadable = touched_drafters(tree, changed, no_cache)
    for file, message in unreadable:  # what it defines is not known: as scan, an input error
        print(f"error: {file}: {message}; fix it and commit again", file=sys.stderr)
    if unreadable:
        raise typer.Exit(exit_codes.ERROR)
    for record, reason in refused:
        print(
            f"note: {record.file}:{record.line}: {record.arch or record.cls} ({record.cls}) has no get_top_tokens "
            f"and no safe mirror: `mtp-audit fix --model {record.arch or record.cls}` refuses it ({reason}); "
            "write it by hand",
            file=sys.stderr,
        )
    for record in records:
        print(
            f"{record.file}:{record.line}: {record.arch or record.cls} ({record.cls}) has no get_top_tokens; "
            f"`mtp-audit fix --model {record.arch or record.cls}` writes it ({record.reason})",
            file=sys.stderr,
        )
    if fix and records:
        from .apply.plan import Action

        result = fix_drafters(tree, records, no_cache)
        for rewrite in result.rewrites:
            print(f"mtp-audit wrote get_top_tokens into {rewrite.path} ({', '.join(rewrite.classes)})", file=sys.stderr)
        for outcome in result.plan.outcomes:
            if outcome.action == Action.REFUSED:
                print(f"refused {outcome.record.arch}: {outcome.reason}", file=sys.stderr)
    raise typer.Exit(exit_codes.pre_commit_exit(len(records)))


def _run_app() -> None:
    """The typer app, with click's usage errors (an unknown option, a bad value) in one line on
    stderr like the tool's own, where typer would draw a box; exit codes as typer gives them.

    Click's classes are taken from ``typer.BadParameter``'s bases: typer 0.28 vendors click
    (``typer._click``), older releases use click itself.
    """
    try:
        _run_typer_app()
    except SystemExit:  # the command's exit code: output still buffered fails here, named (exit 2), not in the
        sys.stdout.flush()  # interpreter's last flush (exit 120); another exception in flight is not replaced
        raise
    sys.stdout.flush()


def _run_typer_app() -> None:
    bases = {cls.__name__: cls for cls in typer.BadParameter.__mro__}
    try:
        code = app(standalone_mode=False)
    except bases["ClickException"] as error:
        if type(error).__name__ == "NoArgsIsHelpError":  # a bare command: typer has printed its help
            sys.exit(2)
        context = getattr(error, "ctx", None) if isinstance(error, bases["UsageError"]) else None
        hint = f" (`{context.command_path} --help` says more)" if context is not None else ""
        raise UsageError(f"{error.format_message()}{hint}") from None
    except typer.Abort:
        print("mtp-audit: aborted", file=sys.stderr)
        sys.exit(1)
    if isinstance(code, int) and code:
        sys.exit(code)


def main() -> None:
    from .lifecycle import Interrupted, handle_ctrl_c, ignore_ctrl_c, on_big_stack
    from .outputs import OutputFailed, ReaderGone, guard_stdout, leave_as_a_closed_pipe_ends_a_command, silence_stdout

    handle_ctrl_c()
    guard_stdout()
    try:
        on_big_stack(_run_app)
    except UsageError as error:
        print(f"mtp-audit: {error}", file=sys.stderr)
        sys.exit(2)
    except InternalError as error:
        print(f"mtp-audit: {error}", file=sys.stderr)
        if os.environ.get("MTP_AUDIT_DEBUG"):
            traceback.print_exception(error.cause)
        sys.exit(2)
    except (KeyboardInterrupt, Interrupted):
        from .lifecycle import interrupted

        interrupted()
    except ReaderGone:
        silence_stdout()
        leave_as_a_closed_pipe_ends_a_command()
    except OutputFailed as error:
        silence_stdout()
        print(f"mtp-audit: {error}", file=sys.stderr)
        sys.exit(2)
    except OSError as error:  # input we could not read, a directory we could not list: named, not a bug
        where = f"{error.filename}: " if error.filename else ""
        print(f"mtp-audit: {where}{error.strerror or error}", file=sys.stderr)
        sys.exit(2)
    except Exception as error:  # a bug of ours: one line, exit 2; MTP_AUDIT_DEBUG=1 shows the traceback
        if _a_worker_died(error):  # killed from outside (the OOM killer, kill -9): no bug of ours
            print(
                "mtp-audit: a worker process died before it answered (killed from outside, or out of memory); "
                "run the command again, or with --jobs 1 for one process",
                file=sys.stderr,
            )
            sys.exit(2)
        print(
            f"mtp-audit: internal error: {type(error).__name__}: {error} (set MTP_AUDIT_DEBUG=1 for the "
            "traceback, and please report it)",
            file=sys.stderr,
        )
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
        ignore_ctrl_c()


def _warn_of_callers(caller_notes: list[str], runner_notes: list[str], quiet: bool) -> None:
    for note in caller_notes:
        _say(quiet, f"warning: speculator not followed: {note}")
    for note in runner_notes:
        _say(quiet, f"warning: model runner not read: {note}")


def _a_worker_died(error: Exception) -> bool:
    """A worker pool broken under the command (its module is imported only where a pool ran)."""
    pools = sys.modules.get("concurrent.futures.process")
    return pools is not None and isinstance(error, pools.BrokenProcessPool)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
) -> None:
    if version:
        typer.echo(f"mtp-audit {__version__}")
        raise typer.Exit(0)
    if ctx.invoked_subcommand is None:  # no command: a usage error, so the help goes to stderr (stdout stays empty)
        with redirect_stdout(sys.stderr):  # typer's rich help prints itself (to stdout) and returns ""
            text = ctx.get_help()
        if text:
            typer.echo(text, err=True)
        raise typer.Exit(2)
