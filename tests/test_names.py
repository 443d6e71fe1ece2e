"""Following a name through imports, re-exports, star imports and platform dispatch to the class it
names (or to why it cannot be followed): each case is a small tree and the exact answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtp_audit.index.modules import ModuleIndex
from mtp_audit.model import ClassKey, SourceTree
from mtp_audit.resolve.names import External, Missing, ModuleRef, resolve_expression, resolve_name

HEADER = "from vllm.platforms import current_platform\n"


def index_of(tmp_path: Path, files: dict[str, str]) -> ModuleIndex:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return ModuleIndex(SourceTree(tmp_path, None, None))


def test_a_name_is_followed_through_imports_and_re_exports(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "from .models import Drafter as Exported\n",
            "pkg/models/__init__.py": "from pkg.models.mtp import Drafter\n",
            "pkg/models/mtp.py": "class Helper:\n    pass\n\n\nclass Drafter(Helper):\n    pass\n",
        },
    )
    assert resolve_name(index, "pkg", "Exported", "cuda") == [ClassKey("pkg.models.mtp", "Drafter", 5)]


def test_a_name_that_is_a_module_or_outside_the_tree(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "from . import sub\nfrom pkg import other as renamed\nimport pkg.sub\nimport torch\n"
            "from torch import nn\nimport pkg.absent\n",
            "pkg/sub.py": "",
            "pkg/other.py": "",
            "pkg/never_imported.py": "",
        },
    )
    assert resolve_name(index, "pkg", "sub", "cuda") == [ModuleRef("pkg.sub")]
    assert resolve_name(index, "pkg", "renamed", "cuda") == [ModuleRef("pkg.other")]
    assert resolve_name(index, "pkg", "torch", "cuda") == [External("torch")]
    assert resolve_name(index, "pkg", "nn", "cuda") == [External("torch.nn")]
    # not bound by the package, yet a submodule of it: ``pkg.never_imported`` is importable
    assert resolve_name(index, "pkg", "never_imported", "cuda") == [ModuleRef("pkg.never_imported")]
    assert resolve_name(index, "torch", "Tensor", "cuda") == [External("torch.Tensor")]


def test_a_name_per_platform_and_a_platform_whose_import_raises(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": HEADER + "if current_platform.is_tpu():\n    raise ImportError('no TPU kernels')\n"
            "if current_platform.is_rocm():\n    from .amd import Drafter\nelse:\n"
            "    from .nvidia import Drafter\n",
            "pkg/amd.py": "class Drafter:\n    pass\n",
            "pkg/nvidia.py": "\nclass Drafter:\n    pass\n",
        },
    )
    assert resolve_name(index, "pkg", "Drafter", "rocm") == [ClassKey("pkg.amd", "Drafter", 1)]
    assert resolve_name(index, "pkg", "Drafter", "cuda") == [ClassKey("pkg.nvidia", "Drafter", 2)]
    assert resolve_name(index, "pkg", "Drafter", "tpu") == [
        Missing("pkg/__init__.py: import raises ImportError (line 3): no TPU kernels")
    ]


def test_an_undecidable_condition_keeps_both_classes_once_each(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "import os\nif os.environ.get('X'):\n    from .a import Drafter\nelse:\n"
            "    from .b import Drafter\n",
            "pkg/a.py": "from .b import Drafter\n",
            "pkg/b.py": "class Drafter:\n    pass\n",
        },
    )
    assert resolve_name(index, "pkg", "Drafter", "cuda") == [ClassKey("pkg.b", "Drafter", 1)]


def test_star_imports_the_last_that_has_the_name_wins(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "from .first import *\nfrom .second import *\nfrom .third import *\n",
            "pkg/first.py": "class Drafter:\n    pass\n\n\nclass OnlyFirst:\n    pass\n",
            "pkg/second.py": "\n\nclass Drafter:\n    pass\n",
            "pkg/third.py": "class Unrelated:\n    pass\n",
        },
    )
    assert resolve_name(index, "pkg", "Drafter", "cuda") == [ClassKey("pkg.second", "Drafter", 3)]
    assert resolve_name(index, "pkg", "OnlyFirst", "cuda") == [ClassKey("pkg.first", "OnlyFirst", 5)]
    assert resolve_name(index, "pkg", "Nowhere", "cuda") == [Missing("pkg/__init__.py: Nowhere is not defined")]


def test_a_star_import_rebinds_only_the_names_bound_before_it(tmp_path: Path) -> None:
    """Statements run in order: a star import after a class rebinds its name, one before does not; a name
    ``__getattr__`` gives is asked for only when the module lacks it, so a star import wins over it; a star
    import of a module outside the tree (what it exports is unknown) leaves the explicit binding."""
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/src.py": "class Drafter:\n    pass\n",
            "pkg/after.py": "class Drafter:\n    pass\n\n\nfrom .src import *\n",
            "pkg/before.py": "from .src import *\n\n\nclass Drafter:\n    pass\n",
            "pkg/lazy.py": "from .src import *\n\n__all__ = ['Drafter']\n\n\ndef __getattr__(name):\n"
            "    if name == 'Drafter':\n        from .other import Drafter\n\n        return Drafter\n",
            "pkg/other.py": "class Drafter:\n    pass\n",
            "pkg/outside.py": "class Drafter:\n    pass\n\n\nfrom torch import *\n",
        },
    )
    assert resolve_name(index, "pkg.after", "Drafter", "cuda") == [ClassKey("pkg.src", "Drafter", 1)]
    assert resolve_name(index, "pkg.before", "Drafter", "cuda") == [ClassKey("pkg.before", "Drafter", 4)]
    assert resolve_name(index, "pkg.lazy", "Drafter", "cuda") == [ClassKey("pkg.src", "Drafter", 1)]
    assert resolve_name(index, "pkg.outside", "Drafter", "cuda") == [ClassKey("pkg.outside", "Drafter", 1)]


def test_a_star_import_binds_only_what_all_lists(tmp_path: Path) -> None:
    """``import *`` binds the names a literal ``__all__`` lists (``+=`` and ``append`` included, per platform
    under an ``if``), or without one the names not starting with ``_``; an ``__all__`` that is not a literal
    list is taken to list the name, as before."""
    drafter = "class Drafter:\n    pass\n\n\nclass _Private:\n    pass\n\n\n"
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/listed.py": drafter + "__all__ = ['Other']\n__all__ += ['Drafter']\n",
            "pkg/unlisted.py": drafter + "__all__ = ('Other',)\n__all__.append('Also')\n",
            "pkg/per.py": HEADER + drafter + "__all__ = ['Other']\nif current_platform.is_rocm():\n"
            "    __all__.extend(['Drafter'])\n",
            "pkg/unread.py": drafter + "__all__ = ['Other'] + NAMES\n",
            "pkg/none.py": drafter,
            **{f"pkg/from_{m}.py": f"from .{m} import *\n" for m in ("listed", "unlisted", "per", "unread", "none")},
        },
    )
    assert resolve_name(index, "pkg.from_listed", "Drafter", "cuda") == [ClassKey("pkg.listed", "Drafter", 1)]
    assert resolve_name(index, "pkg.from_unlisted", "Drafter", "cuda") == [
        Missing(
            "pkg/from_unlisted.py: Drafter is not defined (from pkg.unlisted import * leaves it out: "
            "not in its __all__)"
        )
    ]
    assert resolve_name(index, "pkg.from_per", "Drafter", "rocm") == [ClassKey("pkg.per", "Drafter", 2)]
    assert resolve_name(index, "pkg.from_per", "Drafter", "cuda")[0].reason.endswith("not in its __all__)")
    assert resolve_name(index, "pkg.from_unread", "Drafter", "cuda") == [ClassKey("pkg.unread", "Drafter", 1)]
    assert resolve_name(index, "pkg.from_none", "Drafter", "cuda") == [ClassKey("pkg.none", "Drafter", 1)]
    assert resolve_name(index, "pkg.from_none", "_Private", "cuda") == [
        Missing("pkg/from_none.py: _Private is not defined (from pkg.none import * leaves it out: it starts with _)")
    ]


def test_an_import_cycle_is_named_not_followed_forever(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from pkg.b import Drafter\n",
            "pkg/b.py": "from pkg.a import Drafter\n",
            "pkg/star.py": "from pkg.star import *\n",
        },
    )
    assert resolve_name(index, "pkg.a", "Drafter", "cuda") == [Missing("import cycle through pkg.a.Drafter")]
    assert resolve_name(index, "pkg.star", "Drafter", "cuda") == [Missing("pkg/star.py: Drafter is not defined")]


def test_what_cannot_be_followed_says_why(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "Drafter = make_drafter()\nAlias = 3\n"
            "def __getattr__(name):\n    raise AttributeError(name)\n",
            "pkg/lazy.py": "def __getattr__(name):\n    if name == 'Drafter':\n"
            "        raise ImportError('needs kernels')\n"
            "    raise AttributeError(name)\n",
            "pkg/broken.py": "class Drafter(\n",
        },
    )
    assert resolve_name(index, "pkg", "Drafter", "cuda") == [
        Missing("pkg/__init__.py: cannot follow Drafter (line 1: Drafter = make_drafter())", undecided=True)
    ]  # the tool's limit: unresolved, naming the statement and its line
    assert resolve_name(index, "pkg", "Alias", "cuda") == [Missing("pkg/__init__.py:2: Alias = 3")]
    assert resolve_name(index, "pkg.lazy", "Drafter", "cuda") == [
        Missing("pkg/lazy.py: __getattr__ raises ImportError (line 3): needs kernels")
    ]
    broken = resolve_name(index, "pkg.broken", "Drafter", "cuda")
    assert len(broken) == 1 and isinstance(broken[0], Missing) and broken[0].reason.startswith("pkg/broken.py: ")


def test_a_name_bound_to_a_builtin_class_is_that_class(tmp_path: Path) -> None:
    """``_Base = object`` (the ``else:`` of ``if TYPE_CHECKING:``): unbound in the module, Python looks the
    name up in builtins, as for a builtin written directly as a base; a builtin that is no class is not
    followed, and neither is a builtin's name the module binds first."""
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from .heads import Head as _Base\nelse:\n    _Base = object\n"
            "_Mapping = dict\n_Printer = print\n"
            "class object:\n    pass\n_Own = object\n",
        },
    )
    assert resolve_name(index, "pkg", "_Base", "cuda") == [External("builtins.object")]
    assert resolve_name(index, "pkg", "_Mapping", "cuda") == [External("builtins.dict")]
    assert resolve_name(index, "pkg", "_Printer", "cuda") == [
        Missing("pkg/__init__.py: cannot follow _Printer (line 7: _Printer = print)", undecided=True)
    ]
    assert resolve_name(index, "pkg", "_Own", "cuda") == [ClassKey("pkg", "object", 8)]


