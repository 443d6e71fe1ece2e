"""The text index that picks which modules the inheritor search reads."""

from __future__ import annotations

from conftest import FIXTURES, build_tree
from mtp_audit.apply.inheritors import BaseNames
from mtp_audit.fix import plan_fix
from mtp_audit.locate import locate


def test_base_names_reads_every_form_of_base_list(tmp_path):
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "one_line.py").write_text("class A(Base, metaclass=Meta):\n    pass\n")
    (package / "multi_line.py").write_text(
        "import x\n\n\nclass B(\n    x.Other,  # a comment (with parens)\n    Mixin[int],\n):\n    pass\n"
    )
    (package / "nested.py").write_text("def f():\n    class C(Inner):\n        pass\n")
    (package / "prose.py").write_text("# a subclass Fake(Base): is not a class statement\nBase = 1\n")
    (package / "no_bases.py").write_text("class D:\n    base = Base\n")
    (package / "a_constants.py").write_text("LIMIT = 1\n")  # read first, and nothing to index
    (package / "a_moved.py").symlink_to(tmp_path / "gone.py")  # unreadable: skipped, the rest still read
    (package / "commented.py").write_text("#class Fake(Base):\nclass Real(Kept):\n    pass\n")
    names = BaseNames(tmp_path, package)

    assert names.mentioning({"Base"}) == ["vllm.one_line"]
    assert names.mentioning({"Meta"}) == ["vllm.one_line"]  # generous: keywords count too
    assert names.mentioning({"Other", "Mixin"}) == ["vllm.multi_line"]
    assert names.mentioning({"Inner"}) == ["vllm.nested"]
    assert names.mentioning({"Kept"}) == ["vllm.commented"]  # after a commented-out class statement
    assert names.mentioning({"Fake", "D", "pass"}) == []


MODELS = "vllm/model_executor/models"


def test_every_subclass_of_a_written_base_is_named_with_its_platforms_and_result(tmp_path):
    """Subclasses in the base's file and in others, a subclass of a subclass (found in a later round),
    one that imports on CUDA only; a file that does not parse or is no module is skipped; non-drafters are
    listed too."""
    tree = build_tree(FIXTURES / "fix" / "series", tmp_path / "tree", "input")
    (tree / MODELS / "scorer_grand.py").write_text(
        "import torch\n\nfrom .wrap_predictor import ScorerPredictor\n\n\nclass GrandScorer(ScorerPredictor):\n"
        "    def compute_logits(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor:\n"
        "        logits = super().compute_logits(hidden_states, spec_step_idx)\n"
        "        logits[..., self.limit :] = -torch.inf\n"
        "        return logits\n"
    )
    (tree / MODELS / "cuda_scorer.py").write_text(
        "from vllm.platforms import current_platform\n\nfrom .wrap_predictor import WrapPredictor\n\n"
        "if not current_platform.is_cuda():\n    raise ImportError('CUDA only')\n\n\n"
        "class CudaScorer(WrapPredictor):\n    pass\n"
    )
    (tree / MODELS / "broken.py").write_text(
        "from .wrap_predictor import WrapPredictor\n\n\nclass Broken(WrapPredictor(:\n"
    )
    (tree / MODELS / "other_predictor.py").write_text(  # the same name, another class: not the written one
        "from torch import nn\n\n\nclass WrapPredictor(nn.Module):\n    pass\n\n\n"
        "class OtherScorer(WrapPredictor):\n    pass\n"
    )
    (tree / MODELS / "not-a-module.py").write_text(  # no module name: the index has no facts for it
        "from .wrap_predictor import WrapPredictor\n\n\nclass Stray(WrapPredictor):\n    pass\n"
    )
    (tree / MODELS / "own_scorer.py").write_text(  # its own method: it inherits nothing, and is not listed
        "from .wrap_predictor import WrapPredictor\n\n\nclass OwnScorer(WrapPredictor):\n"
        "    def get_top_tokens(self, hidden_states, spec_step_idx=0):\n        return hidden_states.argmax(-1)\n\n\n"
        "class OwnScorerChild(OwnScorer):\n    pass\n\n\n"
        "class OwnMirrorScorer(WrapPredictor):  # the processor's get_top_tokens is no inherited one\n"
        "    def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
        "        return self.logits_processor.get_top_tokens(self.head, hidden_states)\n"
    )
    (tree / MODELS / "super_scorer.py").write_text(  # its own method reaches the written one: listed
        "from .wrap_predictor import WrapPredictor\n\n\nclass SuperScorer(WrapPredictor):\n"
        "    def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
        "        return super().get_top_tokens(hidden_states, spec_step_idx)\n\n\n"
        "class NamedBaseScorer(WrapPredictor):\n"
        "    def get_top_tokens(self, hidden_states, spec_step_idx=0):\n"
        "        return WrapPredictor.get_top_tokens(self, hidden_states, spec_step_idx)\n"
    )
    result = plan_fix(locate(tree), ["WrapMTPModel"], False, None)
    everywhere = ("cpu", "cuda", "rocm", "tpu", "xpu")
    found = [(i.base.name, i.cls.name, i.cls.line, i.file, i.platforms, i.role, i.result) for i in result.inheritors]
    assert found == [
        ("WrapPredictor", "CudaScorer", 9, f"{MODELS}/cuda_scorer.py", ("cuda",), "not a drafter", "supported/mirror"),
        (
            "WrapPredictor",
            "GrandScorer",
            6,
            f"{MODELS}/scorer_grand.py",
            everywhere,
            "not a drafter",
            "supported/divergent: get_top_tokens inherited from WrapPredictor; compute_logits of GrandScorer "
            f"({MODELS}/scorer_grand.py:7): logits masked after the head call (line 9: "
            "`logits[..., self.limit :] = -torch.inf`); get_top_tokens of WrapPredictor "
            f"({MODELS}/wrap_predictor.py:6) ignores it",
        ),
        (
            "WrapPredictor",
            "SuperScorer",
            4,
            f"{MODELS}/super_scorer.py",
            everywhere,
            "not a drafter",
            "supported/mirror",
        ),
        (
            "WrapPredictor",
            "NamedBaseScorer",
            9,
            f"{MODELS}/super_scorer.py",
            everywhere,
            "not a drafter",
            "supported/unproven: get_top_tokens defined; get_top_tokens of NamedBaseScorer "
            f"({MODELS}/super_scorer.py:10) is written differently from compute_logits of WrapPredictor "
            f"({MODELS}/wrap_predictor.py:6); run `mtp-audit verify`",
        ),
        (
            "WrapPredictor",
            "WrapLitePredictor",
            7,
            f"{MODELS}/wrap_lite_mtp.py",
            everywhere,
            "delegate of drafter WrapLiteMTPModel",  # its own result, not the drafter's
            "supported/mirror",
        ),
        (
            "WrapPredictor",
            "ScorerPredictor",
            15,
            f"{MODELS}/wrap_predictor.py",
            everywhere,
            "not a drafter",
            "supported/mirror",
        ),
    ]
    assert [i.target.name for i in result.plan.insertions] == ["WrapMTP", "WrapPredictor"]


