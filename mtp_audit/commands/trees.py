"""The tree a command audits, and its scan result (from the result cache when nothing it read changed).

The pipeline modules are imported where they are used: a warm scan answers from the
result cache without them.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from ..cache import ResultCache, default_cache_dir, usable
from ..errors import UsageError
from ..locate import locate
from ..model import ScanAnswers, ScanResult, SourceTree, Status
from ..sources import Progress, release_tree


def resolve_tree(
    path: Path | None,
    vllm_version: str | None,
    progress: Progress | None = None,
    *,
    runs_with: str | None = None,
    plugins: bool = False,
    plugin_paths: list[Path] | None = None,
    follow_symlinks: bool = False,
    writes: bool = False,
) -> SourceTree:
    """The tree to audit, once an interrupted fix in it is settled (``settled``: a command that
    ``writes`` completes or undoes it, one that only reads refuses); a vLLM with its installed
    plugins, a plugin directory with its vLLM. ``progress`` shows a first download."""
    from ..locate import runs_with as with_vllm
    from ..locate import with_plugins

    if path is not None and vllm_version:
        raise UsageError("give PATH or --vllm-version, not both")
    tree = locate(release_tree(vllm_version, progress=progress) if vllm_version else path)
    if follow_symlinks:
        tree = replace(tree, follow_symlinks=True)
    if not tree.is_vllm:
        if plugin_paths:
            raise UsageError("--plugin-path goes with a vLLM tree; PATH is a plugin directory")
        tree = with_vllm(tree, runs_with, lambda version: release_tree(version, progress=progress))
    elif runs_with is not None:
        raise UsageError("--vllm names the vLLM a plugin directory runs with; this PATH is a vLLM tree itself")
    elif plugins:
        tree = with_plugins(tree, plugin_paths or [])
    return settled(tree, writes)


def settled(tree: SourceTree, writes: bool) -> SourceTree:
    """``tree``, once a fix that was interrupted in it (kill -9) is dealt with: a command that
    ``writes`` completes or undoes it (only inside the roots it may write, as ``fix`` checks);
    one that only reads never writes, and refuses to report on the half-written tree."""
    from ..apply.write import recover, refuse_interrupted

    if writes:
        recover(tree.root, tree.plugin_folders)
    else:
        refuse_interrupted(tree.root)
    return tree


def cache_off(no_cache: bool, quiet: bool) -> bool:
    """Whether the command runs without the cache: ``--no-cache``, or a cache directory that cannot
    be used (said once, unless ``quiet``, which also silences warnings about bad entries)."""
    return no_cache or not usable(default_cache_dir(), quiet)


def model_types(tree: SourceTree) -> dict[str, list[str]]:
    """The Hugging Face model_type -> drafter names of a vLLM tree's speculative config."""
    if not tree.is_vllm:
        return {}
    from ..resolve.model_types import model_type_map

    assert tree.package_dir is not None
    return model_type_map(tree.package_dir)


def run_scan(tree: SourceTree, no_cache: bool, jobs: int = 0, fix_refusals: bool = False) -> ScanResult:
    """The scan result: from the result cache when nothing it depends on changed. ``fix_refusals``:
    with ``ScanResult.fix_refusals`` planned (0.2-0.3 s on vLLM 0.34: one pass notes what each
    analysis reads, then each plan re-analyses only the drafters it can change), kept in the result
    cache."""
    results = _result_cache(tree, no_cache)
    cached = results.load(tree) if results else None
    if cached is not None and (not fix_refusals or not _fixable(cached)):
        return cached
    basis = package_files(tree) if fix_refusals else None
    if cached is not None and cached.fix_refusals is not None and cached.fix_refusals_basis == basis:
        return cached
    from ..cache import FactsCache, Observed
    from ..fanout import forked, resolve_jobs
    from ..scan import scan

    earlier = results.answers(tree) if results and cached else None
    result, scanner, resolutions = scan(
        tree, None if no_cache else FactsCache(), forked(resolve_jobs(jobs)), earlier=earlier
    )
    if fix_refusals and not result.parse_errors:  # else fix stops at those files, refusing nothing
        from ..fix import refusals_alone

        result.fix_refusals = refusals_alone(tree, scanner, resolutions, result.records)
        result.fix_refusals_basis = basis
    if results and not result.parse_errors:
        observed = {**(earlier.observed if earlier else {}), **scanner.index.observed}  # what seeded it too
        results.store(tree, Observed(observed), result, scanner.answers(resolutions))
    return result


def package_files(tree: SourceTree) -> str:
    """A digest of the package's Python files as the file system lists them (path, size, modification time):
    what the blast radius of a planned fix reads beyond the files a scan reads (a new module subclassing a
    base), cheap to tell again (0.08 s for vLLM 0.34's 3,600 files)."""
    import hashlib

    top = str(tree.package_dir or tree.root)
    signature = hashlib.sha256()
    for folder, folders, names in os.walk(top):
        folders.sort()
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            signature.update(f"{os.path.relpath(path, top)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return signature.hexdigest()


def _fixable(result: ScanResult) -> bool:
    return any(r.status == Status.MISSING_FIXABLE for r in result.records)


def cached_answers(tree: SourceTree, no_cache: bool) -> ScanAnswers | None:
    """The import-chain and call-contract answers of the last scan of ``tree`` (``run_scan``) if
    nothing it read has changed since; None without one."""
    results = _result_cache(tree, no_cache)
    return results.answers(tree) if results else None


def _result_cache(tree: SourceTree, no_cache: bool) -> ResultCache | None:
    """The whole-result cache, for a vLLM tree read without following symlinks out of it."""
    return None if no_cache or not tree.is_vllm or tree.follow_symlinks else ResultCache(default_cache_dir())
