"""The checks on a method's text (``classify.method_checks``), seen in the verdicts a scan gives.

A hand-written get_top_tokens that keeps its tokens in a variable, arm by arm or not, or carries a
docstring, is still the mirror; the local-argmax mixin is recognised by its own head call and remap
only; a get_top_tokens that leaves the hidden states as they are, where compute_logits transforms
them, diverges; an inherited compute_logits is mirrored in the drafter only when the mirror means the
same there: it needs nothing but self, its parameters, builtins and torch, or module names in a drafter
of the same module, and nothing ties it to its class. ``classify.memo`` keeps these answers on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_analysis import AT, PRE_HEAD, analyse

from conftest import FIXTURES, build_tree
from mtp_audit.cache import FactsCache
from mtp_audit.classify import memo, method_checks, shapes
from mtp_audit.classify.shape_types import FreeNames
from mtp_audit.locate import locate
from mtp_audit.model import Consistency, Status
from mtp_audit.scan import scan

BRANCHED = (
    "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
    "        assert self.lm_head is not None\n"
    "        if self.plain:\n"
    "            logits = self.logits_processor(self.lm_head, hidden_states)\n"
    "        elif self.lora:\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "            logits = self.logits_processor(self.lm_head.base_layer, hidden_states)\n"
    "        else:\n"
    "            if self.scale is not None:\n"
    "                hidden_states = hidden_states * self.scale\n"
    "            logits = self.logits_processor(self.head, hidden_states)\n"
    "        return logits\n\n"
)
BRANCHED_TOP_TOKENS = (
    "    def get_top_tokens(self, hidden_states):\n"
    "        assert self.lm_head is not None\n"
    "        if self.plain:\n"
    "            {plain} = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    "        elif self.lora:\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "            {lora} = self.logits_processor.get_top_tokens(self.lm_head.base_layer, hidden_states)\n"
    "        else:\n"
    "            if self.scale is not None:\n"
    "                hidden_states = hidden_states * self.scale\n"
    "            {other} = self.logits_processor.get_top_tokens(self.head, hidden_states)\n"
    "        return tokens\n"
)
TWO_ARMS = (
    "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
    "        if self.plain:\n"
    "            logits = self.logits_processor(self.lm_head, hidden_states)\n"
    "        else:\n"
    "            logits = self.logits_processor(self.lm_head.base_layer, hidden_states)\n"
    "        return logits\n\n"
    "    def get_top_tokens(self, hidden_states):\n"
    "        if self.plain:\n"
    "            tokens = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    "        else:\n"
    "            tokens = self.logits_processor.get_top_tokens(self.lm_head.base_layer, hidden_states)\n"
    "        return tokens\n"
)
PLAIN = "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n" + (
    "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
)


def written_differently(line: int) -> str:
    return (
        f"get_top_tokens defined; get_top_tokens of ExampleMTP {AT.format(line)} is written differently from "
        f"compute_logits of ExampleMTP {AT.format(2)}; run `mtp-audit verify`"
    )


def get_top_tokens(*statements: str, params: str = "self, hidden_states") -> str:
    return f"    def get_top_tokens({params}):\n" + "".join(f"        {s}\n" for s in statements)


def test_a_docstring_does_not_change_a_mirror(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        PLAIN
        + get_top_tokens(
            '"""Greedy draft tokens, without gathering the logits."""',
            "return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)",
        ),
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert analysis.reason == "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(2)


def test_tokens_kept_in_a_variable_before_they_are_returned_are_the_mirror(tmp_path: Path) -> None:
    asserted = analyse(
        tmp_path / "asserted",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
        "        assert self.lm_head is not None\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
        + get_top_tokens(
            "assert self.lm_head is not None",
            "tokens = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)",
            "return tokens",
        ),
    )
    assert (asserted.status, asserted.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    dropped = analyse(
        tmp_path / "dropped",
        "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
        "        assert self.lm_head is not None\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
        + get_top_tokens("tokens = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)", "return tokens"),
    )
    assert (dropped.status, dropped.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)


def test_a_get_top_tokens_that_assigns_its_tokens_in_every_arm_is_the_arm_by_arm_mirror(tmp_path: Path) -> None:
    """if/elif/else, an arm with a statement before its head call and one with a nested if, a
    statement before the if; and the if alone."""
    branched = analyse(
        tmp_path / "branched", BRANCHED + BRANCHED_TOP_TOKENS.format(plain="tokens", lora="tokens", other="tokens")
    )
    assert (branched.status, branched.consistency) == (Status.SUPPORTED, Consistency.MIRROR)
    assert branched.reason == "get_top_tokens defined; mirror of compute_logits of ExampleMTP " + AT.format(2)
    two_arms = analyse(tmp_path / "two_arms", TWO_ARMS)
    assert (two_arms.status, two_arms.consistency) == (Status.SUPPORTED, Consistency.MIRROR)


@pytest.mark.parametrize(
    ("plain", "lora", "other"),
    [("top", "tokens", "tokens"), ("tokens", "top", "tokens"), ("tokens", "tokens", "top")],
    ids=["if", "elif", "else"],
)
def test_an_arm_that_leaves_the_returned_name_unset_is_not_a_mirror(
    tmp_path: Path, plain: str, lora: str, other: str
) -> None:
    """The method returns ``tokens`` but one arm sets ``top``: on that arm it returns what an earlier
    statement left in ``tokens``, or raises."""
    analysis = analyse(tmp_path, BRANCHED + BRANCHED_TOP_TOKENS.format(plain=plain, lora=lora, other=other))
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert analysis.reason == written_differently(15)


def test_an_arm_that_ends_in_another_statement_is_not_a_mirror(tmp_path: Path) -> None:
    """The else arm sets ``tokens``, then changes the hidden states: its tokens are still set, but
    the arm is not the mirror's arm."""
    source = TWO_ARMS.replace(
        "base_layer, hidden_states)\n        return tokens",
        "base_layer, hidden_states)\n            hidden_states = None\n        return tokens",
    )
    analysis = analyse(tmp_path, source)
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)


