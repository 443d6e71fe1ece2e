"""Regenerate the example outputs in README.md from real runs on the cached vLLM sources.

    python scripts/readme_examples.py           rewrite README.md (then review the diff)
    python scripts/readme_examples.py --check   exit 1 when README.md differs (tests/test_readme.py)

Each example is a block of README.md between ``<!-- example: NAME -->`` and
``<!-- /example -->``: the command as a user types it, then its output at 80
columns with colour off (stdout, then stderr, as a terminal shows them; a
piped ``| tail`` is not wrapped, as without a terminal).
Released sources are downloaded on first use, as ``--vllm-version`` does.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
WIDTH = 80
BLOCK = re.compile(r"<!-- example: (?P<name>[\w-]+) -->\n.*?<!-- /example -->", re.DOTALL)


@dataclass(frozen=True)
class Example:
    args: tuple[str, ...]
    lang: str = "text"
    tail: int | None = None  # only the last lines (the command shows `2>&1 | tail -N`: piped, so unwrapped)
    details: str | None = None  # folded under this summary
    plugin: tuple[str, str] | None = None  # (name, version) installed with pip --no-deps --target T, on PYTHONPATH
    exits: tuple[int, ...] = (0, 1)  # the exit codes it is shown with (2: a refusal the README explains)


EXAMPLES = {
    "scan": Example(("scan", "--vllm-version", "0.34.0"), details="the whole report of vLLM 0.34.0 at 80 columns"),
    "scan-some": Example(
        ("scan", "--vllm-version", "0.34.0", "--model", "deepseek_v4", "--model", "Gemma4MTPModel", "--show-all")
    ),
    "scan-markdown": Example(
        (
            "scan",
            "--vllm-version",
            "0.34.0",
            "--model",
            "deepseek_v4",
            "--model",
            "Gemma4MTPModel",
            "--format",
            "markdown",
        )
    ),
    "compare": Example(("scan", "--compare", "0.33.0", "0.34.0")),
    "fix-deepseek": Example(("fix", "--vllm-version", "0.34.0", "--model", "deepseek_mtp", "--diff"), lang="diff"),
    "fix-all": Example(("fix", "--vllm-version", "0.34.0", "--all", "--check"), tail=1),
    "fix-nemotron-034": Example(("fix", "--vllm-version", "0.34.0", "--model", "nemotron_h", "--check")),
    "fix-nemotron-033": Example(("fix", "--vllm-version", "0.33.0", "--model", "nemotron_h", "--diff"), lang="diff"),
    "plugin-scan": Example(
        ("scan", "--model", "DeepSeekMTPModel", "--format", "markdown"), plugin=("vllm-ascend", "0.9.1")
    ),
    "plugin-old-vllm": Example(
        ("fix", "T", "--vllm", "0.11.0", "--model", "DeepSeekMTPModel"), plugin=("vllm-ascend", "0.9.1"), exits=(2,)
    ),
}
PLUGIN_DIR = "T"  # how the commands and outputs name the plugin's --target directory


def installed_plugin(name: str, version: str, into: Path) -> Path:
    """The released plugin's wheel (downloaded once, as ``--vllm`` does with releases) installed without its
    dependencies into a folder of ``into``, for its own Python and platform: the scan reads it, never imports it."""
    sys.path.insert(0, str(REPO))
    try:
        from mtp_audit.sources import released_wheel
    finally:
        sys.path.pop(0)
    wheel = released_wheel(name, version)
    python, _, platforms = wheel.stem.split("-")[-3:]
    digits = python.split(".")[-1].removeprefix("cp").removeprefix("py")  # cp311, py3, py2.py3
    tags = ["--python-version", f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits]
    for platform in platforms.split("."):
        tags += ["--platform", platform]
    target = into / f"{name}-{version}"
    if not target.exists():
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check"]
        subprocess.run(
            [*pip, "--no-index", "--only-binary=:all:", *tags, "--target", str(target), str(wheel)], check=True
        )
    return target


def run(example: Example, cache: Path) -> str:
    """The example's output; a plugin's folder (under ``cache``) named ``T`` in its arguments and output."""
    plugin = installed_plugin(*example.plugin, cache) if example.plugin else None
    env = {key: value for key, value in os.environ.items() if key != "COLUMNS"}
    env = {
        **env,
        **({} if example.tail else {"COLUMNS": str(WIDTH)}),
        "NO_COLOR": "1",
        "MTP_AUDIT_CACHE_DIR": str(cache),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), str(plugin or ""), os.environ.get("PYTHONPATH")])),
    }
    args = [str(plugin) if plugin and arg == PLUGIN_DIR else arg for arg in example.args]
    result = subprocess.run(
        [sys.executable, "-m", "mtp_audit", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        check=False,
    )
    if result.returncode not in example.exits:
        raise SystemExit(f"mtp-audit {' '.join(example.args)} exited {result.returncode}: {result.stderr}")
    output = result.stdout + result.stderr
    lines = (output.replace(str(plugin), PLUGIN_DIR) if plugin else output).splitlines()
    return "\n".join(lines[-example.tail :] if example.tail else lines)


def block(name: str, example: Example, cache: Path) -> str:
    command = ("$ PYTHONPATH=T " if example.plugin else "$ ") + "mtp-audit " + " ".join(example.args)
    if example.tail:
        command += f" 2>&1 | tail -{example.tail}"
    fenced = f"```{example.lang}\n{command}\n{run(example, cache)}\n```"
    if example.details:
        fenced = f"<details><summary>{example.details}</summary>\n\n{fenced}\n\n</details>"
    return f"<!-- example: {name} -->\n{fenced}\n<!-- /example -->"


def render(readme: str) -> str:
    """README with every example block replaced by a fresh run; an unknown or missing block is an error.

    The runs share a new, empty cache: what a user's cache holds from older versions of the tool
    never reaches the README."""
    found = [m.group("name") for m in BLOCK.finditer(readme)]
    if sorted(found) != sorted(EXAMPLES):
        raise SystemExit(f"README example blocks {sorted(found)} differ from the examples {sorted(EXAMPLES)}")
    with tempfile.TemporaryDirectory(prefix="mtp-audit-readme-") as cache:
        return BLOCK.sub(lambda m: block(m.group("name"), EXAMPLES[m.group("name")], Path(cache)), readme)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md is not up to date")
    args = parser.parse_args()
    current = README.read_text()
    fresh = render(current)
    if args.check:
        sys.exit(0 if fresh == current else 1)
    README.write_text(fresh)


if __name__ == "__main__":
    main()
