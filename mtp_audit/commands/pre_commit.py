"""``pre-commit``: the missing_fixable drafters a commit touches, and their fix."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..locate import locate, registry_file
from ..model import DrafterRecord, SourceTree, Status
from .trees import run_scan, settled

if TYPE_CHECKING:
    from ..apply.result import FixResult


def checkout(cwd: Path, writes: bool) -> SourceTree:
    """The vLLM checkout ``cwd`` is in, as git finds a repository (never the installed vllm), settled
    as ``trees.settled`` says; the files given stay relative to ``cwd``."""
    root = next((folder for folder in (cwd, *cwd.resolve().parents) if registry_file(folder / "vllm")), None)
    tree = locate(root) if root is not None else None
    if tree is None or not tree.is_vllm:
        raise UsageError(
            "the pre-commit hook runs in a vLLM checkout (no vllm/ registry in the current directory or above)"
        )
    return settled(tree, writes)


def changed_files(tree: SourceTree, cwd: Path, files: list[Path]) -> tuple[set[str], list[Path]]:
    """``files`` relative to the checkout's root (symlinks followed), and those that resolve outside
    it: none of those can define a drafter of this tree, so the hook skips them."""
    root = tree.root.resolve()
    inside: set[str] = set()
    outside: list[Path] = []
    for file in files:
        path = (cwd / file).resolve()
        if path.is_relative_to(root):
            inside.add(path.relative_to(root).as_posix())
        else:
            outside.append(file)
    return inside, outside


def touched_drafters(
    tree: SourceTree, changed: set[str], no_cache: bool
) -> tuple[list[DrafterRecord], list[tuple[DrafterRecord, str]], list[tuple[str, str]]]:
    """missing_fixable drafters defined, or getting their compute_logits, in one of the ``changed``
    files (relative to the root): those ``fix --model`` writes, and those it refuses with why (the
    plan's own decision: blast radius, a mirror that would go into vLLM from a plugin...). A refused
    one is no finding of the hook, as a missing_manual one is not: no commit could make the advice work.
    Third, the changed files that cannot be read or parsed, with why: what they define is not known."""
    result = run_scan(tree, no_cache, fix_refusals=True)
    unreadable = [(file, message) for file, message in result.parse_errors if file in changed]
    touched = [
        r
        for r in result.records
        if r.status == Status.MISSING_FIXABLE
        and ({r.file, r.compute_logits.file if r.compute_logits else ""} | {d.file for d in r.delegates}) & changed
    ]
    refused = [(r, result.refused_by_fix(r)) for r in touched]
    return [r for r, why in refused if why is None], [(r, why) for r, why in refused if why is not None], unreadable


def fix_drafters(tree: SourceTree, records: list[DrafterRecord], no_cache: bool) -> FixResult:
    """Write the mirrors of ``records`` (what ``fix --model`` of each would write), and of no other record
    of their architectures: a definition the commit does not touch (another platform's) is left alone."""
    from ..cache import FactsCache
    from ..fix import plan_fix, write_fix

    result = plan_fix(
        tree,
        [r.arch or r.cls for r in records],
        False,
        None if no_cache else FactsCache(),
        only={(r.arch, r.cls, r.file) for r in records},
    )
    write_fix(result)
    return result