MIXIN_REMAP = (
    'd2t = getattr(self, "draft_id_to_target_id", None)',
    "if d2t is not None:",
    "    top = top + d2t[top]",
    "return top",
)


@pytest.mark.parametrize(
    "head_call",
    [
        "self.logits_processor.get_top_tokens(self.embed, hidden_states)",
        "self.logits_processor.get_top_tokens(self.model.lm_head, hidden_states)",
        "self.logits_processor.get_top_tokens(self.lm_head, self.norm(hidden_states))",
        "self.logits_processor.forward(self.lm_head, hidden_states)",
        "self.sampler.get_top_tokens(self.lm_head, hidden_states)",
        "self.model.logits_processor.get_top_tokens(self.lm_head, hidden_states)",
    ],
    ids=["other_head", "nested_head", "transformed", "logits", "other_processor", "nested_processor"],
)
def test_the_local_argmax_remap_around_another_head_call_is_not_the_mixin(tmp_path: Path, head_call: str) -> None:
    """The mixin's verdict (the same tokens as a plain compute_logits) holds for its own head call:
    ``self.logits_processor.get_top_tokens(self.lm_head, <hidden states>)``, nothing else."""
    analysis = analyse(tmp_path, PLAIN + get_top_tokens(f"top = {head_call}", *MIXIN_REMAP))
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert analysis.reason == written_differently(5)


def test_the_mixin_is_its_head_call_and_the_remap_through_draft_id_to_target_id(tmp_path: Path) -> None:
    head = "top = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)"
    mixin = analyse(tmp_path / "mixin", PLAIN + get_top_tokens(head, *MIXIN_REMAP))
    assert (mixin.status, mixin.consistency) == (Status.SUPPORTED, Consistency.EQUIVALENT)
    assert mixin.reason == (
        f"get_top_tokens defined; ExampleMTP {AT.format(5)}: the same head call as compute_logits of "
        f"ExampleMTP {AT.format(2)}; no draft_id_to_target_id"
    )
    # remapped through another table, or indexed by draft_id_to_target_id without adding the draft id
    other_table = analyse(tmp_path / "other_table", PLAIN + get_top_tokens(head, "return top + self.offsets[top]"))
    offsets_only = analyse(
        tmp_path / "offsets_only", PLAIN + get_top_tokens(head, "return self.draft_id_to_target_id[top]")
    )
    for analysis in (other_table, offsets_only):
        assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
        assert analysis.reason == written_differently(5)


def test_a_get_top_tokens_that_takes_no_hidden_states(tmp_path: Path) -> None:
    analysis = analyse(
        tmp_path,
        PLAIN
        + get_top_tokens(
            "return self.logits_processor.get_top_tokens(self.lm_head, self.hidden_states)", params="self"
        ),
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.DIVERGENT)
    assert analysis.reason == (
        f"get_top_tokens defined; compute_logits of ExampleMTP {AT.format(2)} takes hidden_states, which it reads "
        "(line 3: `return self.logits_processor(self.lm_head, hidden_states)`); get_top_tokens of ExampleMTP "
        f"{AT.format(5)} does not accept it"
    )


