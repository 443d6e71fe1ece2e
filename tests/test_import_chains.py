"""Import facts read by the line scanner agree with the interpreter; chains stop where Python would."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import BASE, FIXTURES, build_tree, run_cli
from mtp_audit.index.encoding import decode_source
from mtp_audit.index.imports import (
    ImportStatement,
    _column_0_text_in_strings,
    _interpreted_imports,
    _plain_imports,
    extract_imports,
)
from mtp_audit.locate import locate
from mtp_audit.model import PLATFORMS
from mtp_audit.scan import scan


def _lines(statements: list[ImportStatement]) -> list[tuple[str, tuple[str, ...], int]]:
    return [(s.module, s.imported(), s.line) for s in statements]


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[str(p.relative_to(FIXTURES)) for p in FIXTURE_FILES])
def test_line_scanner_agrees_with_interpreter(path: Path) -> None:
    """What ``extract_imports`` answers (the line scanner where it trusts it, else the interpreter on the
    cut top level) is what the interpreter reads off the whole file, on each platform."""
    root = next(parent for parent in path.parents if (parent / "vllm").is_dir() or parent == FIXTURES)
    module, is_package = _module_name(path, root)
    source, _ = decode_source(path.read_bytes())  # a fixture may be latin-1 (fix/file_encodings)
    answered = extract_imports(source, module, is_package)
    interpreted = _interpreted_imports(source, module, is_package, cut=False)
    if interpreted is None:
        return  # not Python: the module index reports the file (the scanner does not parse)
    for platform in interpreted.imports:
        assert _lines(answered.imports[platform]) == _lines(interpreted.imports[platform])
    assert answered.errors == interpreted.errors


def test_docstring_line_starting_with_import_is_not_an_import() -> None:
    """A triple-quoted string's line that reads as a column-0 import is text: the scanner, which would
    take it for one, is not trusted with the file."""
    source = '"""Re-exported here, where drafters\nimport it from."""\n\nfrom vllm.a.head import LogitsProcessor\n'
    read = [("vllm.a.head", ("LogitsProcessor",), 4)]
    assert _column_0_text_in_strings(source)
    answered = extract_imports(source, "vllm.a", True)
    assert all(_lines(facts) == read for facts in answered.imports.values())


SCANNED = '''"""Docstring."""


from __future__ import annotations

import os.path, sys as system
from . import sibling
from ..pkg import (  # noqa: F401 (re-exported)
    first,  # a comment (with parentheses)
    second as other,
)
from .mod import \\
    third

if TYPE_CHECKING:
    from heavy import Never


def lazy():
    import inside


class Holder:
    import in_class
'''


def test_line_scanner_reads_every_form() -> None:
    statements = _plain_imports(SCANNED, "vllm.a.b", False)
    assert statements is not None
    assert _lines(statements) == [
        ("__future__", ("annotations",), 4),
        ("", ("os.path", "sys"), 6),
        ("vllm.a", ("sibling",), 7),
        ("vllm.pkg", ("first", "second"), 8),
        ("vllm.a.mod", ("third",), 12),
    ]


@pytest.mark.parametrize(
    "block",
    [
        "if current_platform.is_rocm():\n    import amd\n",
        "if TYPE_CHECKING:\n    pass\nelse:\n    import runtime\n",
        "with suppress(ImportError):\n    import maybe\n",
        "raise ImportError('never importable')\n",
        "try:\n    import optional\nexcept ImportError:\n    optional = None\n",  # which handler stops what
    ],
)
def test_line_scanner_leaves_blocks_to_the_interpreter(block: str) -> None:
    assert _plain_imports("import torch\n" + block, "vllm.x", False) is None


DISPATCH = """from vllm.platforms import current_platform

if current_platform.is_rocm():
    from .amd import Model
elif current_platform.is_xpu():
    raise NotImplementedError("not on XPU")
else:
    from .nvidia import Model

if has_feature():
    import optional_feature
else:
    raise ImportError("unknown at scan time")

try:
    if current_platform.is_cpu():
        raise RuntimeError("caught below")
except RuntimeError:
    pass
