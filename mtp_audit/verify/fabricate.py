"""Build a drafter instance without its ``__init__``: only what its methods read.

The methods are called for real; each time one reads an attribute that is
not there (``AttributeError`` on an object we built), the attribute is made
from vLLM's real pieces and the call is retried:

- ``ParallelLMHead`` (vocabulary sharded across TP ranks, padded), with
  random weights drawn from one seeded global matrix, so every rank holds
  its shard of the same head;
- ``LogitsProcessor``;
- ``RMSNorm`` with random, non-unit weights, so a skipped norm shows;
- the class the owner's ``__init__`` assigns to the attribute
  (``self.model = Predictor(...)``, ``self.shared_head = SharedHead(...)``),
  built the same way, recursively;
- per-step layer containers (``self.layers[str(start + step)]``), one
  distinct layer (own head, own norm) per step;
- the integer bookkeeping MTP modules read (``num_mtp_layers``,
  ``mtp_start_layer_idx``);
- a value the owner's ``__init__`` computes from sizes (``self.hc_dim =
  self.hc_mult * config.hidden_size``) or a parameter it allocates
  (``nn.Parameter(torch.empty(self.hc_mult, self.hc_dim, dtype=...))``),
  evaluated with the values built here, the tensor drawn from the seed;
- a ``VocabParallelEmbedding`` that serves as the head (tied embeddings),
  built as the head is;
- a vLLM ``CustomOp`` the ``__init__`` constructs, constructed for real:
  where the implementation vLLM dispatches to on this platform needs a
  compiled kernel that is not here, another of the op's own
  implementations (``forward_native`` first) that runs here is used, and
  named in the result.

Anything else is refused with the owner and attribute named: the drafter is
then reported as not verified, never as passing. Every attribute made is
recorded as a recipe, which ``--emit-test`` turns back into code.
"""

from __future__ import annotations

import ast
import contextlib
import enum
import functools
import inspect
import math
import re
import sys
import textwrap
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from vllm.model_executor.custom_op import CustomOp
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead, VocabParallelEmbedding

from ..index.ast_tools import self_attribute, unparse
from .constants import NUM_STEPS, ORG_VOCAB, START_LAYER, TARGET_VOCAB

CONTAINERS = ("layers", "mtp_layers", "_mtp_layers")
STEP_BOOKKEEPING = ("num_mtp_layers", "mtp_start_layer_idx")
HEADS = ("lm_head", "head")
NORM = re.compile(r"(^|_)(norm|layernorm|ln)$|norm$")
INDEX = re.compile(r"(idx|ids|index|indices)$")
CONFIG_READ = re.compile(r"""(?:self\.)?\w*config\.(\w+)|getattr\((?:self\.)?\w*config,\s*["'](\w+)["'].*\)""")


class CannotBuild(Exception):
    """The harness cannot make something a method needs: not verified."""


class OutsideSteps(CannotBuild):
    """A per-step container read past its layers: a step the code does not wrap (as vLLM's
    ``ModuleDict`` would raise ``KeyError``)."""


# What a recipe line makes (verify/emit.py writes each one back as code).
StepKind = Literal[
    "constant",
    "head",
    "logits_processor",
    "logits_processor_subclass",
    "steps_view",
    "steps_slice",
    "norm",
    "int",
    "steps",
    "instance",
    "config",
    "draft_to_target",
    "token_ids",
    "constructed",
    "element",
]


@dataclass
class Step:
    """One recipe line: ``path.attr = kind(args)``."""

    path: str
    attr: str
    kind: StepKind
    args: dict = field(default_factory=dict)