def test_only_super_get_top_tokens_with_the_same_arguments_is_followed_to_the_base(tmp_path: Path) -> None:
    """A get_top_tokens that hands its work to a delegate's get_top_tokens, or returns its base's
    compute_logits (logits, not tokens), is not what its base's get_top_tokens is."""
    base = (
        "class Base:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
        "    def get_top_tokens(self, hidden_states):\n"
        "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n\n\n"
        "class ExampleMTP(Base):\n"
    )
    delegated = analyse(
        tmp_path / "delegated", base + get_top_tokens("return self.model.get_top_tokens(hidden_states)")
    )
    logits = analyse(tmp_path / "logits", base + get_top_tokens("return super().compute_logits(hidden_states)"))
    for analysis in (delegated, logits):
        assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
        assert analysis.reason == (
            f"get_top_tokens defined; get_top_tokens of ExampleMTP {AT.format(10)} is written differently from "
            f"compute_logits of Base {AT.format(2)}; run `mtp-audit verify`"
        )
    followed = analyse(tmp_path / "followed", base + get_top_tokens("return super().get_top_tokens(hidden_states)"))
    assert (followed.status, followed.consistency) == (Status.SUPPORTED, Consistency.MIRROR)


@pytest.mark.parametrize(
    "statements",
    [
        ("hidden_states *= self.scale", "return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)"),
        ("return self.logits_processor.get_top_tokens(self.lm_head, self.final_norm(hidden_states))",),
        ("return self.local_argmax(self.lm_head, hidden_states)",),
        ("tokens = self.logits_processor(self.lm_head, self.norm(hidden_states)).argmax(dim=-1)", "return tokens"),
    ],
    ids=["augmented", "other_transform", "helper", "by_hand"],
)
def test_a_get_top_tokens_that_may_transform_the_hidden_states_is_not_said_to_skip_it(
    tmp_path: Path, statements: tuple[str, ...]
) -> None:
    """compute_logits normalises the hidden states before the head. Only a get_top_tokens that hands
    them to its head call untouched provably skips that (divergent); one that changes them in place,
    through another call or by hand may do the same (unproven)."""
    analysis = analyse(tmp_path, PRE_HEAD + get_top_tokens(*statements))
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, Consistency.UNPROVEN)
    assert analysis.reason == written_differently(6)


def inherited(*statements: str, signature: str = "self, hidden_states", returns: str = "", imports: str = "") -> str:
    body = "".join(f"        {s}\n" for s in statements)
    return (
        f"{imports}class Base:\n    def compute_logits({signature}){returns}:\n{body}"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n\nclass ExampleMTP(Base):\n    pass\n"
    )


@pytest.mark.parametrize(
    "source",
    [
        inherited("hidden_states = torch.tanh(hidden_states)", imports="import torch\n\n\n"),
        inherited("hidden_states = torch.nn.functional.normalize(hidden_states, dim=-1)", imports="import torch\n\n\n"),
        inherited("assert isinstance(hidden_states, tuple) is False"),
        inherited(returns=" -> Optional[torch.Tensor]", imports="from typing import Optional\n\nimport torch\n\n\n"),
    ],
    ids=["torch", "keyword", "builtins", "return_annotation"],
)
def test_an_inherited_compute_logits_that_needs_only_self_torch_and_builtins_is_mirrored_in_the_drafter(
    tmp_path: Path, source: str
) -> None:
    """The mirror writes its own return annotation (``-> torch.Tensor``); a keyword names a parameter."""
    analysis = analyse(tmp_path, source)
    assert analysis.status == Status.MISSING_FIXABLE
    assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [("ExampleMTP", "Base")]


@pytest.mark.parametrize(
    "source",
    [
        inherited("hidden_states = super().final_norm(hidden_states)"),
        inherited(
            signature="self, hidden_states, spec_step_idx: Optional[int] = None",
            imports="from typing import Optional\n\n\n",
        ),
    ],
    ids=["super", "parameter_annotation"],
)
def test_an_inherited_compute_logits_that_needs_its_own_class_or_module_is_mirrored_beside_it(
    tmp_path: Path, source: str
) -> None:
    """``super()`` in the drafter reaches another class; a parameter's annotation is copied into the
    mirror and evaluated where the ``def`` runs, which may be a module that does not import it."""
    analysis = analyse(tmp_path, source)
    assert analysis.status == Status.MISSING_FIXABLE
    assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [("Base", "Base")]


