"""A drafter's verdict when its compute_logits reaches another class's: through ``super()``, through
a delegate, with or without a get_top_tokens on the way. Each case is a small drafter module and
the verdict the scanner gives it: status, consistency, the methods it names and what a fix would add."""

from __future__ import annotations

from pathlib import Path

from conftest import BASE, build_tree
from mtp_audit.classify.analysis import Analysis
from mtp_audit.locate import locate
from mtp_audit.model import ClassKey, Consistency, Status
from mtp_audit.resolve.names import resolve_name
from mtp_audit.scan import Scanner

MODULE = "vllm.model_executor.models.example_mtp"
HEAD = "        return self.logits_processor(self.lm_head, hidden_states)\n"
MIRROR = (
    "    def get_top_tokens(self, hidden_states):\n"
    "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
)
SUPER = "    def compute_logits(self, hidden_states):\n        return super().compute_logits(hidden_states)\n"


def analyse(tmp_path: Path, source: str, name: str = "ExampleMTP") -> Analysis:
    root = build_tree(BASE, tmp_path / "tree")
    models = root / "vllm" / "model_executor" / "models"
    (models / "example_mtp.py").write_text(source)
    (models / "registry.py").write_text(f'_SPECULATIVE_DECODING_MODELS = {{"M": ("example_mtp", "{name}")}}\n')
    scanner = Scanner(locate(root))
    key = next(k for k in resolve_name(scanner.index, MODULE, name, "cuda") if isinstance(k, ClassKey))
    return scanner.analyzers["cuda"].analyze(key)


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
