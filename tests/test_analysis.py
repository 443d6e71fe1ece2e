"""A drafter's verdict when its compute_logits reaches another class's: through ``super()``, through
a delegate, with or without a get_top_tokens on the way. Each case is a small drafter module and
the verdict the scanner gives it: status, consistency, the methods it names and what a fix would add."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import BASE, build_tree
from mtp_audit.classify.analysis import Analysis, Analyzer
from mtp_audit.classify.shape_types import MASK_METHODS
from mtp_audit.locate import locate
from mtp_audit.model import ClassKey, Consistency, Status
from mtp_audit.resolve.names import resolve_name
from mtp_audit.scan import Scanner
from mtp_audit.synthesize.answers import synthetic_mirror

MODULE = "vllm.model_executor.models.example_mtp"
HEAD = "        return self.logits_processor(self.lm_head, hidden_states)\n"
MIRROR = (
    "    def get_top_tokens(self, hidden_states):\n"
    "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
)
SUPER = "    def compute_logits(self, hidden_states):\n        return super().compute_logits(hidden_states)\n"


def analyzer_of(
    tmp_path: Path, source: str, name: str = "ExampleMTP", others: dict[str, str] | None = None
) -> tuple[Analyzer, ClassKey]:
    """``others``: more model modules beside example_mtp.py, file name -> source."""
    root = build_tree(BASE, tmp_path / "tree")
    models = root / "vllm" / "model_executor" / "models"
    (models / "example_mtp.py").write_text(source)
    for file, text in (others or {}).items():
        (models / file).write_text(text)
    (models / "registry.py").write_text(f'_SPECULATIVE_DECODING_MODELS = {{"M": ("example_mtp", "{name}")}}\n')
    scanner = Scanner(locate(root))
    key = next(k for k in resolve_name(scanner.index, MODULE, name, "cuda") if isinstance(k, ClassKey))
    return scanner.analyzers["cuda"], key


def analyse(tmp_path: Path, source: str, name: str = "ExampleMTP", others: dict[str, str] | None = None) -> Analysis:
    analyzer, key = analyzer_of(tmp_path, source, name, others)
    return analyzer.analyze(key)


def owners(analysis: Analysis) -> tuple[str | None, str | None]:
    return tuple(hit.owner.name if hit else None for hit in (analysis.compute_logits, analysis.get_top_tokens))


def test_super_reaching_a_plain_head_is_fixed_in_both_classes(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class Base:\n    def compute_logits(self, hidden_states):\n" + HEAD + "\n\nclass ExampleMTP(Base):\n" + SUPER,
    )
    assert analysis.status == Status.MISSING_FIXABLE and analysis.consistency is None
    assert owners(analysis) == ("ExampleMTP", None)
    assert [i.target.name for i in analysis.insertions] == ["ExampleMTP", "Base"]
    assert [c.name for c in analysis.delegates] == ["Base"]
    assert analysis.reason == (
        "compute_logits delegates to super().compute_logits; super() (Base): compute_logits returns "
        "self.logits_processor(self.lm_head, hidden_states) in Base (vllm/model_executor/models/example_mtp.py:2)"
    )


def test_super_reaching_a_stub_cannot_be_fixed(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class Base:\n    def compute_logits(self, hidden_states):\n"
        "        raise NotImplementedError\n\n\nclass ExampleMTP(Base):\n" + SUPER,
    )
    assert analysis.status == Status.MISSING_MANUAL and analysis.insertions == []
    assert analysis.rule == "MTP102" and [c.name for c in analysis.delegates] == ["Base"]
    assert owners(analysis) == ("ExampleMTP", None)
    assert analysis.reason == (
        "delegate super() (Base) has no usable compute_logits: compute_logits raises NotImplementedError "
        "(line 3) in Base (vllm/model_executor/models/example_mtp.py:2)"
    )


def test_super_reaching_a_class_with_both_methods(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class Base:\n    def compute_logits(self, hidden_states):\n"
        + HEAD
        + MIRROR
        + "\n\nclass ExampleMTP(Base):\n"
        + SUPER,
    )
    # the inherited get_top_tokens is compared with the subclass's own compute_logits text, which
    # differs: unproven (safe), though super() makes them select the same tokens
    assert analysis.status == Status.SUPPORTED and analysis.consistency == Consistency.UNPROVEN
    assert owners(analysis) == ("ExampleMTP", "Base")
    assert analysis.reason.endswith("run `mtp-audit verify`")


SUPER_TOP_TOKENS = (
    "    def get_top_tokens(self, hidden_states):\n        return super().get_top_tokens(hidden_states)\n"
)
BASE_HEAD = "class Base:\n    def compute_logits(self, hidden_states):\n" + HEAD
AT = "(vllm/model_executor/models/example_mtp.py:{})"


def test_both_methods_through_super_to_a_mirror(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, BASE_HEAD + MIRROR + "\n\nclass ExampleMTP(Base):\n" + SUPER + SUPER_TOP_TOKENS)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert owners(analysis) == ("ExampleMTP", "ExampleMTP")
    assert analysis.reason == (
        "get_top_tokens defined; delegates to Base: mirror of compute_logits of Base " + AT.format(2)
    )


def test_both_methods_through_two_supers(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        BASE_HEAD
        + MIRROR
        + "\n\nclass Mid(Base):\n"
        + SUPER
        + SUPER_TOP_TOKENS
        + "\n\nclass ExampleMTP(Mid):\n"
        + SUPER
        + SUPER_TOP_TOKENS,
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert analysis.reason == (
        "get_top_tokens defined; delegates to Mid: delegates to Base: mirror of compute_logits of Base " + AT.format(2)
    )


def test_a_super_get_top_tokens_that_reaches_none_diverges(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, BASE_HEAD + "\n\nclass ExampleMTP(Base):\n" + SUPER + SUPER_TOP_TOKENS)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert analysis.reason == (
        "get_top_tokens defined; delegate Base has no get_top_tokens (compute_logits returns "
        "self.logits_processor(self.lm_head, hidden_states) in Base " + AT.format(2) + ")"
    )


def test_super_reaching_a_hand_written_head_is_manual(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class Base:\n    def compute_logits(self, hidden_states):\n"
        "        logits = self.lm_head(hidden_states)\n        return logits * 2\n\n\n"
        "class ExampleMTP(Base):\n" + SUPER,
    )
    assert analysis.status == Status.MISSING_MANUAL and analysis.rule == "MTP104"
    assert owners(analysis) == ("ExampleMTP", None) and [c.name for c in analysis.delegates] == ["Base"]
    assert analysis.reason == (
        "delegate super() (Base): logits come from self.lm_head(...), not "
        "self.logits_processor (line 3) in Base " + AT.format(2)
    )


def test_a_chain_of_supers_is_fixed_in_every_class_on_it(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, BASE_HEAD + "\n\nclass Mid(Base):\n" + SUPER + "\n\nclass ExampleMTP(Mid):\n" + SUPER)
    assert analysis.status == Status.MISSING_FIXABLE
    assert [i.target.name for i in analysis.insertions] == ["ExampleMTP", "Mid", "Base"]
    assert [c.name for c in analysis.delegates] == ["Mid", "Base"]
    assert analysis.reason == (
        "compute_logits delegates to super().compute_logits; super() (Mid): compute_logits delegates to "
        "super().compute_logits (in Mid " + AT.format(7) + "); super() (Base): compute_logits returns "
        "self.logits_processor(self.lm_head, hidden_states) in Base " + AT.format(2)
    )


def test_a_get_top_tokens_that_mirrors_the_inlined_super(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, BASE_HEAD + "\n\nclass ExampleMTP(Base):\n" + SUPER + MIRROR)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert analysis.reason == (
        "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(7) + " with the "
        "super().compute_logits of Base " + AT.format(2) + " inlined"
    )


def test_no_inlining_when_super_reaches_nothing_or_cannot_be_inlined(tmp_path: Path) -> None:
    outside = analyse(tmp_path / "outside", "from torch import nn\n\n\nclass ExampleMTP(nn.Module):\n" + SUPER + MIRROR)
    assert (outside.status, outside.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert outside.reason == (
        "get_top_tokens defined; get_top_tokens of ExampleMTP " + AT.format(7) + " is written differently from "
        "compute_logits of ExampleMTP " + AT.format(5) + "; run `mtp-audit verify`"
    )
    keyword = analyse(
        tmp_path / "keyword",
        "class Base:\n    def compute_logits(self, hidden_states, scale=1):\n"
        + HEAD
        + "\n\nclass ExampleMTP(Base):\n    def compute_logits(self, hidden_states):\n"
        "        return super().compute_logits(hidden_states, scale=2)\n" + MIRROR,
    )
    assert (keyword.status, keyword.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert "is written differently from compute_logits of ExampleMTP" in keyword.reason


PRE_HEAD = (
    "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
    "        hidden_states = self.norm(hidden_states)\n"
    "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
)


def top_tokens(parameter: str, *statements: str) -> str:
    body = "".join(f"        {s}\n" for s in statements)
    return (
        f"    def get_top_tokens(self, {parameter}):\n{body}"
        f"        return self.logits_processor.get_top_tokens(self.lm_head, {parameter})\n"
    )


def test_a_transform_before_the_head_must_be_kept(tmp_path: Path) -> None:
    kept = analyse(
        tmp_path / "kept", PRE_HEAD + top_tokens("hidden_states", "hidden_states = self.norm(hidden_states)")
    )
    assert (kept.status, kept.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    dropped = analyse(tmp_path / "dropped", PRE_HEAD + top_tokens("hidden_states"))
    assert (dropped.status, dropped.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert dropped.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + " transforms the hidden states "
        "before the head (hidden_states); get_top_tokens of ExampleMTP " + AT.format(6) + " does not"
    )
    other = analyse(
        tmp_path / "other", PRE_HEAD + top_tokens("hidden_states", "hidden_states = self.other(hidden_states)")
    )
    assert (other.status, other.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)


def test_a_get_top_tokens_without_the_parameter_compute_logits_reads(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, PRE_HEAD + top_tokens("hs"))
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert analysis.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + " takes hidden_states, which it "
        "reads (line 3: `hidden_states = self.norm(hidden_states)`); get_top_tokens of ExampleMTP "
        + AT.format(6)
        + " does not accept it"
    )


def test_a_mirror_with_a_parameter_renamed_in_place_is_unproven_not_divergent(tmp_path: Path) -> None:
    """A call passing the step by position reaches the renamed parameter (the same tokens); one passing
    it by keyword raises TypeError: without the callers' forms, neither is proven (it was divergent)."""
    source = (
        "class ExampleMTP:\n    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n\n"
        "    def get_top_tokens(self, hidden_states, step_idx=0):\n"
        "        return self.logits_processor.get_top_tokens(self.heads[step_idx], hidden_states)\n"
    )
    analysis = analyse(tmp_path, source)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert analysis.reason == (
        f"get_top_tokens defined; get_top_tokens of ExampleMTP {AT.format(5)} takes step_idx for spec_step_idx of "
        f"compute_logits of ExampleMTP {AT.format(2)}, in the same place: a call passing it by position reaches "
        "it, one passing it by keyword raises TypeError; run `mtp-audit verify`"
    )
    other_head = source.replace("self.heads[step_idx]", "self.heads[0]")  # not the mirror once renamed back
    assert analyse(tmp_path / "other", other_head).consistency == Consistency.DIVERGENT
    # a docstring line at column 0 (the method's text stays indented as in the file) is no crash
    documented = source.replace(
        "get_top_tokens(self, hidden_states, step_idx=0):\n",
        'get_top_tokens(self, hidden_states, step_idx=0):\n        """Greedy.\n\nTokens."""\n',
    )
    assert analyse(tmp_path / "documented", documented).consistency == Consistency.UNPROVEN
    # a body that reads a global of the compute_logits parameter's name (not its own) is not renamed into it
    captured = source.replace("self.heads[step_idx]", "self.heads[spec_step_idx]")
    assert analyse(tmp_path / "captured", captured).consistency == Consistency.DIVERGENT


