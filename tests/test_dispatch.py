"""Platform dispatch: a branch that raises on a platform means that platform has no drafter.

The module-level statements (and a module ``__getattr__``) are read per
platform; each case says, platform by platform, where a name leads or why the
import fails.
"""

from __future__ import annotations

import pytest

from mtp_audit.index.facts import Target, extract_facts
from mtp_audit.model import PLATFORMS


def where(source: str, name: str = "Drafter") -> dict[str, str]:
    """Platform -> the module ``name`` is imported from, or ``raises: <why>``."""
    facts = extract_facts(source, "pkg", "pkg/__init__.py", True)  # a dispatching package
    out = {}
    for platform in PLATFORMS:
        if platform in facts.import_errors:
            assert facts.bindings[platform] == {}, "a module that fails to import binds nothing"
            out[platform] = f"raises: {facts.import_errors[platform]}"
            continue
        targets = facts.bindings[platform].get(name, [])
        out[platform] = " | ".join(f"{t.kind}:{t.a}" if t.kind != "unavailable" else f"unavailable: {t.a}"
                                   for t in targets)
    return out


HEADER = "from vllm.platforms import current_platform\n\n"


def test_a_raising_if_removes_only_its_platform() -> None:
    found = where(HEADER + 'if current_platform.is_xpu():\n    raise NotImplementedError("no XPU")\n\n'
                  "from .nvidia import Drafter\n")
    assert found == {"cuda": "import:pkg.nvidia", "rocm": "import:pkg.nvidia", "cpu": "import:pkg.nvidia",
                     "tpu": "import:pkg.nvidia", "xpu": "raises: import raises NotImplementedError (line 4): no XPU"}


def test_a_raise_after_the_binding_still_fails_the_import() -> None:
    found = where(HEADER + "from .nvidia import Drafter\n\nif not current_platform.is_cuda_alike():\n"
                  '    raise RuntimeError("CUDA or ROCm only")\n')
    assert found["cuda"] == found["rocm"] == "import:pkg.nvidia"
    for platform in ("xpu", "cpu", "tpu"):
        assert found[platform] == "raises: import raises RuntimeError (line 6): CUDA or ROCm only"


def test_an_elif_chain_ending_in_a_raise() -> None:
    found = where(HEADER + "if current_platform.is_rocm():\n    from .amd import Drafter\n"
                  "elif current_platform.is_cuda() or current_platform.is_cpu():\n    from .nvidia import Drafter\n"
                  'else:\n    raise ImportError(f"no kernels for {current_platform}")\n')
    assert found == {"rocm": "import:pkg.amd", "cuda": "import:pkg.nvidia", "cpu": "import:pkg.nvidia",
                     "xpu": "raises: import raises ImportError (line 8)",
                     "tpu": "raises: import raises ImportError (line 8)"}


def test_a_raise_nested_in_a_platform_branch() -> None:
    found = where(HEADER + "if current_platform.is_cuda_alike():\n    if current_platform.is_rocm():\n"
                  '        raise NotImplementedError("ROCm later")\n    from .nvidia import Drafter\n'
                  "else:\n    from .generic import Drafter\n")
    assert found["cuda"] == "import:pkg.nvidia"
    assert found["rocm"].startswith("raises: ") and "ROCm later" in found["rocm"]
    assert found["cpu"] == found["xpu"] == found["tpu"] == "import:pkg.generic"


def test_a_raise_in_a_typechecking_else_branch_is_taken_at_run_time() -> None:
    found = where("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .stubs import Drafter\n"
                  'else:\n    raise ImportError("stubs only")\n')
    assert all(value == "raises: import raises ImportError (line 6): stubs only" for value in found.values())


def test_a_raise_under_an_unknown_condition_keeps_the_other_branch_only() -> None:
    """``os.environ`` is not known statically: the import may succeed, and then only through the
    branch that does not raise (what the raising branch bound before raising never survives)."""
    found = where('import os\n\nif os.environ.get("FAST"):\n    from .fast import Drafter\n'
                  '    raise ImportError("fast path removed")\nelse:\n    from .slow import Drafter\n')
    assert set(found.values()) == {"import:pkg.slow"}