@dataclass
class Fabricator:
    vocab: int
    hidden: int
    dtype: torch.dtype
    seed: int
    recipe: list[Step] = field(default_factory=list)
    paths: dict[int, str] = field(default_factory=dict)  # id(object we built) -> its path
    counter: int = 0
    head_override: "HeadRows | None" = None
    choices: dict[str, int] = field(default_factory=dict)  # configuration point -> alternative to build
    points: dict[str, list[str]] = field(default_factory=dict)  # points met: point -> labels of its alternatives
    target_vocab: int = 0  # the vocabulary compute_logits returns (the target's, under a draft-to-target map)
    config_values: dict[str, object] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # what stood in for what (a custom op's other implementation)
    config_reads: dict[str, object] = field(default_factory=dict)  # config attribute -> the value read
    logit_indices: set[str] = field(default_factory=set)  # config attributes that index or slice the logits
    compared_literals: dict[str, tuple] = field(default_factory=dict)  # config attribute -> literals it is tested with
    head_weights: dict[int, torch.Tensor] = field(default_factory=dict)  # a head's storage -> its unsharded weight

    def __post_init__(self):
        self.target_vocab = self.target_vocab or self.vocab

    def instance(self, cls: type, path: str = "model") -> nn.Module:
        obj = object.__new__(cls)  # not cls.__new__: mixins (SupportsQuant) run config lookups there
        self.logit_indices |= _config_logit_indices(cls)
        for name, literals in _config_literals(cls).items():
            known = self.compared_literals.get(name, ())
            self.compared_literals[name] = known + tuple(value for value in literals if value not in known)
        nn.Module.__init__(obj)
        self.paths[id(obj)] = path
        return obj

    def attribute(self, owner: object, name: str):
        """``owner.name``, built first if it is not there yet."""
        try:
            return getattr(owner, name)
        except AttributeError as error:
            if getattr(error, "obj", None) is not owner or id(owner) not in self.paths:
                raise
        setattr(owner, name, self.make(owner, name))
        return getattr(owner, name)

    def call(self, obj: object, method: str, *args, **kwargs):
        for _ in range(64):
            try:
                return getattr(obj, method)(*args, **kwargs)
            except AttributeError as error:
                owner, name = getattr(error, "obj", None), getattr(error, "name", None)
                if name is None or id(owner) not in self.paths:
                    raise  # the method's own failure (``None.x``), not an attribute we have yet to build
                setattr(owner, name, self.make(owner, name))
        raise CannotBuild(f"{method} still needs more attributes after 64 were built")

    def _next_seed(self) -> int:
        self.counter += 1
        return self.seed * 1000 + self.counter

    def variant(self) -> str:
        """The configuration built, as ``point=label`` for every point that had alternatives."""
        chosen = [f"{point}={labels[self.choices.get(point, 0)]}" for point, labels in sorted(self.points.items())]
        return ", ".join(chosen) or "default"

    def make(self, owner: object, name: str):
        """Build ``owner.name`` as the owner's class can set it; where it can set it several ways
        (a module or None, a flag), that is a configuration point and ``choices`` picks one."""
        path = self.paths[id(owner)]
        alternatives = self._alternatives(owner, name, path)
        if len(alternatives) == 1:
            return alternatives[0][1]()
        point = f"{type(owner).__name__}.{name}"  # one choice for every instance: a config is model-wide
        self.points[point] = [label for label, _ in alternatives]
        return alternatives[self.choices.get(point, 0)][1]()

    def _alternatives(self, owner: object, name: str, path: str) -> list[tuple[str, object]]:
        cls = type(owner)
        values = _assigned_values(cls, name)
        annotation = _annotation(cls, name)
        if values and set(values) <= {"True", "False"}:
            return [(flag, self._constant(path, name, flag == "True")) for flag in ("True", "False")]
        read = [CONFIG_READ.fullmatch(value) for value in values]
        if (
            read and all(read) and name not in STEP_BOOKKEEPING and name != "config"
        ):  # ``self.x = config.x``: the config's value, a configuration point of its own (``self.config =
            # self.draft_model_config.hf_config`` reads like one, but is the config itself, built below)
            key = read[0].group(1) or read[0].group(2)
            return [("config", lambda: self._config_read_step(path, name, key))]
        optional = "None" in values or bool(annotation and re.search(r"\bNone\b|Optional\[", annotation))
        if values and set(values) == {"None"} and set(_assigned_values(cls, name, as_run=False)) != {"None"}:
            # the code that runs sets it to None alone, a base's ``__init__`` that never runs to something else
            return [("None", self._constant(path, name, None))]
        built = self._value(owner, name, path, annotation, optional)
        out = [built] if built is not None else []
        if optional:
            out.append(("None", self._constant(path, name, None)))
        if not out:
            raise CannotBuild(f"cannot build {cls.__name__}.{name} (read at {path}.{name})")
        return out

    def _config_read_step(self, path: str, name: str, key: str):
        value = self.config_value(path, key)
        self.recipe.append(Step(path, name, "constant", {"value": repr(value)}))
        return value

    def _constant(self, path: str, name: str, value):
        def build():
            self.recipe.append(Step(path, name, "constant", {"value": repr(value)}))
            return value

        return build

    def _value(self, owner: object, name: str, path: str, annotation: str | None, optional: bool):
        """(label, builder) for the non-None value of ``owner.name``, or None when only None can be built."""
        declared = _declared_class(type(owner), name)
        if name in HEADS or (declared is not None and issubclass(declared, ParallelLMHead)):
            return ("head", lambda: self._head_step(path, name))
        if declared is not None and issubclass(declared, VocabParallelEmbedding):  # a tied head: the embedding
            return ("embedding", lambda: self._head_step(path, name, declared))
        if name == "logits_processor" or (declared is not None and issubclass(declared, LogitsProcessor)):
            return ("LogitsProcessor", lambda: self._logits_processor_step(owner, path, name))
        if NORM.search(name) or (declared is not None and issubclass(declared, RMSNorm)):
            return ("norm", lambda: self._norm_step(path, name))
        if name in STEP_BOOKKEEPING:
            value = NUM_STEPS if name == "num_mtp_layers" else START_LAYER
            return (str(value), lambda: self._int_step(path, name, value))
        if name == "draft_id_to_target_id":
            return ("map", lambda: self.draft_to_target(path, name))
        if name == "config" or name.endswith("_config"):
            return ("config", lambda: self._config_step(path, name))
        view = _container_view(type(owner), name)
        if view is not None:
            return ("layers", lambda: self._steps_view_step(owner, path, name, *view))
        if name in CONTAINERS:
            element = _container_element(type(owner), name)
            return ("layers", lambda: self._steps_step(path, name, element))
        if declared is not None and issubclass(declared, CustomOp) and _constructible(declared):
            return (declared.__name__, lambda: self._custom_op_step(declared, path, name))
        if declared is not None and issubclass(declared, nn.Module):
            if _scalar_init(declared):
                return (declared.__name__, lambda: self.constructed(declared, path, name))
            return (declared.__name__, lambda: self._instance_step(declared, path, name))
        if annotation and "Tensor" in annotation and INDEX.search(name):
            return ("ids", lambda: self.token_ids(path, name))
        expression = _init_expression(type(owner), name)
        if expression is not None and _evaluable(expression[0]) and not _is_none(expression[0]):
            return ("computed", lambda: self._computed_step(owner, path, name, *expression))
        return None

    def _head_step(self, path, name, cls: type = ParallelLMHead):
        seed = self._next_seed()
        if cls is ParallelLMHead:
            self.recipe.append(Step(path, name, "head", {"seed": seed}))
        else:
            self.recipe.append(Step(path, name, "embedding_head", {"seed": seed, "cls": _qualname(cls)}))
        return self.head(seed, cls)

    def _custom_op_step(self, cls, path, name):
        self.recipe.append(Step(path, name, "custom_op", {"cls": _qualname(cls)}))
        op = cls()
        op._forward_method = PortableForward(op, self)
        return op

    def _computed_step(self, owner, path, name, node: ast.expr, namespace: dict, local_values: dict):
        """``self.<name> = <expression>`` of the owner's ``__init__``, over sizes, config values and
        attributes built here; a tensor it allocates is drawn from the seed."""
        seed = self._next_seed()
        evaluator = _InitEvaluator(self, owner, path, namespace, seed, local_values)
        try:
            value = evaluator.evaluate(node)
        except (TypeError, ValueError) as error:  # a None size under another configuration point
            raise CannotBuild(
                f"cannot evaluate {type(owner).__name__}.{name} = {unparse(node)} here: {type(error).__name__}: {error}"
            ) from error
        if isinstance(value, torch.Tensor) and len(evaluator.dtypes) == 1:  # the one tensor it allocated
            self.recipe.append(
                Step(
                    path,
                    name,
                    "computed_tensor",
                    {
                        "shape": tuple(value.shape),
                        "dtype": evaluator.dtypes[0],
                        "seed": seed,
                        "parameter": isinstance(value, nn.Parameter),
                        "requires_grad": value.requires_grad,
                    },
                )
            )
        elif value is None or isinstance(value, (int, float, bool, str)):
            self.recipe.append(Step(path, name, "constant", {"value": repr(value)}))
        else:
            self.recipe.append(Step(path, name, "computed", {"expression": unparse(node)}))
        return value

    def _logits_processor_step(self, owner, path, name):
        """The processor as the owner's ``__init__`` builds it: its ``org_vocab_size``, ``scale`` and
        ``soft_cap`` evaluated over the values built here (the head's rows are its ``vocab_size``). One
        that cannot be reproduced is not built: a pass would claim a configuration never run."""
        owner_class = type(owner)
        found = _init_expression(owner_class, name)
        where = f"{owner_class.__name__}.{name}"
        if found is None or not isinstance(found[0], ast.Call):
            raise CannotBuild(f"cannot build {where}: no `self.{name} = LogitsProcessor(...)` in its __init__")
        call, namespace, local_values = found
        processor = _processor_class(call, namespace, f"{where} = {unparse(call)}")
        try:
            bound = _PROCESSOR_SIGNATURE.bind(None, *call.args, **{k.arg: k.value for k in call.keywords})
        except TypeError as error:  # ``*args``/``**kwargs``, or arguments LogitsProcessor does not take
            raise CannotBuild(f"cannot build {where} = {unparse(call)}: {error}") from error
        arguments = dict(bound.arguments)
        arguments.pop("self")
        head_rows = arguments.pop("vocab_size")
        org = arguments.pop("org_vocab_size", None)
        evaluator = _InitEvaluator(self, owner, path, namespace, self._next_seed(), local_values)
        unevaluable = [unparse(node) for node in arguments.values() if not _evaluable(node)]
        if unevaluable:
            raise CannotBuild(f"cannot evaluate {', '.join(unevaluable)} of {where} = {unparse(call)} here")
        try:
            kwargs = {parameter: evaluator.evaluate(node) for parameter, node in arguments.items()}
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise CannotBuild(f"cannot evaluate {where} = {unparse(call)} here: {error!r}") from error
        if org is not None:
            kwargs.update(self._org_vocab_size(owner_class, where, call, (head_rows, org), local_values))
        if processor is LogitsProcessor:
            self.recipe.append(Step(path, name, "logits_processor", {"kwargs": kwargs}))
        else:
            self.recipe.append(
                Step(path, name, "logits_processor_subclass", {"kwargs": kwargs, "cls": _qualname(processor)})
            )
        return processor(self.vocab, **kwargs)

    def _org_vocab_size(self, cls: type, where: str, call: ast.Call, sizes: tuple, local_values: dict) -> dict:
        """``org_vocab_size`` where it reads another config attribute than ``vocab_size``
        (``padded_vocab_size`` and ``vocab_size``): a configuration point, the cut below the head's rows
        first, that attribute pinned to it for every other read; the same expression or attribute:
        nothing to cut."""
        if unparse(sizes[0]) == unparse(sizes[1]):  # ``LogitsProcessor(vocab_size, vocab_size)``
            return {}
        rows, org = (_config_attribute(cls, node, local_values) for node in sizes)
        if rows is not None and rows == org:
            return {}
        if rows is None or org is None:
            raise CannotBuild(
                f"cannot tell whether org_vocab_size can differ from vocab_size in {where} = {unparse(call)}"
            )
        cut = self._config_point(f"{where}.org_vocab_size", [(str(ORG_VOCAB), ORG_VOCAB), (str(self.vocab), None)])
        if cut is None:
            return {}
        self.config_values[f"config.{org}"] = cut
        self.config_reads[org] = cut
        return {"org_vocab_size": cut}

    def _norm_step(self, path, name):
        seed = self._next_seed()
        self.recipe.append(Step(path, name, "norm", {"seed": seed}))
        return self.norm(seed)

    def _int_step(self, path, name, value):
        self.recipe.append(Step(path, name, "int", {"value": value}))
        return value

    def _steps_step(self, path, name, element):
        self.recipe.append(Step(path, name, "steps", {"cls": _qualname(element) if element else None}))
        return StepLayers(self, f"{path}.{name}", element)

    def _steps_view_step(self, owner, path, name, source: str, offset: int):
        """``self.<name> = list(self.<source>.values())`` and its kin: the same layers, never others."""
        layers = self.attribute(owner, source)
        if not isinstance(layers, StepLayers):
            raise CannotBuild(f"cannot build {type(owner).__name__}.{name}: {source} is not a per-step container here")
        kind = "steps_view" if offset == 0 else "steps_slice"
        self.recipe.append(Step(path, name, kind, {"source": f"{path}.{source}", "offset": offset}))
        return layers.view(f"{path}.{name}", offset)

    def _instance_step(self, declared, path, name):
        self.recipe.append(Step(path, name, "instance", {"cls": _qualname(declared)}))
        return self.instance(declared, f"{path}.{name}")

    def _config_step(self, path, name):
        self.recipe.append(Step(path, name, "config", {"values": self.config_reads}))  # filled as it is read
        return FabricatedConfig(self, f"{path}.{name}")

    def draft_to_target(self, path: str, name: str) -> nn.Parameter:
        """``draft_id_to_target_id``: per draft id, the offset to its target id (``target = k + d2t[k]``),
        a sorted random subset of a larger target vocabulary, as EAGLE-3 checkpoints ship it."""
        seed = self._next_seed()
        generator = torch.Generator().manual_seed(seed)
        targets = torch.randperm(TARGET_VOCAB, generator=generator)[: self.vocab].sort().values
        self.target_vocab = TARGET_VOCAB
        self.recipe.append(Step(path, name, "draft_to_target", {"seed": seed}))
        return nn.Parameter(targets - torch.arange(self.vocab), requires_grad=False)

    def token_ids(self, path: str, name: str) -> torch.Tensor:
        """An optional tensor of token ids (``_suppress_idx``): every other id, so it hits argmaxes."""
        self.recipe.append(Step(path, name, "token_ids"))
        return torch.arange(0, self.vocab, 2)

    def config_value(self, path: str, name: str, absent: object = None):
        """A config attribute the methods read: sizes are ours; any other value is a configuration point
        (``absent``, what ``getattr(config, name, absent)`` gives without it, or 2). Every value read is
        kept in ``config_reads`` (the config an emitted test builds)."""
        value = self._config_value(name, absent)
        self.config_reads[name] = value
        return value

    def _config_value(self, name: str, absent: object = None):
        key = f"config.{name}"  # model-wide, whichever module's config reads it
        if key in self.config_values:
            return self.config_values[key]
        if name == "vocab_size":
            return self.target_vocab
        if name.endswith(("eps", "epsilon")):  # rms_norm_eps, hc_eps: a small float, not a configuration point
            return 1e-6
        if name in self.logit_indices:
            return self._config_point(key, self._logit_index_alternatives(name))
        if name.endswith("vocab_size"):
            return self.vocab
        if name == "hidden_size":
            return self.hidden
        if name == "num_hidden_layers":  # where MTP layers start
            return START_LAYER
        if name.startswith("num_") and name.endswith("_layers"):  # num_nextn_predict_layers
            return NUM_STEPS
        return self._config_point(key, self._flag_alternatives(name, absent))

    def _flag_alternatives(self, name: str, absent: object) -> list[tuple[str, object]]:
        """Falsy and truthy (2, also a small size), and each literal a method compares it with, so that
        ``if config.policy == "suppress":`` runs its branch."""
        literals = [value for value in self.compared_literals.get(name, ()) if value != absent]
        truthy = [] if any(literals) else [("2", 2)]
        return [(repr(absent), absent), *truthy, *((_literal_label(value), value) for value in literals)]

    def _logit_index_alternatives(self, name: str) -> list[tuple[str, object]]:
        """An integer that indexes or slices the logits is also tried inside the vocabulary: set to the
        vocabulary size, ``logits[..., n:] = -inf`` masks nothing, and a method ignoring it passes."""
        inside = self.vocab // 2
        if name.endswith("vocab_size"):
            return [(str(self.vocab), self.vocab), (str(inside), inside)]
        return [("None", None), ("2", 2), (str(inside), inside)]

    def _config_point(self, key: str, alternatives: list[tuple[str, object]]):
        """A config value with alternatives: a configuration point, model-wide."""
        self.points[key] = [label for label, _ in alternatives]
        value = alternatives[self.choices.get(key, 0)][1]
        self.config_values[key] = value
        return value

    def constructed(self, cls: type, path: str, name: str) -> nn.Module:
        """A module whose ``__init__`` takes only sizes: built by it, with our sizes, then every
        weight drawn from the seed and every integer buffer made a permutation (an ordering)."""
        kwargs = {param: self._size(param, kind) for param, kind in _scalar_init(cls).items()}
        seed = self._next_seed()
        self.recipe.append(Step(path, name, "constructed", {"cls": _qualname(cls), "kwargs": kwargs, "seed": seed}))
        module = cls(**kwargs)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for tensor in [*module.parameters(), *module.buffers()]:
                if tensor.is_floating_point():
                    tensor.copy_(torch.randn(tensor.shape, generator=generator) / self.hidden**0.5)
                else:
                    tensor.copy_(torch.randperm(tensor.numel(), generator=generator).view(tensor.shape))
        self.paths[id(module)] = f"{path}.{name}"
        return module.to(self.dtype) if self.dtype.is_floating_point else module

    def _size(self, param: str, kind: type):
        if kind is bool:
            return False
        if kind is float:
            return 1e-6
        if param.endswith("hidden_size"):
            return self.hidden
        if param.endswith("vocab_size"):
            return self.vocab
        return 16 if param.startswith("num_") else 4  # 16 divides VOCAB: clusters of equal size

    def head(self, seed: int, cls: type = ParallelLMHead) -> VocabParallelEmbedding:
        head = cls(self.vocab, self.hidden, params_dtype=self.dtype)
        weight = head_weight(self.vocab, self.hidden, seed, self.dtype, self.head_override)
        with torch.no_grad():
            head.weight.zero_()  # padding rows stay zero
        head.weight_loader(head.weight, weight)
        with portable_cpu_gemm():
            head.quant_method.process_weights_after_loading(head)
        # every rank loaded its shard of this one matrix: it is the head's weight gathered across TP ranks
        self.head_weights[storage(head.weight)] = weight
        return head

    def norm(self, seed: int) -> RMSNorm:
        norm = RMSNorm(self.hidden, eps=1e-6).to(self.dtype)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            norm.weight.copy_(0.5 + torch.rand(self.hidden, generator=generator))
        return norm