"""


def test_interpreter_runs_imports_and_raises_per_platform() -> None:
    facts = extract_imports(DISPATCH, "vllm.models.fam", True)
    assert facts is not None
    assert facts.errors == {"xpu": "import raises NotImplementedError (line 6): not on XPU"}
    assert [s.module for s in facts.imports["rocm"]] == ["vllm.platforms", "vllm.models.fam.amd", ""]
    assert [s.module for s in facts.imports["cuda"]] == ["vllm.platforms", "vllm.models.fam.nvidia", ""]
    assert facts.imports["cuda"][2].names == ("optional_feature",)  # the branch that does not raise
    assert [s.module for s in facts.imports["xpu"]] == ["vllm.platforms"]


@pytest.mark.parametrize("flag", ["_IS_XPU", "_IS_XPU: bool"])
def test_a_platform_flag_annotated_or_not_decides_what_raises(flag: str) -> None:
    source = "from vllm.platforms import current_platform\n\n"
    source += f"{flag} = current_platform.is_xpu()\n\nif _IS_XPU:\n    raise RuntimeError('no')\n"
    facts = extract_imports(source, "vllm.kernels", True)
    assert facts is not None and facts.errors == {"xpu": "import raises RuntimeError (line 6): no"}


@pytest.mark.parametrize(
    "source",
    [
        "import os; from vllm.kx.fused import fused_norm\n",  # after a semicolon
        "X = 1; import vllm.kx.fused\n",
        "from vllm.kx.fused \\\n    import fused_norm\n",  # a line continued before ``import``
        "from \\\n    vllm.kx.fused import fused_norm\n",
        'import importlib\n\nfused = importlib.import_module(".fused", "vllm.kx")\n',  # a literal package
        'import importlib\n\nfused = importlib.import_module(".fused", package="vllm.kx")\n',
    ],
)
def test_imports_the_line_scanner_cannot_see_at_a_line_start_are_read(source: str) -> None:
    facts = extract_imports(source, "vllm.model_executor.models.helpers", False)
    assert facts is not None
    statements = facts.imports["cuda"]
    imported = {s.module for s in statements if s.module} | {n for s in statements if not s.module for n in s.names}
    assert "vllm.kx.fused" in imported, statements


def test_an_alias_assigned_to_current_platform_decides_what_raises() -> None:
    source = "from vllm.platforms import current_platform\n\ncp = current_platform\n\n"
    source += "if cp.is_xpu():\n    raise RuntimeError('no')\n"
    facts = extract_imports(source, "vllm.kernels", True)
    assert facts is not None and facts.errors == {"xpu": "import raises RuntimeError (line 6): no"}


BEYOND = "ImportError (line 3): attempted relative import beyond top-level package"


def test_a_relative_import_above_the_top_level_package_raises() -> None:
    """``from .... import x`` four levels up from ``vllm.model_executor.models.m`` leaves ``vllm``: an ImportError
    on every platform, unless a handler may catch it, or the tool cannot know where the top level is."""
    source = "import torch\n\nfrom .... import something\n"
    facts = extract_imports(source, "vllm.model_executor.models.m", False)
    assert facts is not None and facts.errors == {p: f"import raises {BEYOND}" for p in PLATFORMS}
    assert not extract_imports(source.replace("....", "..."), "vllm.model_executor.models.m", False).errors
    assert not extract_imports(source, "vllm.model_executor.models.m", True).errors  # a package: one level more
    assert not extract_imports(source, "vllm.model_executor.models.m", False, top=False).errors
    caught = "try:\n    from .... import something\nexcept ImportError:\n    something = None\n"
    assert not extract_imports(caught, "vllm.model_executor.models.m", False).errors


CLIMBING_MTP = """from torch import nn

from .... import something  # noqa: F401


class ClimbingMTP(nn.Module):
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)
"""


def test_a_drafter_whose_import_chain_climbs_above_vllm_has_no_platform(tmp_path: Path) -> None:
    """Python cannot import the drafter's module (itself, or a module it imports): no record, the statement named."""
    tree = build_tree(BASE, tmp_path / "tree")
    models = tree / "vllm" / "model_executor" / "models"
    (models / "registry.py").write_text(
        '_SPECULATIVE_DECODING_MODELS = {"ClimbingMTPModel": ("climbing_mtp", "ClimbingMTP"),'
        ' "UserMTPModel": ("user_mtp", "ClimbingMTP")}\n'
    )
    (models / "climbing_mtp.py").write_text(CLIMBING_MTP)
    (models / "user_mtp.py").write_text("from .climbing_mtp import ClimbingMTP  # noqa: F401\n")
    result, _, _ = scan(locate(tree))
    assert not result.records
    path = "vllm/model_executor/models/climbing_mtp.py"
    assert [(u.arch, u.platforms, u.reason) for u in result.unresolved] == [
        ("ClimbingMTPModel", sorted(PLATFORMS), f"{path}: import raises {BEYOND}"),
        (
            "UserMTPModel",
            sorted(PLATFORMS),
            f"import chain: vllm/model_executor/models/user_mtp.py:1 imports vllm.model_executor.models.climbing_mtp;"
            f" {path}: import raises {BEYOND}",
        ),
    ]


BROKEN_BASE = """from torch import nn


class BrokenBase(nn.Module):
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)

    def forward(self, x) return x
"""