def test_a_get_top_tokens_bound_in_the_class_body_to_a_function_names_it_not_a_wrapper(tmp_path: Path) -> None:
    """``get_top_tokens = _tokens`` was "wrapped (@rebound_in_class_body(_tokens)); the wrapper may change
    the tokens": the facts' own marker, and a wrapper there is none of."""
    source = (
        "def _tokens(self, hidden_states):\n"
        "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n\n\n"
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + HEAD + "\n    get_top_tokens = _tokens\n"
    )
    analysis = analyse(tmp_path, source)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert analysis.reason == (
        f"get_top_tokens defined; get_top_tokens of ExampleMTP {AT.format(9)} is bound in the class body to "
        "_tokens, whose code the scan does not compare; run `mtp-audit verify`"
    )


def delegation_chain(delegations: int, *, top_tokens: bool) -> str:
    """Classes D0 ... D<delegations>: each hands compute_logits (and get_top_tokens) to the next
    through ``self.model``; the last calls the head."""
    classes = []
    for k in range(delegations):
        methods = (
            "    def compute_logits(self, hidden_states):\n        return self.model.compute_logits(hidden_states)\n"
        )
        if top_tokens:
            methods += (
                "\n    def get_top_tokens(self, hidden_states):\n"
                "        return self.model.get_top_tokens(hidden_states)\n"
            )
        classes.append(f"class D{k}:\n    def __init__(self):\n        self.model = D{k + 1}()\n\n{methods}")
    last = f"class D{delegations}:\n    def compute_logits(self, hidden_states):\n" + HEAD
    classes.append(last + ("\n" + MIRROR if top_tokens else ""))
    return "\n\n".join(classes)


def test_a_chain_of_nine_delegations_is_followed_and_ten_are_too_deep(tmp_path: Path) -> None:
    nine = analyse(tmp_path / "nine", delegation_chain(9, top_tokens=False), name="D0")
    assert nine.status == Status.MISSING_FIXABLE
    assert [c.name for c in nine.delegates] == [f"D{k}" for k in range(1, 10)]
    assert [i.target.name for i in nine.insertions] == [f"D{k}" for k in range(10)]
    ten = analyse(tmp_path / "ten", delegation_chain(10, top_tokens=False), name="D0")
    assert (ten.status, ten.insertions) == (Status.MISSING_MANUAL, [])
    assert ten.reason == "".join(f"delegate D{k}: " for k in range(1, 10)) + "delegation chain too deep"
    assert [c.name for c in ten.delegates] == [f"D{k}" for k in range(1, 10)]