def _literal_label(value: object) -> str:
    """How a configuration names a literal: ``'suppress'``, ``Mode.FAST``."""
    return f"{type(value).__name__}.{value.name}" if isinstance(value, enum.Enum) else repr(value)


def storage(tensor: torch.Tensor) -> int | None:
    """Where a tensor's values live: a view of a head's weight (``weight.t()``) is that head."""
    try:
        return tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # a tensor without storage (a subclass, a meta tensor)
        return None


class PortableForward:
    """A custom op's forward: the implementation vLLM dispatched to here, or, where that one needs a
    kernel this machine lacks (a compiled op, TileLang), the first of the op's own other
    implementations that runs (``forward_native`` first; Triton runs in its interpreter on a
    CPU). The choice is kept, so both methods run the same one; the fabricator notes it."""

    OTHERS = ("forward_native", "forward_cuda", "forward_hip", "forward_xpu", "forward_cpu", "forward_tpu")
    UNAVAILABLE = (NotImplementedError, ImportError, AttributeError, RuntimeError)

    def __init__(self, op: CustomOp, fabricator: Fabricator):
        self.op = op
        self.fabricator = fabricator
        self.dispatched = op._forward_method
        self.chosen = None

    def _candidates(self) -> list:
        out = [self.dispatched]
        for name in self.OTHERS:
            defined = next((klass for klass in type(self.op).__mro__ if name in klass.__dict__), None)
            if defined is not None and defined is not CustomOp:  # CustomOp's own forwards only delegate
                method = getattr(self.op, name)
                if getattr(method, "__func__", None) is not getattr(self.dispatched, "__func__", self.dispatched):
                    out.append(method)
        return out

    def __call__(self, *args, **kwargs):
        if self.chosen is not None:
            return self.chosen(*args, **kwargs)
        failures = []
        for implementation in self._candidates():
            try:
                out = implementation(*args, **kwargs)
            except self.UNAVAILABLE as error:
                message = str(error).strip().splitlines()[0][:120] if str(error).strip() else ""
                failures.append(f"{_name(implementation)}: {type(error).__name__}: {message}")
                continue
            self.chosen = implementation
            if implementation is not self.dispatched:
                note = f"custom op {type(self.op).__name__} ran its {_name(implementation)} ({'; '.join(failures)})"
                if note not in self.fabricator.notes:
                    self.fabricator.notes.append(note)
            return out
        raise CannotBuild(f"custom op {type(self.op).__name__}: no implementation runs here ({'; '.join(failures)})")


