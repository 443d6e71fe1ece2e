"""One exit-code policy for every command: the rules as data, and the functions that apply them.

``0`` nothing to do, ``1`` something to act on (findings, changes needed,
refusals, mismatches), ``2`` the command could not do its job (usage or input
errors, a drafter ``verify`` cannot exercise). A refusal is 1 everywhere; a
``not_applicable`` drafter (a platform placeholder, no ``compute_logits``) is
skipped, never refused, unless it is one no speculator calls and ``--model``
asked for it (MTP201: a method written there would be dead code).
``docs/exit-codes.md`` prints ``POLICY``; a test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

OK, ACTION, ERROR = 0, 1, 2

FixMode = Literal["write", "diff", "check"]


@dataclass(frozen=True)
class Rule:
    command: str
    code: int
    when: str


POLICY: tuple[Rule, ...] = (
    Rule("scan", OK, "no finding at or above `--fail-on` and every registered architecture resolves"),
    Rule(
        "scan",
        ACTION,
        "a finding at or above `--fail-on` (default `missing_fixable`), or an architecture that "
        "does not resolve on some platform (unless `--fail-on never`); with `--model`, only the architectures it "
        "selects count, and naming one that does not resolve reports it so, not as an unknown name",
    ),
    Rule(
        "scan",
        ERROR,
        "a file the audit reads (a registry module, what it imports or inherits from, a speculator) that fails "
        "to parse (named; the rest is still reported), or a PATH with no registry and no drafter-shaped file",
    ),
    Rule("fix", OK, "every requested drafter written or already supported; `not_applicable` ones skipped"),
    Rule(
        "fix",
        ACTION,
        "a requested drafter refused (`missing_manual`, a `divergent` method there, blast radius, unsafe "
        "rewrite, or `--model` naming a drafter no speculator calls by its own name); the others are still written",
    ),
    Rule("fix --diff", OK, "the diff printed (or nothing to change), nothing refused"),
    Rule("fix --diff", ACTION, "a requested drafter refused; the diff of the others is printed"),
    Rule("fix --check", OK, "no file needs a change and nothing is refused"),
    Rule("fix --check", ACTION, "a file needs a change, or a requested drafter is refused"),
    Rule("verify", OK, "every requested drafter selects the same tokens at every TP size"),
    Rule("verify", ACTION, "a mismatch (row, token ids and logits printed)"),
    Rule("verify", ERROR, "a drafter that cannot be exercised (`not verified`, with the reason)"),
    Rule(
        "verify --all",
        OK,
        "no mismatch; records this machine cannot exercise are listed as `not verified` with the reason",
    ),
    Rule("verify --all", ACTION, "a mismatch in any record, configuration or call form"),
    Rule(
        "pre-commit",
        OK,
        "no `missing_fixable` drafter in the changed files that `fix --model` would write; one it refuses "
        "(blast radius, a plugin's mirror that would go into vLLM) is a `note:` saying why, as a "
        "`missing_manual` one is no finding of the hook",
    ),
    Rule(
        "pre-commit",
        ACTION,
        "a `missing_fixable` drafter in the changed files that `fix --model` would write (with `--fix`: "
        "the mirror was written, re-stage; or it was refused as it was written, an unsafe rewrite)",
    ),
    Rule(
        "pre-commit",
        ERROR,
        "a changed file the audit reads that cannot be read or parsed (named on stderr): what it defines is not "
        "known (a file no drafter reaches, such as an unregistered new module, is not the hook's to judge)",
    ),
    Rule(
        "every command",
        ERROR,
        "usage or input error: an unknown option or `--model`, an ambiguous `--model` "
        "for `fix`/`verify`, a missing PATH or `--plugin-path`, a vLLM whose `LogitsProcessor` has no "
        "`get_top_tokens` (0.16 and earlier), a tree an interrupted `fix` left its journal in (for a "
        "command that only reads) or whose journal names a file no fix writes, a `fix --diff`/`--patches` that "
        "would name a file outside the tree (a plugin installed elsewhere), a `--patches` folder that is not new "
        "or empty, a `--verify-report` that is not a `verify --json` file or verified another vLLM version than "
        "the tree's; one line on stderr, nothing written",
    ),
)


def scan_exit(finding_count: int, unresolved: bool, parse_errors: bool, fail_never: bool) -> int:
    if parse_errors:
        return ERROR
    return ACTION if finding_count or (unresolved and not fail_never) else OK


def fix_exit(actions: Iterable[str], files_changed: int, mode: FixMode) -> int:
    """``actions`` are the plan's outcomes ("fix", "supported", "skipped", "refused")."""
    if "refused" in set(actions):
        return ACTION
    return ACTION if mode == "check" and files_changed else OK


def verify_exit(verdicts: Iterable[str], sweep_all: bool = False) -> int:
    """With ``--all``, records this machine cannot exercise are listed, not an error."""
    seen = set(verdicts)
    if "MISMATCH" in seen:
        return ACTION
    return ERROR if "not verified" in seen and not sweep_all else OK


def pre_commit_exit(missing_fixable: int) -> int:
    """Failing with ``--fix`` too: a hook that changed files fails, so that they are re-staged."""
    return ACTION if missing_fixable else OK


def markdown_table() -> str:
    lines = ["| command | exit | when |", "| --- | --- | --- |"]
    lines += [
        f"| `{rule.command}` | {rule.code} | {rule.when} |"
        if rule.command != "every command"
        else f"| every command | {rule.code} | {rule.when} |"
        for rule in POLICY
    ]
    return "\n".join(lines) + "\n"
