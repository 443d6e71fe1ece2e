"""Platform dispatch: a branch that raises on a platform means that platform has no drafter.

The module-level statements (and a module ``__getattr__``) are read per
platform; each case says, platform by platform, where a name leads or why the
import fails. Conditions have three values: True, False, or None when they
cannot be known (both branches are then kept), so a wrong True/False silently
drops a drafter from a platform or adds one.
"""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from conftest import BASE, build_tree, run_cli
from mtp_audit.index.fact_types import Target, TryOutcome
from mtp_audit.index.facts import check_syntax, extract_facts
from mtp_audit.index.imports import _interpreted_imports
from mtp_audit.index.interpreter import catches
from mtp_audit.index.platforms import evaluate, string_values
from mtp_audit.locate import locate
from mtp_audit.model import PLATFORMS
from mtp_audit.scan import scan


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
        out[platform] = " | ".join(
            f"{t.kind}:{t.a}" if t.kind != "unavailable" else f"unavailable: {t.a}" for t in targets
        )
    return out


HEADER = "from vllm.platforms import current_platform\n\n"


def test_a_raising_if_removes_only_its_platform() -> None:
    found = where(
        HEADER + 'if current_platform.is_xpu():\n    raise NotImplementedError("no XPU")\n\n'
        "from .nvidia import Drafter\n"
    )
    assert found == {
        "cuda": "import:pkg.nvidia",
        "rocm": "import:pkg.nvidia",
        "cpu": "import:pkg.nvidia",
        "tpu": "import:pkg.nvidia",
        "xpu": "raises: import raises NotImplementedError (line 4): no XPU",
    }


def test_a_raise_after_the_binding_still_fails_the_import() -> None:
    found = where(
        HEADER + "from .nvidia import Drafter\n\nif not current_platform.is_cuda_alike():\n"
        '    raise RuntimeError("CUDA or ROCm only")\n'
    )
    assert found["cuda"] == found["rocm"] == "import:pkg.nvidia"
    for platform in ("xpu", "cpu", "tpu"):
        assert found[platform] == "raises: import raises RuntimeError (line 6): CUDA or ROCm only"


def test_an_elif_chain_ending_in_a_raise() -> None:
    found = where(
        HEADER + "if current_platform.is_rocm():\n    from .amd import Drafter\n"
        "elif current_platform.is_cuda() or current_platform.is_cpu():\n    from .nvidia import Drafter\n"
        'else:\n    raise ImportError(f"no kernels for {current_platform}")\n'
    )
    assert found == {
        "rocm": "import:pkg.amd",
        "cuda": "import:pkg.nvidia",
        "cpu": "import:pkg.nvidia",
        "xpu": "raises: import raises ImportError (line 8)",
        "tpu": "raises: import raises ImportError (line 8)",
    }


def test_a_raise_nested_in_a_platform_branch() -> None:
    found = where(
        HEADER + "if current_platform.is_cuda_alike():\n    if current_platform.is_rocm():\n"
        '        raise NotImplementedError("ROCm later")\n    from .nvidia import Drafter\n'
        "else:\n    from .generic import Drafter\n"
    )
    assert found["cuda"] == "import:pkg.nvidia"
    assert found["rocm"].startswith("raises: ") and "ROCm later" in found["rocm"]
    assert found["cpu"] == found["xpu"] == found["tpu"] == "import:pkg.generic"


def test_a_raise_in_a_typechecking_else_branch_is_taken_at_run_time() -> None:
    found = where(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from .stubs import Drafter\n"
        'else:\n    raise ImportError("stubs only")\n'
    )
    assert all(value == "raises: import raises ImportError (line 6): stubs only" for value in found.values())


def test_a_raise_under_an_unknown_condition_keeps_the_other_branch_only() -> None:
    """``os.environ`` is not known statically: the import may succeed, and then only through the
    branch that does not raise (what the raising branch bound before raising never survives)."""
    found = where(
        'import os\n\nif os.environ.get("FAST"):\n    from .fast import Drafter\n'
        '    raise ImportError("fast path removed")\nelse:\n    from .slow import Drafter\n'
    )
    assert set(found.values()) == {"import:pkg.slow"}


def test_a_raise_in_both_unknown_branches_fails_the_import() -> None:
    found = where(
        'import os\n\nif os.environ.get("FAST"):\n    raise ImportError("a")\n'
        'else:\n    raise ImportError("b")\nfrom .x import Drafter\n'
    )
    assert all(value.startswith("raises: import raises ImportError") for value in found.values())


def test_unknown_branches_that_both_bind_keep_both() -> None:
    found = where(
        'import os\n\nif os.environ.get("FAST"):\n    from .fast import Drafter\nelse:\n    from .slow import Drafter\n'
    )
    assert set(found.values()) == {"import:pkg.fast | import:pkg.slow"}


def test_else_and_finally_of_a_module_level_try_run_after_its_body() -> None:
    """``else`` runs where the body's imports succeed, and ``finally`` always does. Whether an import
    raises is for resolution to say (fixture ``dispatch_try_fallback``): the facts
    keep both outcomes, the name unbound where the handler runs."""
    found = where(
        HEADER + "try:\n    import triton\nexcept ImportError:\n    triton = None\n"
        "else:\n    from .triton_kernels import Drafter\n"
    )
    unbound = "unavailable: Drafter is not bound when the import at line 4 raises"
    assert set(found.values()) == {f"import:pkg.triton_kernels | {unbound}"}
    found = where(
        HEADER + "try:\n    from .nvidia import Drafter\nfinally:\n"
        '    if current_platform.is_xpu():\n        raise NotImplementedError("no XPU")\n'
    )
    assert found.pop("xpu") == "raises: import raises NotImplementedError (line 7): no XPU"
    assert set(found.values()) == {"import:pkg.nvidia"}