def _name(implementation) -> str:
    return getattr(implementation, "__name__", type(implementation).__name__)


class _InitEvaluator:
    """Evaluates one right-hand side of an ``__init__`` (see ``_evaluable`` for what it may hold)."""

    def __init__(
        self, fabricator: Fabricator, owner: object, path: str, namespace: dict, seed: int, local_values: dict
    ):
        self.fabricator, self.owner, self.path, self.namespace = fabricator, owner, path, namespace
        self.local_values = local_values  # ``name = <expression>`` of the same __init__
        self.generator = torch.Generator().manual_seed(seed)
        self.dtypes: list[str] = []  # of each tensor made: its dtype as code (``dtype``: the case's)

    def evaluate(self, node: ast.expr):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.evaluate(element) for element in node.elts)
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self.evaluate(node.left), self.evaluate(node.right))
        if isinstance(node, ast.Name):
            if CONFIG_NAME.fullmatch(node.id):  # ``config = vllm_config...hf_config`` in the __init__
                return FabricatedConfig(self.fabricator, f"{self.path}.{node.id}")
            if node.id in self.local_values:
                if not _evaluable(self.local_values[node.id]):
                    raise TypeError(f"{node.id} = {unparse(self.local_values[node.id])} runs code")
                return self.evaluate(self.local_values[node.id])
            return self.namespace[node.id]
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                return self.fabricator.attribute(self.owner, node.attr)
            return getattr(self.evaluate(node.value), node.attr)
        if _is_getattr(node):  # ``getattr(config, "x", default)``: the default is the absent attribute
            config = self.evaluate(node.args[0])
            if isinstance(config, FabricatedConfig):
                absent = self.evaluate(node.args[2]) if len(node.args) == 3 else None
                return self.fabricator.config_value(config._path, node.args[1].value, absent)
        if isinstance(node, ast.Call):
            function = self.evaluate(node.func)
            args = [self.evaluate(arg) for arg in node.args]
            kwargs = {keyword.arg: self.evaluate(keyword.value) for keyword in node.keywords}
            if function is nn.Parameter:
                return nn.Parameter(*args, **kwargs)
            return self.tensor(args, kwargs)
        raise TypeError(f"cannot evaluate {unparse(node)}")

    def tensor(self, args: list, kwargs: dict) -> torch.Tensor:
        """``torch.empty(sizes..., dtype=...)`` and its kin: the shape asked for, values from the seed."""
        shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else tuple(args)
        if not all(isinstance(size, int) for size in shape):
            raise TypeError(f"sizes {shape!r} are not all integers")
        dtype = kwargs.get("dtype") or self.fabricator.dtype
        self.dtypes.append(str(kwargs["dtype"]) if kwargs.get("dtype") else "dtype")
        values = torch.randn(shape, generator=self.generator)
        if not dtype.is_floating_point:
            return torch.randperm(math.prod(shape), generator=self.generator).view(shape).to(dtype)
        return values.to(dtype)