def test_a_drafter_whose_base_module_does_not_parse_has_no_platform(tmp_path: Path) -> None:
    """The drafter's module imports its base's, which raises SyntaxError: Python never defines the drafter.
    No record (not ``not_applicable`` for a base not followed); the file's error and exit code 2 stay."""
    tree = build_tree(BASE, tmp_path / "tree")
    models = tree / "vllm" / "model_executor" / "models"
    (models / "registry.py").write_text(
        '_SPECULATIVE_DECODING_MODELS = {"DerivedMTPModel": ("derived_mtp", "DerivedMTP"),'
        ' "LazyMTPModel": ("lazy_mtp", "LazyMTP")}\n'
    )
    (models / "broken_base.py").write_text(BROKEN_BASE)
    (models / "derived_mtp.py").write_text(
        "from .broken_base import BrokenBase\n\n\nclass DerivedMTP(BrokenBase):\n    pass\n"
    )
    lazy = "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .broken_base import BrokenBase\n"
    (models / "lazy_mtp.py").write_text(lazy + "\n\nclass LazyMTP(BrokenBase):\n    pass\n")
    result, _, _ = scan(locate(tree))
    assert result.parse_errors == [("vllm/model_executor/models/broken_base.py", "syntax error, line 8: expected ':'")]
    # imported under TYPE_CHECKING only, never at run time: Python fails on the name; the scan names the
    # base it cannot follow and leaves the drafter to a human (missing_manual), not "nothing to do"
    assert {(r.cls, r.status.value) for r in result.records} == {("LazyMTP", "missing_manual")}
    [lazy_record] = result.records
    assert "but bases not followed: BrokenBase" in lazy_record.reason
    assert [(u.arch, u.platforms, u.reason) for u in result.unresolved] == [
        (
            "DerivedMTPModel",
            sorted(PLATFORMS),
            "import chain: vllm/model_executor/models/derived_mtp.py:1 imports vllm.model_executor.models.broken_base;"
            " vllm/model_executor/models/broken_base.py: syntax error, line 8: expected ':'",
        )
    ]
    run = run_cli("scan", str(tree), "--format", "json")
    assert run.returncode == 2
    assert "error: vllm/model_executor/models/broken_base.py: syntax error, line 8: expected ':'" in run.stderr


def test_handled_imports_that_import_each_other_end(tmp_path: Path) -> None:
    """Two modules whose ``try`` imports reach each other: the walk through a handled import comes back
    to a module whose import is under way, which Python finds partly run, so the cycle ends; the
    raising package behind one of them still fails the chain on XPU, as ``except ImportError`` does not
    stop ``NotImplementedError``."""
    tree = build_tree(FIXTURES / "scan" / "import_chain_handlers", tmp_path / "tree")
    models = tree / "vllm" / "model_executor" / "models"
    (models / "first_helpers.py").write_text(
        "try:\n    from . import second_helpers\nexcept ImportError:\n    second_helpers = None\n"
    )
    (models / "second_helpers.py").write_text(
        "try:\n    from . import first_helpers\nexcept ImportError:\n    first_helpers = None\n\n"
        "from .handler_helpers import fused_norm\n"
    )
    (models / "handler_mtp.py").write_text(
        (models / "handler_mtp.py").read_text().replace(".handler_helpers import fused_norm", ".first_helpers import *")
    )
    result, _, _ = scan(locate(tree))
    handler = next(r for r in result.records if r.cls == "HandlerMTP")
    assert "xpu" not in handler.platforms
    assert [u.platform for u in handler.unavailable_on] == ["xpu"]
    assert "vllm/kernels/__init__.py: import raises NotImplementedError (line 6)" in handler.unavailable_on[0].reason


def test_modules_importing_each_other_in_a_try_with_an_else_block_end(tmp_path: Path) -> None:
    """Two modules whose ``try`` imports the other and whose ``else`` asks a name a module binds on CUDA only:
    the walk of one comes back to the other; it ends (reading the names the else asks recursed without end)."""
    tree = build_tree(BASE, tmp_path / "tree")
    models = tree / "vllm" / "model_executor" / "models"
    (tree / "vllm" / "extra.py").write_text("EXTRA = 1\n")
    (tree / "vllm" / "perplat.py").write_text(
        "from vllm.platforms import current_platform\n\nif current_platform.is_cuda():\n"
        "    from vllm.extra import EXTRA as NAME\n"
    )
    drafter = (
        "from torch import nn\n\nfrom .{me}_helpers import *  # noqa: F403\n\n\nclass {cls}(nn.Module):\n"
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    for me, other in (("a", "b"), ("b", "a")):
        (models / f"{me}_helpers.py").write_text(
            f"try:\n    import vllm.model_executor.models.{other}_helpers\nexcept ImportError:\n    pass\n"
            "else:\n    from vllm.perplat import NAME\n"
        )
        (models / f"{me}_mtp.py").write_text(drafter.format(me=me, cls=f"{me.upper()}MTP"))
    (models / "registry.py").write_text(
        '_SPECULATIVE_DECODING_MODELS = {"AMTPModel": ("a_mtp", "AMTP"), "BMTPModel": ("b_mtp", "BMTP")}\n'
    )
    result, _, _ = scan(locate(tree))
    assert sorted(r.cls for r in result.records) == ["AMTP", "BMTP"]
    assert all("cuda" in r.platforms for r in result.records)
