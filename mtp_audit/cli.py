"""The ``mtp-audit`` command line: parse options, run a pipeline, render, exit."""

from __future__ import annotations

import os
import sys
import traceback
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from . import __version__
from .errors import InternalError, UsageError
from .index.cache import FactsCache
from .locate import locate
from .model import ScanResult
from .report.json_report import render_json
from .report.markdown import render_markdown
from .report.severity import DEFAULT_FAIL_ON, LEVELS, NEVER, findings
from .report.table import render_table
from .scan import scan
from .select import select

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


def stdout_console() -> Console:
    """Pipes and CI logs get a wide table: wrapping a reason into a 1-char column helps nobody."""
    width = None if sys.stdout.isatty() else 200
    return Console(no_color=bool(os.environ.get("NO_COLOR")) or None, width=width)


def stderr_console() -> Console:
    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")) or None)


def run_scan(path: Optional[Path], no_cache: bool) -> ScanResult:
    tree = locate(path)
    result, _, _ = scan(tree, None if no_cache else FactsCache())
    return result


@app.command("scan")
def scan_command(
    path: PathArg = None,
    format: Annotated[Format, typer.Option("--format", "-f", help="Output format.")] = Format.table,
    fail_on: Annotated[FailOn, typer.Option(  # type: ignore[valid-type]
        "--fail-on", help="Exit 1 when a finding at or above this level exists "
                          f"({' < '.join(LEVELS)}; '{NEVER}' never fails).")] = DEFAULT_FAIL_ON,
    model: ModelOpt = None,
    no_cache: NoCacheOpt = False,
) -> None:
    """Report every registered drafter on every platform: supported, fixable, manual or not applicable."""
    result = run_scan(path, no_cache)
    if model:
        result.records = select(result.records, model, single_module=False)
    err = stderr_console()
    for file, message in result.parse_errors:
        err.print(f"[red]error[/] {file}: {message}; this file was skipped, fix it and scan again")
    if format == Format.json:
        sys.stdout.write(render_json(result) + "\n")
    elif format == Format.markdown:
        sys.stdout.write(render_markdown(result))
    else:
        render_table(result, stdout_console())
    if result.parse_errors:
        raise typer.Exit(2)
    raise typer.Exit(1 if findings(result.records, fail_on.value) else 0)


def main() -> None:
    try:
        app()
    except UsageError as error:
        stderr_console().print(f"[red]mtp-audit:[/] {error}", highlight=False)
        sys.exit(2)
    except InternalError as error:
        stderr_console().print(f"[red]mtp-audit: {error}[/]", highlight=False)
        if os.environ.get("MTP_AUDIT_DEBUG"):
            traceback.print_exception(error.cause)
        sys.exit(2)
    except KeyboardInterrupt:
        sys.exit(130)


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