def method(signature: str, *statements: str) -> str:
    return f"def compute_logits({signature}) -> torch.Tensor:\n" + "".join(f"    {s}\n" for s in statements or ["pass"])


PRIVATE = "the private name __head (Python mangles it with the class's name)"
ZERO_ARGUMENT_SUPER = "super() (it starts after the class it is written in)"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        (method("self, hs", "hs = hs * SCALE", "return f(hs)"), FreeNames(("SCALE", "f"), (), None)),
        (method("self, hs, n: int = N"), FreeNames((), ("N", "int"), None, ("N",))),
        (method("self, hs, n=F(M, k=2), m: T = 0"), FreeNames((), ("F", "M", "T"), None, ("F", "M"))),
        (method('self, hs: "IntermediateTensors"'), FreeNames((), ("IntermediateTensors",), None)),
        (method("self, hs: \"Optional['typing.Any']\""), FreeNames((), ("Optional", "typing"), None)),
        (
            method('self, hs: "a b"'),
            FreeNames((), (), None, (), "the quoted annotation '\"a b\"', which quotes no expression"),
        ),
        (method("self, hs", "global G", "G = hs", "return __name__"), FreeNames(("G", "__name__"), (), None)),
        (method("self, hs", "return self.__head(hs)"), FreeNames((), (), PRIVATE)),
        (
            method("self, hs", "return __class__"),
            FreeNames(("__class__",), (), "__class__ (the class it is written in)"),
        ),
        (method("self, hs", "return super().f(hs)"), FreeNames(("super",), (), ZERO_ARGUMENT_SUPER)),
        (method("self, hs", "return super(Base, self).f(hs)"), FreeNames(("Base", "super"), (), None)),
        (
            method("self, hs", "nonlocal q", "return q"),
            FreeNames(("q",), (), "`nonlocal q` (a name of an enclosing function)"),
        ),
    ],
    ids=[
        "module_names",
        "default",
        "defaults_apart_from_annotations",
        "quoted",
        "quoted_in_quoted",
        "unparsable",
        "module_bound",
        "private",
        "class_cell",
        "super",
        "explicit_super",
        "nonlocal",
    ],
)
def test_free_names_by_when_they_are_read_and_what_ties_a_method_to_its_class(code: str, expected: FreeNames) -> None:
    """Names a copy of the method reads when it runs, those its ``def`` reads (defaults, annotations,
    quoted or not) and what makes it mean something else in another class; decorators and the return
    annotation are left out (the mirror has neither of its own)."""
    assert method_checks.free_names(code) == expected


@pytest.mark.parametrize(
    "source",
    [
        inherited("hidden_states = hidden_states * SCALE", imports="SCALE = 2\n\n\n"),
        inherited("hidden_states = hidden_states * float(__name__ != 'x')"),
        inherited("global CALLS", "CALLS = 1"),
    ],
    ids=["module_constant", "module_dunder", "global"],
)
def test_module_names_read_when_it_runs_mean_the_same_in_a_drafter_of_the_same_module(
    tmp_path: Path, source: str
) -> None:
    analysis = analyse(tmp_path, source)
    assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [("ExampleMTP", "Base")]


@pytest.mark.parametrize(
    "source",
    [
        inherited("hidden_states = hidden_states * SCALE", imports="SCALE = 2\n\n\n"),
        inherited("hidden_states = hidden_states * float(__name__ != 'x')"),
        inherited(signature='self, hidden_states: "IntermediateTensors"'),
    ],
    ids=["module_constant", "module_dunder", "quoted_annotation"],
)
def test_module_names_keep_the_mirror_beside_compute_logits_when_the_drafter_is_in_another_module(
    tmp_path: Path, source: str
) -> None:
    base, _ = source.split("class ExampleMTP")
    drafter = "from .base_lm import Base\n\n\nclass ExampleMTP(Base):\n    pass\n"
    analysis = analyse(tmp_path, drafter, others={"base_lm.py": base})
    assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [("Base", "Base")]


@pytest.mark.parametrize(
    "source",
    [
        inherited("hidden_states = self.__norm(hidden_states)"),
        inherited("assert __class__ is not None"),
        inherited("hidden_states = super().final_norm(hidden_states)"),
        inherited(signature="self, hidden_states, spec_step_idx: int = STEP", imports="STEP = 0\n\n\n"),
        inherited(signature='self, hidden_states: "IntermediateTensors"'),
    ],
    ids=["private_name", "class_cell", "super", "default", "quoted_annotation"],
)
def test_a_method_tied_to_its_class_or_read_as_its_def_runs_stays_beside_it_in_the_same_module_too(
    tmp_path: Path, source: str
) -> None:
    """``self.__norm`` is ``self._Base__norm`` in Base, ``self._ExampleMTP__norm`` in ExampleMTP; a default
    or an annotation is read as the class statement runs, where a module name may be bound otherwise."""
    analysis = analyse(tmp_path, source)
    assert [(i.target.name, i.source.owner.name) for i in analysis.insertions] == [("Base", "Base")]