def test_a_raise_a_handler_may_catch_runs_the_handlers_instead() -> None:
    """Each handler that may catch the raise is an alternative, up to the first that surely does (by the
    built-in hierarchy); one that raises again is dropped, as an unknown branch is. When every handler
    raises, or none can catch it, the import fails for the body's reason."""
    body = (
        HEADER + 'try:\n    if current_platform.is_xpu():\n        raise ImportError("no XPU kernels")\n'
        "    from .nvidia import Drafter\n"
    )
    found = where(
        body + "except KernelError:\n    from .generic import Drafter\nexcept (RuntimeError, OSError):\n"
        "    from .fallback import Drafter\nexcept ImportError:\n    from .portable import Drafter\n"
        "except Exception:\n    from .never import Drafter\nelse:\n    from .fast import Drafter\n"
    )
    assert found.pop("xpu") == "import:pkg.generic | import:pkg.portable"  # KernelError: the tree's own, may catch
    assert set(found.values()) == {"import:pkg.fast"}
    found = where(body + "except (RuntimeError, OSError):\n    from .fallback import Drafter\n")
    assert found.pop("xpu") == "raises: import raises ImportError (line 5): no XPU kernels"
    found = where(body + "except ImportError:\n    raise\nexcept Exception:\n    raise\n")  # the body's reason
    assert found.pop("xpu") == "raises: import raises ImportError (line 5): no XPU kernels"
    assert set(found.values()) == {"import:pkg.nvidia"}


def test_an_import_fallback_keeps_every_outcome_marked() -> None:
    """``try: from .fast import X`` / ``except ImportError: from .slow import X``: each binding is marked
    with the outcome it holds under (the body ran, or its import statement N raised and handler M
    ran); a name every outcome binds alike stays unmarked."""
    found = bindings(
        "import os\n\ntry:\n    from .fast import Drafter\n    FAST = True\n"
        "except (ImportError, OSError):\n    from .slow import Drafter\n    FAST = False\nexcept ValueError:\n"
        "    pass\n"
    )
    assert found["os"] == [Target("module", "os")]
    outcome = TryOutcome((4,), (("pkg.fast", "pkg.fast.Drafter"),), (("ImportError", "OSError"), ("ValueError",)))
    caught, passed = replace(outcome, failed_at=0, handler=0), replace(outcome, failed_at=0, handler=1)
    assert found["Drafter"] == [
        Target("import", "pkg.fast", "Drafter", (outcome,)),
        Target("import", "pkg.slow", "Drafter", (caught,)),
        Target("unavailable", "Drafter is not bound when the import at line 4 raises", when=(passed,)),
    ]
    assert [t.when for t in found["FAST"]] == [(outcome,), (caught,), (passed,)]


def test_a_try_body_that_is_not_only_imports_and_bindings_is_taken_to_succeed() -> None:
    found = bindings(
        "try:\n    for _ in ():\n        pass\n    from .fast import Drafter\nexcept ImportError:\n"
        "    from .slow import Drafter\n"
    )
    assert found["Drafter"] == [Target("import", "pkg.fast", "Drafter")]


@pytest.mark.parametrize(
    ("names", "raised", "caught"),
    [
        ((), "NotImplementedError", True),  # a bare except
        (("ImportError",), "ImportError", True),
        (("ImportError",), "ModuleNotFoundError", True),
        (("ModuleNotFoundError",), "ImportError", False),  # the subclass does not catch its base
        (("ValueError",), "ImportError", False),
        (("ValueError", "Exception"), "ImportError", True),
        (("builtins.ImportError",), "ImportError", True),
        (("BaseException",), "KernelMissing", True),
        (("Exception",), "KernelMissing", None),  # a class of the tree's own: not known
        (("ImportError",), None, None),  # a bare ``raise`` or ``raise error``
        (("KernelMissing",), "ImportError", None),  # may be an alias of ImportError
        (("KernelMissing", "ValueError"), "ImportError", None),
    ],
)
def test_which_handlers_catch_which_raises(names: tuple[str, ...], raised: str | None, caught: bool | None) -> None:
    assert catches(names, raised) is caught


def test_an_import_fallback_inside_module_getattr() -> None:
    getattr_def = (
        '__all__ = ["A", "B"]\n\ndef __getattr__(name):\n    if name == "A":\n        try:\n'
        "            from .fast import A\n        except ImportError:\n            from .slow import A\n"
        "        return A\n    try:\n        return __import__(name)\n    except ImportError:\n        return None\n"
    )
    found = bindings(getattr_def)
    assert [(t.a, t.when[0].failed_at) for t in found["A"]] == [("pkg.fast", -1), ("pkg.slow", 0)]
    assert found["B"] == [Target("unknown", "a return inside a try in __getattr__")]


def test_a_module_level_condition_on_all() -> None:
    found = where(
        HEADER + '__all__ = ["Drafter", "cpu"]\n\nif current_platform.device_type in __all__:\n'
        '    raise NotImplementedError("not on CPU")\nfrom .nvidia import Drafter\n'
    )
    assert found.pop("cpu") == "raises: import raises NotImplementedError (line 6): not on CPU"
    assert set(found.values()) == {"import:pkg.nvidia"}