_BINARY = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
}
TENSOR_CALLS = {"nn.Parameter", "torch.nn.Parameter", "Parameter", "torch.empty", "torch.zeros", "torch.ones"}
CONFIG_NAME = re.compile(r"\w*config")


def _is_getattr(node: ast.expr) -> bool:
    """``getattr(x, "name")`` or ``getattr(x, "name", default)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "getattr"
        and len(node.args) in (2, 3)
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _is_none(node: ast.expr) -> bool:
    """``self.x = None``: the optional alternative already builds it."""
    return isinstance(node, ast.Constant) and node.value is None


def _evaluable(node: ast.expr) -> bool:
    """Sizes, config values, ``self`` attributes, arithmetic, and allocating a tensor: nothing that runs
    the model's own code."""
    for child in ast.walk(node):
        if isinstance(child, ast.Call):
            if unparse(child.func) not in TENSOR_CALLS and not _is_getattr(child):
                return False
        elif isinstance(child, ast.BinOp):
            if type(child.op) not in _BINARY:
                return False
        elif not isinstance(
            child, (ast.Constant, ast.Name, ast.Attribute, ast.Tuple, ast.List, ast.keyword, ast.Load, ast.operator)
        ):
            return False
    return True


class FabricatedConfig:
    """A model config whose attributes are answered by the fabricator when read."""

    def __init__(self, fabricator: Fabricator, path: str):
        self._fabricator = fabricator
        self._path = path

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._fabricator.config_value(self._path, name)


@contextlib.contextmanager
def portable_cpu_gemm():
    """On a CPU with AMX, vLLM routes small bf16 GEMMs to its own compiled kernels
    (``torch.ops._C.convert_weight_packed``), which a ``--no-deps`` install lacks; there,
    take the plain torch path vLLM takes on CPUs without AMX (the same logits)."""
    probe = getattr(torch.cpu, "_is_amx_tile_supported", None)
    if probe is None or hasattr(torch.ops._C, "convert_weight_packed"):
        yield
        return
    torch.cpu._is_amx_tile_supported = lambda: False
    try:
        yield
    finally:
        torch.cpu._is_amx_tile_supported = probe


@dataclass(frozen=True)
class HeadRows:
    """An adversarial head: ``ties`` makes two rows equal and dominant; ``negative`` makes every real logit < 0."""

    kind: Literal["ties", "negative"]


def head_weight(vocab: int, hidden: int, seed: int, dtype: torch.dtype, override: HeadRows | None) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randn(vocab, hidden, generator=generator) / hidden**0.5
    if override is not None and override.kind == "ties":
        tied = 8 * torch.ones(hidden) / hidden**0.5
        weight[3] = tied
        weight[vocab - 2] = tied  # in the last shard at TP 2
    elif override is not None and override.kind == "negative":
        weight = -3 * torch.ones(vocab, hidden) / hidden**0.5 + 0.1 * weight
    return weight.to(dtype)


class StepLayers(nn.Module):
    """A per-step layer container reached by ``[str(start + step)]`` or ``[step]``: in the one form its first
    reader (compute_logits, which runs first) uses. A real container keys its layers one way (a ModuleDict
    by ``str(start + i)``, a list by position), so a method reading another form (``[str(step)]``, an int
    key into string keys) raises there: here it raises KeyError too, and a mirror doing so mismatches."""

    def __init__(self, fabricator: Fabricator, path: str, element: type | None):
        super().__init__()
        self._fabricator = fabricator
        self._path = path
        self._element = element
        self._made: dict[int, nn.Module] = {}
        self._offset = 0  # a view's element i is element i + offset of the container it views
        self._form: tuple[bool, bool] | None = None  # (keys are strings, keys start at START_LAYER), once read

    def view(self, path: str, offset: int) -> StepLayers:
        """Another name for these layers (``list(self.layers.values())[offset:]``): the same instances."""
        alias = StepLayers(self._fabricator, path, self._element)
        alias._made = self._made
        alias._offset = self._offset + offset
        alias._form = (False, False)  # a list of the values: by position
        return alias

    def _index(self, key) -> int:
        index = int(key)
        form = (isinstance(key, str), index >= START_LAYER)
        if self._form is None:
            self._form = form
        elif form != self._form:
            first = ("start + " if self._form[1] else "") + "step"
            first = f"str({first})" if self._form[0] else first
            raise KeyError(f"{self._path}[{key!r}]: its layers are reached as [{first}] (the first read's form)")
        return index - START_LAYER if form[1] else index

    def __getitem__(self, key) -> nn.Module:
        index = self._index(key) + self._offset
        if not 0 <= index < NUM_STEPS:
            raise OutsideSteps(f"{self._path}[{key!r}] is outside the {NUM_STEPS} fabricated steps")
        if index not in self._made:
            if self._element is None:
                raise CannotBuild(f"cannot tell which layer class {self._path} holds")
            self._fabricator.recipe.append(Step(self._path, str(index), "element", {"cls": _qualname(self._element)}))
            self._made[index] = self._fabricator.instance(self._element, f"{self._path}[{index}]")
        return self._made[index]

    def __len__(self) -> int:
        return NUM_STEPS - self._offset