def test_a_raise_in_both_unknown_branches_fails_the_import() -> None:
    found = where('import os\n\nif os.environ.get("FAST"):\n    raise ImportError("a")\n'
                  'else:\n    raise ImportError("b")\nfrom .x import Drafter\n')
    assert all(value.startswith("raises: import raises ImportError") for value in found.values())


def test_unknown_branches_that_both_bind_keep_both() -> None:
    found = where('import os\n\nif os.environ.get("FAST"):\n    from .fast import Drafter\n'
                  "else:\n    from .slow import Drafter\n")
    assert set(found.values()) == {"import:pkg.fast | import:pkg.slow"}


LAZY = HEADER + '''\
__all__ = ["Drafter"]


def __getattr__(name):
    if name == "Drafter":
        if current_platform.is_tpu():
            raise NotImplementedError("Drafter has no TPU kernels")
        from .nvidia import mtp

        return mtp.Drafter
    raise AttributeError(name)
'''


def test_a_raise_in_module_getattr_makes_the_name_unavailable_on_that_platform() -> None:
    found = where(LAZY)
    assert found["tpu"] == "unavailable: __getattr__ raises NotImplementedError (line 9): Drafter has no TPU kernels"
    assert {found[p] for p in PLATFORMS if p != "tpu"} == {"import:pkg.nvidia.mtp"}


def test_module_getattr_for_a_name_it_does_not_serve() -> None:
    facts = extract_facts(LAZY.replace('__all__ = ["Drafter"]', '__all__ = ["Drafter", "Other"]'),
                          "pkg", "pkg/__init__.py", True)
    for platform in PLATFORMS:
        [target] = facts.bindings[platform]["Other"]
        assert target.kind == "unavailable" and "AttributeError" in target.a


@pytest.mark.parametrize("predicate, platforms", [
    ("is_cuda()", {"cuda"}), ("is_rocm()", {"rocm"}), ("is_xpu()", {"xpu"}), ("is_cpu()", {"cpu"}),
    ("is_tpu()", {"tpu"}), ("is_cuda_alike()", {"cuda", "rocm"}), ("is_out_of_tree()", set()),
    ('device_type == "cuda"', {"cuda", "rocm"}), ('device_type != "cuda"', {"xpu", "cpu", "tpu"}),
    ('device_type in ("xpu", "cpu")', {"xpu", "cpu"}), ('device_type not in ["tpu"]', {"cuda", "rocm", "xpu", "cpu"}),
])
def test_each_platform_condition_raises_exactly_where_it_holds(predicate: str, platforms: set[str]) -> None:
    found = where(HEADER + f'if current_platform.{predicate}:\n    raise ImportError("here")\n'
                  "from .x import Drafter\n")
    assert {p for p, value in found.items() if value.startswith("raises: ")} == platforms


def test_an_unknown_platform_condition_raises_nowhere() -> None:
    found = where(HEADER + 'if current_platform.is_something_new():\n    raise ImportError("maybe")\n'
                  "from .x import Drafter\n")
    assert set(found.values()) == {"import:pkg.x"}


def test_the_targets_are_plain_data() -> None:
    facts = extract_facts(HEADER + "from .x import Drafter as D\n", "pkg", "pkg/__init__.py", True)
    assert facts.bindings["cuda"]["D"] == [Target("import", "pkg.x", "Drafter")]


def test_the_first_raise_is_the_reason() -> None:
    """Python stops at the first raise: a later one on the same platform is never reached."""
    found = where(HEADER + 'if current_platform.is_xpu():\n    raise NotImplementedError("first")\n'
                  'if not current_platform.is_cuda():\n    raise ImportError("second")\nfrom .x import Drafter\n')
    assert found["xpu"] == "raises: import raises NotImplementedError (line 4): first"
    assert found["cpu"] == "raises: import raises ImportError (line 6): second"
    assert found["cuda"] == "import:pkg.x"
