"""Which speculators can hold a drafter, read from the caller files of a small vLLM tree: the
three-valued reading of the conditions that choose one, the if/elif chains that construct them,
0.34-style speculator configs, and the caller files themselves (imports, bases, MROs, drafting
paths, the model runner's cut)."""

from __future__ import annotations

import ast
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import BASE, build_tree
from mtp_audit.index.modules import ModuleIndex
from mtp_audit.locate import locate
from mtp_audit.resolve.callers import UNKNOWN, CallerIndex, Drafter

REGISTRY = '_SPECULATIVE_DECODING_MODELS = {"ToyMTPModel": ("toy_mtp", "ToyMTP")}\n'


def caller_index(tmp_path: Path, files: dict[str, str]) -> CallerIndex:
    """The callers of a tree made of the shared base and ``files`` (paths under ``vllm/``)."""
    root = build_tree(BASE, tmp_path / "tree")
    for name, text in {"model_executor/models/registry.py": REGISTRY, **files}.items():
        path = root / "vllm" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return CallerIndex(ModuleIndex(locate(root)))


def drafter(arch="ToyMTPModel", cls="ToyMTP", methods=("mtp",), model_types=(), declared=None) -> Drafter:
    return Drafter(arch, cls, None if methods is None else frozenset(methods), frozenset(model_types), declared)


def truth(index: CallerIndex, condition: str, of: Drafter):
    return index.truth(ast.parse(condition, mode="eval").body, of)


def test_method_comparisons(tmp_path: Path) -> None:
    index = caller_index(tmp_path, {})
    mtp = drafter()
    assert truth(index, "spec.method == 'mtp'", mtp) is True
    assert truth(index, "spec.method != 'mtp'", mtp) is False
    assert truth(index, "spec.method == 'eagle'", mtp) is False
    assert truth(index, "spec.method in ('eagle', 'mtp')", mtp) is True
    assert truth(index, "spec.method not in ['eagle', 'medusa']", mtp) is True
    assert truth(index, "spec.method == 'mtp'", drafter(methods=None)) is UNKNOWN


SPEC_CONFIG = """\
from typing import Literal
import typing

DraftTypes = Literal["toy_draft"]
MTPModelTypes = Literal["toy_mtp", "toy_step_mtp", DraftTypes]
EagleModelTypes = typing.Literal["toy_eagle", MTPModelTypes, Unknown]
SingleType = Literal["toy_single"]
NotALiteral = ("toy_mtp",)
first, second = Literal["a"], Literal["b"]


class SpeculativeConfig:
    def _draft_config(self, hf_config):
        if hf_config.model_type == "toy_step":
            hf_config.model_type = "toy_step_mtp"
            hf_config.update({"n_predict": 3, "architectures": ["ToyStepMTP", name]})
            hf_config.update({"architectures": ["ToyStepMTPAlt"]})
            note = "toy_not_a_type"
        if hf_config.model_type == "toy_named":
            hf_config.model_type = "toy_named_mtp"
            hf_config.update({"architectures": "ToyNamedMTP"})
        if hf_config.model_type == "toy_only_archs":
            hf_config.update({"architectures": ["ToyOnlyArchs"]})
        return hf_config

    def use_mtp(self) -> bool:
        return self.method == "mtp"

    def uses_eagle(self) -> bool:
        return self.method in ("eagle", "eagle3")

    def use_step_mtp(self) -> bool:
        return self.use_mtp() and getattr(self.draft_model_config.hf_config, "model_type", None) == "toy_step_mtp"

    def use_early_mtp(self) -> bool:
        x = 1
        if self.method != "mtp":
            return False
        return True

    def use_maybe_early(self) -> bool:
        if self.num_speculative_tokens > 1:
            return self.method == "mtp"
        return self.method == "mtp"

    def use_split_early(self) -> bool:
        if self.num_speculative_tokens > 1:
            return self.method == "mtp"
        return self.method == "eagle"

    def use_unknown_early(self) -> bool:
        if self.num_speculative_tokens > 1:
            return self.num_speculative_tokens > 2
        return self.num_speculative_tokens > 3

    def use_first_true(self) -> bool:
        if self.method == "mtp":
            return True
        return False

    def use_bare_return(self) -> bool:
        return

    def use_with_else(self) -> bool:
        if self.method == "mtp":
            return True
        else:
            return False

    def use_loop(self) -> bool:
        for name in self.names:
            return True

    def use_no_return(self) -> bool:
        pass

    def use_recursive(self) -> bool:
        return self.use_recursive()

    def not_a_predicate(self) -> bool:
        return True

    async def use_async(self) -> bool:
        return True
"""


def spec_index(tmp_path: Path) -> CallerIndex:
    return caller_index(tmp_path, {"config/speculative.py": SPEC_CONFIG})


