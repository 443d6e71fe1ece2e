"""The method resolution order the scanner computes is the one Python computes.

Each hierarchy is written as source files (read by the scanner's index) and
built as real classes in the test; the two orders must agree. A hierarchy
Python rejects (no C3 order exists: the class statement raises TypeError) is
named so (``Mro.uncreatable``), and still gives each class once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtp_audit.index.fact_types import ClassFacts
from mtp_audit.index.modules import ModuleIndex
from mtp_audit.model import ClassKey, SourceTree
from mtp_audit.resolve.mro import CYCLE, Hierarchy, Mro, _bound_as, _mangled
from mtp_audit.resolve.names import External

Bases = dict[str, list[str]]  # class name -> base names, in definition order
EXTERNAL = "nn.Module"  # ``from torch import nn``: not in the scanned tree


def python_mro(bases: Bases, name: str) -> list[str]:
    """Names in ``type.mro()`` of the classes built from ``bases`` (``object`` left out)."""
    built: dict[str, type] = {EXTERNAL: type(EXTERNAL, (), {})}  # outside the tree: a terminal base
    for cls, parents in bases.items():  # definition order: a base is defined before its subclasses
        built[cls] = type(cls, tuple(built[p] for p in parents) or (object,), {})
        if cls == name:
            break
    return [c.__name__ for c in built[name].mro() if c is not object]


def write_module(root: Path, module: str, bases: Bases, imports: str = "") -> dict[str, int]:
    """Write ``bases`` as class statements of ``module``; the line of each class."""
    lines = imports.splitlines() if imports else []
    where = {}
    for cls, parents in bases.items():
        lines.append("")
        where[cls] = len(lines) + 1
        lines.append(f"class {cls}({', '.join(parents)}):" if parents else f"class {cls}:")
        lines.append("    pass")
    path = root.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return where


def scanner_mro(root: Path, module: str, name: str, line: int, platform: str = "cuda") -> list[str]:
    return [
        item.name.removeprefix("torch.") if isinstance(item, External) else item.name
        for item in scanner_order(root, module, name, line, platform).classes
    ]


def scanner_order(root: Path, module: str, name: str, line: int, platform: str = "cuda") -> Mro:
    hierarchy = Hierarchy(ModuleIndex(SourceTree(root, None, None)), platform)
    mro = hierarchy.mro(ClassKey(module, name, line))
    assert not mro.unresolved, mro.unresolved
    return mro


def assert_same_mro(tmp_path: Path, bases: Bases) -> None:
    where = write_module(tmp_path, "pkg.classes", bases)
    for cls in bases:
        assert scanner_mro(tmp_path, "pkg.classes", cls, where[cls]) == python_mro(bases, cls), cls


SHAPES = {
    "diamond": {"A": [], "B": ["A"], "C": ["A"], "D": ["B", "C"]},
    "diamond, bases swapped": {"A": [], "B": ["A"], "C": ["A"], "D": ["C", "B"]},
    "shared base listed late": {"A": [], "B": ["A"], "C": ["B"], "D": ["C", "A"]},
    # Python's own example of C3 (the 2.3 MRO paper): O, F, E, D, C, B, A
    "c3 paper": {"F": [], "E": [], "D": [], "C": ["D", "F"], "B": ["D", "E"], "A": ["B", "C"]},
    "mixins before the base": {"Base": [], "MixA": [], "MixB": ["MixA"], "Leaf": ["MixB", "MixA", "Base"]},
    "two diamonds": {"A": [], "B": ["A"], "C": ["A"], "D": ["B", "C"], "E": ["C"], "F": ["D", "E"]},
    "deep chain": {"A": [], "B": ["A"], "C": ["B"], "D": ["C"], "E": ["D"]},
}


@pytest.mark.parametrize("bases", SHAPES.values(), ids=SHAPES.keys())
def test_mro_is_pythons(bases: Bases, tmp_path: Path) -> None:
    assert_same_mro(tmp_path, bases)


def test_mro_across_files_and_an_external_base(tmp_path: Path) -> None:
    """Bases imported from another module, and ``nn.Module`` (outside the tree) as a terminal."""
    base_lines = write_module(tmp_path, "pkg.base", {"Base": ["nn.Module"], "Mixin": []}, "from torch import nn")
    leaf_lines = write_module(
        tmp_path, "pkg.leaf", {"Middle": ["Base"], "Leaf": ["Mixin", "Middle", "Base"]}, "from .base import Base, Mixin"
    )
    (tmp_path / "pkg" / "__init__.py").write_text("")
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    mro = hierarchy.mro(ClassKey("pkg.leaf", "Leaf", leaf_lines["Leaf"]))
    assert not mro.unresolved
    expected_python = python_mro(
        {"Module": [], "Base": ["Module"], "Mixin": [], "Middle": ["Base"], "Leaf": ["Mixin", "Middle", "Base"]}, "Leaf"
    )
    assert (
        [item.name for item in mro.classes]
        == ["Leaf", "Mixin", "Middle", "Base", "torch.nn.Module"]
        == [*expected_python[:-1], "torch.nn.Module"]
    )
    assert mro.classes[3] == ClassKey("pkg.base", "Base", base_lines["Base"])
    assert isinstance(mro.classes[-1], External)


def test_inconsistent_hierarchy_is_named_uncreatable_with_each_class_once(tmp_path: Path) -> None:
    """Python refuses ``class C(A, B)`` where A's order and B's disagree (TypeError at the class
    statement, so its module never imports): the order names C, for C and every subclass, and no
    order is taken for Python's."""
    bases = {"X": [], "Y": [], "A": ["X", "Y"], "B": ["Y", "X"], "C": ["A", "B"], "D": ["C"]}
    with pytest.raises(TypeError, match="consistent method resolution"):
        python_mro(bases, "C")
    where = write_module(tmp_path, "pkg.classes", bases)
    for cls, above in (("C", "ABXY"), ("D", "ABCXY")):
        mro = scanner_order(tmp_path, "pkg.classes", cls, where[cls])
        assert mro.uncreatable == [ClassKey("pkg.classes", "C", where["C"])]
        names = [item.name for item in mro.classes]
        assert names[0] == cls and sorted(names[1:]) == list(above)  # every class, once
    for cls in ("A", "B"):  # its consistent bases keep Python's order
        assert scanner_mro(tmp_path, "pkg.classes", cls, where[cls]) == python_mro(bases, cls)
        assert not scanner_order(tmp_path, "pkg.classes", cls, where[cls]).uncreatable