def test_an_inheritor_result_per_platform_and_one_without_a_consistency(tmp_path):
    """A subclass whose base is another class on CUDA gets each platform's result, in platform order; a
    subclass that binds get_top_tokens to None is no supported class at all: its status and reason only."""
    tree = build_tree(FIXTURES / "fix" / "series", tmp_path / "tree", "input")
    (tree / MODELS / "masked_predictor.py").write_text(
        "import torch\n\nfrom .wrap_predictor import WrapPredictor\n\n\nclass MaskedPredictor(WrapPredictor):\n"
        "    def compute_logits(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor:\n"
        "        logits = super().compute_logits(hidden_states, spec_step_idx)\n"
        "        logits[..., self.limit :] = -torch.inf\n"
        "        return logits\n"
    )
    (tree / MODELS / "plat_scorer.py").write_text(
        "from vllm.platforms import current_platform\n\nfrom .wrap_predictor import WrapPredictor\n\n"
        "if current_platform.is_cuda():\n    from .masked_predictor import MaskedPredictor as PlatBase\n"
        "else:\n    from .wrap_predictor import ScorerPredictor as PlatBase\n\n\n"
        "class PlatScorer(PlatBase, WrapPredictor):\n    pass\n\n\n"
        "class Shadow(WrapPredictor):\n    get_top_tokens = None\n"
    )
    result = plan_fix(locate(tree), ["WrapMTPModel"], False, None)
    found = {i.cls.name: i.result for i in result.inheritors if i.file.endswith("plat_scorer.py")}
    assert found == {
        "PlatScorer": "supported/mirror; supported/divergent: get_top_tokens inherited from WrapPredictor; "
        f"compute_logits of MaskedPredictor ({MODELS}/masked_predictor.py:7): logits masked after the head call "
        "(line 9: `logits[..., self.limit :] = -torch.inf`); get_top_tokens of WrapPredictor "
        f"({MODELS}/wrap_predictor.py:6) ignores it",
        "Shadow": "missing_manual: get_top_tokens = None (line 16) in Shadow: hasattr() finds get_top_tokens, "
        "calling it fails; a method cannot be added under that binding (remove it first)",
    }