_ASSIGN = r"self\.{name}\s*(?::[^=\n]+)?=\s*(.*)"


@functools.cache  # inspect.getsource re-parses the whole module: once per class
def _class_source(klass: type) -> str | None:
    """A class's source text; None where it is not there to read (built at run time, a C extension)."""
    try:
        return inspect.getsource(klass)
    except (OSError, TypeError):
        return None


def _namespace(klass: type) -> dict:
    """The namespace of the module that defines ``klass`` (what its source's names mean)."""
    module = sys.modules.get(klass.__module__)
    return vars(module) if module else {}


def _own_inits(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The ``__init__`` written in the body of the class a class's parsed source holds."""
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    return [d for d in body if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == "__init__"]


@functools.cache
def _init_sources(cls: type) -> list[tuple[str, dict]]:
    """Source text and module namespace of each class whose ``__init__`` runs when ``cls`` is built
    (decorators may wrap ``__init__``)."""
    return [(source, _namespace(klass)) for klass in _inits_run(cls) if (source := _class_source(klass)) is not None]


@functools.cache
def _inits_run(cls: type) -> tuple[type, ...]:
    """The classes of the MRO whose ``__init__`` may run when ``cls`` is built, in MRO order: the first that
    defines one, then those each of them may call (``_base_inits_called``). An ``__init__`` that calls only
    torch's (``nn.Module.__init__(self)``) ends its path: what its bases' ``__init__`` would set is never set,
    so it is no configuration to build."""
    mro = _own_classes(cls)
    first = next((klass for klass in mro if "__init__" in klass.__dict__), None)
    reached: set[type] = set()
    pending = [first] if first is not None else []
    while pending:
        klass = pending.pop()
        if klass in reached:
            continue
        reached.add(klass)
        for start in _base_inits_called(klass, mro):  # the first class from there on that defines one runs
            pending.extend(next(([k] for k in mro[mro.index(start) :] if "__init__" in k.__dict__), []))
    return tuple(klass for klass in mro if klass in reached)


def _base_inits_called(klass: type, mro: list[type]) -> list[type]:
    """Where the ``__init__`` chain may go on from ``klass``'s: the class of each ``Base.__init__(self, ...)``
    the class calls (anywhere in it: a helper may), the next class of the MRO for ``super().__init__`` or
    ``super(X, self).__init__`` (and for a class whose ``__init__`` is written elsewhere: a decorator's,
    ``typing.Protocol``'s, or calls none, or whose source is not there to read), and nothing for a call of
    torch's own ``__init__``. More paths than Python takes where it cannot tell: more configurations, never
    fewer."""
    after = mro[mro.index(klass) + 1 :]
    following = after[:1]
    source = _class_source(klass)
    try:
        tree = _parsed(source) if source is not None else None
    except SyntaxError:
        return following
    if tree is None or not _own_inits(tree):
        return following
    namespace = _namespace(klass)
    called: list[type] = []
    calls = False
    for node in ast.walk(tree):
        match node:
            case ast.Call(func=ast.Attribute(value=ast.Call(func=ast.Name(id="super")), attr="__init__")):
                calls = True
                called.extend(following)
            case ast.Call(func=ast.Attribute(value=initialised, attr="__init__")):
                calls = True
                found = _lookup(unparse(initialised), namespace)
                if isinstance(found, type) and found.__module__.startswith("torch."):
                    continue
                called.extend([found] if found in after else following)
    return called if calls else following


@functools.cache
def _sources_as_run(cls: type) -> list[str]:
    """``_class_sources``, with each ``__init__`` that never runs when ``cls`` is built blanked out (a base
    whose ``__init__`` the subclass's does not call): what may set an attribute of an instance of ``cls``."""
    running = _inits_run(cls)
    return [
        _without_init(source) if "__init__" in klass.__dict__ and klass not in running else source
        for klass in _own_classes(cls)
        if (source := _class_source(klass)) is not None
    ]


def _without_init(source: str) -> str:
    """A class's source with its ``__init__`` (decorators included) blanked, line numbers kept."""
    lines = textwrap.dedent(source).splitlines(keepends=True)  # ``_parsed`` dedents: the same line numbers
    for definition in _own_inits(_parsed(source)):
        first = min([definition.lineno, *(d.lineno for d in definition.decorator_list)])
        for index in range(first - 1, definition.end_lineno):
            lines[index] = "\n"
    return "".join(lines)


def _own_classes(cls: type) -> list[type]:
    """The MRO below ``nn.Module``: torch's own classes and ``object`` left out."""
    return [klass for klass in cls.__mro__ if klass is not object and not klass.__module__.startswith("torch.")]


@functools.cache
def _class_sources(cls: type) -> list[str]:
    """Source text of every class in the MRO below ``nn.Module`` (any method may set an attribute)."""
    return [source for klass in _own_classes(cls) if (source := _class_source(klass)) is not None]


LOGIT_METHODS = ("compute_logits", "get_top_tokens")


@functools.cache
def _config_logit_indices(cls: type) -> frozenset[str]:
    """Config attributes that the MRO's compute_logits or get_top_tokens uses inside a subscript
    (``logits[..., self.config.n :]``), directly or through a local name assigned from it: values worth
    trying inside the vocabulary. Not ``vocab_size`` nor one the ``__init__`` that runs sizes a head with
    (``ParallelLMHead(config.draft_vocab_size, ...)``): that is the head's own rows, built here as ours."""
    found: set[str] = set()
    for source in _class_sources(cls):
        for method in ast.walk(_parsed(source)):
            if isinstance(method, ast.FunctionDef) and method.name in LOGIT_METHODS:
                found |= _subscript_config_reads(method)
    return frozenset(found - {"vocab_size"} - _config_head_sizes(cls))


def _config_head_sizes(cls: type) -> frozenset[str]:
    """Config attributes that give a head its rows in the ``__init__`` that runs: the first argument
    (``num_embeddings``) of a ``ParallelLMHead`` it builds, or of a ``VocabParallelEmbedding`` it assigns to
    a head's name (``self.lm_head = VocabParallelEmbedding(...)``); not an input embedding's."""
    found: set[str] = set()
    for source, namespace in _init_sources(cls):
        for init in ast.walk(_parsed(source)):
            if not (isinstance(init, ast.FunctionDef) and init.name == "__init__"):
                continue
            local_values = _local_values(init)
            for statement in ast.walk(init):
                if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or not isinstance(statement.value, ast.Call):
                    continue
                call = statement.value
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                built = _lookup(unparse(call.func), namespace)
                if not isinstance(built, type) or not (
                    issubclass(built, ParallelLMHead)
                    or issubclass(built, VocabParallelEmbedding)
                    and any(self_attribute(target) in HEADS for target in targets)
                ):
                    continue
                rows = (
                    call.args[0]
                    if call.args
                    else next((k.value for k in call.keywords if k.arg == "num_embeddings"), None)
                )
                attribute = _config_attribute(cls, rows, local_values) if rows is not None else None
                if attribute is not None:
                    found.add(attribute)
    return frozenset(found)


def _config_aliases(function: ast.FunctionDef) -> dict[str, str]:
    """Local names assigned one config read (``n = self.config.X``): name -> X."""
    aliases: dict[str, str] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            read = CONFIG_READ.fullmatch(unparse(node.value))
            if read:
                aliases[node.targets[0].id] = read.group(1) or read.group(2)
    return aliases


def _config_read(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """The config attribute ``node`` is: ``self.config.X``, ``getattr(config, "X", d)`` or a local alias of one."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id)
    read = CONFIG_READ.fullmatch(unparse(node)) if isinstance(node, (ast.Attribute, ast.Call)) else None
    return (read.group(1) or read.group(2)) if read else None


COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


@functools.cache
def _config_literals(cls: type) -> dict[str, tuple]:
    """Config attributes that any method of the MRO compares with literals (``config.policy == "suppress"``,
    ``in ("a", "b")``, ``is Mode.FAST``): attribute -> those literals, each a value to try so the branch runs."""
    found: dict[str, list] = {}
    for klass in _own_classes(cls):
        source = _class_source(klass)
        if source is None:
            continue
        tree = _parsed(source)
        namespace = _namespace(klass)
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef):
                continue
            aliases = _config_aliases(function)
            for compare in ast.walk(function):
                if not (isinstance(compare, ast.Compare) and len(compare.ops) == 1):
                    continue
                if not isinstance(compare.ops[0], COMPARISONS):
                    continue
                for read_side, literal_side in (
                    (compare.left, compare.comparators[0]),
                    (compare.comparators[0], compare.left),
                ):
                    name = _config_read(read_side, aliases)
                    literals = _literals(literal_side, namespace)
                    if name is not None and literals:
                        found.setdefault(name, [])
                        found[name] += [value for value in literals if value not in found[name]]
    return {name: tuple(values) for name, values in found.items()}


def _literals(node: ast.expr, namespace: dict) -> list:
    """The values a literal side of a comparison names: a constant, an enum member, or a tuple/list/set of them."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        values = [_literals(element, namespace) for element in node.elts]
        return [value for found in values for value in found] if all(values) else []
    if isinstance(node, ast.Constant) and node.value is not None:
        return [node.value]
    if isinstance(node, ast.Attribute):
        member = _lookup(unparse(node), namespace)
        return [member] if isinstance(member, enum.Enum) else []
    return []


def config_branches(function: ast.FunctionDef) -> list[tuple[ast.If, str]]:
    """``if`` statements of ``function`` whose test reads a config value, with the attribute read."""
    aliases = _config_aliases(function)
    out = []
    for node in ast.walk(function):
        if isinstance(node, ast.If):
            reads = [name for inner in ast.walk(node.test) if (name := _config_read(inner, aliases))]
            if reads:
                out.append((node, reads[0]))
    return out


def _subscript_config_reads(method: ast.FunctionDef) -> set[str]:
    """``config.X`` read in a subscript of ``method``, or through ``n = self.config.X`` then ``[..., n:]``."""
    aliases = _config_aliases(method)
    found: set[str] = set()
    for node in ast.walk(method):
        if not isinstance(node, ast.Subscript):
            continue
        for inner in ast.walk(node.slice):
            read = CONFIG_READ.fullmatch(unparse(inner)) if isinstance(inner, (ast.Attribute, ast.Call)) else None
            if read:
                found.add(read.group(1) or read.group(2))
            elif isinstance(inner, ast.Name) and inner.id in aliases:
                found.add(aliases[inner.id])
    return found


def _assigned_values(cls: type, name: str, as_run: bool = True) -> list[str]:
    """The right-hand sides of ``self.<name> = ...`` in the class and its bases, first line each (``as_run``:
    not in an ``__init__`` that never runs for ``cls``)."""
    pattern = re.compile(_ASSIGN.format(name=re.escape(name)))
    sources = _sources_as_run(cls) if as_run else _class_sources(cls)
    return [match.group(1).strip() for source in sources for match in pattern.finditer(source)]


def _annotation(cls: type, name: str) -> str | None:
    """``self.<name>: T = ...`` or a class-level ``<name>: T``, as text (not in an ``__init__`` that never runs)."""
    pattern = re.compile(rf"(?:self\.|^\s+){re.escape(name)}\s*:\s*([^=\n]+)", re.MULTILINE)
    for source in _sources_as_run(cls):
        match = pattern.search(source)
        if match:
            return match.group(1).strip()
    return None


_PROCESSOR_SIGNATURE = inspect.signature(LogitsProcessor.__init__)


def _processor_class(call: ast.Call, namespace: dict, statement: str) -> type:
    """The class an ``__init__`` builds its processor with: LogitsProcessor, or a subclass that keeps its
    constructor (its overrides then run as vLLM runs them). Anything else would be a stand-in: refused."""
    callee = _lookup(unparse(call.func), namespace)
    if not (isinstance(callee, type) and issubclass(callee, LogitsProcessor)):
        raise CannotBuild(f"cannot build {statement}: {unparse(call.func)} is not a LogitsProcessor class here")
    if inspect.signature(callee.__init__) != _PROCESSOR_SIGNATURE:
        raise CannotBuild(
            f"cannot build {statement}: the processor class {callee.__name__} takes other arguments "
            "than LogitsProcessor"
        )
    return callee


def _config_attribute(cls: type, node: ast.expr, local_values: dict, depth: int = 0) -> str | None:
    """The config attribute an ``__init__`` expression reads (``config.vocab_size``, through a local name
    or ``self.unpadded_vocab_size = config.vocab_size``); None when it is not one plain read."""
    read = CONFIG_READ.fullmatch(unparse(node))
    if read:
        return read.group(1) or read.group(2)
    if depth > 4:
        return None
    if isinstance(node, ast.Name) and node.id in local_values:
        return _config_attribute(cls, local_values[node.id], local_values, depth + 1)
    if (attribute := self_attribute(node)) is not None:
        found = _init_expression(cls, attribute)
        return _config_attribute(cls, found[0], found[2], depth + 1) if found else None
    return None


def _local_values(function: ast.FunctionDef) -> dict[str, ast.expr]:
    """``name = <expression>`` statements of an ``__init__`` (the first of each name)."""
    out: dict[str, ast.expr] = {}
    for statement in ast.walk(function):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Name):
                out.setdefault(target.id, statement.value)
    return out


def _init_expression(cls: type, name: str) -> tuple[ast.expr, dict, dict[str, ast.expr]] | None:
    """The whole right-hand side of ``self.<name> = ...`` in an ``__init__`` of the MRO, its module namespace
    and the local names that ``__init__`` assigns."""
    for source, namespace in _init_sources(cls):
        for node in ast.walk(_parsed(source)):
            if not isinstance(node, ast.FunctionDef) or node.name != "__init__":
                continue
            for statement in ast.walk(node):
                targets = (
                    statement.targets
                    if isinstance(statement, ast.Assign)
                    else [statement.target]
                    if isinstance(statement, ast.AnnAssign) and statement.value
                    else []
                )
                for target in targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr == name
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        return statement.value, namespace, _local_values(node)
    return None


@functools.cache
def _parsed(source: str) -> ast.Module:
    return ast.parse(textwrap.dedent(source))


def _constructible(cls: type) -> bool:
    """Its ``__init__`` needs no argument (a custom op built from nothing but the current config)."""
    try:
        parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    except (TypeError, ValueError):
        return False
    return all(p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters)


def _scalar_init(cls: type) -> dict[str, type]:
    """``__init__``'s parameters when every one is an int, float or bool (a module built from sizes), else {}."""
    init = cls.__dict__.get("__init__")
    if init is None:
        return {}
    try:
        hints = inspect.signature(init).parameters
    except (TypeError, ValueError):
        return {}
    kinds = {"int": int, "float": float, "bool": bool, int: int, float: float, bool: bool}
    out = {}
    for param in list(hints.values())[1:]:
        kind = kinds.get(param.annotation)
        if kind is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            return {}
        out[param.name] = kind
    return out


def _declared_class(cls: type, name: str) -> type | None:
    """The class that ``__init__`` assigns to ``self.<name>`` (``self.x = Callee(...)``)."""
    for source, namespace in _init_sources(cls):
        for match in re.finditer(_ASSIGN.format(name=re.escape(name)), source):
            callee = re.match(r"([A-Za-z_][\w.]*)\s*\(", match.group(1))
            found = _lookup(callee.group(1), namespace) if callee else None
            if isinstance(found, type):
                return found
    return None


def _container_element(cls: type, name: str) -> type | None:
    """The module class built inside ``self.<name> = nn.ModuleDict({...: Layer(...)})``."""
    for source, namespace in _init_sources(cls):
        start = re.search(_ASSIGN.format(name=re.escape(name)), source)
        if not start:
            continue
        text = source[start.start(1) : start.start(1) + 800]
        for callee in re.findall(r"([A-Z][\w.]*)\s*\(", text):
            found = _lookup(callee, namespace)
            if isinstance(found, type) and issubclass(found, nn.Module) and found not in (nn.ModuleDict, nn.ModuleList):
                return found
    return None


def _container_view(cls: type, name: str) -> tuple[str, int] | None:
    """``self.<name>`` as a view of a per-step container of the same ``__init__``: that container's name and
    the view's offset into it. None when the right-hand side names no container; an expression over one
    that is not a view read here is refused, naming it, rather than built as other layers."""
    found = _init_expression(cls, name)
    if found is None:
        return None
    node = found[0]
    sources = {attribute for child in ast.walk(node) if (attribute := self_attribute(child)) in CONTAINERS} - {name}
    if not sources:
        return None
    view = _view_of(node, cls)
    if view is None:
        raise CannotBuild(
            f"cannot build {cls.__name__}.{name} = {unparse(node)}: "
            f"not a view of {', '.join(sorted(sources))} read here"
        )
    return view


def _view_of(node: ast.expr, cls: type) -> tuple[str, int] | None:
    """``self.X``, ``self.X.values()``, ``list(...)``/``tuple(...)`` of a view of a ``ModuleDict``'s values or
    of a ``ModuleList``, ``{k: v for k, v in self.X.items()}``, and a constant slice of a list view."""
    match node:
        case ast.Attribute(value=ast.Name(id="self"), attr=source):
            return source, 0
        case ast.Call(
            func=ast.Attribute(value=ast.Attribute(value=ast.Name(id="self"), attr=source), attr="values"), args=[]
        ):
            return source, 0
        case ast.Call(func=ast.Name(id="list" | "tuple"), args=[ast.Call() as inner], keywords=[]):
            return _view_of(inner, cls)
        case ast.Call(
            func=ast.Name(id="list" | "tuple"),
            args=[ast.Attribute(value=ast.Name(id="self"), attr=source)],
            keywords=[],
        ):
            return (source, 0) if _is_module_list(cls, source) else None
        case ast.DictComp(
            key=ast.Name(id=key),
            value=ast.Name(id=value),
            generators=[
                ast.comprehension(
                    target=ast.Tuple(elts=[ast.Name(id=key_target), ast.Name(id=value_target)]),
                    iter=ast.Call(
                        func=ast.Attribute(value=ast.Attribute(value=ast.Name(id="self"), attr=source), attr="items")
                    ),
                    ifs=[],
                )
            ],
        ) if (key, value) == (key_target, value_target):
            return source, 0
        case ast.Subscript(value=sequence, slice=ast.Slice(lower=lower, upper=None, step=None)) if _is_list_view(
            sequence, cls
        ):
            start = 0 if lower is None else lower.value if isinstance(lower, ast.Constant) else None
            view = _view_of(sequence, cls)
            return (view[0], view[1] + start) if view and isinstance(start, int) else None
    return None


def _is_list_view(node: ast.expr, cls: type) -> bool:
    """A view that slicing keeps in step order: a ``list(...)`` or ``tuple(...)`` view, or a ``ModuleList``."""
    match node:
        case ast.Call(func=ast.Name(id="list" | "tuple")):
            return True
        case ast.Attribute(value=ast.Name(id="self"), attr=source):
            return _is_module_list(cls, source)
    return False


def _is_module_list(cls: type, name: str) -> bool:
    """``self.<name> = nn.ModuleList(...)``: iterating it gives its layers (a ``ModuleDict`` gives its keys)."""
    found = _init_expression(cls, name)
    return found is not None and isinstance(found[0], ast.Call) and unparse(found[0].func).endswith("ModuleList")


def _lookup(dotted: str, namespace: dict):
    parts = dotted.split(".")
    value = namespace.get(parts[0])
    for part in parts[1:]:
        value = getattr(value, part, None)
    return value


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
