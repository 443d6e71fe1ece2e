"""How wide the output may be, and a rich console that honours it and ``NO_COLOR``."""

from __future__ import annotations

import os
import shutil
import sys

# Piped output without COLUMNS (a CI log): tables stay wide, reasons on few lines; the concise
# format wraps nothing.
PIPED_TABLE_WIDTH = 200


def output_width(stderr: bool = False) -> int | None:
    """``COLUMNS`` when set, else the terminal's width, else None (a pipe: do not wrap)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return shutil.get_terminal_size().columns
    return None


def console(stderr: bool = False):
    from rich.console import Console

    width = output_width(stderr) or PIPED_TABLE_WIDTH
    # with a width alone, rich takes a dumb terminal (TERM=dumb: Emacs' shell, some CI consoles) for
    # 80 x 25 whatever its size; the height is not used
    height = shutil.get_terminal_size().lines
    return Console(stderr=stderr, no_color=bool(os.environ.get("NO_COLOR")) or None, width=width, height=height)