def test_both_methods_through_a_chain_of_delegations(tmp_path: Path) -> None:
    source = delegation_chain(9, top_tokens=True)
    nine = analyse(tmp_path / "nine", source, name="D0")
    assert (nine.status, nine.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert nine.reason == (
        "get_top_tokens defined; "
        + "".join(f"delegates to D{k}: get_top_tokens defined; " for k in range(1, 10))
        + "mirror of compute_logits of D9 "
        + AT.format(source.splitlines().index("class D9:") + 2)
    )
    # the delegates named are those followed: nine levels
    assert [c.name for c in nine.delegates] == [f"D{k}" for k in range(1, 10)]
    ten = analyse(tmp_path / "ten", delegation_chain(10, top_tokens=True), name="D0")
    assert (ten.status, ten.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert ten.reason == (
        "get_top_tokens defined; "
        + "".join(f"delegates to D{k}: get_top_tokens defined; " for k in range(1, 10))
        + "delegation chain too deep"
    )
    assert [c.name for c in ten.delegates] == [f"D{k}" for k in range(1, 10)]


def test_a_delegate_whose_class_cannot_be_told(tmp_path: Path) -> None:
    delegating = (
        "class ExampleMTP:\n    def __init__(self):\n        self.model = build_model()\n\n"
        "    def compute_logits(self, hidden_states):\n        return self.model.compute_logits(hidden_states)\n"
    )
    missing = analyse(tmp_path / "missing", delegating)
    assert (missing.status, missing.delegates, missing.insertions) == (Status.MISSING_MANUAL, [], [])
    assert missing.reason == (
        "cannot tell the class of self.model (build_model at vllm/model_executor/models/example_mtp.py:3 in "
        "ExampleMTP.__init__)"
    )
    both = analyse(
        tmp_path / "both",
        delegating
        + "\n    def get_top_tokens(self, hidden_states):\n        return self.model.get_top_tokens(hidden_states)\n",
    )
    assert (both.status, both.consistency, both.delegates) == (Status.SUPPORTED, Consistency.UNPROVEN, [])
    assert both.reason == (
        "get_top_tokens defined; cannot tell the class of self.model (build_model at "
        "vllm/model_executor/models/example_mtp.py:3 in ExampleMTP.__init__)"
    )


OPTIONAL_NORM = (
    "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
    "        {test}\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
)


def test_an_attribute_compute_logits_treats_as_optional(tmp_path: Path) -> None:
    """compute_logits falls back when self.norm is unset; a get_top_tokens that asserts it or uses it
    unguarded fails there, whichever way compute_logits tests it."""
    uses = (
        "get_top_tokens of ExampleMTP uses self.norm (line 8), which compute_logits of ExampleMTP treats as "
        "optional (line 3): without it compute_logits falls back, get_top_tokens fails"
    )
    tests = (
        "if self.norm is not None:",
        "if not self.norm is None:",
        "if self.norm:",
        "if self.use_norm and self.norm is not None:",
        "if not (self.norm is None):",
    )
    for i, test in enumerate(tests):
        source = OPTIONAL_NORM.format(test=test) + top_tokens(
            "hidden_states", "hidden_states = self.norm(hidden_states)"
        )
        analysis = analyse(tmp_path / str(i), source)
        assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT), test
        assert analysis.reason == f"get_top_tokens defined; {uses}", test
    asserted = analyse(
        tmp_path / "asserted",
        OPTIONAL_NORM.format(test="if self.norm is not None:")
        + top_tokens("hidden_states", "assert self.norm is not None", "hidden_states = self.norm(hidden_states)"),
    )
    assert asserted.consistency == Consistency.DIVERGENT
    assert asserted.reason.startswith(
        "get_top_tokens defined; get_top_tokens of ExampleMTP asserts self.norm (line 8), which compute_logits"
    )
    # tested the same way in get_top_tokens: the same tokens whether the attribute is set or not
    guarded = analyse(
        tmp_path / "guarded",
        OPTIONAL_NORM.format(test="if self.norm is not None:")
        + top_tokens("hidden_states", "if self.norm is not None:", "    hidden_states = self.norm(hidden_states)"),
    )
    assert (guarded.status, guarded.consistency) == (Status.SUPPORTED, Consistency.MIRROR)


def test_an_attribute_tested_in_a_conditional_expression_or_compared_with_something_else(tmp_path: Path) -> None:
    ternary = analyse(
        tmp_path / "ternary",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
        "        head = self.lm_head if self.draft_head is None else self.draft_head\n"
        "        return self.logits_processor(head, hidden_states)\n\n"
        + top_tokens("hidden_states", "assert self.draft_head is not None"),
    )
    assert ternary.consistency == Consistency.DIVERGENT
    assert "asserts self.draft_head (line 7), which compute_logits of ExampleMTP treats as optional (line 3)" in (
        ternary.reason
    )
    # `self.step == 0` is not a test of whether the attribute is set
    compared = analyse(
        tmp_path / "compared",
        OPTIONAL_NORM.format(test="if self.norm == 0:")
        + top_tokens("hidden_states", "hidden_states = self.norm(hidden_states)"),
    )
    assert "treats as optional" not in compared.reason


INNER_HEAD = "class Inner:\n    def compute_logits(self, hidden_states):\n" + HEAD
DELEGATE = "    def compute_logits(self, hidden_states):\n        return self.model.compute_logits(hidden_states)\n"
TO_INNER = "compute_logits delegates to self.model.compute_logits; Inner: compute_logits returns " + (
    "self.logits_processor(self.lm_head, hidden_states)"
)


def test_the_class_of_a_delegate_from_an_annotation_or_an_inherited_init(tmp_path: Path) -> None:
    annotated = analyse(tmp_path / "annotated", INNER_HEAD + '\n\nclass ExampleMTP:\n    model: "Inner"\n\n' + DELEGATE)
    inherited = analyse(
        tmp_path / "inherited",
        INNER_HEAD + "\n\nclass Base:\n    def __init__(self):\n        self.model = Inner()\n\n\n"
        "class ExampleMTP(Base):\n" + DELEGATE,
    )
    for analysis in (annotated, inherited):
        assert (analysis.status, analysis.reason) == (Status.MISSING_FIXABLE, TO_INNER)
        assert [c.name for c in analysis.delegates] == ["Inner"]
        assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [
            ("ExampleMTP", "ExampleMTP"),
            ("Inner", "Inner"),
        ]


def test_a_delegate_of_no_class_or_of_several(tmp_path: Path) -> None:
    unassigned = analyse(tmp_path / "unassigned", "class ExampleMTP:\n" + DELEGATE)
    assert (unassigned.status, unassigned.reason) == (
        Status.MISSING_MANUAL,
        "cannot tell the class of self.model (no assignment in __init__)",
    )
    assert owners(unassigned) == ("ExampleMTP", None) and unassigned.insertions == []
    several = analyse(
        tmp_path / "several",
        INNER_HEAD.replace("Inner", "Other")
        + "\n\n"
        + INNER_HEAD
        + "\n\nclass ExampleMTP:\n    def __init__(self, config):\n        if config.x:\n"
        "            self.model = Inner()\n        else:\n            self.model = Other()\n\n" + DELEGATE,
    )
    assert (several.status, several.reason) == (
        Status.MISSING_MANUAL,
        "self.model may be one of several classes (Inner, Other)",
    )


def test_a_delegate_with_a_get_top_tokens_that_is_not_proven(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        INNER_HEAD
        + "\n    def get_top_tokens(self, hidden_states):\n        return self.other_head(hidden_states).argmax(-1)\n"
        "\n\nclass ExampleMTP:\n    def __init__(self):\n        self.model = Inner()\n\n" + DELEGATE,
    )
    # a mirror of the delegating compute_logits would call Inner's get_top_tokens: not written
    assert (analysis.status, analysis.insertions) == (Status.MISSING_MANUAL, [])
    assert owners(analysis) == ("ExampleMTP", None) and [c.name for c in analysis.delegates] == ["Inner"]
    assert analysis.reason == (
        "delegate Inner has an unproven get_top_tokens: get_top_tokens defined; get_top_tokens of Inner "
        + AT.format(5)
        + " is written differently from compute_logits of Inner "
        + AT.format(2)
        + "; run `mtp-audit verify`"
    )


def test_a_delegate_with_no_compute_logits_and_both_methods_delegated(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class Inner:\n    pass\n\n\nclass ExampleMTP:\n    def __init__(self):\n        self.model = Inner()\n\n"
        + DELEGATE
        + "\n    def get_top_tokens(self, hidden_states):\n        return self.model.get_top_tokens(hidden_states)\n",
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert [c.name for c in analysis.delegates] == ["Inner"]
    assert analysis.reason == (
        "get_top_tokens defined; delegate Inner has no get_top_tokens (no compute_logits in the MRO of Inner)"
    )


def test_a_super_get_top_tokens_under_a_compute_logits_of_its_own(tmp_path: Path) -> None:
    """The subclass's compute_logits against the get_top_tokens its super() reaches."""
    own = "class ExampleMTP(Base):\n    def compute_logits(self, hidden_states):\n" + HEAD + SUPER_TOP_TOKENS
    same_head = analyse(tmp_path / "same", BASE_HEAD + MIRROR + "\n\n" + own)
    assert (same_head.status, same_head.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert owners(same_head) == ("ExampleMTP", "ExampleMTP")
    assert same_head.reason == "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(9)
    other_head = analyse(
        tmp_path / "other",
        (BASE_HEAD + MIRROR).replace("self.lm_head", "self.head") + "\n\n" + own,
    )
    assert (other_head.status, other_head.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert other_head.reason == (
        "get_top_tokens defined; get_top_tokens of Base " + AT.format(4) + " is written differently from "
        "compute_logits of ExampleMTP " + AT.format(9) + "; run `mtp-audit verify`"
    )
    nothing = analyse(tmp_path / "nothing", "from torch import nn\n\n\n" + own.replace("(Base)", "(nn.Module)"))
    assert (nothing.status, nothing.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert nothing.reason == "get_top_tokens defined; super().get_top_tokens in ExampleMTP " + AT.format(7) + (
        " reaches nothing"
    )


def test_super_reaching_no_compute_logits(tmp_path: Path) -> None:
    analysis = analyse(tmp_path, "from torch import nn\n\n\nclass ExampleMTP(nn.Module):\n" + SUPER)
    assert (analysis.status, analysis.insertions) == (Status.MISSING_MANUAL, [])
    assert owners(analysis) == ("ExampleMTP", None)
    assert analysis.reason == "super().compute_logits in ExampleMTP " + AT.format(5) + " reaches no compute_logits"


def super_chain(supers: int, *, top_tokens: bool) -> str:
    """K0(K1), K1(K2), ...: each compute_logits (and get_top_tokens) returns super()'s; the last calls the head."""
    last = f"class K{supers}:\n    def compute_logits(self, hidden_states):\n" + HEAD + (MIRROR if top_tokens else "")
    classes = [last] + [
        f"class K{k}(K{k + 1}):\n" + SUPER + (SUPER_TOP_TOKENS if top_tokens else "") for k in reversed(range(supers))
    ]
    return "\n\n".join(classes)


def test_a_chain_of_nine_supers_is_followed_and_ten_are_too_deep(tmp_path: Path) -> None:
    nine = analyse(tmp_path / "nine", super_chain(9, top_tokens=False), name="K0")
    assert nine.status == Status.MISSING_FIXABLE
    assert [c.name for c in nine.delegates] == [f"K{k}" for k in range(1, 10)]
    assert [(i.target.name, i.source.owner.name) for i in nine.insertions] == [(f"K{k}", f"K{k}") for k in range(10)]
    ten = analyse(tmp_path / "ten", super_chain(10, top_tokens=False), name="K0")
    assert (ten.status, ten.insertions) == (Status.MISSING_MANUAL, [])
    assert owners(ten) == ("K0", None) and [c.name for c in ten.delegates] == [f"K{k}" for k in range(1, 10)]
    assert ten.reason == "".join(f"delegate super() (K{k}): " for k in range(1, 10)) + "delegation chain too deep"


def test_both_methods_through_a_chain_of_supers(tmp_path: Path) -> None:
    nine = analyse(tmp_path / "nine", super_chain(9, top_tokens=True), name="K0")
    assert (nine.status, nine.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert nine.reason == (
        "get_top_tokens defined; "
        + "".join(f"delegates to K{k}: " for k in range(1, 10))
        + "mirror of compute_logits of K9 "
        + AT.format(2)
    )
    ten = analyse(tmp_path / "ten", super_chain(10, top_tokens=True), name="K0")
    assert (ten.status, ten.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert ten.reason == (
        "get_top_tokens defined; " + "".join(f"delegates to K{k}: " for k in range(1, 10)) + "delegation chain too deep"
    )


@pytest.mark.parametrize("method", MASK_METHODS)
def test_a_get_top_tokens_masking_the_same_way_is_unproven_not_divergent(tmp_path: Path, method: str) -> None:
    """Every method the mask rule reads as a mask in compute_logits is a mask in get_top_tokens too."""
    call = f"logits.{method}(self.rows, self.floor)"
    mask = f"        {call}\n" if method.endswith("_") else f"        logits = {call}\n"  # in place, or a copy kept
    head = "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
    analysis = analyse(
        tmp_path,
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + head + mask + "        return logits\n\n"
        "    def get_top_tokens(self, hidden_states):\n" + head + mask + "        return logits.argmax(dim=-1)\n",
    )
    assert analysis.consistency == Consistency.UNPROVEN
    assert analysis.reason.endswith(" masks too; run `mtp-audit verify`"), analysis.reason


def test_verdicts_against_a_compute_logits_that_is_not_a_plain_head(tmp_path: Path) -> None:
    masked = (
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        '        logits.masked_fill_(self.suppressed, -float("inf"))\n        return logits\n\n'
    )
    masks_too = analyse(
        tmp_path / "masks_too",
        masked + "    def get_top_tokens(self, hidden_states):\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        '        logits.masked_fill_(self.suppressed, -float("inf"))\n        return logits.argmax(dim=-1)\n',
    )
    assert masks_too.consistency == Consistency.UNPROVEN
    assert masks_too.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + ": logits masked after the head "
        'call (line 4: `logits.masked_fill_(self.suppressed, -float("inf"))`); get_top_tokens of ExampleMTP '
        + AT.format(7)
        + " masks too; run `mtp-audit verify`"
    )
    stub = analyse(
        tmp_path / "stub",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n        raise NotImplementedError\n\n"
        + MIRROR,
    )
    assert (stub.consistency, stub.reason) == (
        Consistency.UNPROVEN,
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + " is a stub",
    )
    manual = analyse(
        tmp_path / "manual",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
        "        return self.lm_head(hidden_states)\n\n" + MIRROR,
    )
    assert (manual.consistency, manual.reason) == (
        Consistency.UNPROVEN,
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + ": logits come from "
        "self.lm_head(...), not self.logits_processor (line 3); get_top_tokens of ExampleMTP "
        + AT.format(5)
        + " is written differently; run `mtp-audit verify`",
    )
    alone = analyse(tmp_path / "alone", "class ExampleMTP:\n" + MIRROR)
    assert (alone.status, alone.consistency, owners(alone)) == (
        Status.SUPPORTED,
        Consistency.UNPROVEN,
        (None, "ExampleMTP"),
    )
    assert alone.reason == "get_top_tokens defined; no compute_logits to compare with"


def test_a_get_top_tokens_without_two_parameters_compute_logits_reads(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        "class ExampleMTP:\n    def compute_logits(self, hidden_states, spec_step_idx=0, temperature=1.0):\n"
        "        return self.logits_processor(self.heads[spec_step_idx], hidden_states / temperature)\n\n" + MIRROR,
    )
    assert analysis.consistency == Consistency.DIVERGENT
    assert analysis.reason.startswith(
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + " takes spec_step_idx, temperature, "
        "which it reads (line 3: "
    )


LOCAL_ARGMAX_MIXIN = (
    "class LocalArgmaxMixin:\n    def get_top_tokens(self, hidden_states):\n"
    "        top = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    '        d2t = getattr(self, "draft_id_to_target_id", None)\n'
    "        if d2t is not None:\n            top = top + d2t[top]\n        return top\n\n\n"
    "class ExampleMTP(LocalArgmaxMixin):\n    def compute_logits(self, hidden_states):\n"
)
MIXIN_AT = "LocalArgmaxMixin " + AT.format(2)


def test_the_local_argmax_mixin_against_compute_logits_it_cannot_prove(tmp_path: Path) -> None:
    """The mixin's head call is compared with what compute_logits does; what it cannot prove is unproven."""
    cases = {
        "delegated": (
            "return self.model.compute_logits(hidden_states)",
            "compute_logits delegates to self.model.compute_logits",
        ),
        "no_head_call": (
            "return self.lm_head(hidden_states)",
            "logits come from self.lm_head(...), not self.logits_processor (line 12)",
        ),
        "scaled": (
            "logits = self.logits_processor(self.lm_head, hidden_states)\n        return logits / 2",
            "logits post-processed after the head call (line 13: `return logits / 2`)",
        ),
    }
    for name, (body, why) in cases.items():
        analysis = analyse(tmp_path / name, LOCAL_ARGMAX_MIXIN + f"        {body}\n")
        assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN), name
        assert owners(analysis) == ("ExampleMTP", "LocalArgmaxMixin"), name
        assert analysis.reason == (
            f"get_top_tokens inherited from LocalArgmaxMixin; {MIXIN_AT} against compute_logits of ExampleMTP "
            + AT.format(11)
            + f": {why}"
        ), name
    other_head = analyse(
        tmp_path / "other_head", LOCAL_ARGMAX_MIXIN + "        return self.logits_processor(self.head, hidden_states)\n"
    )
    assert other_head.consistency == Consistency.DIVERGENT
    assert other_head.reason == (
        "get_top_tokens inherited from LocalArgmaxMixin; compute_logits of ExampleMTP " + AT.format(11) + " calls the "
        f"head as (self.head, hidden_states); {MIXIN_AT} uses (self.lm_head, hidden states) unchanged"
    )


NORMALISED_IN_ONE_ARM = (
    "        if self.norm_first:\n            h = self.norm(hidden_states)\n"
    "            return self.logits_processor(self.lm_head, h)\n"
    "        else:\n            return self.logits_processor(self.lm_head, hidden_states)\n"
)


def test_a_head_call_in_every_arm_is_no_plain_head(tmp_path: Path) -> None:
    """One arm normalises the hidden states first: neither the local-argmax mixin nor a plain mirror
    (one head call on the hidden states as given) selects the same tokens."""
    mixin = analyse(tmp_path / "mixin", LOCAL_ARGMAX_MIXIN + NORMALISED_IN_ONE_ARM)
    assert (mixin.status, mixin.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert mixin.reason == (
        "get_top_tokens inherited from LocalArgmaxMixin; compute_logits of ExampleMTP " + AT.format(11) + " calls the "
        f"head as (self.lm_head, hidden states that differ by arm); {MIXIN_AT} uses (self.lm_head, hidden states) "
        "unchanged"
    )
    plain = analyse(
        tmp_path / "plain",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + NORMALISED_IN_ONE_ARM + "\n" + MIRROR,
    )
    assert (plain.status, plain.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert plain.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + " transforms the hidden states "
        "before the head (hidden states that differ by arm); get_top_tokens of ExampleMTP " + AT.format(9) + " does not"
    )


def test_an_assert_before_the_head_keeps_the_local_argmax_mixin_equivalent(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        LOCAL_ARGMAX_MIXIN + "        assert self.lm_head is not None\n        return self.logits_processor("
        "self.lm_head, hidden_states)\n",
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.EQUIVALENT)
    assert analysis.reason == (
        f"get_top_tokens inherited from LocalArgmaxMixin; {MIXIN_AT}: the same head call as compute_logits of "
        "ExampleMTP " + AT.format(11) + "; no draft_id_to_target_id"
    )


def test_hidden_states_passed_by_keyword_are_not_a_transform(tmp_path: Path) -> None:
    """``self.logits_processor(self.lm_head, hidden_states=hidden_states)`` is the mixin's own head call,
    and no transform a plain get_top_tokens leaves out (it was read as one: divergent)."""
    by_keyword = "        return self.logits_processor(self.lm_head, hidden_states=hidden_states)\n"
    mixin = analyse(tmp_path / "mixin", LOCAL_ARGMAX_MIXIN + by_keyword)
    assert (mixin.status, mixin.consistency) == (Status.SUPPORTED, Consistency.EQUIVALENT)
    assert mixin.reason == (
        f"get_top_tokens inherited from LocalArgmaxMixin; {MIXIN_AT}: the same head call as compute_logits of "
        "ExampleMTP " + AT.format(11) + "; no draft_id_to_target_id"
    )
    plain = analyse(
        tmp_path / "plain",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + by_keyword + "\n" + MIRROR,
    )
    assert (plain.status, plain.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    alone = analyse(
        tmp_path / "alone", "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + by_keyword
    )
    assert (alone.status, alone.reason) == (
        Status.MISSING_FIXABLE,
        "compute_logits returns self.logits_processor(self.lm_head, hidden_states=hidden_states)",
    )


def test_a_get_top_tokens_beside_a_head_call_it_cannot_mirror(tmp_path: Path) -> None:
    """A head call with arguments get_top_tokens does not take, alone or in one arm of an `if`: the
    get_top_tokens written beside it cannot be proven a mirror, so verify is asked for."""
    alone = "        return self.logits_processor(self.lm_head, hidden_states, scale=2.0)\n"
    in_an_arm = (
        "        if self.plain:\n            return self.logits_processor(self.lm_head, hidden_states)\n"
        "        else:\n            return self.logits_processor(self.lm_head, hidden_states, scale=2.0)\n"
    )
    for name, body, line, top_tokens in (("alone", alone, 3, 5), ("in_an_arm", in_an_arm, 6, 8)):
        analysis = analyse(
            tmp_path / name, "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + body + "\n" + MIRROR
        )
        assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN), name
        assert analysis.reason == (
            "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(2) + ": self.logits_processor called "
            f"with arguments get_top_tokens does not take (line {line}): no parameter `scale`; get_top_tokens, whose "
            "signature was not read, assumed (lm_head, hidden_states, embedding_bias=...); get_top_tokens of "
            "ExampleMTP " + AT.format(top_tokens) + " is written differently; run `mtp-audit verify`"
        ), name


def test_a_super_inlined_in_a_class_the_drafter_inherits_from(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path, BASE_HEAD + "\n\nclass Mid(Base):\n" + SUPER + MIRROR + "\n\nclass ExampleMTP(Mid):\n    pass\n"
    )
    assert (analysis.status, analysis.consistency, owners(analysis)) == (
        Status.SUPPORTED,
        Consistency.MIRROR,
        ("Mid", "Mid"),
    )
    assert analysis.reason == (
        "get_top_tokens inherited from Mid; mirror of compute_logits of Mid " + AT.format(7) + " with the "
        "super().compute_logits of Base " + AT.format(2) + " inlined"
    )


def test_an_inherited_head_is_mirrored_in_the_drafter_when_it_uses_only_self(tmp_path: Path) -> None:
    only_self = analyse(tmp_path / "self", BASE_HEAD + "\n\nclass ExampleMTP(Base):\n    pass\n")
    assert [(i.target.name, i.source.owner.name) for i in only_self.insertions] == [("ExampleMTP", "Base")]
    base = (
        "from torch.nn import functional as F\n\n\nclass Base:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, F.normalize(hidden_states))\n"
    )
    same_module = analyse(tmp_path / "same", base + "\n\nclass ExampleMTP(Base):\n    pass\n")
    # compute_logits reads a module name (F) when it runs: in the drafter of the same module, the same F
    assert [(i.target.name, i.source.owner.name) for i in same_module.insertions] == [("ExampleMTP", "Base")]
    other_module = analyse(
        tmp_path / "other", "from .base import Base\n\n\nclass ExampleMTP(Base):\n    pass\n", others={"base.py": base}
    )
    # in another module, F may be unbound or another object: the mirror stays beside compute_logits, in Base
    assert [(i.target.name, i.source.owner.name) for i in other_module.insertions] == [("Base", "Base")]
    own = analyse(tmp_path / "own", BASE_HEAD.replace("class Base", "class ExampleMTP"))
    assert [(i.target.name, i.source.owner.name) for i in own.insertions] == [("ExampleMTP", "ExampleMTP")]


def test_a_compute_logits_a_mirror_in_the_class_body_would_not_follow(tmp_path: Path) -> None:
    conditional = analyse(
        tmp_path / "conditional",
        "import sys\n\n\nclass ExampleMTP:\n    if sys.platform == 'linux':\n\n"
        "        def compute_logits(self, hidden_states):\n    " + HEAD,
    )
    outside = analyse(
        tmp_path / "outside",
        "class ExampleMTP:\n    pass\n\n\ndef compute_logits(self, hidden_states):\n"
        + HEAD
        + "\n\nExampleMTP.compute_logits = compute_logits\n",
    )
    where = (
        (conditional, "defined only under `if sys.platform == 'linux':` in the class body (line 5)"),
        (outside, "set after the class to compute_logits (line 9)"),
    )
    for analysis, how in where:
        assert (analysis.status, analysis.insertions, owners(analysis)) == (
            Status.MISSING_MANUAL,
            [],
            ("ExampleMTP", None),
        )
        assert analysis.reason == (
            f"compute_logits of ExampleMTP is {how}; a mirror written into the class body would not follow it"
        )


def test_a_compute_logits_that_decides_by_itself(tmp_path: Path) -> None:
    stub = analyse(
        tmp_path / "stub",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n        raise NotImplementedError\n",
    )
    assert (stub.status, stub.rule, stub.reason) == (
        Status.NOT_APPLICABLE,
        "MTP102",
        "compute_logits raises NotImplementedError (line 3)",
    )
    manual = analyse(
        tmp_path / "manual",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n        return self.lm_head(hidden_states)\n",
    )
    assert (manual.status, manual.rule, manual.reason) == (
        Status.MISSING_MANUAL,
        "MTP104",
        "logits come from self.lm_head(...), not self.logits_processor (line 3)",
    )
    assert owners(stub) == owners(manual) == ("ExampleMTP", None)


def test_no_compute_logits_says_what_else_it_found(tmp_path: Path) -> None:
    placeholder = analyse(
        tmp_path / "placeholder",
        "class ExampleMTP:\n    def __init__(self, *args, **kwargs):\n"
        "        raise ImportError('needs the extension')\n",
    )
    assert (placeholder.status, placeholder.reason) == (
        Status.NOT_APPLICABLE,
        "no compute_logits in the MRO of ExampleMTP; a placeholder: its __init__ raises ImportError: needs the "
        "extension",
    )
    # a base the tool cannot follow may define it: not known to have none, so a human looks
    unfollowed = analyse(tmp_path / "unfollowed", "class ExampleMTP(make_base(), Undefined):\n    pass\n")
    assert (unfollowed.status, unfollowed.reason) == (
        Status.MISSING_MANUAL,
        "no compute_logits found in the MRO of ExampleMTP, but bases not followed: make_base() (cannot follow base "
        "make_base()), Undefined (vllm/model_executor/models/example_mtp.py: Undefined is not defined), where it "
        "may be defined",
    )
    missing_module = analyse(
        tmp_path / "missing_module",
        "from vllm.model_executor.models.renamed_mtp import RenamedMTP\n\n\nclass ExampleMTP(RenamedMTP):\n    pass\n",
    )
    assert (missing_module.status, missing_module.reason) == (
        Status.MISSING_MANUAL,
        "no compute_logits found in the MRO of ExampleMTP, but bases not followed: RenamedMTP "
        "(vllm.model_executor.models.renamed_mtp is no module of the tree: importing RenamedMTP from it raises "
        "ModuleNotFoundError), where it may be defined",
    )
    # get_top_tokens = None and no compute_logits: nothing to draft with, nothing to fix
    disabled = analyse(tmp_path / "disabled", "class ExampleMTP:\n    get_top_tokens = None\n")
    assert (disabled.status, disabled.reason) == (Status.NOT_APPLICABLE, "no compute_logits in the MRO of ExampleMTP")


def test_a_base_from_a_namespace_package_is_named_as_one(tmp_path: Path) -> None:
    """A folder without __init__.py imports (a namespace package) and defines nothing: ImportError, not
    ModuleNotFoundError (QA cache #3)."""
    source = (
        "from vllm.model_executor.models.renamed_mtp import RenamedMTP\n\n\nclass ExampleMTP(RenamedMTP):\n    pass\n"
    )
    root = build_tree(BASE, tmp_path / "tree")
    models = root / "vllm" / "model_executor" / "models"
    (models / "renamed_mtp").mkdir()
    (models / "renamed_mtp" / "other.py").write_text("class RenamedMTP:\n    pass\n")
    (models / "example_mtp.py").write_text(source)
    (models / "registry.py").write_text('_SPECULATIVE_DECODING_MODELS = {"M": ("example_mtp", "ExampleMTP")}\n')
    scanner = Scanner(locate(root))
    key = next(k for k in resolve_name(scanner.index, MODULE, "ExampleMTP", "cuda") if isinstance(k, ClassKey))
    assert scanner.analyzers["cuda"].analyze(key).reason == (
        "no compute_logits found in the MRO of ExampleMTP, but bases not followed: RenamedMTP "
        "(vllm.model_executor.models.renamed_mtp is a folder without __init__.py (a namespace package), which "
        "defines nothing: importing RenamedMTP from it raises ImportError), where it may be defined"
    )


def test_the_methods_a_fix_would_write_reach_through_delegations_and_supers(tmp_path: Path) -> None:
    """The blast-radius check analyses a drafter again with the mirrors a fix would write overlaid:
    they must be seen through every delegation and super() on the way."""
    sources = {
        "delegations": (delegation_chain(3, top_tokens=False), "D0", "delegates to D1: "),
        "supers": (super_chain(3, top_tokens=False), "K0", "delegates to K1: "),
    }
    for name, (source, drafter, first) in sources.items():
        analyzer, key = analyzer_of(tmp_path / name, source, drafter)
        before = analyzer.analyze(key)
        assert before.status == Status.MISSING_FIXABLE, name
        overlay = {i.target: {"get_top_tokens": synthetic_mirror(i.source, analyzer.h)} for i in before.insertions}
        after = analyzer.analyze(key, overlay)
        assert (after.status, after.consistency) == (Status.SUPPORTED, Consistency.MIRROR), name
        assert after.reason.startswith(f"get_top_tokens defined; {first}"), name
        if name == "delegations":  # supers need no list: the classes they reach are in the drafter's MRO
            assert after.delegates == before.delegates


def test_super_reaching_the_local_argmax_mixin_of_a_drafter_that_sets_draft_ids(tmp_path: Path) -> None:
    mixin = LOCAL_ARGMAX_MIXIN.split("class ExampleMTP")[0]
    analysis = analyse(
        tmp_path,
        mixin
        + "class Base(LocalArgmaxMixin):\n    def compute_logits(self, hidden_states):\n"
        + HEAD
        + "\n\nclass ExampleMTP(Base):\n    def __init__(self):\n        self.draft_id_to_target_id = None\n\n"
        + SUPER
        + SUPER_TOP_TOKENS,
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert analysis.reason == (
        f"get_top_tokens defined; delegates to Base: {MIXIN_AT} remaps through draft_id_to_target_id, which "
        "ExampleMTP sets, but compute_logits of Base " + AT.format(11) + " does not scatter"
    )


def test_an_optional_attribute_in_a_method_with_a_string_at_column_zero(tmp_path: Path) -> None:
    """A multi-line string that goes on at column 0 cannot be dedented away: the methods are still read."""
    source = OPTIONAL_NORM.format(test="if self.norm is not None:").replace(
        "        return self.logits_processor",
        '        note = """\nat column zero"""\n        return self.logits_processor',
    ) + top_tokens("hidden_states", "hidden_states = self.norm(hidden_states)")
    analysis = analyse(tmp_path, source)
    assert analysis.consistency == Consistency.DIVERGENT
    assert analysis.reason == (
        "get_top_tokens defined; get_top_tokens of ExampleMTP uses self.norm (line 10), which compute_logits of "
        "ExampleMTP treats as optional (line 3): without it compute_logits falls back, get_top_tokens fails"
    )


def test_a_delegating_drafter_judged_by_its_callers(tmp_path: Path) -> None:
    from mtp_audit.classify.contract_rules import CallExample, example_contract

    source = (
        "class Inner:\n    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n\n\n"
        "class ExampleMTP:\n    def __init__(self):\n        self.model = Inner()\n\n"
        "    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        return self.model.compute_logits(hidden_states, spec_step_idx)\n"
    )
    analyzer, key = analyzer_of(tmp_path, source)
    with_step = ("hidden_states", "spec_step_idx=spec_step_idx")
    uncalled = analyzer.analyze(key, contract=example_contract(CallExample("", None, with_step)))
    assert (uncalled.status, uncalled.uncalled, uncalled.rule) == (Status.NOT_APPLICABLE, True, "MTP201")
    assert [c.name for c in uncalled.delegates] == ["Inner"] and owners(uncalled) == ("ExampleMTP", None)
    without_step = analyzer.analyze(key, contract=example_contract(CallExample("", ("hidden_states",), with_step)))
    assert (without_step.status, without_step.rule) == (Status.MISSING_MANUAL, "MTP203")
    assert [c.name for c in without_step.delegates] == ["Inner"] and without_step.insertions == []
    assert without_step.reason.endswith(
        "compute_logits reads spec_step_idx (line 11: `return self.model.compute_logits(hidden_states, "
        "spec_step_idx)`): a mirror would draft with other values than compute_logits gets; the call site must "
        "pass the same arguments to both methods"
    )


def test_a_contract_rule_is_named_only_for_a_verdict_it_decided(tmp_path: Path) -> None:
    from mtp_audit.classify.contract_rules import CallExample, example_contract

    with_step = ("hidden_states", "spec_step_idx=spec_step_idx")
    contract = example_contract(CallExample("", with_step, with_step))  # get_top_tokens gets spec_step_idx=
    conditional = (
        "import sys\n\n\nclass ExampleMTP:\n    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        return self.logits_processor(self.heads[spec_step_idx], hidden_states)\n\n"
        "    if sys.platform == 'linux':\n\n        def get_top_tokens(self, hidden_states):\n"
        "            return self.logits_processor.get_top_tokens(self.heads[0], hidden_states)\n"
    )
    coroutine = (
        "class ExampleMTP:\n    async def get_top_tokens(self, hidden_states):\n"
        "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    )
    # unproven because it is conditional, divergent because it is a coroutine: not the call's doing
    for name, source, consistency in (
        ("conditional", conditional, Consistency.UNPROVEN),
        ("coroutine", coroutine, Consistency.DIVERGENT),
    ):
        analyzer, key = analyzer_of(tmp_path / name, source)
        analysis = analyzer.analyze(key, contract=contract)
        assert (analysis.status, analysis.consistency, analysis.rule) == (Status.SUPPORTED, consistency, None), name


def test_a_delegate_whose_get_top_tokens_is_a_mirror_or_diverges(tmp_path: Path) -> None:
    holder = "\n\nclass ExampleMTP:\n    def __init__(self):\n        self.model = Inner()\n\n" + DELEGATE
    mirror = analyse(tmp_path / "mirror", INNER_HEAD + MIRROR + holder)
    # the drafter's own mirror calls Inner's get_top_tokens: written into the drafter alone
    assert (mirror.status, [c.name for c in mirror.delegates]) == (Status.MISSING_FIXABLE, ["Inner"])
    assert [(i.target.name, i.source.owner.name) for i in mirror.insertions] == [("ExampleMTP", "ExampleMTP")]
    assert mirror.reason == (
        "compute_logits delegates to self.model.compute_logits; Inner: get_top_tokens defined; mirror of "
        "compute_logits of Inner " + AT.format(2)
    )
    normed = INNER_HEAD.replace(
        "hidden_states):\n", "hidden_states):\n        hidden_states = self.norm(hidden_states)\n"
    )
    divergent = analyse(tmp_path / "divergent", normed + MIRROR + holder)
    assert (divergent.status, divergent.insertions) == (Status.MISSING_MANUAL, [])
    assert divergent.reason.startswith("delegate Inner has a divergent get_top_tokens: get_top_tokens defined; ")


def test_a_super_get_top_tokens_reaching_the_mixin_or_a_delegation(tmp_path: Path) -> None:
    own_head = "    def compute_logits(self, hidden_states):\n" + HEAD
    mixin = analyse(
        tmp_path / "mixin",
        LOCAL_ARGMAX_MIXIN.split("class ExampleMTP")[0]
        + "class Base(LocalArgmaxMixin):\n    pass\n\n\nclass ExampleMTP(Base):\n    def __init__(self):\n"
        "        self.draft_id_to_target_id = None\n\n" + own_head + SUPER_TOP_TOKENS,
    )
    assert mixin.consistency == Consistency.DIVERGENT
    assert mixin.reason == (
        f"get_top_tokens defined; {MIXIN_AT} remaps through draft_id_to_target_id, which ExampleMTP sets, but "
        "compute_logits of ExampleMTP " + AT.format(18) + " does not scatter"
    )
    delegation = analyse(
        tmp_path / "delegation",
        INNER_HEAD + MIRROR + "\n\nclass Base:\n    def get_top_tokens(self, hidden_states):\n"
        "        return self.model.get_top_tokens(hidden_states)\n\n\n"
        "class ExampleMTP(Base):\n    def __init__(self):\n        self.model = Inner()\n\n"
        + DELEGATE
        + SUPER_TOP_TOKENS,
    )
    assert (delegation.consistency, [c.name for c in delegation.delegates]) == (Consistency.MIRROR, ["Inner"])
    assert delegation.reason == (
        "get_top_tokens defined; delegates to Inner: get_top_tokens defined; mirror of compute_logits of Inner "
        + AT.format(2)
    )
    # inherited from a class in the middle: the super() of Mid's method, not of the drafter's MRO start
    middle = analyse(
        tmp_path / "middle",
        BASE_HEAD + MIRROR + "\n\nclass Mid(Base):\n" + own_head + SUPER_TOP_TOKENS + "\n\n"
        "class ExampleMTP(Mid):\n    pass\n",
    )
    assert (middle.consistency, middle.reason) == (
        Consistency.MIRROR,
        "get_top_tokens inherited from Mid; mirror of compute_logits of Mid " + AT.format(9),
    )


def test_a_mirror_a_fix_writes_into_the_base_reaches_a_super_get_top_tokens(tmp_path: Path) -> None:
    source = BASE_HEAD + "\n\nclass ExampleMTP(Base):\n    def compute_logits(self, hidden_states):\n" + HEAD
    analyzer, key = analyzer_of(tmp_path, source + SUPER_TOP_TOKENS)
    assert analyzer.analyze(key).consistency == Consistency.DIVERGENT  # super() reaches nothing yet
    base = analyzer.analyze(key).compute_logits
    assert base is not None
    base_head = analyzer.h.find(analyzer.h.mro(key), "compute_logits", start=base.index + 1)
    assert base_head is not None and base_head.owner.name == "Base"
    after = analyzer.analyze(key, {base_head.owner: {"get_top_tokens": synthetic_mirror(base_head, analyzer.h)}})
    assert (after.consistency, after.reason) == (
        Consistency.MIRROR,
        "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(7),
    )


def test_a_fix_that_writes_only_the_delegates_mirror_leaves_the_rest_to_write(tmp_path: Path) -> None:
    """Another drafter's fix writes Inner's get_top_tokens: this drafter still needs its own (and, through
    super(), its base's), and no longer Inner's."""
    source = (
        INNER_HEAD
        + "\n\nclass Base:\n    def __init__(self):\n        self.model = Inner()\n\n"
        + DELEGATE
        + "\n\nclass ExampleMTP(Base):\n"
        + SUPER
    )
    analyzer, key = analyzer_of(tmp_path, source)
    before = analyzer.analyze(key)
    assert [i.target.name for i in before.insertions] == ["ExampleMTP", "Base", "Inner"]
    inner = before.insertions[-1]
    after = analyzer.analyze(key, {inner.target: {"get_top_tokens": synthetic_mirror(inner.source, analyzer.h)}})
    assert after.status == Status.MISSING_FIXABLE
    assert [i.target.name for i in after.insertions] == ["ExampleMTP", "Base"]
    assert after.reason.endswith("Inner: get_top_tokens defined; mirror of compute_logits of Inner " + AT.format(2))


def test_a_mirror_a_fix_writes_two_super_calls_away(tmp_path: Path) -> None:
    source = (
        BASE_HEAD
        + "\n\nclass Mid(Base):\n"
        + SUPER_TOP_TOKENS
        + "\n\nclass ExampleMTP(Mid):\n    def compute_logits(self, hidden_states):\n"
        + HEAD
        + SUPER_TOP_TOKENS
    )
    analyzer, key = analyzer_of(tmp_path, source)
    assert analyzer.analyze(key).consistency == Consistency.DIVERGENT  # Mid's super() reaches nothing yet
    base = analyzer.h.find(analyzer.h.mro(key), "compute_logits", start=1)
    assert base is not None and base.owner.name == "Base"
    after = analyzer.analyze(key, {base.owner: {"get_top_tokens": synthetic_mirror(base, analyzer.h)}})
    assert (after.consistency, after.reason) == (
        Consistency.MIRROR,
        "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(12),
    )


def test_a_parameter_no_caller_passes_is_not_held_against_a_super_get_top_tokens(tmp_path: Path) -> None:
    from mtp_audit.classify.contract_rules import CallExample, example_contract

    source = (
        BASE_HEAD
        + MIRROR
        + "\n\nclass ExampleMTP(Base):\n    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        + HEAD
        + SUPER_TOP_TOKENS
    )
    analyzer, key = analyzer_of(tmp_path, source)
    # no caller known: compute_logits takes spec_step_idx, the get_top_tokens callers reach does not
    assert analyzer.analyze(key).consistency == Consistency.DIVERGENT
    # the callers pass it to neither: the methods super() reaches are compared, not judged by it
    plain = ("hidden_states",)
    analysis = analyzer.analyze(key, contract=example_contract(CallExample("", plain, plain)))
    assert (analysis.consistency, analysis.rule) == (Consistency.UNPROVEN, None)
    assert analysis.reason == (
        "get_top_tokens defined; get_top_tokens of Base " + AT.format(4) + " is written differently from "
        "compute_logits of ExampleMTP " + AT.format(9) + "; run `mtp-audit verify`"
    )


def test_a_delegate_annotated_with_a_class_whose_name_starts_with_x(tmp_path: Path) -> None:
    """Only the quotes around an annotation are dropped: the class name itself is kept whole."""
    head = INNER_HEAD.replace("Inner", "XverseModel")
    for case, annotation in enumerate(('"XverseModel"', "XverseModel", "'XverseModel'")):
        analysis = analyse(
            tmp_path / str(case),
            head + f"\n\nclass ExampleMTP:\n    model: {annotation}\n\n" + DELEGATE,
        )
        assert analysis.status == Status.MISSING_FIXABLE, annotation
        assert [c.name for c in analysis.delegates] == ["XverseModel"]
        assert analysis.reason == TO_INNER.replace("Inner", "XverseModel")


def with_a_super_get_top_tokens_in(source: str, index: int) -> str:
    """``delegation_chain`` with D<index>'s get_top_tokens moved to a base class ``Handing`` and
    replaced by ``return super().get_top_tokens(hidden_states)``."""
    handing = "    def get_top_tokens(self, hidden_states):\n        return self.model.get_top_tokens(hidden_states)\n"
    start = source.index(f"class D{index}:")
    end = source.index(handing, start) + len(handing)
    own = source[start:end].replace(f"class D{index}:", f"class D{index}(Handing):").replace(handing, SUPER_TOP_TOKENS)
    return "class Handing:\n" + handing + "\n\n" + source[:start] + own + source[end:]


def test_the_depth_of_a_delegation_chain_counts_across_a_super_get_top_tokens(tmp_path: Path) -> None:
    expected = "get_top_tokens defined; " + "".join(
        f"delegates to D{k}: get_top_tokens defined; " for k in range(1, 10)
    )
    nine = analyse(tmp_path / "nine", with_a_super_get_top_tokens_in(delegation_chain(9, top_tokens=True), 5), "D0")
    assert (nine.status, nine.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert nine.reason.startswith(expected + "mirror of compute_logits of D9 ")
    # the super() at D5 does not start the count again: ten delegations are still too deep
    ten = analyse(tmp_path / "ten", with_a_super_get_top_tokens_in(delegation_chain(10, top_tokens=True), 5), "D0")
    assert (ten.status, ten.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert ten.reason == expected + "delegation chain too deep"


def test_a_masking_compute_logits_against_a_super_get_top_tokens_without_its_parameter(tmp_path: Path) -> None:
    """A super() get_top_tokens is not said to ignore the mask (the method it reaches masks too): the
    verdict names only the parameter it does not accept."""
    source = (
        "class Base:\n    def get_top_tokens(self, hidden_states):\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        '        logits.masked_fill_(self.suppressed, -float("inf"))\n        return logits.argmax(dim=-1)\n\n\n'
        "class ExampleMTP(Base):\n    def compute_logits(self, hidden_states, temperature=1.0):\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states) / temperature\n"
        '        logits.masked_fill_(self.suppressed, -float("inf"))\n        return logits\n\n' + SUPER_TOP_TOKENS
    )
    analysis = analyse(tmp_path, source)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert analysis.reason == (
        "get_top_tokens defined; compute_logits of ExampleMTP " + AT.format(9) + " takes temperature, which it "
        "reads (line 10: `logits = self.logits_processor(self.lm_head, hidden_states) / temperature`); "
        "get_top_tokens of ExampleMTP " + AT.format(14) + " does not accept it"
    )
