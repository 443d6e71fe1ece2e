"""Released vLLM sources, fetched without installing them: ``pip download --no-deps``
of the wheel, keeping only ``vllm/**/*.py`` in the user cache; offline afterwards."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import platformdirs

from .errors import UsageError
from .lifecycle import scratch_directory

VERSION = re.compile(r"^\d+\.\d+(\.\d+)*([.-]?(post|rc|dev)\d+)?$")


def sources_dir() -> Path:
    override = os.environ.get("MTP_AUDIT_SOURCES_DIR")
    if override:
        return Path(override)
    return Path(platformdirs.user_cache_dir("mtp-audit")) / "vllm-src"


Progress = Callable[[str], AbstractContextManager]  # shown while a slow step runs


def release_tree(version: str, *, offline: bool = False, progress: Progress | None = None) -> Path:
    """The directory holding ``vllm/`` of release ``version``, downloading it once.

    The download (a wheel of hundreds of MB) is the one slow step of a scan: ``progress``
    says so while it runs."""
    if not VERSION.match(version):
        raise UsageError(f"{version!r} is not a vLLM version number (e.g. 0.34.0)")
    target = sources_dir() / version
    if (target / "vllm" / "__init__.py").is_file():
        return target
    if offline:
        raise UsageError(f"vLLM {version} is not in the cache ({target}) and --offline was given")
    target.parent.mkdir(parents=True, exist_ok=True)
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
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # the cache entry appears whole or not at all
    return target


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
    with scratch_directory(".download-", target.parent) as scratch:
        with (progress or nullcontext)(f"downloading the {name}=={version} wheel with pip, once, into {target}"):
            wheel = _download(f"{name}=={version}", Path(scratch))
        staging = Path(scratch) / "entry"
        staging.mkdir()
        shutil.move(str(wheel), staging / wheel.name)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # the cache entry appears whole or not at all
    return min(target.glob("*.whl"))
