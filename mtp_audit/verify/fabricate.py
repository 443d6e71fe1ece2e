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
  ``mtp_start_layer_idx``).

Anything else is refused with the owner and attribute named: the drafter is
then reported as not verified, never as passing. Every attribute made is
recorded as a recipe, which ``--emit-test`` turns back into code.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import sys
from dataclasses import dataclass, field

import torch
from torch import nn

from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.layers.vocab_parallel_embedding import ParallelLMHead

from .constants import NUM_STEPS, START_LAYER

CONTAINERS = ("layers", "mtp_layers", "_mtp_layers")
HEADS = ("lm_head", "head")
NORM = re.compile(r"(^|_)(norm|layernorm|ln)$|norm$")


class CannotBuild(Exception):
    """The harness cannot make something a method needs: not verified."""


@dataclass
class Step:
    """One recipe line: ``path.attr = kind(args)``."""

    path: str
    attr: str
    kind: str  # "head", "norm", "logits_processor", "int", "instance", "steps", "element"
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

    def instance(self, cls: type, path: str = "model") -> nn.Module:
        obj = object.__new__(cls)  # not cls.__new__: mixins (SupportsQuant) run config lookups there
        nn.Module.__init__(obj)
        self.paths[id(obj)] = path
        return obj

    def call(self, obj: object, method: str, *args, **kwargs):
        for _ in range(64):
            try:
                return getattr(obj, method)(*args, **kwargs)
            except AttributeError as error:
                owner, name = getattr(error, "obj", None), getattr(error, "name", None)
                if owner is None or name is None or id(owner) not in self.paths:
                    raise CannotBuild(f"{method} raised AttributeError: {error}") from None
                setattr(owner, name, self.make(owner, name))
        raise CannotBuild(f"{method} still needs more attributes after 64 were built")

    def _next_seed(self) -> int:
        self.counter += 1
        return self.seed * 1000 + self.counter

    def make(self, owner: object, name: str):
        path = self.paths[id(owner)]
        declared = _declared_class(type(owner), name)
        if name in HEADS or (declared is not None and issubclass(declared, ParallelLMHead)):
            seed = self._next_seed()
            self.recipe.append(Step(path, name, "head", {"seed": seed}))
            return self.head(seed)
        if name == "logits_processor" or (declared is not None and issubclass(declared, LogitsProcessor)):
            self.recipe.append(Step(path, name, "logits_processor"))
            return LogitsProcessor(self.vocab)
        if NORM.search(name) or (declared is not None and issubclass(declared, RMSNorm)):
            seed = self._next_seed()
            self.recipe.append(Step(path, name, "norm", {"seed": seed}))
            return self.norm(seed)
        if name == "num_mtp_layers":
            self.recipe.append(Step(path, name, "int", {"value": NUM_STEPS}))
            return NUM_STEPS
        if name == "mtp_start_layer_idx":
            self.recipe.append(Step(path, name, "int", {"value": START_LAYER}))
            return START_LAYER
        if name in CONTAINERS:
            element = _container_element(type(owner), name)
            self.recipe.append(Step(path, name, "steps", {"cls": _qualname(element) if element else None}))
            return StepLayers(self, f"{path}.{name}", element)
        if declared is not None and issubclass(declared, nn.Module):
            self.recipe.append(Step(path, name, "instance", {"cls": _qualname(declared)}))
            return self.instance(declared, f"{path}.{name}")
        raise CannotBuild(f"cannot build {type(owner).__name__}.{name} (read at {path}.{name})")

    def head(self, seed: int) -> ParallelLMHead:
        head = ParallelLMHead(self.vocab, self.hidden, params_dtype=self.dtype)
        weight = head_weight(self.vocab, self.hidden, seed, self.dtype, self.head_override)
        with torch.no_grad():
            head.weight.zero_()  # padding rows stay zero
        head.weight_loader(head.weight, weight)
        with portable_cpu_gemm():
            head.quant_method.process_weights_after_loading(head)
        return head

    def norm(self, seed: int) -> RMSNorm:
        norm = RMSNorm(self.hidden, eps=1e-6).to(self.dtype)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            norm.weight.copy_(0.5 + torch.rand(self.hidden, generator=generator))
        return norm


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

    kind: str


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
    """A per-step layer container reached by ``[str(start + step)]`` or ``[step]``."""

    def __init__(self, fabricator: Fabricator, path: str, element: type | None):
        super().__init__()
        self._fabricator = fabricator
        self._path = path
        self._element = element
        self._made: dict[int, nn.Module] = {}

    def _index(self, key) -> int:
        index = int(key)
        return index - START_LAYER if index >= START_LAYER else index

    def __getitem__(self, key) -> nn.Module:
        index = self._index(key)
        if not 0 <= index < NUM_STEPS:
            raise CannotBuild(f"{self._path}[{key!r}] is outside the {NUM_STEPS} fabricated steps")
        if index not in self._made:
            if self._element is None:
                raise CannotBuild(f"cannot tell which layer class {self._path} holds")
            self._fabricator.recipe.append(Step(self._path, str(index), "element", {"cls": _qualname(self._element)}))
            self._made[index] = self._fabricator.instance(self._element, f"{self._path}[{index}]")
        return self._made[index]

    def __len__(self) -> int:
        return NUM_STEPS


_ASSIGN = r"self\.{name}\s*(?::[^=\n]+)?=\s*(.*)"


def _init_sources(cls: type) -> list[tuple[str, dict]]:
    """Source text and module namespace of each class in the MRO (decorators may wrap ``__init__``)."""
    out = []
    for klass in cls.__mro__:
        if klass in (nn.Module, object) or "__init__" not in klass.__dict__:
            continue
        module = sys.modules.get(klass.__module__)
        try:
            out.append((inspect.getsource(klass), vars(module) if module else {}))
        except (OSError, TypeError):
            continue
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
        text = source[start.start(1):start.start(1) + 800]
        for callee in re.findall(r"([A-Z][\w.]*)\s*\(", text):
            found = _lookup(callee, namespace)
            if isinstance(found, type) and issubclass(found, nn.Module) and found not in (nn.ModuleDict, nn.ModuleList):
                return found
    return None


def _lookup(dotted: str, namespace: dict):
    parts = dotted.split(".")
    value = namespace.get(parts[0])
    for part in parts[1:]:
        value = getattr(value, part, None)
    return value


def _qualname(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"