def test_base_names_follows_every_alias_of_a_name(tmp_path):
    """``X as Y`` and ``Y = X`` (of a dotted X too), anywhere, make Y a spelling of X, chain upon chain."""
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "reexport.py").write_text("from .base import Base as _B\nAlias: type = _B\nOther = mod.Base  # noqa\n")
    (package / "sub_as.py").write_text("from .reexport import _B\n\n\nclass S(_B):\n    pass\n")
    (package / "sub_assigned.py").write_text("from .reexport import Alias\n\n\nclass T(Alias):\n    pass\n")
    (package / "sub_dotted.py").write_text("from .reexport import Other\n\n\nclass U(Other):\n    pass\n")
    (package / "unrelated.py").write_text("class V(Different):\n    pass\n")
    names = BaseNames(tmp_path, package)

    assert names.spellings({"Base"}) == {"Base", "_B", "Alias", "Other"}
    assert names.mentioning({"Base"}) == ["vllm.sub_as", "vllm.sub_assigned", "vllm.sub_dotted"]


def test_an_alias_in_a_file_with_crlf_line_endings_is_a_spelling_too(tmp_path):
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "windows.py").write_bytes(b"from .base import Base\r\n_B = Base\r\nif T:\r\n    _C = Base\r\n")
    (package / "sub.py").write_bytes(b"from .windows import _B\r\n\r\n\r\nclass S(_B):\r\n    pass\r\n")
    names = BaseNames(tmp_path, package)
    assert names.spellings({"Base"}) == {"Base", "_B", "_C"} and names.mentioning({"Base"}) == ["vllm.sub"]


def test_a_subclass_that_names_its_base_by_an_alias_is_in_the_blast_radius(tmp_path):
    """``from m import Base as _B; class S(_B)``, ``import pkg.m as m; class S(m.Base)`` and a name
    re-exported as ``Alias = Base`` are the written base at run time: each subclass is named."""
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head_subclass_alias", tmp_path / "tree", "input")
    (tree / MODELS / "reexport.py").write_text("from .long_mtp import LongMTP\n\nAlias = LongMTP\n")
    (tree / MODELS / "assigned_variant.py").write_text(
        "from .reexport import Alias\n\n\nclass AssignedVariant(Alias):\n    pass\n"
    )
    (tree / MODELS / "module_variant.py").write_text(
        "import vllm.model_executor.models.long_mtp as lm\n\n\nclass ModuleVariant(lm.LongMTP):\n    pass\n"
    )
    result = plan_fix(locate(tree), ["LongMTPModel"], False, None)
    assert sorted(i.cls.name for i in result.inheritors) == ["AliasedVariant", "AssignedVariant", "ModuleVariant"]


UNDECIDED_BASE = (
    "import os\n\nif os.environ.get('OTHER_HEAD'):\n    from .other_head import OtherHead as _Base\n"
    "else:\n    from .long_mtp import LongMTP as _Base\n\n\nclass UndecidedVariant(_Base):\n    pass\n"
)


def test_a_subclass_through_any_alternative_of_an_undecided_base_is_in_the_blast_radius(tmp_path):
    """A base bound under a condition the tool cannot decide may be the written class at run time
    even when it is not the first alternative: the subclass is named, by every order it may have."""
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head_subclass_alias", tmp_path / "tree", "input")
    (tree / MODELS / "other_head.py").write_text("from torch import nn\n\n\nclass OtherHead(nn.Module):\n    pass\n")
    (tree / MODELS / "undecided_variant.py").write_text(UNDECIDED_BASE)
    (tree / MODELS / "grand_variant.py").write_text(  # and its subclass, found in the next round
        "from .undecided_variant import UndecidedVariant\n\n\nclass GrandVariant(UndecidedVariant):\n    pass\n"
    )
    result = plan_fix(locate(tree), ["LongMTPModel"], False, None)
    found = {i.cls.name: (i.base.name, i.platforms) for i in result.inheritors}
    everywhere = ("cpu", "cuda", "rocm", "tpu", "xpu")
    assert found == {
        "AliasedVariant": ("LongMTP", everywhere),
        "UndecidedVariant": ("LongMTP", everywhere),
        "GrandVariant": ("LongMTP", everywhere),
    }
