"""Imports go down the pipeline only: a module imports its own layer or the layers below it.

Every import counts, at any depth of the file (in functions, under TYPE_CHECKING):
an annotation-only or deferred edge up the pipeline still ties a stage to a later one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import mtp_audit

PACKAGE = Path(mtp_audit.__file__).parent
# Lowest first. The ground floor imports nothing of the tool's but itself; `cli` is the top.
LAYERS = (
    ("__init__", "model", "errors", "depth", "patterns", "cstnodes", "templating", "lifecycle", "outputs"),
    ("cache",),
    ("locate", "sources", "select"),
    ("index",),
    ("resolve",),
    ("classify",),
    ("synthesize",),
    ("scan",),
    ("fanout",),
    ("apply",),
    ("verify",),
    ("report",),
    ("fix",),
    ("commands",),
    ("cli", "__main__"),
)
LAYER = {name: level for level, names in enumerate(LAYERS) for name in names}


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


MODULES = _modules()


def _unit(module: str) -> str:
    """The layer unit of an absolute module name: ``mtp_audit.classify.shapes`` -> ``classify``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(module: str, source: str, is_package: bool = False) -> set[str]:
    """Absolute names of the mtp_audit modules that ``module``'s source imports, anywhere in it."""
    package = module if is_package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = parts[: len(parts) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)  # `from .. import patterns` imports the submodule, not just the package
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return {name for name in found if name == "mtp_audit" or name.startswith("mtp_audit.")}


def upward_imports(module: str, source: str, is_package: bool = False) -> list[str]:
    """The imports of ``module`` that reach a later stage of the pipeline."""
    mine = LAYER[_unit(module)]
    return sorted(name for name in imported_modules(module, source, is_package) if LAYER[_unit(name)] > mine)


def test_every_module_has_a_layer():
    assert sorted({_unit(m) for m in MODULES} - set(LAYER)) == []


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_pipeline(module: str):
    path = MODULES[module]
    upward = upward_imports(module, path.read_text(encoding="utf-8"), path.name == "__init__.py")
    assert not upward, f"{module} ({_unit(module)}) imports a later stage: {', '.join(upward)}"


def test_an_upward_import_is_caught():
    in_function = "def f():\n    from ..synthesize import mirror\n"
    assert upward_imports("mtp_audit.classify.memo", in_function) == [
        "mtp_audit.synthesize",
        "mtp_audit.synthesize.mirror",
    ]
    type_checking = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .fix import FixResult\n"
    assert upward_imports("mtp_audit.model", type_checking) == ["mtp_audit.fix"]
    assert upward_imports("mtp_audit.scan", "import mtp_audit.fanout\n") == ["mtp_audit.fanout"]
    assert upward_imports("mtp_audit.classify", "from .. import report\n", is_package=True) == ["mtp_audit.report"]
    assert upward_imports("mtp_audit.report.pr_body", "from ..apply.plan import FixResult\n") == []