def test_inheritance_cycle_is_reported_not_followed(tmp_path: Path) -> None:
    where = write_module(tmp_path, "pkg.classes", {"A": ["B"], "B": ["A"]})
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    mro = hierarchy.mro(ClassKey("pkg.classes", "A", where["A"]))
    assert any(u.startswith(CYCLE) for u in mro.unresolved)
    assert [item.name for item in mro.classes][:2] == ["A", "B"]


@st.composite
def hierarchies(draw) -> Bases:
    """Up to eight classes, each with up to three earlier classes (or ``nn.Module``) as bases, in any order."""
    count = draw(st.integers(2, 8))
    bases: Bases = {}
    for number in range(count):
        earlier = [EXTERNAL, *bases]
        parents = draw(st.lists(st.sampled_from(earlier), max_size=3, unique=True))
        bases[f"C{number}"] = parents
    return bases


@settings(
    max_examples=int(os.environ.get("MTP_AUDIT_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
@given(hierarchies())
def test_any_hierarchy_python_accepts_gets_pythons_mro(bases: Bases) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        where = write_module(Path(tmp), "pkg.classes", bases, "from torch import nn")
        for cls in bases:
            try:
                expected = python_mro(bases, cls)
            except TypeError:  # Python rejects it (so does every subclass)
                mro = scanner_order(Path(tmp), "pkg.classes", cls, where[cls])
                assert mro.uncreatable == [ClassKey("pkg.classes", cls, where[cls])], (cls, bases)
                assert mro.classes[0].name == cls and len(mro.classes) == len(set(mro.classes))
                break
            assert scanner_mro(Path(tmp), "pkg.classes", cls, where[cls]) == expected, (cls, bases)
            assert not scanner_order(Path(tmp), "pkg.classes", cls, where[cls]).uncreatable, (cls, bases)


def test_each_class_on_a_three_cycle_reads_from_itself(tmp_path: Path) -> None:
    """Whatever class is asked first, each one's order starts at itself and takes in the whole
    cycle (a result met half-way round the cycle is not kept for later)."""
    where = write_module(tmp_path, "pkg.classes", {"A": ["B"], "B": ["C"], "C": ["A"]})
    for first in "ABC":
        hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
        hierarchy.mro(ClassKey("pkg.classes", first, where[first]))
        for cls in "ABC":
            mro = hierarchy.mro(ClassKey("pkg.classes", cls, where[cls]))
            names = [item.name for item in mro.classes]
            assert names[0] == cls and set(names) == set("ABC"), (first, cls, mro)
            assert any(u.startswith(CYCLE) for u in mro.unresolved)


def test_bases_that_cannot_be_followed_say_why(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "other.py").write_text("")
    source = (
        "from pkg import other\n\n\nclass D(Undefined):\n    pass\n\n\nclass F(other):\n    pass\n\n\n"
        "class G(D, make_base()):\n    pass\n"
    )
    (tmp_path / "pkg" / "m.py").write_text(source)
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    lines = {n: i + 1 for i, text in enumerate(source.splitlines()) for n in "DFG" if text.startswith(f"class {n}(")}
    d = hierarchy.mro(ClassKey("pkg.m", "D", lines["D"]))
    assert d.unresolved == ["Undefined (pkg/m.py: Undefined is not defined)"]
    f = hierarchy.mro(ClassKey("pkg.m", "F", lines["F"]))
    assert f.unresolved == ["other"] and [c.name for c in f.classes] == ["F"]
    g = hierarchy.mro(ClassKey("pkg.m", "G", lines["G"]))
    assert g.unresolved == [
        "make_base() (cannot follow base make_base())",
        "Undefined (pkg/m.py: Undefined is not defined)",
    ]
    assert [c.name for c in g.classes] == ["G", "D"]


def test_an_external_base_beside_one_that_cannot_be_followed(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("")
    (tmp_path / "pkg" / "b.py").write_text("")
    source = (
        "import os\nfrom torch import nn\n"
        "if os.environ.get('X'):\n    from pkg.a import Gone\nelse:\n    from pkg.b import Gone\n"
        "\n\nclass H(nn.Module, Gone):\n    pass\n\n\nclass K(H):\n    pass\n"
        "\n\nclass L(K, nn.Module):\n    pass\n"
    )
    (tmp_path / "pkg" / "m.py").write_text(source)
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    h = hierarchy.mro(ClassKey("pkg.m", "H", 9))
    assert [c.name for c in h.classes] == ["H", "torch.nn.Module"]
    # the undecidable condition leaves two places Gone may come from; neither defines it
    assert h.unresolved == ["Gone (pkg/a.py: Gone is not defined; pkg/b.py: Gone is not defined)"]
    k = hierarchy.mro(ClassKey("pkg.m", "K", 13))  # a subclass inherits what its base could not follow
    assert [c.name for c in k.classes] == ["K", "H", "torch.nn.Module"] and k.unresolved == h.unresolved
    both = hierarchy.mro(ClassKey("pkg.m", "L", 17))  # and so does one of several bases
    assert [c.name for c in both.classes] == ["L", "K", "H", "torch.nn.Module"] and both.unresolved == h.unresolved


HEADS = """\
class A:
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)


class B(A):
    def compute_logits(self, hidden_states):
        return self.logits_processor(self.head, hidden_states)


class C(B):
    pass
"""


def test_find_gives_the_owner_and_its_place_in_the_whole_mro(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(HEADS)
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    lines = {
        name: HEADS.splitlines().index(text) + 1
        for name, text in (("A", "class A:"), ("B", "class B(A):"), ("C", "class C(B):"))
    }
    mro = hierarchy.mro(ClassKey("m", "C", lines["C"]))
    hit = hierarchy.find(mro, "compute_logits")
    assert (hit.owner.name, hit.index) == ("B", 1)
    hit = hierarchy.find(mro, "compute_logits", start=2)
    assert (hit.owner.name, hit.index, hit.method.line) == ("A", 2, 2)
    assert hierarchy.find(mro, "get_top_tokens") is None
    overlay = {ClassKey("m", "C", lines["C"]): {"compute_logits": hit.method}}
    found = hierarchy.find(mro, "compute_logits", overlay=overlay)
    assert (found.owner.name, found.index) == ("C", 0)


def test_absorbed_orders_are_used_and_never_replace_computed_ones(tmp_path: Path) -> None:
    bases = SHAPES["two diamonds"]
    where = write_module(tmp_path, "pkg.classes", bases)
    keys = [ClassKey("pkg.classes", cls, where[cls]) for cls in bases]
    worker = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    for key in keys:
        worker.mro(key)
    parent = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")
    own = parent.mro(keys[0])
    parent.absorb(worker.memoised())
    assert parent.memoised() == worker.memoised()
    assert parent.memoised()[keys[0]] is own
    assert all(parent.mro(key) is worker.memoised()[key] for key in keys[1:])


BOUND_THEN = """\
from vllm.platforms import current_platform


class A:
    pass


class A(A):
    pass


class B:
    pass


Base = A
if current_platform.is_rocm():
    Base = B


class Leaf(Base):
    pass


Base = None
"""


def test_a_base_is_what_its_name_is_bound_to_when_the_class_statement_runs(tmp_path: Path) -> None:
    """``class A(A):`` derives from the earlier A; a name rebound after the class is not its base, on any platform."""
    (tmp_path / "m.py").write_text(BOUND_THEN)
    namespace: dict = {}
    exec(
        BOUND_THEN.replace("from vllm.platforms import current_platform\n", "").replace(
            "current_platform.is_rocm()", "False"
        ),
        namespace,
    )
    assert [c.__name__ for c in namespace["Leaf"].mro()] == ["Leaf", "A", "A", "object"]
    lines = BOUND_THEN.splitlines()
    leaf = ClassKey("m", "Leaf", lines.index("class Leaf(Base):") + 1)
    expected = {"cuda": [("A", 8), ("A", 4)], "rocm": [("B", 12)]}
    for platform, bases in expected.items():
        mro = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), platform).mro(leaf)
        assert not mro.unresolved, mro.unresolved
        found = [(item.name, item.line) for item in mro.classes if isinstance(item, ClassKey)]
        assert found == [("Leaf", leaf.line), *bases]


def test_a_redefined_class_derives_from_the_earlier_one_where_no_platform_is_read(tmp_path: Path) -> None:
    where = write_module(tmp_path, "pkg.classes", {"A": [], "B": ["A"]})
    source = (tmp_path / "pkg" / "classes.py").read_text()
    (tmp_path / "pkg" / "classes.py").write_text(source.replace("class B(A):", "class A(A):"))
    for platform in ("cuda", "xpu"):  # the module is run once, its facts shared by every platform
        mro = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), platform).mro(
            ClassKey("pkg.classes", "A", where["B"])
        )
        assert [(item.name, item.line) for item in mro.classes] == [("A", where["B"]), ("A", where["A"])]


UNDECIDED = """import os

from torch import nn


class Left(nn.Module):
    pass


class Right(nn.Module):
    pass


class Mixin(Right):
    pass


if os.environ.get("LEFT"):
    Base = Left
elif os.environ.get("MIXIN"):
    Base = Mixin
else:
    Base = Right


class Middle(Base):
    pass


class Leaf(Middle, Right):
    pass


class Odd(Right, Middle):
    pass
"""


def test_every_order_a_class_may_have_through_an_undecided_base(tmp_path: Path) -> None:
    """One order per alternative, as Python builds each, through a subclass too; an alternative
    with no C3 order (Python raises TypeError there) gives none, and a decided class has one."""
    (tmp_path / "m.py").write_text(UNDECIDED)
    lines = UNDECIDED.splitlines()
    key = {
        name: ClassKey("m", name, lines.index(f"class {name}({base}):") + 1)
        for name, base in [("Middle", "Base"), ("Leaf", "Middle, Right"), ("Mixin", "Right"), ("Odd", "Right, Middle")]
    }
    hierarchy = Hierarchy(ModuleIndex(SourceTree(tmp_path, None, None)), "cuda")

    def names(orders):
        return [[item.name for item in order] for order in orders]

    assert names(hierarchy.orders(key["Middle"])) == [
        ["Middle", "Left", "torch.nn.Module"],
        ["Middle", "Mixin", "Right", "torch.nn.Module"],
        ["Middle", "Right", "torch.nn.Module"],
    ]
    assert names(hierarchy.orders(key["Leaf"])) == [
        ["Leaf", "Middle", "Left", "Right", "torch.nn.Module"],
        ["Leaf", "Middle", "Mixin", "Right", "torch.nn.Module"],
        ["Leaf", "Middle", "Right", "torch.nn.Module"],
    ]
    assert names(hierarchy.orders(key["Odd"])) == [["Odd", "Right", "Middle", "Left", "torch.nn.Module"]]
    assert hierarchy.orders(key["Mixin"]) == [hierarchy.mro(key["Mixin"]).classes]
    for environment in ({"LEFT": "1"}, {"MIXIN": "1"}, {}):  # Python agrees with each
        os.environ.update(environment)
        try:
            namespace: dict = {}
            code = UNDECIDED.replace("from torch import nn", "import types\nnn = types.SimpleNamespace(Module=object)")
            if "LEFT" in environment:
                exec(code, namespace)
            else:  # Base is Right or Mixin: Odd names Right before its subclass Middle
                with pytest.raises(TypeError, match="consistent method resolution"):
                    exec(code, namespace)
                exec(code.split("class Odd")[0], namespace)
            assert [c.__name__ for c in namespace["Leaf"].mro()][:-1] in [
                o[:-1] for o in names(hierarchy.orders(key["Leaf"]))
            ]
        finally:
            for name in environment:
                del os.environ[name]


@pytest.mark.parametrize(
    ("cls", "name"),
    [
        ("Base", "__build"),
        ("_Base", "__build"),
        ("__Base", "___build"),
        ("My__Base", "__x"),
        ("Base", "__init__"),
        ("Base", "_build"),
        ("___", "__build"),
        ("Base", "__build_"),
    ],
)
def test_a_private_name_is_mangled_as_python_mangles_it(cls: str, name: str) -> None:
    """``_mangled`` gives the attribute Python stores ``def <name>`` of ``class <cls>`` under, and ``_bound_as``
    finds that def again from the attribute."""
    namespace: dict[str, type] = {}
    exec(f"class {cls}:\n    def {name}(self):\n        pass\n", namespace)  # the test's own source
    stored = next(attr for attr in vars(namespace[cls]) if not attr.startswith("__") or attr == name)
    assert _mangled(name, cls) == stored
    facts = ClassFacts(name=cls, line=1, bases=[])
    facts.defined_methods[name] = 2
    assert _bound_as(facts, cls, stored) == name
