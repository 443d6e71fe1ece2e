"""What a rewrite is given and what it gives back: plain data, no libcst.

The fix pipeline hands ``FileJob``s to the rewriting workers and reads back
``Rewrite``s (or ``UnsafeRewrite``s) without importing libcst itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..classify.analysis import Insertion
from ..model import ClassKey


class UnsafeRewrite(Exception):
    """The rewritten file is not the old file plus the new methods; nothing is written."""


@dataclass
class FileJob:
    """One file to rewrite, with everything the rewrite reads (it may run in another process)."""

    path: str
    source: str
    insertions: list[Insertion]
    binds_torch: bool  # ``torch`` is bound at run time on every platform: no import to add
    factor_pre_head: bool = False  # share a long pre-head block through a helper (fix --factor-pre-head)
    # planned class -> why it may not get the helper: it, a subclass or a class in their MRO binds the name
    # (``name_clashes``)
    helper_clashes: dict[ClassKey, str] = field(default_factory=dict)


@dataclass
class Rewrite:
    path: str
    old: str
    new: str
    classes: list[str]  # classes that received get_top_tokens
    added_import: bool
    targets: list[tuple[str, int]]  # (name, line in the old file) of the planned classes
    encoding: str = "utf-8"  # the file's own (a BOM, a PEP 263 cookie): written back in it
    factored: list[str] = field(default_factory=list)  # classes whose pre-head block went into a helper
    # the modules whose classes it writes: the file may be reached as several, through in-tree links
    modules: tuple[str, ...] = ()