LAZY = (
    HEADER
    + """\
__all__ = ["Drafter"]


def __getattr__(name):
    if name == "Drafter":
        if current_platform.is_tpu():
            raise NotImplementedError("Drafter has no TPU kernels")
        from .nvidia import mtp

        return mtp.Drafter
    raise AttributeError(name)
"""
)


def test_a_raise_in_module_getattr_makes_the_name_unavailable_on_that_platform() -> None:
    found = where(LAZY)
    assert found["tpu"] == "unavailable: __getattr__ raises NotImplementedError (line 9): Drafter has no TPU kernels"
    assert {found[p] for p in PLATFORMS if p != "tpu"} == {"import:pkg.nvidia.mtp"}


def test_module_getattr_for_a_name_it_does_not_serve() -> None:
    facts = extract_facts(
        LAZY.replace('__all__ = ["Drafter"]', '__all__ = ["Drafter", "Other"]'), "pkg", "pkg/__init__.py", True
    )
    for platform in PLATFORMS:
        [target] = facts.bindings[platform]["Other"]
        assert target.kind == "unavailable" and "AttributeError" in target.a


@pytest.mark.parametrize(
    "predicate, platforms",
    [
        ("is_cuda()", {"cuda"}),
        ("is_rocm()", {"rocm"}),
        ("is_xpu()", {"xpu"}),
        ("is_cpu()", {"cpu"}),
        ("is_tpu()", {"tpu"}),
        ("is_cuda_alike()", {"cuda", "rocm"}),
        ("is_out_of_tree()", set()),
        ('device_type == "cuda"', {"cuda", "rocm"}),
        ('device_type != "cuda"', {"xpu", "cpu", "tpu"}),
        ('device_type in ("xpu", "cpu")', {"xpu", "cpu"}),
        ('device_type not in ["tpu"]', {"cuda", "rocm", "xpu", "cpu"}),
    ],
)
def test_each_platform_condition_raises_exactly_where_it_holds(predicate: str, platforms: set[str]) -> None:
    found = where(HEADER + f'if current_platform.{predicate}:\n    raise ImportError("here")\nfrom .x import Drafter\n')
    assert {p for p, value in found.items() if value.startswith("raises: ")} == platforms


def test_an_unknown_platform_condition_raises_nowhere() -> None:
    found = where(
        HEADER + 'if current_platform.is_something_new():\n    raise ImportError("maybe")\nfrom .x import Drafter\n'
    )
    assert set(found.values()) == {"import:pkg.x"}


def test_the_targets_are_plain_data() -> None:
    facts = extract_facts(HEADER + "from .x import Drafter as D\n", "pkg", "pkg/__init__.py", True)
    assert facts.bindings["cuda"]["D"] == [Target("import", "pkg.x", "Drafter")]


def test_the_first_raise_is_the_reason() -> None:
    """Python stops at the first raise: a later one on the same platform is never reached."""
    found = where(
        HEADER + 'if current_platform.is_xpu():\n    raise NotImplementedError("first")\n'
        'if not current_platform.is_cuda():\n    raise ImportError("second")\nfrom .x import Drafter\n'
    )
    assert found["xpu"] == "raises: import raises NotImplementedError (line 4): first"
    assert found["cpu"] == "raises: import raises ImportError (line 6): second"
    assert found["cuda"] == "import:pkg.x"


def bindings(source: str, platform: str = "cuda") -> dict[str, list[Target]]:
    return extract_facts(source, "pkg", "pkg/__init__.py", True).bindings[platform]


