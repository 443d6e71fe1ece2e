"""Lay out generated methods as ruff formats them, where they will stand in the file.

Kept apart from the mirror rule (which needs ``libcst.matchers``): the file
rewriter formats cached mirrors and should not pay for importing the matchers.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

import libcst as cst


class FormatError(Exception):
    """ruff could not format the generated code."""


@functools.cache
def _ruff() -> list[str]:
    exe = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if exe:
        return [exe]
    return [sys.executable, "-m", "ruff"]


def ruff_format(code: str, line_length: int = 88) -> str:
    """Format with ruff, isolated from any configuration, as vLLM's CI does."""
    result = subprocess.run(
        [*_ruff(), "format", "--isolated", f"--line-length={line_length}", "--stdin-filename=mirror.py", "-"],
        input=code,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise FormatError(f"ruff format failed on the generated method: {result.stderr.strip()}")
    return result.stdout


def format_methods(methods: list[tuple[cst.FunctionDef, int]]) -> list[cst.FunctionDef]:
    """Lay out each method as ruff would inside ``depth`` nested classes, in one ruff run.

    Each method is wrapped in its own stack of classes in one module; ruff
    formats the module, and the methods are parsed back out in order.
    """
    if not methods:
        return []
    wrapped: list[cst.BaseStatement] = []
    for index, (method, depth) in enumerate(methods):
        inner: cst.BaseStatement = method.with_changes(leading_lines=())
        for level in range(depth):
            inner = cst.ClassDef(name=cst.Name(f"_Wrapper{index}_{level}"), body=cst.IndentedBlock(body=[inner]))
        wrapped.append(inner)
    formatted = cst.parse_module(ruff_format(cst.Module(body=wrapped).code))
    out = []
    for statement, (_, depth) in zip(formatted.body, methods):
        node: cst.CSTNode = statement
        for _ in range(depth):
            assert isinstance(node, cst.ClassDef)
            node = node.body.body[0]
        assert isinstance(node, cst.FunctionDef)
        out.append(node)
    return out