def test_answers_are_kept_beside_the_facts_and_read_back_without_running_a_rule(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(memo, "_store", None)  # scan() sets it; put back the in-process default afterwards
    tree = locate(build_tree(FIXTURES / "scan" / "consistency", tmp_path / "tree"))
    cache = FactsCache(tmp_path / "cache")
    first, _, _ = scan(tree, cache)
    assert list((tmp_path / "cache").glob("*/shapes/**/*.json")), "no classification answer was stored"

    def not_run(*args):
        raise AssertionError("a rule ran although its answer is cached")

    for rule in ("analyze_get_top_tokens", "normalize", "free_names", "returns_plain_head"):
        monkeypatch.setattr(method_checks, rule, not_run)
    monkeypatch.setattr(shapes, "analyze_compute_logits", not_run)
    for answer in vars(memo).values():
        if callable(getattr(answer, "cache_clear", None)):
            answer.cache_clear()
    second, _, _ = scan(tree, cache)
    assert second.records == first.records


BRANCHED_PRE_HEAD = (
    "class ExampleMTP:\n    def compute_logits(self, hidden_states):\n"
    "        if self.norm is not None:\n"
    "            hidden_states = self.norm(hidden_states)\n"
    "        else:\n"
    "            hidden_states = hidden_states * self.scale\n"
    "        return self.logits_processor(self.lm_head, hidden_states)\n\n"
)


@pytest.mark.parametrize(
    ("norm", "fallback", "consistency"),
    [
        ("self.norm(hidden_states)", "hidden_states * self.scale", Consistency.MIRROR),
        ("self.final_norm(hidden_states)", "hidden_states * self.scale", Consistency.UNPROVEN),
        ("self.norm(hidden_states)", "hidden_states * 2", Consistency.UNPROVEN),
    ],
    ids=["same", "other_if_arm", "other_else_arm"],
)
def test_each_arm_of_a_transform_before_the_head_is_compared(
    tmp_path: Path, norm: str, fallback: str, consistency: Consistency
) -> None:
    analysis = analyse(
        tmp_path,
        BRANCHED_PRE_HEAD
        + get_top_tokens(
            "if self.norm is not None:",
            f"    hidden_states = {norm}",
            "else:",
            f"    hidden_states = {fallback}",
            "return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)",
        ),
    )
    assert (analysis.status, analysis.consistency) == (Status.SUPPORTED, consistency)
    if consistency == Consistency.UNPROVEN:
        assert analysis.reason == written_differently(9)


def test_a_decorator_is_part_of_the_fingerprint() -> None:
    """A wrapper may change what a call returns: two methods that differ by a decorator are not the same logic."""
    body = "    return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    plain = method_checks.normalize("def get_top_tokens(self, hidden_states):\n" + body)
    wrapped = method_checks.normalize("@negated\ndef get_top_tokens(self, hidden_states):\n" + body)
    assert plain != wrapped


@pytest.mark.parametrize(
    ("pre_init", "same"),
    [
        ("logits = None", True),
        ("logits: torch.Tensor | None = None", True),
        ("logits: torch.Tensor", True),
        ("global logits\n    logits = None", False),  # binds the module's name: not dead
        ("logits = None\n    self.seen(logits)", False),  # read
        ("logits = 0", False),  # not a pre-initialisation
    ],
)
def test_fingerprint_drops_a_dead_pre_initialisation(pre_init: str, same: bool):
    """``logits = None`` before the arms does nothing once each arm returns its head call: the mirror
    leaves it out, and a method with or without it has one fingerprint."""
    arms = (
        "    if self.alt:\n"
        "        logits = self.logits_processor.get_top_tokens(self.alt_head, hidden_states)\n"
        "    else:\n"
        "        logits = self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
        "    return logits\n"
    )
    with_it = method_checks.normalize(f"def get_top_tokens(self, hidden_states):\n    {pre_init}\n" + arms)
    without = method_checks.normalize("def get_top_tokens(self, hidden_states):\n" + arms)
    assert (with_it == without) == same