def test_method_membership_is_known_only_when_every_method_agrees(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    eagle = drafter("ToyEagleModel", "ToyEagle", ("eagle", "eagle3"))
    assert truth(index, "spec.method in ('eagle', 'eagle3', 'mtp')", eagle) is True
    assert truth(index, "spec.method == 'eagle'", eagle) is UNKNOWN  # it may be loaded as eagle3
    assert truth(index, "spec.method != 'eagle'", eagle) is UNKNOWN
    assert truth(index, "spec.method == 'mtp'", eagle) is False
    assert truth(index, "spec.method in {'medusa'}", eagle) is False
    assert truth(index, "spec.method in ('eagle', name)", eagle) is UNKNOWN  # not all strings
    assert truth(index, "spec.method in ('eagle', name)", drafter()) is UNKNOWN
    assert truth(index, "spec.method in ('mtp', name)", drafter()) is UNKNOWN
    assert truth(index, "spec.method == name", eagle) is UNKNOWN
    assert truth(index, "spec.method in ()", eagle) is False
    assert truth(index, "spec.other == 'eagle'", eagle) is UNKNOWN  # not the method
    assert truth(index, "'eagle' == spec.method", eagle) is UNKNOWN  # read left to right only
    assert truth(index, "spec.method < 'mtp'", eagle) is UNKNOWN
    assert truth(index, "spec.method is 'mtp'", drafter()) is UNKNOWN
    assert truth(index, "'eagle' < spec.method < 'mtp'", eagle) is UNKNOWN  # a chain


def test_literals_are_read_with_their_nested_literals(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    of_type = {t: drafter("ToyModel", "Toy", ("mtp",), (t,)) for t in ("toy_mtp", "toy_draft", "toy_eagle", "a")}
    literal = "config.model_type in get_args({})"
    assert [truth(index, literal.format("MTPModelTypes"), d) for d in of_type.values()] == [True, True, False, False]
    assert [truth(index, literal.format("EagleModelTypes"), d) for d in of_type.values()] == [True, True, True, False]
    assert truth(index, literal.format("SingleType"), drafter(model_types=("toy_single",))) is True
    assert truth(index, literal.format("NotALiteral"), of_type["toy_mtp"]) is False  # no strings in it
    assert truth(index, literal.format("first"), of_type["a"]) is UNKNOWN  # two targets: not read


def test_model_type_in_a_literal(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    draft = drafter("ToyDraftModel", "ToyDraft", ("mtp",), ("toy_draft",))
    other = drafter("ToyOtherModel", "ToyOther", ("mtp",), ("toy_other",))
    for condition in (
        "hf_config.model_type in get_args(MTPModelTypes)",
        "hf_config.model_type in typing.get_args(EagleModelTypes)",
        "getattr(config, 'model_type', None) in get_args(MTPModelTypes)",
        "config.model_type == 'toy_draft'",
    ):
        assert truth(index, condition, draft) is True, condition
        assert truth(index, condition, other) is False, condition
        assert truth(index, condition.replace(" in ", " not in ").replace("==", "!="), draft) is False, condition
    assert truth(index, "hf_config.model_type in get_args(SingleType)", draft) is False
    assert truth(index, "hf_config.model_type in get_args(Missing)", draft) is UNKNOWN
    assert truth(index, "hf_config.model_type in get_args()", draft) is UNKNOWN
    assert truth(index, "hf_config.model_type in other_args(MTPModelTypes)", draft) is UNKNOWN
    assert truth(index, "hf_config.model_type in get_args(config.MTPModelTypes)", draft) is UNKNOWN
    assert truth(index, "getattr(config, 'model_type')", draft) is UNKNOWN  # not a comparison
    assert truth(index, "getattr(config, 'model_type') == 'toy_draft'", draft) is True
    assert truth(index, "getattr(config, 'other', None) == 'toy_draft'", draft) is UNKNOWN
    assert truth(index, "getattr(config, model_type, None) == 'toy_draft'", draft) is UNKNOWN
    assert truth(index, "getattr(config, 3, None) == 'toy_draft'", draft) is UNKNOWN
    assert truth(index, "get(config, 'model_type', None) == 'toy_draft'", draft) is UNKNOWN
    assert truth(index, "getattr(config) == 'toy_draft'", draft) is UNKNOWN


def test_a_model_type_the_config_writes_is_known_by_its_architectures(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    step = drafter("ToyStepMTPAlt", "ToyStep", ("mtp",))  # no model type maps to it: the rewrite tells
    assert truth(index, "config.model_type == 'toy_step_mtp'", drafter("ToyStepMTP", "ToyStep")) is True
    assert truth(index, "config.model_type == 'toy_named_mtp'", drafter("ToyNamedMTP", "ToyNamed")) is UNKNOWN
    assert truth(index, "config.model_type == 'toy_only_archs'", drafter("ToyOnlyArchs", "Toy")) is UNKNOWN
    assert truth(index, "config.model_type == 'toy_not_a_type'", drafter("ToyStepMTP", "ToyStep")) is UNKNOWN
    assert truth(index, "config.model_type == 'toy_step_mtp'", step) is True
    assert truth(index, "config.model_type in ('toy_mtp', 'toy_step_mtp')", step) is True
    assert truth(index, "config.model_type == 'toy_step_mtp'", drafter()) is False
    assert truth(index, "config.model_type == 'toy_mtp'", step) is UNKNOWN  # nothing known of toy_mtp
    assert truth(index, "config.model_type in ('toy_mtp', 'toy_step_mtp')", drafter()) is UNKNOWN
    no_arch = drafter(None, "ToyStep", ("mtp",), ("toy_step_mtp",))
    assert truth(index, "config.model_type == 'toy_step_mtp'", no_arch) is True  # from its model types
    assert truth(index, "config.model_type == 'toy_mtp'", no_arch) is False


def test_architectures(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    mtp = drafter()
    assert truth(index, "'ToyMTPModel' in config.architectures", mtp) is True
    assert truth(index, "'ToyMTPModel' not in config.architectures", mtp) is False
    assert truth(index, "'OtherModel' in config.architectures", mtp) is False
    assert truth(index, "'OtherModel' not in config.architectures", mtp) is True
    assert truth(index, "'ToyMTPModel' in config.archs", mtp) is UNKNOWN
    assert truth(index, "'ToyMTPModel' in architectures", mtp) is UNKNOWN
    assert truth(index, "name in config.architectures", mtp) is UNKNOWN
    assert truth(index, "3 in config.architectures", mtp) is UNKNOWN
    assert truth(index, "'ToyMTPModel' in config.architectures", drafter(None)) is UNKNOWN
    assert truth(index, "'ToyMTPModel' == config.architectures", mtp) is UNKNOWN


def test_is_none(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    mtp = drafter()
    assert truth(index, "self.draft_model_config is None", mtp) is False  # a drafter has a draft config
    assert truth(index, "self.draft_model_config is not None", mtp) is True
    assert truth(index, "self.draft_model_config == None", mtp) is UNKNOWN
    assert truth(index, "self.target_model_config is None", mtp) is UNKNOWN
    assert truth(index, "self.draft_model_config is not False", mtp) is UNKNOWN
    assert truth(index, "self.method is None", mtp) is UNKNOWN


def test_not_and_or_and_constants(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    mtp = drafter()
    yes, no, maybe = "spec.method == 'mtp'", "spec.method == 'eagle'", "spec.num_speculative_tokens > 1"
    assert truth(index, f"not {yes}", mtp) is False
    assert truth(index, f"not {no}", mtp) is True
    assert truth(index, f"not {maybe}", mtp) is UNKNOWN
    assert truth(index, f"-{yes}", mtp) is UNKNOWN
    table = {
        (yes, yes): (True, True),
        (yes, no): (False, True),
        (no, yes): (False, True),
        (no, no): (False, False),
        (yes, maybe): (UNKNOWN, True),
        (maybe, yes): (UNKNOWN, True),
        (no, maybe): (False, UNKNOWN),
        (maybe, no): (False, UNKNOWN),
        (maybe, maybe): (UNKNOWN, UNKNOWN),
    }
    for (left, right), (conjunction, disjunction) in table.items():
        assert truth(index, f"{left} and {right}", mtp) is conjunction, (left, right)
        assert truth(index, f"{left} or {right}", mtp) is disjunction, (left, right)
    assert truth(index, f"{yes} and {yes} and {maybe}", mtp) is UNKNOWN
    assert truth(index, f"{no} or {no} or {maybe}", mtp) is UNKNOWN
    assert truth(index, "True", mtp) is True
    assert truth(index, "False", mtp) is False
    assert truth(index, "1", mtp) is UNKNOWN
    assert truth(index, "None", mtp) is UNKNOWN
    assert truth(index, "spec", mtp) is UNKNOWN


def test_predicates_of_the_speculative_config(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    mtp, eagle = drafter(), drafter("ToyEagleModel", "ToyEagle", ("eagle", "eagle3"))
    step = drafter("ToyStepMTP", "ToyStepMTP", ("mtp",))
    assert truth(index, "spec.use_mtp()", mtp) is True
    assert truth(index, "spec.use_mtp()", eagle) is False
    assert truth(index, "spec.uses_eagle()", eagle) is True
    assert truth(index, "self.speculative_config.uses_eagle()", mtp) is False
    assert truth(index, "not spec.use_mtp()", eagle) is True
    assert truth(index, "spec.use_step_mtp()", step) is True  # a predicate calling a predicate
    assert truth(index, "spec.use_step_mtp()", mtp) is False
    assert truth(index, "spec.use_step_mtp()", eagle) is False
    assert truth(index, "spec.use_mtp(1)", mtp) is UNKNOWN  # called with arguments: not the predicate
    assert truth(index, "use_mtp()", mtp) is UNKNOWN  # not a method of the config
    assert truth(index, "spec.not_a_predicate()", mtp) is UNKNOWN
    assert truth(index, "spec.use_async()", mtp) is UNKNOWN
    assert truth(index, "spec.use_recursive()", mtp) is UNKNOWN
    assert truth(index, "spec.use_no_return()", mtp) is UNKNOWN
    assert truth(index, "spec.use_bare_return()", mtp) is False


def test_predicates_with_early_returns(tmp_path: Path) -> None:
    index = spec_index(tmp_path)
    mtp, eagle, unknown = drafter(), drafter("ToyEagleModel", "ToyEagle", ("eagle",)), drafter(methods=None)
    assert truth(index, "spec.use_early_mtp()", mtp) is True
    assert truth(index, "spec.use_early_mtp()", eagle) is False
    assert truth(index, "spec.use_early_mtp()", unknown) is UNKNOWN
    assert truth(index, "spec.use_first_true()", mtp) is True
    assert truth(index, "spec.use_first_true()", eagle) is False
    assert truth(index, "spec.use_first_true()", unknown) is UNKNOWN
    # an unknown condition: known only when both ways agree
    assert truth(index, "spec.use_maybe_early()", mtp) is True
    assert truth(index, "spec.use_maybe_early()", eagle) is False
    assert truth(index, "spec.use_split_early()", mtp) is UNKNOWN
    assert truth(index, "spec.use_split_early()", eagle) is UNKNOWN
    assert truth(index, "spec.use_unknown_early()", mtp) is UNKNOWN
    # an else, a loop: not read
    assert truth(index, "spec.use_with_else()", mtp) is UNKNOWN
    assert truth(index, "spec.use_loop()", mtp) is UNKNOWN


SELECTION = {
    "config/speculative.py": SPEC_CONFIG,
    "v1/worker/gpu/spec_decode/__init__.py": """\
        from vllm.v1.worker.gpu.spec_decode.speculator import MTPSpeculator

        from .eagle import EagleSpeculator

        try:
            from .medusa import MedusaSpeculator
        except ImportError:
            MedusaSpeculator = None


        def init_speculator(vllm_config, device):
            spec = vllm_config.speculative_config
            if spec.method == "ngram":
                raise NotImplementedError(spec.method)
            if spec.use_mtp():
                if spec.num_speculative_tokens > 1:
                    from vllm.v1.worker.gpu.spec_decode.multi import MultiSpeculator

                    return MultiSpeculator(vllm_config, device)
                return MTPSpeculator(vllm_config, device)
            elif spec.uses_eagle():
                speculator = EagleSpeculator(vllm_config, device)
            elif spec.method == "medusa":
                return MedusaSpeculator(vllm_config, device)
            else:
                speculator = FallbackSpeculator(vllm_config, device)
            return speculator


        class FallbackSpeculator(MTPSpeculator):
            pass
        """,
    "v1/worker/gpu/spec_decode/speculator.py": """\
        class BaseSpeculator:
            def propose(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)


        class MTPSpeculator(BaseSpeculator):
            pass
        """,
    "v1/worker/gpu/spec_decode/eagle.py": """\
        from .speculator import BaseSpeculator


        class EagleSpeculator(BaseSpeculator):
            pass
        """,
    "v1/worker/gpu/spec_decode/medusa.py": """\
        class MedusaSpeculator:
            def propose(self, hidden_states):
                return self.model.compute_logits(hidden_states)
        """,
    "v1/worker/gpu/spec_decode/multi/__init__.py": """\
        from ..speculator import MTPSpeculator


        class MultiSpeculator(MTPSpeculator):
            pass
        """,
    "v1/spec_decode/eagle.py": """\
        class EagleProposer:
            def propose(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)
        """,
    "v1/spec_decode/medusa.py": """\
        class MedusaProposer:
            def propose(self, hidden_states):
                return self.model.compute_logits(hidden_states)
        """,
    "v1/worker/gpu_model_runner.py": """\
        import torch
        from vllm.v1.spec_decode.eagle import EagleProposer
        from vllm.v1.spec_decode.medusa import (
            MedusaProposer,
        )


        class GPUModelRunner:
            def __init__(self, vllm_config, device):
                self.speculative_config = vllm_config.speculative_config
                if self.speculative_config:
                    if self.speculative_config.method == "ngram":
                        from vllm.v1.spec_decode.ngram import NgramProposer

                        self.drafter = NgramProposer(vllm_config)
                    elif self.speculative_config.uses_eagle() or self.speculative_config.use_mtp():
                        self.drafter = EagleProposer(
                            vllm_config, device, self
                        )
                    elif self.speculative_config.method == "medusa":
                        self.drafter = MedusaProposer(vllm_config=vllm_config, device=device)
                    else:
                        raise ValueError(
                            "Unknown speculative decoding method: "
                            f"{self.speculative_config.method}"
                        )

            def execute_model(self, batch):
                return self.model(batch)
        """,
}
V2 = "vllm.v1.worker.gpu.spec_decode"
V2_HOW = "vllm/v1/worker/gpu/spec_decode/__init__.py:init_speculator"
V1_HOW = "vllm/v1/worker/gpu_model_runner.py:__init__"


def test_the_speculators_a_drafter_can_take(tmp_path: Path) -> None:
    index = caller_index(tmp_path, SELECTION)
    v1 = {"eagle": ("vllm.v1.spec_decode.eagle.EagleProposer", V1_HOW)}
    v1["medusa"] = ("vllm.v1.spec_decode.medusa.MedusaProposer", V1_HOW)
    mtp = [
        v1["eagle"],
        (f"{V2}.multi.MultiSpeculator", V2_HOW),  # an unknown condition: both ways
        (f"{V2}.speculator.MTPSpeculator", V2_HOW),
    ]
    assert index.candidates(index.drafter("ToyMTPModel", "ToyMTP", None)) == mtp
    assert index.candidates(index.drafter("ToyEagleModel", "ToyEagle", None)) == [
        v1["eagle"],
        (f"{V2}.eagle.EagleSpeculator", V2_HOW),  # not the fallback: the return after the chain
    ]
    assert index.candidates(index.drafter("ToyMedusaModel", "ToyMedusa", None)) == [
        v1["medusa"],
        (f"{V2}.medusa.MedusaSpeculator", V2_HOW),
    ]
    assert index.candidates(index.drafter("ToyModel", "Toy", None)) == [
        v1["eagle"],
        v1["medusa"],
        (f"{V2}.FallbackSpeculator", V2_HOW),
        (f"{V2}.eagle.EagleSpeculator", V2_HOW),
        (f"{V2}.medusa.MedusaSpeculator", V2_HOW),
        (f"{V2}.multi.MultiSpeculator", V2_HOW),
        (f"{V2}.speculator.MTPSpeculator", V2_HOW),
    ]
    assert index.candidates(drafter("ToyNgram", "ToyNgram", ("ngram",))) == []  # the raise ends the choice


DRAFTER_TYPES = """\
from typing import Literal

MTPModelTypes = Literal["toy_mtp"]


class SpeculativeConfig:
    def _draft_config(self, hf_config):
        if hf_config.model_type == "toy_mtp":
            hf_config.update({"architectures": ["ToyDraftModel"]})
        if hf_config.model_type == "toy_other":
            hf_config.update({"architectures": ["ToyDraftModel", "ToyOtherModel"]})
"""


def test_what_is_known_of_a_drafter(tmp_path: Path) -> None:
    index = caller_index(tmp_path, {**SELECTION, "config/speculative.py": DRAFTER_TYPES})
    # its model types, from the architectures the speculative config writes; an MTP type makes it mtp
    assert index.drafter("ToyDraftModel", "ToyDraft", None) == drafter(
        "ToyDraftModel", "ToyDraft", ("mtp",), ("toy_mtp", "toy_other")
    )
    assert index.drafter("ToyOtherModel", "ToyOther", "x.Config") == drafter(
        "ToyOtherModel", "ToyOther", None, ("toy_other",), "x.Config"
    )
    # else its name: the first fragment that matches, in the architecture or the class
    assert index.drafter("ToyEagle3Model", "Toy", None).methods == {"eagle3"}
    assert index.drafter("ToyEagleModel", "Toy", None).methods == {"eagle", "eagle3"}
    assert index.drafter(None, "ToyEagle", None) == drafter(None, "ToyEagle", ("eagle", "eagle3"))
    assert index.drafter("LiLiCorrModel", "Draft", None).methods == {"dflash"}
    assert index.drafter("ToyMLPSpeculatorModel", "Draft", None).methods == {"mlp_speculator"}
    assert index.drafter("ToyMedusa", "ToyMTP", None).methods == {"medusa"}
    assert index.drafter("ToyDraftModel", "ToyEagle", None).methods == {"mtp", "eagle", "eagle3"}
    assert index.drafter("Plain", "Draft", None).methods is None


def speculator_module(*subclasses: str, others: tuple[str, ...] = ()) -> str:
    """A speculator file: ``BaseSpeculator`` drafts through ``get_top_tokens``; each of
    ``subclasses`` inherits that, each of ``others`` is a class of no speculator."""
    classes = [f"class {name}(BaseSpeculator):\n    pass\n" for name in subclasses]
    classes += [f"class {name}:\n    pass\n" for name in others]
    base = (
        "class BaseSpeculator:\n"
        "    def propose(self, hidden_states):\n"
        "        return self.model.get_top_tokens(hidden_states)\n"
    )
    return "\n\n".join([base, *classes])


SPEC = "v1/worker/gpu/spec_decode"
CONFIGS = {
    f"{SPEC}/speculator.py": speculator_module(
        "MTPSpeculator",
        "MultiSpeculator",
        "GemmaSpeculator",
        "ChildSpeculator",
        "SpecialSpeculator",
        "HiddenSpeculator",
        "LoopSpeculator",
        "LoopBackSpeculator",
    ),
    f"{SPEC}/speculator_config.py": """\
        from typing import ClassVar


        class SpeculatorConfig:
            base_method: ClassVar[str | None] = None
            speculator_class: ClassVar[str | None] = None

            @classmethod
            def specialize(cls, spec):
                return cls
        """,
    f"{SPEC}/mtp/config.py": f"""\
        from vllm.{SPEC.replace("/", ".")}.speculator_config import SpeculatorConfig


        class MTPConfig(SpeculatorConfig):
            base_method = "mtp"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.MTPSpeculator"

            @classmethod
            def specialize(cls, spec):
                if spec.num_speculative_tokens == 1:
                    return cls
                from vllm.v1.worker.gpu.spec_decode.mtp.multi import MultiConfig

                return MultiConfig


        class GemmaConfig(MTPConfig):
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.GemmaSpeculator"


        class DisabledConfig(MTPConfig):
            base_method = "disabled"
            speculator_class = None


        class NgramConfig(SpeculatorConfig):
            base_method = "ngram"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.ngram.NgramSpeculator"


        class NamedConfig(SpeculatorConfig):
            base_method = "named"
            speculator_class = SPECULATOR
        """,
    f"{SPEC}/mtp/multi.py": """\
        from .config import MTPConfig


        class MultiConfig(MTPConfig):
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.MultiSpeculator"
        """,
    f"{SPEC}/child.py": """\
        from vllm.v1.worker.gpu.spec_decode.speculator_config import SpeculatorConfig
        from vllm.v1.worker.gpu.spec_decode.special import SpecialConfig


        class GrandParentConfig(SpeculatorConfig):
            @classmethod
            def specialize(cls, spec):
                return HiddenConfig


        class ParentConfig(GrandParentConfig):
            @classmethod
            def specialize(cls, spec):
                if spec.enforce_eager:
                    return None
                if spec.disable_padded_drafter_batch:
                    return
                return SpecialConfig if spec.special else cls


        class ChildConfig(ParentConfig):
            base_method = "child"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.ChildSpeculator"


        class OtherChildConfig(ParentConfig):
            base_method = "other"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.ChildSpeculator"

            @classmethod
            def specialize(cls, spec):
                return cls if spec.plain else SpecialConfig


        class HiddenConfig(SpeculatorConfig):
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.HiddenSpeculator"


        class LoopConfig(SpeculatorConfig):
            base_method = "loop"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.LoopSpeculator"

            @classmethod
            def specialize(cls, spec):
                return LoopBackConfig


        class LoopBackConfig(LoopConfig):
            base_method = "loop_back"
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.LoopBackSpeculator"

            @classmethod
            def specialize(cls, spec):
                return LoopConfig
        """,
    f"{SPEC}/special.py": """\
        from vllm.v1.worker.gpu.spec_decode.speculator_config import SpeculatorConfig


        class SpecialConfig(SpeculatorConfig):
            speculator_class = "vllm.v1.worker.gpu.spec_decode.speculator.SpecialSpeculator"
        """,
}
SPECULATOR = "vllm.v1.worker.gpu.spec_decode.speculator."


def by_config(index: CallerIndex, methods, declared=None) -> list[tuple[str, str]]:
    return [
        (name.removeprefix(SPECULATOR), how)
        for name, how in index.candidates(drafter("ToyModel", "Toy", methods, declared=declared))
    ]


def test_speculator_configs_chosen_by_method_and_specialized(tmp_path: Path) -> None:
    index = caller_index(tmp_path, CONFIGS)
    method = "by speculative method: "
    # not GemmaConfig: it inherits the base method, the drafter must declare it
    assert by_config(index, ("mtp",)) == [
        ("MTPSpeculator", method + "MTPConfig"),
        ("MultiSpeculator", method + "MultiConfig"),
    ]
    # an inherited specialize() (its parent's is overridden); returns of None, of nothing, of cls
    assert by_config(index, ("child",)) == [
        ("ChildSpeculator", method + "ChildConfig"),
        ("SpecialSpeculator", method + "SpecialConfig"),
    ]
    assert by_config(index, ("other",)) == [
        ("ChildSpeculator", method + "OtherChildConfig"),
        ("SpecialSpeculator", method + "SpecialConfig"),
    ]
    assert by_config(index, ("loop",)) == [  # and back: each once
        ("LoopBackSpeculator", method + "LoopBackConfig"),
        ("LoopSpeculator", method + "LoopConfig"),
    ]
    assert by_config(index, ("disabled",)) == []  # its speculator_class is None
    assert by_config(index, ("ngram",)) == []  # its speculator is not in the tree
    assert by_config(index, ("named",)) == []  # not a string: not read
    assert by_config(index, ("eagle",)) == []
    assert [name for name, _ in by_config(index, None)] == [
        "ChildSpeculator",
        "LoopBackSpeculator",
        "LoopSpeculator",
        "MTPSpeculator",
        "MultiSpeculator",
        "SpecialSpeculator",
    ]


def test_a_speculator_config_the_drafter_declares(tmp_path: Path) -> None:
    index = caller_index(tmp_path, CONFIGS)
    gemma = f"{V2}.mtp.config.GemmaConfig"
    declared = "declared by the drafter (GemmaConfig): GemmaConfig"
    assert by_config(index, ("mtp",), gemma) == [("GemmaSpeculator", declared)]
    assert by_config(index, None, gemma) == [("GemmaSpeculator", declared)]
    # taken as it is: not specialized
    mtp = "declared by the drafter (MTPConfig): MTPConfig"
    assert by_config(index, ("mtp",), f"{V2}.mtp.config.MTPConfig") == [("MTPSpeculator", mtp)]
    # a declared name that is no class of the tree: chosen by method
    assert by_config(index, ("mtp",), "vllm.models.GemmaConfig") == by_config(index, ("mtp",))
    assert by_config(index, ("ngram",), f"{V2}.mtp.config.NgramConfig") == []


MRO = {
    f"{SPEC}/speculator.py": """\
        class BaseSpeculator:
            def propose(self, hidden_states):
                return self._generate_draft(hidden_states)

            def _generate_draft(self, hidden_states):
                return self.model.compute_logits(hidden_states).argmax(-1)


        class StepSpeculator(BaseSpeculator):
            def _generate_draft(self, hidden_states):
                return self.model.get_top_tokens(hidden_states, spec_step_idx=1)


        class PlainSpeculator(BaseSpeculator):
            pass
        """,
    f"{SPEC}/mixed.py": """\
        from .speculator import PlainSpeculator as Plain, StepSpeculator


        class StepFirstSpeculator(StepSpeculator, Plain):
            pass


        class PlainFirstSpeculator(Plain, StepSpeculator):
            pass


        class SuperSpeculator(StepSpeculator):
            def _generate_draft(self, hidden_states):
                logits = self.model.compute_logits(hidden_states, spec_step_idx=2)
                return super()._generate_draft(hidden_states)


        class ModuleSpeculator(nn.Module, Plain):
            def _generate_draft(self, hidden_states):
                self.parameters()
                return self.model.compute_logits(hidden_states)


        class AsyncProposer:
            async def propose(self, hidden_states):
                return self.draft_model.get_top_tokens(hidden_states)


        class DraftMixin:
            def _generate_draft(self, hidden_states):
                return self.model.get_top_tokens(hidden_states, spec_step_idx=3)


        class MixinFirstSpeculator(DraftMixin, Plain):
            pass


        class A:
            def propose(self, hidden_states):
                return self.model.get_top_tokens(hidden_states, spec_step_idx=4)


        class B:
            pass


        class AB(A, B):
            pass


        class BA(B, A):
            pass


        class Inconsistent(AB, BA):
            pass


        class LoopSpeculator(LoopBackSpeculator):
            pass


        class LoopBackSpeculator(LoopSpeculator):
            def propose(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)
        """,
}
MIXED = "vllm.v1.worker.gpu.spec_decode.mixed."


def drafted_with(reach) -> list[tuple[str, tuple[str, ...], int]]:
    """The calls on the drafter a speculator's drafting path makes: (method, arguments, line)."""
    calls = [(p.top_tokens.method, p.top_tokens.args, p.top_tokens.line) for p in reach.pairs]
    calls += [(c.method, c.args, c.line) for c in reach.logits]
    return calls + [(name, (), 0) for name in reach.other]


def test_a_speculators_drafting_path_follows_its_mro(tmp_path: Path) -> None:
    index = caller_index(tmp_path, MRO)
    assert drafted_with(index.reach(f"{MIXED}StepFirstSpeculator")) == [
        ("get_top_tokens", ("hidden_states", "spec_step_idx=1"), 11)
    ]
    # C3: StepSpeculator comes before BaseSpeculator, which both bases share
    assert drafted_with(index.reach(f"{MIXED}PlainFirstSpeculator")) == [
        ("get_top_tokens", ("hidden_states", "spec_step_idx=1"), 11)
    ]
    assert drafted_with(index.reach(f"{V2}.speculator.PlainSpeculator")) == [("compute_logits", ("hidden_states",), 6)]
    # a base from outside the caller files (nn.Module) ends the walk there
    assert drafted_with(index.reach(f"{MIXED}ModuleSpeculator")) == [("compute_logits", ("hidden_states",), 21)]
    # super() goes on from the class that calls it; the compute_logits before it is on the same path
    reach = index.reach(f"{MIXED}SuperSpeculator")
    assert drafted_with(reach) == [
        ("get_top_tokens", ("hidden_states", "spec_step_idx=1"), 11),
        ("compute_logits", ("hidden_states", "spec_step_idx=2"), 14),
    ]
    assert reach.pairs[0].logits == tuple(reach.logits)
    assert (reach.speculator, reach.file, reach.line) == (
        "SuperSpeculator",
        "vllm/v1/worker/gpu/spec_decode/mixed.py",
        12,
    )
    assert drafted_with(index.reach(f"{MIXED}AsyncProposer")) == [("get_top_tokens", ("hidden_states",), 26)]
    # a mixin with no base of its own, first
    assert drafted_with(index.reach(f"{MIXED}MixinFirstSpeculator")) == [
        ("get_top_tokens", ("hidden_states", "spec_step_idx=3"), 31)
    ]
    # a hierarchy Python refuses (no C3 order): the class is never made, and its statement is named
    inconsistent = index.reach(f"{MIXED}Inconsistent")
    assert drafted_with(inconsistent) == []
    assert inconsistent.uncreatable == (
        "vllm/v1/worker/gpu/spec_decode/mixed.py:55: class Inconsistent raises TypeError (no consistent method "
        "resolution order for its bases AB, BA)"
    )


def test_an_inheritance_cycle_ends(tmp_path: Path) -> None:
    index = caller_index(tmp_path, MRO)
    index.prepare()
    assert drafted_with(index.reach(f"{MIXED}LoopBackSpeculator")) == [("get_top_tokens", ("hidden_states",), 65)]
    assert drafted_with(index.reach(f"{MIXED}LoopSpeculator")) == [("get_top_tokens", ("hidden_states",), 65)]


def test_the_unknown_truth_value_says_what_it_is() -> None:
    assert repr(UNKNOWN) == "UNKNOWN"


def test_caller_files_that_cannot_be_read(tmp_path: Path) -> None:
    files = {
        f"{SPEC}/broken.py": "class BrokenSpeculator(:\n    def propose(self):\n        pass\n",
        f"{SPEC}/locked.py": "class LockedSpeculator:\n    def propose(self):\n        pass\n",
        f"{SPEC}/fine.py": "class FineSpeculator:\n    def propose(self):\n        pass\n",
        f"{SPEC}/gone.py": "class GoneSpeculator:\n    def propose(self):\n        pass\n",
    }
    root = build_tree(BASE, tmp_path / "tree")
    for name, text in {"model_executor/models/registry.py": REGISTRY, **files}.items():
        (root / "vllm" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "vllm" / name).write_text(text)
    modules = ModuleIndex(locate(root))
    read_bytes = modules.read_bytes

    def locked(path: Path) -> bytes:
        if path.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        if path.name == "gone.py":
            raise OSError("removed while read")
        return read_bytes(path)

    modules.read_bytes = locked
    index = CallerIndex(modules)
    assert modules.read_errors == {
        "vllm/v1/worker/gpu/spec_decode/broken.py": "syntax error, invalid syntax (<unknown>, line 1)",
        "vllm/v1/worker/gpu/spec_decode/locked.py": "cannot be read (Permission denied)",
        "vllm/v1/worker/gpu/spec_decode/gone.py": "cannot be read (removed while read)",
    }
    assert index.present and list(index.classes) == ["vllm.v1.worker.gpu.spec_decode.fine.FineSpeculator"]


def test_a_speculator_whose_base_module_does_not_parse(tmp_path: Path) -> None:
    """The base's module raises SyntaxError: the file is named among the read errors (the scan exits 2), and
    the speculator's own drafting path, which looks a method up past that base, names the base it cannot
    read (it crashed with KeyError where it asked what the base's methods bind on the instance)."""
    index = caller_index(
        tmp_path,
        {
            f"{SPEC}/speculator.py": "class BaseSpeculator:\n    def sample_draft(self, h) pass\n",
            f"{SPEC}/own.py": """\
                from vllm.v1.worker.gpu.spec_decode.speculator import BaseSpeculator


                class OwnSpeculator(BaseSpeculator):
                    def propose(self, hidden_states):
                        return self.sample_draft(hidden_states)
                """,
        },
    )
    assert index.index.read_errors == {
        "vllm/v1/worker/gpu/spec_decode/speculator.py": "syntax error, expected ':' (<unknown>, line 2)"
    }
    reach = index.reach("vllm.v1.worker.gpu.spec_decode.own.OwnSpeculator")
    assert not reach.reaches
    assert reach.unfollowed == [
        "vllm/v1/worker/gpu/spec_decode/own.py:4: base `BaseSpeculator` of OwnSpeculator cannot be read "
        "(vllm/v1/worker/gpu/spec_decode/speculator.py cannot be read or parsed); sample_draft may be defined there"
    ]


PATHS = {
    f"{SPEC}/__init__.py": """\
        class PackageSpeculator:
            def propose(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)
        """,
    f"{SPEC}/speculator.py": MRO[f"{SPEC}/speculator.py"],
    f"{SPEC}/paths.py": """\
        from typing import TYPE_CHECKING

        import vllm.v1.worker.gpu.spec_decode.speculator

        try:
            from .speculator import StepSpeculator
        except ImportError:
            from .speculator import PlainSpeculator
        else:
            from . import PackageSpeculator
        finally:
            from .speculator import BaseSpeculator as Base
        if TYPE_CHECKING:
            from .speculator import PlainSpeculator as Typed


        class FromTry(StepSpeculator):
            pass


        class FromExcept(PlainSpeculator):
            pass


        class FromElse(PackageSpeculator):
            pass


        class FromFinally(Base):
            pass


        class FromIf(Typed):
            pass


        class Generic(Base[int]):
            pass


        class Made(make_base(Base)):
            def propose(self, hidden_states):
                return self.model.compute_logits(hidden_states)


        class Calls(Base):
            def propose(self, hidden_states):
                self._b(hidden_states)
                self._a(hidden_states)
                self._c(hidden_states)
                return self._loop(hidden_states)

            def _a(self, hidden_states):
                model = self.model
                return model.get_top_tokens(hidden_states, **self.extra)

            def _b(self, hidden_states):
                states = hidden_states
                self.draft_model.compute_logits(hidden_states, 1)
                return self.model.get_top_tokens(hidden_states)

            def _c(self, hidden_states):
                return self._b(hidden_states)

            def _loop(self, hidden_states):
                if self.again:
                    return self._loop(self._ping(hidden_states))
                return self.model.sample(hidden_states)

            def _ping(self, hidden_states):
                return self._pong(hidden_states)

            def _pong(self, hidden_states):
                return self._ping(self.model.compute_logits(hidden_states, 2))


        class Qualified(vllm.v1.worker.gpu.spec_decode.speculator.StepSpeculator):
            pass


        class TwoWays(Base):
            def propose(self, hidden_states):
                return self._a(hidden_states) + self._b(hidden_states)

            def _a(self, hidden_states):
                self.model.compute_logits(hidden_states, 1)
                return self._sample(hidden_states)

            def _b(self, hidden_states):
                self.model.compute_logits(hidden_states, 2)
                return self._sample(hidden_states)

            def _sample(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)


        class Wrapping(StepSpeculator):
            def propose(self, hidden_states):
                self.model.prepare(hidden_states)
                return super().propose(hidden_states)
        """,
}
PATH = "vllm.v1.worker.gpu.spec_decode.paths."


def test_bases_imported_under_try_and_if_and_from_the_package(tmp_path: Path) -> None:
    index = caller_index(tmp_path, PATHS)
    step = [("get_top_tokens", ("hidden_states", "spec_step_idx=1"), 11)]
    plain = [("compute_logits", ("hidden_states",), 6)]
    assert drafted_with(index.reach(f"{PATH}FromTry")) == step
    assert drafted_with(index.reach(f"{PATH}FromExcept")) == plain
    assert drafted_with(index.reach(f"{PATH}FromElse")) == [("get_top_tokens", ("hidden_states",), 3)]
    assert drafted_with(index.reach(f"{PATH}FromFinally")) == plain
    assert drafted_with(index.reach(f"{PATH}FromIf")) == plain
    assert drafted_with(index.reach(f"{PATH}Generic")) == plain  # Base[int] is Base
    assert drafted_with(index.reach(f"{PATH}Qualified")) == step  # a base named by its module
    assert drafted_with(index.reach(f"{PATH}Made")) == [("compute_logits", ("hidden_states",), 43)]


def test_what_a_drafting_path_calls_on_the_drafter(tmp_path: Path) -> None:
    index = caller_index(tmp_path, PATHS)
    reach = index.reach(f"{PATH}Calls")
    # in the order of the file, whichever method calls them first; through an alias, **kwargs kept
    assert drafted_with(reach) == [
        ("get_top_tokens", ("hidden_states", "**self.extra"), 55),
        ("get_top_tokens", ("hidden_states",), 60),
        ("compute_logits", ("hidden_states", "1"), 59),
        ("compute_logits", ("hidden_states", "2"), 74),
        ("sample", (), 0),
    ]
    first, second = reach.pairs
    # each get_top_tokens with the compute_logits calls of the nearest method that reaches some
    assert [c.line for c in first.logits] == [59, 74]
    assert [c.line for c in second.logits] == [59]
    # reached from two methods, each with its own compute_logits: both are on its paths
    # (through the wrapper of each, which is a call site of its own: each pair names its own)
    via_a, via_b = index.reach(f"{PATH}TwoWays").pairs
    assert sorted((p.top_tokens.line, [c.line for c in p.logits]) for p in (via_a, via_b)) == [(94, [86]), (94, [90])]
    assert via_a.top_tokens.through != via_b.top_tokens.through
    assert (first.top_tokens.keywords, first.top_tokens.positional) == ((), 1)
    # super().propose goes on to the base's, from a class that overrides it
    assert drafted_with(index.reach(f"{PATH}Wrapping")) == [
        ("get_top_tokens", ("hidden_states", "spec_step_idx=1"), 11),
        ("prepare", (), 0),
    ]


RUNNER = """\
import torch
from vllm.v1.spec_decode.eagle \\
    import EagleProposer
from vllm.v1.spec_decode.medusa import (
    MedusaProposer,
)


class GPUModelRunner:
    def load_model(self): return self.model.load()
    def __init__(
        self,
        vllm_config,
        device,
    ):
        self.speculative_config = vllm_config.speculative_config

        if self.speculative_config.method == "medusa":
            self.drafter = MedusaProposer(vllm_config)
        else:
            self.drafter = EagleProposer(vllm_config)
    def make_drafter(self): return EagleProposer(self.vllm_config)
{between}def helper():
    return 1
"""


@pytest.mark.parametrize("between", ["", "\n", "\n\n"], ids=["no-blank", "one-blank", "two-blanks"])
def test_the_model_runner_is_read_for_what_it_constructs(tmp_path: Path, between: str) -> None:
    files = {name: text for name, text in SELECTION.items() if name.startswith("v1/spec_decode/")}
    index = caller_index(tmp_path, {**files, "v1/worker/gpu_model_runner.py": RUNNER.format(between=between)})
    assert index.candidates(index.drafter("ToyModel", "Toy", None)) == [
        ("vllm.v1.spec_decode.eagle.EagleProposer", V1_HOW),
        ("vllm.v1.spec_decode.medusa.MedusaProposer", V1_HOW),
    ]
    assert index.candidates(index.drafter("ToyMedusaModel", "ToyMedusa", None)) == [
        ("vllm.v1.spec_decode.eagle.EagleProposer", "vllm/v1/worker/gpu_model_runner.py:make_drafter"),
        ("vllm.v1.spec_decode.medusa.MedusaProposer", V1_HOW),
    ]
    assert not index.index.read_errors


def test_caller_files_in_another_encoding(tmp_path: Path) -> None:
    latin = ("v1/spec_decode/eagle.py", "v1/worker/gpu_model_runner.py")
    caller_index(tmp_path, {name: SELECTION[name] for name in latin})  # the tree, then these in Latin-1
    for name in latin:
        text = "# -*- coding: latin-1 -*-\n# Proposers of the caf\xe9\n" + textwrap.dedent(SELECTION[name])
        (tmp_path / "tree" / "vllm" / name).write_bytes(text.encode("latin-1"))
    index = CallerIndex(ModuleIndex(locate(tmp_path / "tree")))
    assert index.candidates(drafter("ToyEagleModel", "ToyEagle", ("eagle",))) == [
        ("vllm.v1.spec_decode.eagle.EagleProposer", V1_HOW)
    ]
    assert not index.index.read_errors


CHAIN_SPECULATORS = speculator_module(
    "MTPSpeculator", "MultiSpeculator", "EagleSpeculator", "FallbackSpeculator", others=("SpeculatorMetrics",)
)
CHAINS = {
    "do-then-if": """\
        speculator = MTPSpeculator(spec)
        if spec.method == "mtp":
            speculator = MultiSpeculator(spec)
        if spec.num_speculative_tokens > 1:
            return EagleSpeculator(spec)
        elif spec.method == "mtp":
            return speculator
        return FallbackSpeculator(spec)
        """,
    "unknown-else-exits": """\
        if spec.num_speculative_tokens > 2:
            extra = MultiSpeculator(spec)
        else:
            return MTPSpeculator(spec)
        return EagleSpeculator(spec)
        """,
    "false-else-exits": """\
        if spec.method == "mtp":
            extra = MultiSpeculator(spec)
        else:
            return EagleSpeculator(spec)
        return FallbackSpeculator(spec)
        """,
    "nested-exits": """\
        if spec.method == "mtp":
            if spec.num_speculative_tokens > 1:
                return MultiSpeculator(spec)
            else:
                return MTPSpeculator(spec)
        return EagleSpeculator(spec)
        """,
    "not-callers-and-modules": """\
        metrics = SpeculatorMetrics()
        if spec.method == "mtp":
            return speculator.MTPSpeculator(spec)
        return DefaultSpeculator(spec)
        """,
    "an-alias-only": """        return DefaultSpeculator(spec)
        """,
    "local-values": """\
        method = spec.method
        many = spec.num_speculative_tokens > 1
        fallback = None
        fallback = spec.method
        if method == "mtp":
            if many:
                return MultiSpeculator(spec)
            return MTPSpeculator(spec)
        if fallback == "eagle":
            return EagleSpeculator(spec)
        return FallbackSpeculator(spec)
        """,
}
CHOSEN = {  # chain -> (speculators of an MTP drafter, of an EAGLE one)
    "do-then-if": (
        ["EagleSpeculator", "MTPSpeculator", "MultiSpeculator"],
        ["EagleSpeculator", "FallbackSpeculator", "MTPSpeculator"],
    ),
    "unknown-else-exits": (
        ["EagleSpeculator", "MTPSpeculator", "MultiSpeculator"],
        ["EagleSpeculator", "MTPSpeculator", "MultiSpeculator"],
    ),
    "false-else-exits": (["FallbackSpeculator", "MultiSpeculator"], ["EagleSpeculator"]),
    "nested-exits": (["MTPSpeculator", "MultiSpeculator"], ["EagleSpeculator"]),
    "not-callers-and-modules": (["MTPSpeculator"], ["FallbackSpeculator"]),
    "an-alias-only": (["FallbackSpeculator"], ["FallbackSpeculator"]),
    # a local assigned once is its value; one assigned twice is not known
    "local-values": (["MTPSpeculator", "MultiSpeculator"], ["EagleSpeculator", "FallbackSpeculator"]),
}


@pytest.mark.parametrize("chain", list(CHAINS))
def test_which_constructions_a_drafter_reaches_in_a_chain(tmp_path: Path, chain: str) -> None:
    module = (
        "from . import speculator\n"
        "from .speculator import EagleSpeculator, FallbackSpeculator, MTPSpeculator, MultiSpeculator\n"
        "from .speculator import FallbackSpeculator as DefaultSpeculator, SpeculatorMetrics\n\n\n"
    )
    module += "def choose(spec):\n" + textwrap.indent(textwrap.dedent(CHAINS[chain]), "    ")
    index = caller_index(tmp_path, {f"{SPEC}/__init__.py": module, f"{SPEC}/speculator.py": CHAIN_SPECULATORS})
    how = {f"vllm/{SPEC}/__init__.py:choose"}
    for drafted, expected in zip((drafter(), drafter("ToyEagleModel", "ToyEagle", ("eagle",))), CHOSEN[chain]):
        found = index.candidates(drafted)
        assert [name.removeprefix(f"{V2}.speculator.") for name, _ in found] == expected
        assert {h for _, h in found} == how


NEWER_SYNTAX = {  # running Python -> a statement only a later one parses
    (3, 10): "type Alias = int",  # 3.12
    (3, 11): "type Alias = int",
    (3, 12): "def f[T = int](): pass",  # 3.13
    (3, 13): 'greeting = t"hello"',  # 3.14
}


@pytest.mark.skipif(sys.version_info[:2] not in NEWER_SYNTAX, reason="no syntax newer than this Python is known here")
def test_the_runner_is_cut_to_what_constructs(tmp_path: Path) -> None:
    """The model runner is read for its imports and the functions that construct speculators, not
    whole: a release written for a newer Python than the one running the scan still shows its
    proposers, however the imports and functions around them are laid out."""
    newer = NEWER_SYNTAX[sys.version_info[:2]]
    runner = RUNNER.format(between="\n\n").replace(
        "    def make_drafter", f"    def describe(self):\n        {newer}\n\n    def make_drafter"
    )
    runner += f"\n\ndef newer():\n    {newer}\n"
    files = {name: text for name, text in SELECTION.items() if name.startswith("v1/spec_decode/")}
    index = caller_index(tmp_path, {**files, "v1/worker/gpu_model_runner.py": runner})
    assert index.candidates(index.drafter("ToyModel", "Toy", None)) == [
        ("vllm.v1.spec_decode.eagle.EagleProposer", V1_HOW),
        ("vllm.v1.spec_decode.medusa.MedusaProposer", V1_HOW),
    ]
    assert not index.index.read_errors


@pytest.mark.skipif(sys.version_info[:2] not in NEWER_SYNTAX, reason="no syntax newer than this Python is known here")
def test_comments_on_the_runners_imports(tmp_path: Path) -> None:
    """A parenthesis or a backslash in the comment of an import does not take the lines after it
    into the import: the cut would then hold a part it does not need (here, in newer syntax)."""
    runner = "from vllm.v1.spec_decode.eagle import EagleProposer  # see (1\n"
    runner += "from vllm.v1.spec_decode.medusa import MedusaProposer  # C:\\\n"
    runner += f"def newer():\n    {NEWER_SYNTAX[sys.version_info[:2]]}\n\n\nclass R:\n    def __init__(self, x):\n"
    runner += "        self.drafter = EagleProposer(1) if x else MedusaProposer(2)\n"
    files = {name: text for name, text in SELECTION.items() if name.startswith("v1/spec_decode/")}
    index = caller_index(tmp_path, {**files, "v1/worker/gpu_model_runner.py": runner})
    assert index.candidates(drafter()) == [
        ("vllm.v1.spec_decode.eagle.EagleProposer", V1_HOW),
        ("vllm.v1.spec_decode.medusa.MedusaProposer", V1_HOW),
    ]
    assert not index.index.read_errors


LOOKUPS = {
    "v1/worker/gpu/spec_decode/__init__.py": """\
        from . import speculator as speculators


        def init_speculator(config, device):
            if config.speculative_config.method == "mtp":
                from .lookups import TwoArgSuperSpeculator

                return TwoArgSuperSpeculator(config, device)
            if config.speculative_config.method == "eagle":
                return speculators.HandingSpeculator(config, device)
            if config.speculative_config.method == "medusa":
                from vllm.plugins.medusa import MedusaSpeculator

                return MedusaSpeculator(config, device)
            raise NotImplementedError
        """,
    "v1/worker/gpu/spec_decode/speculator.py": """\
        def greedy(model, hidden_states, step):
            alias = model
            return alias.get_top_tokens(hidden_states)


        def by_keyword(hidden_states, *, drafter):
            return drafter.compute_logits(hidden_states)


        class HandingSpeculator:
            def propose(self, hidden_states):
                greedy(self.model, hidden_states, 0)
                return by_keyword(hidden_states, drafter=self.model)
        """,
    "v1/worker/gpu/spec_decode/lookups.py": """\
        class Base:
            def propose(self, hidden_states):
                return self._draft(hidden_states)

            def _draft(self, hidden_states):
                return self.model.get_top_tokens(hidden_states)


        class Middle(Base):
            def _draft(self, hidden_states):
                return self.model.compute_draft_logits(hidden_states)


        class TwoArgSuperSpeculator(Middle):
            def _draft(self, hidden_states):
                return super(Middle, self)._draft(hidden_states)


        class ExplicitSpeculator(Middle):
            def _draft(self, hidden_states):
                return Base._draft(self, hidden_states)
        """,
}
LOOKUP = "vllm.v1.worker.gpu.spec_decode."


def test_lookups_a_drafting_path_makes(tmp_path: Path) -> None:
    index = caller_index(tmp_path, LOOKUPS)
    # super(Middle, self) goes on after Middle, not after the caller's class: Base's _draft
    assert drafted_with(index.reach(f"{LOOKUP}lookups.TwoArgSuperSpeculator")) == [
        ("get_top_tokens", ("hidden_states",), 6)
    ]
    # Base._draft(self, ...) is Base's, whatever overrides it
    assert drafted_with(index.reach(f"{LOOKUP}lookups.ExplicitSpeculator")) == [
        ("get_top_tokens", ("hidden_states",), 6)
    ]
    # the drafter handed to module-level functions, by position (and aliased there) or by keyword
    reach = index.reach(f"{LOOKUP}speculator.HandingSpeculator")
    assert drafted_with(reach) == [("get_top_tokens", ("hidden_states",), 3), ("compute_logits", ("hidden_states",), 7)]
    # chosen through a relative import inside the function, and through an imported module
    mtp, eagle = drafter(), drafter("ToyEagleModel", "ToyEagle", ("eagle",))
    assert [q for q, _ in index.candidates(mtp)] == [f"{LOOKUP}lookups.TwoArgSuperSpeculator"]
    assert [q for q, _ in index.candidates(eagle)] == [f"{LOOKUP}speculator.HandingSpeculator"]
    # a speculator constructed there that no caller file defines is said, not silently dropped
    assert index.unfollowed() == [
        "vllm/v1/worker/gpu/spec_decode/__init__.py:14: MedusaSpeculator(...) in init_speculator is not a "
        "speculator class of the caller files; the drafters it may hold are judged without it"
    ]


def test_a_chain_of_wrappers_is_paired_in_linear_time(tmp_path: Path) -> None:
    """Each of 40 wrappers calls the next from two places (2**40 call paths): a function is
    paired once per argument values, so this takes a fraction of a second, not forever."""
    helpers = "".join(
        f"    def h{i}(self, hidden_states, step):\n"
        "        if step < 0:\n"
        f"            return self.h{i + 1}(hidden_states, step)\n"
        f"        return self.h{i + 1}(hidden_states, step)\n\n"
        for i in range(40)
    )
    speculator = (
        "class MTPSpeculator:\n"
        "    def propose(self, hidden_states, steps):\n"
        "        if self.use_local_argmax_reduction:\n"
        "            return self.h0(hidden_states, steps)\n"
        "        return self.model.compute_logits(hidden_states, spec_step_idx=steps)\n\n"
        f"{helpers}"
        "    def h40(self, hidden_states, step):\n"
        "        return self.model.get_top_tokens(hidden_states)\n"
    )
    index = caller_index(tmp_path, {"v1/worker/gpu/spec_decode/speculator.py": speculator})
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("pairing did not finish in 20 s"))
    signal.alarm(20)
    try:
        (pair,) = index.reach("vllm.v1.worker.gpu.spec_decode.speculator.MTPSpeculator").pairs
    finally:
        signal.alarm(0)
    assert pair.top_tokens.argument_values == ("hidden_states",)
    assert [call.args for call in pair.logits] == [("hidden_states", "spec_step_idx=steps")]


HOLDERS = {
    "v1/worker/gpu/spec_decode/holders.py": """\
        def greedy(spec, hidden_states):
            return spec._drafter.get_top_tokens(hidden_states)


        class UnpackedSpeculator:
            def __init__(self):
                drafter = self.model
                self._drafter, self.steps = drafter, 3

            def propose(self, hidden_states):
                return greedy(self, hidden_states)


        class AugmentedSpeculator:
            def __init__(self):
                self._drafter = self.model
                self._drafter += self.offset

            def propose(self, hidden_states):
                return self._drafter.get_top_tokens(hidden_states)


        class TwiceBoundLocalSpeculator:
            def __init__(self):
                drafter = self.model
                drafter = self.target_model
                self._drafter = drafter

            def propose(self, hidden_states):
                return self._drafter.get_top_tokens(hidden_states)


        class CycleSpeculator:
            def __init__(self):
                self.first = self.second
                self.second = self.first

            def propose(self, hidden_states):
                return self.first.get_top_tokens(hidden_states)


        class ElsewhereSpeculator:
            def propose(self, hidden_states):
                self.runner.kept = self.model
                return self.runner.kept.get_top_tokens(hidden_states)


        class CalledAliasSpeculator:
            def __init__(self):
                self._drafter = self.model

            def propose(self, hidden_states):
                return self._drafter(hidden_states).argmax(dim=-1)


        class SetterSpeculator:
            @property
            def drafter(self):
                return self.model

            @drafter.setter
            def drafter(self, value):
                self._other = value

            def propose(self, hidden_states):
                return self.drafter.get_top_tokens(hidden_states)


        class SetattrSpeculator:
            def __init__(self, options):
                setattr(self, "_drafter", self.model)

            def propose(self, hidden_states):
                return self._drafter.get_top_tokens(hidden_states)


        class ComputedSetattrSpeculator(SetattrSpeculator):
            def load_model(self, options):
                for key, value in options.items():
                    setattr(self, key, value)
        """,
}
HOLDER = "vllm.v1.worker.gpu.spec_decode.holders."


def test_attributes_that_hold_the_drafter(tmp_path: Path) -> None:
    index = caller_index(tmp_path, HOLDERS)
    file = "vllm/v1/worker/gpu/spec_decode/holders.py"
    # unpacked from a tuple of as many values, through a local bound once; read on the speculator handed to a function
    assert drafted_with(index.reach(f"{HOLDER}UnpackedSpeculator")) == [("get_top_tokens", ("hidden_states",), 2)]
    # `+=` may store another object there, and so may a local bound twice: named where used, never the drafter
    for name, use, store in (
        ("Augmented", 20, "17: `self._drafter += self.offset`"),
        ("TwiceBoundLocal", 30, "27: `self._drafter = drafter`"),
    ):
        reach = index.reach(f"{HOLDER}{name}Speculator")
        assert (reach.pairs, reach.unfollowed) == (
            [],
            [
                f"{file}:{use}: `self._drafter.get_top_tokens(hidden_states)` (self._drafter may hold another "
                f"object than the drafter: {file}:{store})"
            ],
        )
    # attributes that only hold each other hold no drafter: the path calls none (named from its entry point)
    blind = "`propose` (its path calls no method of the drafter that the scan sees)"
    assert index.reach(f"{HOLDER}CycleSpeculator").unfollowed == [f"{file}:38: {blind}"]
    # stored on another object: named (MTP205), not followed
    assert index.reach(f"{HOLDER}ElsewhereSpeculator").unfollowed == [f"{file}:44: `self.runner.kept = self.model`"]
    # calling the attribute runs the drafter's forward, as `self.model(...)` does
    assert index.reach(f"{HOLDER}CalledAliasSpeculator").unfollowed == [f"{file}:52: {blind}"]
    # a property with a setter may be set to anything: not taken for the drafter
    assert index.reach(f"{HOLDER}SetterSpeculator").unfollowed == [f"{file}:65: {blind}"]
    # setattr with the attribute's name stores there; with a name computed at run time, anywhere
    assert drafted_with(index.reach(f"{HOLDER}SetattrSpeculator")) == [("get_top_tokens", ("hidden_states",), 74)]
    assert index.reach(f"{HOLDER}ComputedSetattrSpeculator").unfollowed == [
        f"{file}:74: `self._drafter.get_top_tokens(hidden_states)` (self._drafter may hold another object than the "
        f"drafter: {file}:80: `setattr(self, key, value)`)"
    ]


def test_a_module_name_bound_again_under_a_try_or_by_a_star_import_is_no_constant() -> None:
    """``X = "a"`` then ``try: from m import X``: at run time X may be the import's, so no string is worked out
    for it (it was taken for the constant, and the config's speculator for another)."""
    import ast

    from mtp_audit.resolve.callers import _bound_at_top

    tree = ast.parse("try:\n    from m import X\nexcept ImportError:\n    def Y(): ...\n    class Z: ...\n")
    assert _bound_at_top(tree.body[0]) >= {"X", "Y", "Z"}
    assert "*" in _bound_at_top(ast.parse("from m import *").body[0])


def test_the_runner_cut_keeps_line_numbers_with_a_form_feed_in_a_string() -> None:
    """A form feed ends a line for ``str.splitlines`` but not for the tokenizer: the cut shifted, kept a string's
    closing quotes as a statement, and the runner no longer parsed (exit 2)."""
    import ast

    from mtp_audit.resolve.callers import _constructing_parts

    source = (
        'NOTE = """one\fpage"""\n\n\nclass GPUModelRunner:\n    def __init__(self, config):\n'
        "        self.drafter = StepProposer(config)\n"
    )
    cut = _constructing_parts(source)
    ast.parse(cut)
    assert cut.split("\n")[5] == "        self.drafter = StepProposer(config)"