def test_what_each_kind_of_assignment_binds() -> None:
    """What could not be followed says which statement bound it, and its line: they show up in unresolved-name
    reports."""
    found = bindings(
        "import torch.nn\nimport numpy as np\nfrom . import sub\nfrom .x import Head\n"
        "A = np.ndarray\nB = sub.Drafter\nC = Head.Inner\nD = Undefined\nE = make().attr\n"
        "F = Undefined.deep.attr\nG = 3\nH = '" + "x" * 50 + "'\nI = [Head]\nJ: type = Head\nK: int\n"
        "L = M = Head\nN, O = Head, Head\nnp.x = Head\n"
    )
    assert found == {
        "torch": [Target("module", "torch")],
        "np": [Target("module", "numpy")],
        "sub": [Target("import", "pkg", "sub")],
        "Head": [Target("import", "pkg.x", "Head")],
        "A": [Target("import", "numpy", "ndarray")],
        "B": [Target("import", "pkg.sub", "Drafter")],
        "C": [Target("import", "pkg.x.Head", "Inner")],
        "D": [Target("unknown", "D = Undefined", "8")],  # what is not followed: the statement and its line
        "E": [Target("unknown", "E = make().attr", "9")],
        "F": [Target("unknown", "F = Undefined.deep.attr", "10")],
        "G": [Target("constant", "3", "11")],  # with its line
        "H": [Target("constant", "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "12")],  # the first 40 characters
        "I": [Target("unknown", "I = [Head]", "13")],
        "J": [Target("import", "pkg.x", "Head")],
        "L": [Target("import", "pkg.x", "Head")],
        "M": [Target("import", "pkg.x", "Head")],
        "N": [Target("import", "pkg.x", "Head")],  # a tuple of as many values: pairwise
        "O": [Target("import", "pkg.x", "Head")],
    }


def test_a_star_import_binds_its_module_in_order() -> None:
    found = bindings("from .x import Drafter\nfrom .impl import *\nfrom .more import *\n")
    assert list(found.items()) == [
        ("Drafter", [Target("import", "pkg.x", "Drafter")]),
        ("*pkg.impl", [Target("module", "pkg.impl")]),
        ("*pkg.more", [Target("module", "pkg.more")]),
    ]


def test_all_grows_by_every_form_and_is_what_getattr_serves() -> None:
    """Only ``__all__`` names what ``__getattr__`` may serve here (no literal names in it)."""
    found = bindings("""\
import os

from . import impl

if os.environ.get("X"):
    __all__ = ["A"]
else:
    __all__ = ["A"]
__all__ += ["B"]
__all__.extend(["C"])
__all__.append("D")
__all__.sort()
VERSION = "1"
VERSION += "2"
counter = 0
counter += 1
impl.extra = E = impl.Base


def __getattr__(name):
    return getattr(impl, name)
""")
    assert {name: found[name] for name in "ABCDE"} == {
        **{name: [Target("import", "pkg.impl", name)] for name in "ABCD"},
        "E": [Target("import", "pkg.impl", "Base")],
    }
    assert set(found) == {"os", "impl", "VERSION", "counter", *"ABCDE"}


def test_a_condition_on_all_without_a_module_all_is_unknown() -> None:
    found = bindings(
        "from . import impl\n\ndef __getattr__(name):\n    if name in __all__:\n"
        '        return getattr(impl, name)\n    if name == "A":\n        return impl.B\n'
    )
    assert found["A"] == [Target("unknown", "if name in __all__: cannot be decided", "4")]


def test_relative_imports_climb_from_a_module_or_a_package() -> None:
    source = "from . import a\nfrom .. import b\nfrom ..x import c\nfrom ...y import d\nimport top.level as e\n"
    in_module = extract_facts(source, "p.q.mod", "p/q/mod.py", False).bindings["cuda"]
    in_package = extract_facts(source, "p.q.pkg", "p/q/pkg/__init__.py", True).bindings["cuda"]
    assert [in_module[n][0] for n in "abcde"] == [
        Target("import", "p.q", "a"),
        Target("import", "p", "b"),
        Target("import", "p.x", "c"),
        Target("import", "y", "d"),
        Target("module", "top.level"),
    ]
    assert [in_package[n][0] for n in "abcd"] == [
        Target("import", "p.q.pkg", "a"),
        Target("import", "p.q", "b"),
        Target("import", "p.q.x", "c"),
        Target("import", "p.y", "d"),
    ]


@pytest.mark.parametrize(
    "source, error",
    [
        ("x = (\n", "line 1: '(' was never closed"),
        ("x = 1\x00\n", "source code string cannot contain null bytes"),
    ],
)
def test_a_module_that_does_not_parse_says_where(source: str, error: str) -> None:
    facts = extract_facts(source, "pkg", "pkg/__init__.py", True)
    assert facts.parse_error == error and facts.bindings == {} and facts.classes == []


def test_a_syntax_error_in_code_the_prefilter_cuts_is_the_modules_error() -> None:
    """Python compiles the whole file; ``check_whole=False`` leaves that to ``check_syntax``."""
    source = (
        "class Drafter:\n    def other(self):\n        return (\n\n"
        "    def compute_logits(self, hidden_states):\n        return self.lm_head(hidden_states)\n"
    )
    assert extract_facts(source, "pkg", "pkg/__init__.py", True).parse_error == "line 3: '(' was never closed"
    deferred = extract_facts(source, "pkg", "pkg/__init__.py", True, check_whole=False)
    assert deferred.parse_error is None and [c.name for c in deferred.classes] == ["Drafter"]
    assert check_syntax(source, "pkg/__init__.py") == "line 3: '(' was never closed"


LAZY_FORMS = (
    HEADER
    + """\
import os

from . import impl

__all__ = ["ByName", "ByLiteral", "Computed", "OneArgument", "Missing", "Unknown", "Other"]


def __getattr__(name):
    if name == "ByName":
        return getattr(impl, name)
    if name == "ByLiteral":
        return getattr(impl, "Literal")
    if name == "Computed":
        return getattr(impl, name.lower())
    if name == "OneArgument":
        return getattr(impl)
    if name == "Unknown":
        if os.environ.get("X"):
            return impl.A
        return impl.B
    if name == "Other":
        from .other import Other as found
        return found
    if name == "Gone":
        raise AttributeError("no such name")
    return {"Tabled": impl.T}[name]
"""
)


def test_module_getattr_forms() -> None:
    found = bindings(LAZY_FORMS)
    assert {
        name: found[name]
        for name in ("ByName", "ByLiteral", "Computed", "OneArgument", "Missing", "Unknown", "Other", "Tabled")
    } == {
        "ByName": [Target("import", "pkg.impl", "ByName")],
        "ByLiteral": [Target("import", "pkg.impl", "Literal")],
        "Computed": [Target("unknown", "getattr with a computed name")],
        "OneArgument": [Target("unknown", "Call")],
        "Missing": [Target("unavailable", "__getattr__ has no entry for Missing")],
        "Unknown": [Target("unknown", 'if os.environ.get("X"): cannot be decided', "20")],
        "Other": [Target("import", "pkg.other", "Other")],
        "Tabled": [Target("import", "pkg.impl", "T")],  # a name only __getattr__'s own strings mention
    }
    assert not any(" " in name for name in found)  # strings that are not identifiers are no candidates


def test_module_getattr_with_another_parameter_name_or_none() -> None:
    found = bindings(
        'from . import impl\n__all__ = ["A"]\n\ndef __getattr__(attribute):\n    return getattr(impl, attribute)\n'
    )
    assert found["A"] == [Target("import", "pkg.impl", "A")]
    found = bindings('__all__ = ["A"]\n\ndef __getattr__():\n    return 1\n')
    assert found["A"] == [Target("unknown", "__getattr__ without parameters")]


def test_an_import_error_inside_module_getattr() -> None:
    found = bindings(
        '__all__ = ["A"]\n\ndef __getattr__(name):\n    from .a import A\n    raise ImportError("A moved")\n'
    )
    assert found["A"] == [Target("unavailable", "__getattr__ raises ImportError (line 5): A moved")]


@pytest.mark.parametrize(
    "statement, reason",
    [
        ('raise ImportError("first", "second")', "import raises ImportError (line 1): first"),
        ("raise ImportError(message)", "import raises ImportError (line 1)"),
        ('raise ImportError(prefix + "kernels missing")', "import raises ImportError (line 1): kernels missing"),
        ('raise ImportError(prefix + "two" + "parts")', "import raises ImportError (line 1): two parts"),
        ('raise ImportError(reason="kept as keyword")', "import raises ImportError (line 1): kept as keyword"),
        ('raise ImportError(f"no {x}", "plain")', "import raises ImportError (line 1): plain"),
        ('raise errors.Missing("x")', "import raises errors.Missing (line 1): x"),
        ('raise errors[0]("x")', "import raises an exception (line 1): x"),
        ("raise ImportError", "import raises (line 1)"),
    ],
)
def test_why_an_import_raises(statement: str, reason: str) -> None:
    facts = extract_facts(statement + "\n", "pkg", "pkg/__init__.py", True)
    assert set(facts.import_errors.values()) == {reason}


# Platform conditions, one by one


def truth(condition: str, local_values: dict | None = None, all_names: list[str] | None = None) -> dict:
    """Platform -> truth of ``condition``."""
    node = ast.parse(condition, mode="eval").body
    return {p: evaluate(node, p, local_values, all_names) for p in PLATFORMS}


def holds_on(condition: str, **kwargs) -> set[str] | None:
    """The platforms where ``condition`` is true; None when it is unknown everywhere."""
    values = truth(condition, **kwargs)
    if all(v is None for v in values.values()):
        return None
    assert None not in values.values(), values
    return {p for p, v in values.items() if v}


@pytest.mark.parametrize(
    "condition, platforms",
    [
        ("TYPE_CHECKING", set()),
        ("typing.TYPE_CHECKING", set()),
        ("not TYPE_CHECKING", set(PLATFORMS)),
        ("current_platform.is_cuda()", {"cuda"}),
        ("vllm.platforms.current_platform.is_rocm()", {"rocm"}),
        ("not current_platform.is_cuda_alike()", {"xpu", "cpu", "tpu"}),
        ("current_platform.is_cuda() or current_platform.is_xpu()", {"cuda", "xpu"}),
        ("current_platform.is_cuda_alike() and not current_platform.is_rocm()", {"cuda"}),
        ("current_platform.device_type == 'cuda'", {"cuda", "rocm"}),
        ("current_platform.device_type != 'cpu'", {"cuda", "rocm", "xpu", "tpu"}),
        ("current_platform.device_type in ('xpu', 'tpu')", {"xpu", "tpu"}),
        ("current_platform.device_type not in {'cuda'}", {"xpu", "cpu", "tpu"}),
    ],
)
def test_known_conditions(condition: str, platforms: set[str]) -> None:
    assert holds_on(condition) == platforms


def test_and_or_with_an_unknown_part_are_known_only_where_the_known_part_decides() -> None:
    conjunction = truth("current_platform.is_cuda() and unknown()")
    assert conjunction["cuda"] is None and all(conjunction[p] is False for p in PLATFORMS if p != "cuda")
    disjunction = truth("current_platform.is_cuda() or unknown()")
    assert disjunction["cuda"] is True and all(disjunction[p] is None for p in PLATFORMS if p != "cuda")


@pytest.mark.parametrize(
    "condition",
    [
        "os.environ.get('X')",
        "current_platform.is_something_new()",
        "current_platform.is_cuda(1)",  # a call with arguments is not the predicate
        "helper.is_cuda()",  # not current_platform
        "not os.environ.get('X')",
        "current_platform.device_type == 3",  # not a string
        "current_platform.device_type != ('cuda', 'xpu')",  # != against several values
        "current_platform.device_type == ('cuda', 'xpu')",
        "current_platform.device_type in ('cuda', ('xpu', 'cpu'))",  # a nested tuple is not a list of strings
        "current_platform.device_type < 'x'",
        "current_platform.device_type in values",
        "sys.platform == 'linux'",
        "name == 'Drafter'",  # outside __getattr__, ``name`` is just a variable
        "current_platform.device_type == 'cuda' == 'x'",
        "some.TYPE_CHECKING_EXTRA",
    ],
)
def test_unknown_conditions(condition: str) -> None:
    values = truth(condition)
    assert all(v is None for v in values.values()), values


@pytest.mark.parametrize(
    "condition, asked, expected",
    [
        ("name == 'Drafter'", "Drafter", True),
        ("name == 'Drafter'", "Other", False),
        ("name != 'Drafter'", "Drafter", False),
        ("not name == 'Drafter'", "Drafter", False),
        ("name in ('A', 'B')", "B", True),
        ("name not in ['A', 'B']", "B", False),
        ("name in __all__", "B", True),
        ("name in __all__", "C", False),
        ("not name in __all__", "C", True),
        ("name in __all__ and name == 'A'", "A", True),
        ("name == 'X' or name in __all__", "B", True),
        ("other == 'Drafter'", "Drafter", None),  # not the __getattr__ parameter
    ],
)
def test_conditions_on_the_getattr_parameter(condition: str, asked: str, expected: bool | None) -> None:
    values = truth(condition, {"name": asked}, all_names=["A", "B"])
    assert set(values.values()) == {expected}


@pytest.mark.parametrize(
    "condition, held, expected",
    [
        ("module is not None", "sub", True),
        ("module is not None", None, False),
        ("module is None", None, True),
        ("not module", None, True),
        ("module", "sub", True),
        ("module == 'sub'", "sub", True),
        ("module in ('a', 'b')", None, False),
        ("module is 0", None, None),  # only None, True and False are compared by identity
        ("other is None", None, None),  # not a local whose value is known
    ],
)
def test_conditions_on_a_getattr_local(condition: str, held: object, expected: bool | None) -> None:
    """``module = _LAZY.get(name)`` then ``if module is not None:`` is decided for each name."""
    assert set(truth(condition, {"module": held}).values()) == {expected}


def test_the_getattr_parameter_and_a_platform_together() -> None:
    values = truth("name == 'Drafter' and current_platform.is_rocm()", {"name": "Drafter"})
    assert {p for p, v in values.items() if v} == {"rocm"} and None not in values.values()


def test_all_unknown_without_a_module_all() -> None:
    assert set(truth("name in __all__", {"name": "A"}).values()) == {None}


@pytest.mark.parametrize(
    "text, values",
    [
        ("'a'", ["a"]),
        ("('a', 'b')", ["a", "b"]),
        ("['a']", ["a"]),
        ("{'a'}", ["a"]),
        ("3", None),
        ("('a', 3)", None),
        ("('a', ('b', 'c'))", None),
        ("x", None),
    ],
)
def test_string_values(text: str, values: list[str] | None) -> None:
    assert string_values(ast.parse(text, mode="eval").body) == values


PART_MTP = """import torch
from torch import nn


class PartMTP(nn.Module):
    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.logits_processor(self.lm_head, hidden_states)
"""


def test_a_platform_the_tool_cannot_follow_is_unresolved_not_unavailable(tmp_path) -> None:
    """A raise means a platform has no drafter, and so does a name bound to a value there (``X = None``,
    as DeepSeek-V4's DSpark entry on ROCm and XPU in 0.25); a name the tool cannot follow there is
    reported as unresolved (and scan exits 1), even when the other platforms resolve."""
    tree = build_tree(BASE, tmp_path / "tree")
    files = {
        "vllm/model_executor/models/registry.py": (
            '_SPECULATIVE_DECODING_MODELS = {"PartMTPModel": ("vllm.part", "PartMTP")}\n'
        ),
        "vllm/part/__init__.py": HEADER + "if current_platform.is_rocm():\n    PartMTP = make_rocm_drafter()\n"
        'elif current_platform.is_xpu():\n    raise NotImplementedError("no XPU")\n'
        "elif current_platform.is_tpu():\n    PartMTP = None\nelse:\n    from .nvidia import PartMTP\n",
        "vllm/part/nvidia.py": PART_MTP,
    }
    for path, text in files.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    result, _, _ = scan(locate(tree))
    [record] = result.records
    assert record.platforms == ["cpu", "cuda"]
    assert [(u.platform, u.reason) for u in record.unavailable_on] == [
        ("tpu", "vllm/part/__init__.py:8: PartMTP = None"),  # a value, decided: no drafter there
        ("xpu", "vllm/part/__init__.py: import raises NotImplementedError (line 6): no XPU"),
    ]
    assert [(u.arch, u.platforms, u.reason) for u in result.unresolved] == [
        (
            "PartMTPModel",
            ["rocm"],
            "vllm/part/__init__.py: cannot follow PartMTP (line 4: PartMTP = make_rocm_drafter())",
        )
    ]
    assert run_cli("scan", str(tree), "--format", "json", "--fail-on", "never").returncode == 0
    assert run_cli("scan", str(tree), "--format", "json", "--fail-on", "divergent").returncode == 1


def test_module_level_names_that_decide_a_condition() -> None:
    """``current_platform`` under another name, a flag bound to a decided condition (rebinding it to
    something unknown makes it unknown again), and a conditional expression, which binds per platform."""
    alias = "from vllm.platforms import current_platform as cp\n\n"
    assert where(
        alias + "if cp.is_rocm():\n    from .amd import Drafter\nelse:\n    from .nvidia import Drafter\n"
    ) == {p: "import:pkg.amd" if p == "rocm" else "import:pkg.nvidia" for p in PLATFORMS}
    flag = HEADER + "_ON_AMD = current_platform.is_rocm()\n_ON_AMD_TOO = _ON_AMD\n"
    branch = "if _ON_AMD_TOO:\n    from .amd import Drafter\nelse:\n    from .nvidia import Drafter\n"
    assert where(flag + branch)["rocm"] == "import:pkg.amd" and where(flag + branch)["cuda"] == "import:pkg.nvidia"
    assert bindings(flag, "rocm")["_ON_AMD"] == [Target("constant", "True", "3")]
    rebound = flag + "_ON_AMD_TOO = os.environ.get('AMD')\n" + branch
    assert set(where(rebound).values()) == {"import:pkg.amd | import:pkg.nvidia"}
    choice = (
        HEADER
        + "from . import amd, nvidia\n\nDrafter = amd.Drafter if current_platform.is_rocm() else nvidia.Drafter\n"
    )
    assert where(choice) == {p: "import:pkg.amd" if p == "rocm" else "import:pkg.nvidia" for p in PLATFORMS}
    unknown = (
        "import os\nfrom . import amd, nvidia\n\nDrafter = amd.Drafter if os.environ.get('A') else nvidia.Drafter\n"
    )
    assert set(where(unknown).values()) == {"import:pkg.amd | import:pkg.nvidia"}


def test_an_alias_of_current_platform_decides_an_import_chain_raise() -> None:
    source = (
        'from vllm.platforms import current_platform as cp\n\nif cp.is_xpu():\n    raise NotImplementedError("x")\n'
    )
    facts = _interpreted_imports(source, "pkg.kernels", False)
    assert facts is not None and list(facts.errors) == ["xpu"]


def test_statements_that_rebind_in_ways_not_followed_say_so() -> None:
    """A loop, an unpacking of something else than as many values, ``+=``, a ``with ... as``, a ``match``
    capture and ``globals()`` with a computed key may rebind a name: it is marked with the statement, never
    left at its earlier binding (``A, B = x, y`` and ``globals()["A"] = x`` are followed)."""
    found = bindings(
        "from .x import A, B, C, D, E, F, G\n\nfor A in ():\n    pass\nwhile False:\n    B = 1\nC, _ = pair\n"
        "D += 1\nwith open('f') as E:\n    pass\nmatch C:\n    case F:\n        pass\n"
        "globals()['G'] = D\nglobals()[key] = D\n"
    )
    assert {n: found[n] for n in "ABCDEFG"} == {
        "A": [Target("unknown", "globals()[key] = D", "15")],
        "B": [Target("unknown", "globals()[key] = D", "15")],
        "C": [Target("unknown", "globals()[key] = D", "15")],
        "D": [Target("unknown", "globals()[key] = D", "15")],
        "E": [Target("unknown", "globals()[key] = D", "15")],
        "F": [Target("unknown", "globals()[key] = D", "15")],
        "G": [Target("unknown", "globals()[key] = D", "15")],
    }
    each = bindings(
        "from .x import A, B, C, D, E, F\n\nfor A in ():\n    pass\nwhile False:\n    B = 1\nC, _ = pair\n"
        "D += 1\nwith open('f') as E:\n    pass\nmatch C:\n    case F:\n        pass\n"
    )
    assert {n: each[n][0].a for n in "ABCDEF"} == {
        "A": "for A in ():",
        "B": "while False:",
        "C": "C, _ = pair",
        "D": "D += 1",
        "E": "with open('f') as E:",
        "F": "match C:",
    }
    assert bindings("from .x import A\n\nglobals()['A'] = A.Inner\n")["A"] == [Target("import", "pkg.x.A", "Inner")]


def test_a_with_body_runs_and_its_raise_propagates_unless_suppressed() -> None:
    """A quiet manager lets a raise by; ``suppress(E)`` catches E (by the built-in hierarchy) and nothing else;
    a manager the tool does not know may swallow anything."""
    raising = '    if current_platform.is_xpu():\n        raise ModuleNotFoundError("no XPU")\nfrom .x import Drafter\n'
    assert where(HEADER + "import warnings\nwith warnings.catch_warnings():\n" + raising)["xpu"] == (
        "raises: import raises ModuleNotFoundError (line 6): no XPU"
    )
    suppressing = HEADER + "import contextlib\nwith contextlib.suppress(ImportError):\n" + raising
    assert where(suppressing)["xpu"] == "import:pkg.x"
    assert where(HEADER + "from contextlib import suppress\nwith suppress(OSError):\n" + raising)["xpu"] == (
        "raises: import raises ModuleNotFoundError (line 6): no XPU"
    )
    assert where(HEADER + "with registering():\n" + raising)["xpu"] == "import:pkg.x"
    chain = HEADER + "import torch\nwith torch.no_grad():\n" + raising.replace("from .x import Drafter\n", "")
    assert list(_interpreted_imports(chain, "pkg.kernels", False).errors) == ["xpu"]  # type: ignore[union-attr]
    unknown = HEADER + "with registering():\n" + raising.replace("from .x import Drafter\n", "")
    assert _interpreted_imports(unknown, "pkg.kernels", False).errors == {}  # type: ignore[union-attr]


def test_an_assert_decided_false_raises_in_an_import_chain_too() -> None:
    source = HEADER + 'assert not current_platform.is_tpu(), "no TPU"\nassert os.environ.get("X")\n'
    facts = _interpreted_imports(source, "pkg.kernels", False)
    assert facts is not None and facts.errors == {"tpu": "import raises AssertionError (line 3): no TPU"}


def test_a_match_on_an_undecidable_subject_keeps_every_case() -> None:
    found = where(
        "import os\n\nmatch os.environ.get('KIND'):\n    case 'a':\n        from .a import Drafter\n"
        "    case _:\n        from .b import Drafter\n"
    )
    assert set(found.values()) == {"import:pkg.a | import:pkg.b"}


@pytest.mark.parametrize("change", ['_LAZY |= {"Y"}', '_LAZY.add("Y")', '_LAZY = {"X", "Y"}'])
def test_a_lazy_name_set_changed_after_its_literal_is_not_read_as_the_literal(change):
    """``if name in _LAZY:`` in ``__getattr__`` is decided by the literal only while nothing changes it: a
    set grown later would make Y "not defined" when the module serves it."""
    source = (
        f'_LAZY = {{"X"}}\n{change}\n'
        "def __getattr__(name):\n"
        "    if name in _LAZY:\n"
        "        from .impl import X, Y\n"
        "        return globals()[name]\n"
        "    raise AttributeError(name)\n"
    )
    facts = extract_facts(source, "vllm.m", "vllm/m.py", False)
    assert "cannot be decided" in facts.unlisted["cuda"]


def test_a_class_defined_in_a_match_case_is_a_class_where_that_case_runs():
    """The interpreter runs a case body; the facts must hold the class it defines, else the binding
    points at no class and the drafter is taken for missing where it exists."""
    source = (
        "from vllm.platforms import current_platform\n"
        "match current_platform.device_type:\n"
        '    case "xpu":\n'
        "        class Drafter:\n"
        "            def compute_logits(self, hidden_states):\n"
        "                return self.logits_processor(self.lm_head, hidden_states)\n"
        "    case _:\n"
        "        Drafter = None\n"
    )
    facts = extract_facts(source, "vllm.m", "vllm/m.py", False)
    assert [(c.name, c.line, list(c.methods)) for c in facts.classes] == [("Drafter", 4, ["compute_logits"])]
    assert facts.bindings["xpu"]["Drafter"] == [Target("class", "4")]
    assert facts.bindings["cpu"]["Drafter"][0].kind == "constant"


_LAZY_HEAD = """
import importlib
_LAZY = {"FooMTP": "a"}
_KEYS = {"FooMTP": ["a"]}
def __getattr__(name):
"""


@pytest.mark.parametrize(
    "body, reason",
    [
        pytest.param(
            "    module = _LAZY.get(name)\n    with _lock:\n        module = 'b'\n"
            "    return getattr(importlib.import_module(f'.{module}', __name__), name)\n",
            "importlib.import_module with a computed name",
            id="a with block rebinds the local",
        ),
        pytest.param(
            "    module = _LAZY.get(name)\n    for module in ('b',):\n        pass\n"
            "    return getattr(importlib.import_module(f'.{module}', __name__), name)\n",
            "importlib.import_module with a computed name",
            id="a loop rebinds the local",
        ),
        pytest.param(
            "    if name in _LAZY:\n        with _lock:\n"
            "            return getattr(importlib.import_module('.a', __name__), name)\n"
            "    raise AttributeError(name)\n",
            "a return inside `with _lock:` in __getattr__",
            id="a return inside a with block",
        ),
        pytest.param(
            "    module = _LAZY.get(_KEYS[name])\n"
            "    return getattr(importlib.import_module(f'.{module}', __name__), name)\n",
            "importlib.import_module with a computed name",
            id="an unhashable key",
        ),
    ],
)
def test_a_getattr_statement_not_run_leaves_the_name_unknown(body: str, reason: str) -> None:
    """A statement ``__getattr__`` does not run symbolically (``with``, a loop) forgets what it binds
    and, holding a return, says so: never a stale value taken for the submodule, never 'raises'."""
    from mtp_audit.index.facts import extract_facts

    facts = extract_facts(_LAZY_HEAD + body, "vllm.models.pkg", "vllm/models/pkg/__init__.py", True)
    [target] = facts.bindings["cuda"]["FooMTP"]
    assert (target.kind, target.a) == ("unknown", reason)


@pytest.mark.parametrize(
    "condition, how",
    [
        ("TYPE_CHECKING", "deleted-by-type-checking"),  # never runs: no method at all
        ("not TYPE_CHECKING", "def"),  # always runs: a plain method
        ("not current_platform.is_out_of_tree()", "conditional"),  # false on a platform plugin's device
        ("current_platform.is_rocm()", "conditional"),  # class facts are not per platform
    ],
)
def test_a_class_body_condition_is_decided_only_where_every_platform_agrees(condition: str, how: str) -> None:
    from mtp_audit.index.facts import extract_facts

    source = (
        "from typing import TYPE_CHECKING\nfrom vllm.platforms import current_platform\n\n\nclass D:\n"
        f"    if {condition}:\n\n        def get_top_tokens(self, h):\n            return h\n"
    )
    [cls] = extract_facts(source, "vllm.models.d", "vllm/models/d.py", False).classes
    method = cls.methods.get("get_top_tokens")
    if how == "deleted-by-type-checking":
        assert method is None
    else:
        assert method is not None and method.how == how


@pytest.mark.parametrize("call", ["import_module('.a', package=__name__)", "import_module('.a', __name__)"])
def test_import_module_takes_its_package_by_keyword_too(call: str) -> None:
    from mtp_audit.index.facts import extract_facts

    body = f"    if name in _LAZY:\n        return getattr(importlib.{call}, name)\n    raise AttributeError(name)\n"
    facts = extract_facts(_LAZY_HEAD + body, "vllm.models.pkg", "vllm/models/pkg/__init__.py", True)
    [target] = facts.bindings["cuda"]["FooMTP"]
    assert (target.kind, target.a, target.b) == ("import", "vllm.models.pkg.a", "FooMTP")
