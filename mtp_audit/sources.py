"""Released vLLM sources, fetched without installing them: ``pip download --no-deps``
of the wheel, keeping only ``vllm/**/*.py`` in the user cache; offline afterwards."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

import platformdirs

from .errors import UsageError
from .lifecycle import scratch_directory

VERSION = re.compile(r"^\d+\.\d+(\.\d+)*([.-]?(post|rc|dev)\d+)?$")


def canonical_version(version: str) -> str:
    """The release number as vLLM writes it, three parts (``0.34`` and ``0.34.0.0`` are pip's ``0.34.0``,
    one release: one cache folder, one download); a pre- or post-release suffix kept as given."""
    number = re.match(r"\d+(?:\.\d+)*", version)
    assert number is not None
    parts = [int(part) for part in number.group().split(".")]
    while len(parts) > 3 and parts[-1] == 0:
        parts.pop()
    parts += [0] * (3 - len(parts))
    return ".".join(map(str, parts)) + version[number.end() :]


def sources_dir() -> Path:
    override = os.environ.get("MTP_AUDIT_SOURCES_DIR")
    if override:
        return Path(override).expanduser()  # "~/x" as a CI file writes it, which no shell expanded
    return Path(platformdirs.user_cache_dir("mtp-audit")) / "vllm-src"


Progress = Callable[[str], AbstractContextManager]  # shown while a slow step runs


def release_tree(version: str, *, offline: bool = False, progress: Progress | None = None) -> Path:
    """The directory holding ``vllm/`` of release ``version``, downloading it once.

    The download (a wheel of hundreds of MB) is the one slow step of a scan: ``progress``
    says so while it runs."""
    if not VERSION.match(version):
        raise UsageError(f"{version!r} is not a vLLM version number (e.g. 0.34.0)")
    version = canonical_version(version)
    target = sources_dir() / version
    if _complete_tree(target):
        return target
    if offline:
        raise UsageError(f"vLLM {version} is not in the cache ({target}) and --offline was given")
    target.parent.mkdir(parents=True, exist_ok=True)
    with _one_download_at_a_time(target.parent, progress):
        if _complete_tree(target):  # the download we waited for
            return target
        _download_tree(version, target, progress)
    return target


def _download_tree(version: str, target: Path, progress: Progress | None) -> None:
    with scratch_directory(".download-", target.parent) as scratch:
        with (progress or nullcontext)(
            f"downloading the vllm=={version} wheel with pip, once: its vllm/*.py are kept in {target}"
        ):
            wheel = _download(f"vllm=={version}", Path(scratch), "vllm-*.whl")
        staging = Path(scratch) / "tree"
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if n.startswith("vllm/") and n.endswith(".py")]
            if not members:
                raise UsageError(f"the vllm {version} wheel holds no vllm/*.py files")
            archive.extractall(staging, members)
        _install(staging, target, _complete_tree)


@contextmanager
def _one_download_at_a_time(folder: Path, progress: Progress | None) -> Iterator[None]:
    """Hold the cache folder's lock (``flock`` on the folder itself: no lock file is left) while a download
    runs, so that processes asking for a release at once (a test run's workers, a CI matrix) wait for the
    first and take what it installed instead of downloading hundreds of MB again; downloads into one folder
    run one at a time. The lock only saves work: where ``flock`` is missing (not POSIX) or refused (an NFS
    mount may refuse it on a folder) each process downloads, and ``_install`` keeps the first complete entry."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    handle = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with (progress or nullcontext)(f"waiting for another process's download into {folder}"):
                fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:
            pass  # refused: download unlocked, as above
        yield
    finally:
        os.close(handle)  # releases the lock


def _complete_tree(folder: Path) -> bool:
    return (folder / "vllm" / "__init__.py").is_file()


def _has_wheel(folder: Path) -> bool:
    return any(folder.glob("*.whl"))


def _install(staging: Path, target: Path, complete: Callable[[Path], bool]) -> None:
    """Put ``staging`` (in a scratch folder) at ``target`` in one rename, so the entry appears whole or
    not at all. Where a ``complete`` one is already there (another process finished first, and may be
    reading it), it is kept and ours is left to go with the scratch folder; an incomplete one (not made
    by this function) is moved into the scratch folder first, never removed where it is."""
    try:
        staging.rename(target)
        return
    except OSError:
        if complete(target):
            return
    try:
        target.rename(staging.parent / "incomplete")
    except FileNotFoundError:
        pass
    try:
        staging.rename(target)
    except OSError:
        if not complete(target):  # set aside, then taken again by another process, incomplete
            raise


def _download(requirement: str, into: Path, pattern: str = "*.whl") -> Path:
    """``pip download --no-deps`` of one binary wheel into ``into``; a UsageError naming pip's last line."""
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "--quiet",
        "-d",
        str(into),
        requirement,
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(into.glob(pattern))
    if result.returncode != 0 or not wheels:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise UsageError(f"could not download {requirement} with pip: {detail[-1] if detail else 'no wheel'}")
    return wheels[0]


def released_wheel(name: str, version: str, *, progress: Progress | None = None) -> Path:
    """The wheel of a released distribution (a vLLM plugin), downloaded once with
    ``pip download --no-deps`` into the cache beside the vLLM sources; offline afterwards."""
    if not VERSION.match(version):
        raise UsageError(f"{version!r} is not a version number")
    target = sources_dir() / "wheels" / f"{name}-{version}"
    stem = re.sub(r"[-_.]+", "_", name).lower()
    found = sorted(target.glob(f"{stem}-{version}-*.whl"))
    if found:
        return found[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    with _one_download_at_a_time(target.parent, progress):
        if not _has_wheel(target):  # else the download we waited for
            _download_wheel(name, version, target, progress)
    wheels = sorted(target.glob("*.whl"))
    if not wheels:  # emptied by someone else since
        raise UsageError(f"{target} holds no wheel of {name} {version}; remove it and try again")
    return wheels[0]


def _download_wheel(name: str, version: str, target: Path, progress: Progress | None) -> None:
    with scratch_directory(".download-", target.parent) as scratch:
        with (progress or nullcontext)(f"downloading the {name}=={version} wheel with pip, once, into {target}"):
            wheel = _download(f"{name}=={version}", Path(scratch))
        staging = Path(scratch) / "entry"
        staging.mkdir()
        shutil.move(str(wheel), staging / wheel.name)
        _install(staging, target, _has_wheel)