def test_what_cannot_be_followed_names_the_statement(tmp_path: Path) -> None:
    """A call, a subscript, an attribute of a value: the reason gives the statement and its line, not the
    kind of expression."""
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "import torch\n\nFactory = make('nvidia')\nGeneric = Base[int]\n"
            "Alias, Other = Factory.cls, 3\n",
        },
    )
    assert resolve_name(index, "pkg", "Factory", "cuda") == [
        Missing("pkg/__init__.py: cannot follow Factory (line 3: Factory = make('nvidia'))", undecided=True)
    ]
    assert resolve_name(index, "pkg", "Generic", "cuda") == [
        Missing("pkg/__init__.py: cannot follow Generic (line 4: Generic = Base[int])", undecided=True)
    ]
    assert resolve_name(index, "pkg", "Alias", "cuda") == [
        Missing("pkg/__init__.py: cannot follow Alias (line 5: Alias, Other = Factory.cls, 3)", undecided=True)
    ]


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("Drafter", [ClassKey("pkg.mtp", "Drafter", 1)]),
        ("mtp.Drafter", [ClassKey("pkg.mtp", "Drafter", 1)]),
        ("pkg.mtp.Drafter", [ClassKey("pkg.mtp", "Drafter", 1)]),
        ("nn.Module", [External("torch.nn.Module")]),
        ("torch.nn.Module", [External("torch.nn.Module")]),
        ("Generic[T]", [External("typing.Generic")]),
        ("Base[dict[str, int]]", [ClassKey("pkg.mtp", "Drafter", 1)]),
        (" mtp . Drafter ", [ClassKey("pkg.mtp", "Drafter", 1)]),
        ("object", [External("object")]),
        ("Exception", [ClassKey("pkg.mtp", "Exception", 5)]),  # a class of the module shadows the builtin
        ("Drafter.Inner", [Missing("Drafter.Inner: attribute of class Drafter")]),
        ("mtp.Absent.Inner", [Missing("pkg/mtp.py: Absent is not defined")]),
        ("make()", [Missing("cannot follow base make()")]),
        ("", [Missing("cannot follow base ")]),
    ],
)
def test_a_base_expression(tmp_path: Path, code: str, expected: list) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/mtp.py": "class Drafter:\n    pass\n\n\nclass Exception:\n    pass\n",
            "pkg/user.py": "import pkg\nimport torch\nfrom typing import Generic\nfrom torch import nn\n"
            "from pkg import mtp\nfrom pkg.mtp import Drafter, Exception\n"
            "from pkg.mtp import Drafter as Base\n",
        },
    )
    assert resolve_expression(index, "pkg.user", code, "cuda") == expected


def test_a_base_in_a_module_outside_the_tree_or_missing_on_a_platform(tmp_path: Path) -> None:
    index = index_of(
        tmp_path,
        {
            "pkg/__init__.py": HEADER + "if current_platform.is_xpu():\n    raise ImportError('no XPU')\n",
            "pkg/mtp.py": "import torch\n",
            "pkg/broken.py": "class Drafter(\n",
        },
    )
    broken = resolve_expression(index, "pkg.broken", "Base", "cuda")
    assert len(broken) == 1 and isinstance(broken[0], Missing) and broken[0].reason.startswith("pkg/broken.py: ")
    assert resolve_expression(index, "outside", "Base", "cuda") == [External("outside.Base")]
    assert resolve_expression(index, "outside", "object", "cuda") == [External("object")]
    assert resolve_expression(index, "pkg.mtp", "torch.nn.Module", "cuda") == [External("torch.nn.Module")]
    assert resolve_expression(index, "pkg.mtp", "torch.nn.Module", "xpu") == [
        Missing("pkg/__init__.py: import raises ImportError (line 3): no XPU")
    ]
