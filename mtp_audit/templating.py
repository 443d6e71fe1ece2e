"""The text of ``templates/<name>``: generated code and documents start from these files.

Ground floor, and free of libcst: writing a PR body or a verify test reads a template
without importing the parser. (Not named ``templates``: the wheel ships the template
files in a ``mtp_audit/templates/`` folder, which a module of that name would shadow.)
"""

from __future__ import annotations

import functools
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent
# Shipped in the wheel under the package; in a checkout, the top-level folder.
TEMPLATE_DIRS = (_PACKAGE / "templates", _PACKAGE.parent / "templates")
PRE_HEAD = "pre_head.py.tmpl"  # the helper ``fix --factor-pre-head`` shares the pre-head block through


@functools.cache
def template(name: str) -> str:
    """Text of ``templates/<name>``: shipped in the wheel, or the checkout's top-level folder."""
    for folder in TEMPLATE_DIRS:
        path = folder / name
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"mtp-audit template {name} is missing from the installation")


def defined_name(name: str) -> str:
    """The name that template ``name``'s ``def`` binds (``pre_head.py.tmpl``: the factored helper's):
    code that must know it without building the method (or importing libcst) reads it here."""
    return template(name).split("(", 1)[0].removeprefix("def ").strip()


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 patch``, ``2 patches``: a count and its noun, singular for one (``plural`` where not noun + s)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"
