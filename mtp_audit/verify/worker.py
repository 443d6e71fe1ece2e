"""The verify worker: one process per TP rank, importing the real vLLM code.

Run by ``mtp-audit verify`` (never imported by scan or fix) as
``python -m mtp_audit.verify.worker PLAN.json RANK WORLD PORT OUT.json``.
For every target class and case it calls ``compute_logits`` and
``get_top_tokens`` on the same inputs and records, per row, whether
``get_top_tokens`` selected ``compute_logits(...).argmax(-1)``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import re
import sys
import textwrap
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import torch  # noqa: E402

if not torch.cuda.is_available() and os.environ["VLLM_TARGET_DEVICE"] == "cpu":
    # vLLM keeps the real Triton only with exactly one active GPU driver, or with none in a
    # distributed worker (CUDA_VISIBLE_DEVICES empty); otherwise it installs a placeholder, and
    # modules that read triton.runtime at import fail. Kernels are compiled only when launched.
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    # Without a GPU, Triton kernels (vLLM's fused norms, its Triton implementations of custom ops)
    # run in Triton's own interpreter on CPU tensors: the kernel's code, not a stand-in.
    os.environ.setdefault("TRITON_INTERPRET", "1")

from .arguments import CallArgument, CallEnvironment  # noqa: E402
from .constants import (  # noqa: E402
    FOREIGN_VLLM_EXIT,
    HIDDEN,
    MAX_RUNS,
    MAX_VARIANTS,
    NOT_RUN_AS_CALLED,
    NUM_STEPS,
    STEPS_TRIED,
    VOCAB,
)


def torchvision_without_its_ops():
    """Let torchvision's Python parts import where its C++ ops cannot load.

    PyPI has no CPU build of torchvision for a given torch: its Linux wheel's ops link
    the CUDA torch libraries, so under a CPU torch they fail to load, and importing
    torchvision then fails registering fake kernels for ``torchvision::nms`` and
    ``qnms``, which do not exist (transformers' image processors import it). Declaring
    those two schemas, with no kernel, lets it import; calling them fails naming the op.
    The returned library must stay alive while torchvision is in use.
    """
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return None
    for library in Path(spec.origin).parent.glob("_C*.so"):
        try:
            torch.ops.load_library(str(library))
            return None
        except OSError:
            break
    declared = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        declared.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    return declared


BATCHES = (1, 7, 65)
INTERPRETED_LARGE_BATCH_CASES = ("random",)  # see run_variant
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _cases() -> list[tuple[str, object, float]]:
    from .fabricate import HeadRows

    return [
        ("random", None, 1.0),
        ("ties", HeadRows("ties"), 1.0),
        ("padding", HeadRows("negative"), 1.0),
        ("large", None, 1e4),
        (WINNERS, None, 1.0),
    ]


WINNERS = "winners"  # one row per token id, built to make it the head's winner (see winner_rows)
WINNERS_REACHED = "winners case: at least"
WINNER_STRIDE = 16  # interpreted kernels: every 16th id (65 rows), as the largest batch of the other cases


class HeadInputs(torch.overrides.TorchFunctionMode):
    """Records the first tensor multiplied with a head's weight (``F.linear(x, weight)``, ``x @ weight.t()``):
    the hidden states as the head sees them, after whatever compute_logits does to them first."""

    def __init__(self, heads: dict[int, torch.Tensor]):
        from .fabricate import storage  # bound once: __torch_function__ runs on every torch call

        super().__init__()
        self.heads = heads
        self.storage = storage
        self.seen: tuple[torch.Tensor, torch.Tensor] | None = None

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.seen is None:
            keyed = [(a, self.storage(a)) for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
            heads = [self.heads[key] for _, key in keyed if key in self.heads]
            inputs = [t for t, key in keyed if key not in self.heads]
            if heads and inputs and inputs[0].shape[-1] == heads[0].shape[-1]:
                self.seen = (inputs[0].detach().float().clone(), heads[0])
        return func(*args, **kwargs)


def winner_rows(fabricator, model, form: CallForm, step: int | None, width: int) -> torch.Tensor | None:
    """Row i built from row i of the head compute_logits uses (gathered across TP ranks), so that id i
    wins, and a mask of a fixed id shows: a best effort. A per-coordinate scaling (an RMSNorm's weight)
    between compute_logits' input and the head's is measured on a probe and undone; a row wider than
    the head's (DeepSeek-V4's hc_mult copies) repeats it. None when no head input was seen."""
    from .fabricate import CannotBuild

    probe = _hidden("random", 8, 1.0, fabricator.dtype, seed=101, width=width)
    args, kwargs = form.environment.bind("compute_logits", probe, step)
    mode = HeadInputs(fabricator.head_weights)
    try:
        with torch.no_grad():
            fabricator.call(model, "compute_logits", *args, **kwargs)  # builds what it reads, outside the mode
            with mode:
                fabricator.call(model, "compute_logits", *args, **kwargs)
    except CannotBuild:
        raise
    except Exception:
        return None  # the other cases report what compute_logits raises
    if mode.seen is None:
        return None
    seen, weight = mode.seen
    rows = weight.float()
    if width == rows.shape[-1] and seen.shape == probe.shape:
        rows = rows / _diagonal_gain(probe.float(), seen)
    elif width % rows.shape[-1] == 0:
        rows = rows.repeat(1, width // rows.shape[-1])
    else:
        return None
    return (rows / rows.pow(2).mean(-1, keepdim=True).sqrt()).to(fabricator.dtype)


def _diagonal_gain(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor | float:
    """``after ≈ scale_row * gain * before`` (an RMSNorm: gain its weight): the gain, else 1 (no such map)."""
    ratio = after / before
    ratio = ratio / ratio.abs().mean(-1, keepdim=True)
    gain = ratio.median(0).values
    if not torch.isfinite(gain).all() or (gain <= 0).any():
        return 1.0
    fit = before * gain
    scale = (fit * after).sum(-1, keepdim=True) / (fit * fit).sum(-1, keepdim=True)
    residual = (after - scale * fit).norm() / after.norm()
    return gain if residual < 0.05 else 1.0


def _hidden(case: str, batch: int, scale: float, dtype: torch.dtype, seed: int, width: int = HIDDEN) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if case in ("ties", "padding"):
        h = torch.ones(batch, width) + 0.05 * torch.randn(batch, width, generator=generator)
    else:
        h = torch.randn(batch, width, generator=generator) * scale
    return h.to(dtype)


class RowWidth(Exception):
    """compute_logits reshapes its hidden states to rows of this many values."""

    def __init__(self, width: int):
        super().__init__(width)
        self.width = width


class WidthProbe(torch.Tensor):
    """Hidden states that stop compute_logits at its first ``view(-1, ...)``/``reshape(-1, ...)`` of
    them into rows of another width (DeepSeek-V4 MTP takes (T, hc_mult * D) and views it as
    (T, hc_mult, D)): the width the model's own code expects. Tensors derived from it are plain."""

    RESHAPES = (torch.Tensor.view, torch.Tensor.reshape, torch.reshape)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in cls.RESHAPES and args and type(args[0]) is cls:
            sizes = args[1:] if func is not torch.reshape else args[1:2]
            sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, torch.Size)) else sizes
            sizes = sizes or tuple(kwargs.get("size") or kwargs.get("shape") or ())
            if len(sizes) > 1 and sizes[0] == -1 and all(isinstance(s, int) and s > 0 for s in sizes[1:]):
                width = math.prod(sizes[1:])
                if width != args[0].shape[-1]:
                    raise RowWidth(width)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)


def hidden_width(fabricator, model, form: CallForm, step: int | None) -> int:
    """The row width compute_logits expects of its hidden states: HIDDEN unless it reshapes them
    to another (found by calling it once on a WidthProbe; anything else it does is left to the cases)."""
    from .fabricate import CannotBuild

    probe = torch.zeros(2, HIDDEN, dtype=fabricator.dtype).as_subclass(WidthProbe)
    try:
        args, kwargs = form.environment.bind("compute_logits", probe, step)
        with torch.no_grad():
            fabricator.call(model, "compute_logits", *args, **kwargs)
    except RowWidth as found:
        return found.width
    except CannotBuild:
        raise
    except Exception:  # the cases run it again and report what it raises
        pass
    return HIDDEN


class InterpretedLaunches:
    """Counts Triton kernels launched in Triton's interpreter (a kernel costs about 10 ms a row there)."""

    count = 0

    @classmethod
    def install(cls) -> None:
        if os.environ.get("TRITON_INTERPRET") != "1":
            return
        try:
            from triton.runtime.interpreter import GridExecutor
        except ImportError:  # another Triton: every case runs at every batch
            return
        launch = GridExecutor.__call__

        def counted(self, *args, **kwargs):
            cls.count += 1
            return launch(self, *args, **kwargs)

        GridExecutor.__call__ = counted


def _init_distributed(rank: int, world: int, port: int) -> None:
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    init_distributed_environment(
        world_size=world, rank=rank, local_rank=rank, backend=backend, distributed_init_method=f"tcp://127.0.0.1:{port}"
    )
    initialize_model_parallel(world, 1)


def _vllm_config():
    """A default VllmConfig, built on a CPU without triton-cpu.

    ``CpuPlatform.check_and_update_config`` refuses x86 without triton-cpu
    (a serving concern; these layers never use Triton) and reads
    ``vllm.triton_utils.HAS_TRITON`` when called, so it is set while the
    config is built, and restored.
    """
    import vllm.triton_utils as triton_utils
    from vllm.config import VllmConfig

    saved = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    try:
        return VllmConfig()
    finally:
        triton_utils.HAS_TRITON = saved


def verify_target(target: dict, rank: int, world: int) -> dict:
    """Every configuration the owner can build (those past MAX_VARIANTS named as left out), each under every
    call form."""
    result = {"target": target, "variants": [], "not_verified": None, "recipe": None}
    try:
        module = importlib.import_module(target["module"])
        cls = getattr(module, target["cls"])
    except Exception as error:  # any import failure means: cannot run it here
        result["not_verified"] = (
            f"importing {target['module']} failed: {type(error).__name__}: {error} ({_where(error, inside='vllm')})"
        )
        return result
    for name in ("compute_logits", "get_top_tokens"):
        if not hasattr(cls, name):
            result["not_verified"] = f"{target['cls']} has no {name}"
            return result
    forms, result["unreproduced"] = reproducible_forms(cls, target.get("forms") or [])
    if not forms:
        result["not_verified"] = NOT_RUN_AS_CALLED + "; ".join(result["unreproduced"])
        return result
    branches = ConfigBranches()
    result["variants"], result["left_out"] = explore_configurations(cls, forms, branches)
    result["not_taken"] = branches.not_taken()
    result["recipe"] = next((v["recipe"] for v in result["variants"] if v["compared"] and not v["raised"]), None)
    if not any(v["compared"] for v in result["variants"]):
        failed = [op for v in result["variants"] for op in v["failed_ops"]]
        result["ops"] = list(dict.fromkeys(failed)) or custom_ops(module)
    return result


class ConfigBranches:
    """Which lines of compute_logits and get_top_tokens ran, over every configuration (traced in one case
    each: a config value decides a branch whatever the inputs), so that a branch on a config value that
    no value tried took is named, not passed over."""

    METHODS = ("compute_logits", "get_top_tokens")

    def __init__(self):
        self.ran: dict[object, set[int]] = {}  # code object -> lines run

    @contextlib.contextmanager
    def tracing(self):
        def lines(frame, event, arg):
            if event == "line":
                self.ran[frame.f_code].add(frame.f_lineno)
            return lines

        def calls(frame, event, arg):
            if frame.f_code.co_name not in self.METHODS:
                return None
            self.ran.setdefault(frame.f_code, set())
            return lines

        previous = sys.gettrace()
        sys.settrace(calls)
        try:
            yield
        finally:
            sys.settrace(previous)

    def not_taken(self) -> list[str]:
        """``file:line: if <test>: <branch> never ran``, for each config branch whose test ran."""
        from .fabricate import config_branches

        out = []
        for code, ran in self.ran.items():
            try:
                function = ast.parse(textwrap.dedent(inspect.getsource(code))).body[0]
            except (OSError, TypeError, SyntaxError, IndexError):
                where = f"{Path(code.co_filename).name}: {code.co_name}"
                out.append(f"{where}: source not readable; config branches not checked")
                continue
            shift = code.co_firstlineno - 1  # the source starts at the first decorator, where co_firstlineno is
            for branch, attribute in config_branches(function):
                if branch.lineno + shift not in ran:
                    continue
                arms = [("its body", branch.body)] + ([("its else", branch.orelse)] if branch.orelse else [])
                for arm, body in arms:
                    if body[0].lineno + shift not in ran:
                        where = f"{Path(code.co_filename).name}:{branch.lineno + shift}"
                        test = ast.unparse(branch.test)
                        out.append(f"{where}: if {test}: {arm} never ran (config.{attribute} as tried)")
        return out


def explore_configurations(cls: type, forms: list[CallForm], branches: ConfigBranches) -> tuple[list[dict], list[str]]:
    """Each distinct configuration once, those that reach an alternative no run has taken first, at most
    MAX_VARIANTS of them; the configurations that did not fit are returned, named, never dropped."""
    variants: list[dict] = []
    pending: list[dict] = [{}]
    requested: set[frozenset] = set()
    built: set[frozenset] = set()
    reached: set[tuple[str, int]] = set()  # (point, alternative) of every configuration that ran
    runs = 0
    while pending and len(variants) < MAX_VARIANTS and runs < MAX_RUNS:
        choices = pending.pop(_most_unreached(pending, reached))
        requested.add(_choice_key(choices))
        runs += 1
        variant = run_variant(cls, choices, forms, branches)
        key = _choice_key(variant["choices"])  # what it built: a choice for a point it never met is none
        requested.add(key)
        if key in built:
            continue
        built.add(key)
        variants.append(variant)
        reached |= set(variant["choices"].items())
        for point, labels in variant["points"].items():
            for index in range(len(labels)):
                candidate = {**variant["choices"], point: index}
                if _choice_key(candidate) not in requested | {_choice_key(c) for c in pending}:
                    pending.append(candidate)
    labels = {point: labels for variant in variants for point, labels in variant["points"].items()}
    return variants, [_configuration_label(choices, labels) for choices in pending]


def _most_unreached(pending: list[dict], reached: set[tuple[str, int]]) -> int:
    """The position of the first pending configuration with the most alternatives no run has reached."""
    return max(range(len(pending)), key=lambda i: (len(set(pending[i].items()) - reached), -i))


def _configuration_label(choices: dict, labels: dict[str, list[str]]) -> str:
    """A configuration not run, by its choices other than each point's first alternative."""
    chosen = [f"{point}={labels[point][index]}" for point, index in sorted(choices.items()) if index]
    return ", ".join(chosen) or "default"


def _choice_key(choices: dict) -> frozenset:
    """A configuration as the fabricator builds it: a point left out takes its first alternative, so
    ``{a: 0}`` and ``{a: 0, b: 0}`` are one configuration, run once."""
    return frozenset((point, index) for point, index in choices.items() if index)


KERNEL_CALL = re.compile(r"\b([A-Za-z_][\w.]*(?:kernel|KERNEL|tilelang|triton|_C\.|ops\.)[\w.]*)\s*\(")


def failing_kernel(error: BaseException) -> list[str]:
    """The kernel called on the line of model code (``.../models/...``, its deepest frame) where
    compute_logits failed, if that line calls one."""
    frames = [
        f for f in traceback.extract_tb(error.__traceback__) if f"{os.sep}models{os.sep}" in f.filename and f.line
    ]
    return KERNEL_CALL.findall(frames[-1].line + "(") if frames else []


def custom_ops(module) -> list[str]:
    """Kernels that the module's compute_logits methods call: named when no configuration could run."""
    found: list[str] = []
    for value in vars(module).values():
        method = getattr(value, "__dict__", {}).get("compute_logits") if isinstance(value, type) else None
        if method is None or getattr(value, "__module__", None) != module.__name__:
            continue
        try:
            source = inspect.getsource(method)
        except (OSError, TypeError):
            continue
        found += [name for name in KERNEL_CALL.findall(source) if name not in found]
    return found


@dataclass(frozen=True)
class CallForm:
    """How one caller calls both methods: argument source texts, keywords as ``name=value``, and
    the environment they are evaluated in."""

    label: str
    get_top_tokens: tuple[str, ...]
    compute_logits: tuple[str, ...]
    environment: CallEnvironment

    @classmethod
    def parse(cls, data: dict, parameters: dict[str, tuple[str, ...]]) -> CallForm:
        """The form as recorded by the scan; CallArgument when an argument cannot be reproduced here."""
        gtt, cl = tuple(data["get_top_tokens"]), data["compute_logits"]
        cl = tuple(cl) if cl is not None else gtt
        return cls(data["label"], gtt, cl, CallEnvironment.of(gtt, cl, parameters))

    @property
    def per_step(self) -> bool:
        return self.environment.per_step

    def text(self) -> str:
        return f"get_top_tokens({', '.join(self.get_top_tokens)}) / compute_logits({', '.join(self.compute_logits)})"


def method_parameters(cls: type) -> dict[str, tuple[str, ...]]:
    """Each method's parameter names, ``self`` left out: where a positional argument goes."""
    return {
        name: tuple(p for p in inspect.signature(getattr(cls, name)).parameters if p != "self")
        for name in ("compute_logits", "get_top_tokens")
    }


def reproducible_forms(cls: type, recorded: list[dict]) -> tuple[list[CallForm], list[str]]:
    """The recorded forms verify can run as called, and for each other one, which argument it cannot
    reproduce. No form recorded: the default forms."""
    parameters = method_parameters(cls)
    if not recorded:
        return default_forms(parameters), []
    forms, unreproduced = [], []
    for data in recorded:
        try:
            forms.append(CallForm.parse(data, parameters))
        except CallArgument as error:
            unreproduced.append(f"{data['label']}: {error}")
    return forms, unreproduced


def default_forms(parameters: dict[str, tuple[str, ...]]) -> list[CallForm]:
    """No callers recorded: the base speculator's form, and the MTP speculator's where compute_logits takes a step."""
    plain = ("hidden_states",)
    forms = [CallForm.parse({"label": "positional", "get_top_tokens": plain, "compute_logits": plain}, parameters)]
    if "spec_step_idx" in parameters["compute_logits"]:
        step = ("hidden_states", "spec_step_idx=spec_step_idx")
        forms.append(
            CallForm.parse({"label": "spec_step_idx=", "get_top_tokens": step, "compute_logits": step}, parameters)
        )
    return forms


def run_variant(cls: type, choices: dict, forms: list[CallForm], branches: ConfigBranches | None = None) -> dict:
    """One configuration: every dtype, case, batch, call form and step. The configuration is what
    the first fabricator met; later fabricators are given the same choices. The first dtype's random
    case runs traced by ``branches``."""
    from .fabricate import CannotBuild, Fabricator, OutsideSteps

    variant = {
        "variant": "default",
        "choices": dict(choices),
        "points": {},
        "cases": [],
        "notes": [],
        "compared": 0,
        "raised": False,
        "recipe": None,
        "failed_ops": [],
    }
    started = InterpretedLaunches.count
    for dtype_name, dtype in DTYPES.items():
        for case, override, scale in _cases():
            fabricator = Fabricator(VOCAB, HIDDEN, dtype, seed=7, head_override=override, choices=dict(choices))
            model = fabricator.instance(cls)
            widths: dict[str, int] = {}
            raised: set[tuple[str, int | None]] = set()  # (form, step) where compute_logits raised: not rerun
            launches = InterpretedLaunches.count
            traced = branches is not None and case == "random" and dtype is next(iter(DTYPES.values()))
            with branches.tracing() if traced else contextlib.nullcontext():
                for batch in BATCHES if case != WINNERS else (VOCAB,):
                    if (
                        batch == BATCHES[-1]
                        and case not in INTERPRETED_LARGE_BATCH_CASES
                        and InterpretedLaunches.count > launches
                    ):
                        # its kernels run interpreted: the largest batch in the random case only (bounded time)
                        note = (
                            f"kernels run in Triton's interpreter: batch {batch} in the "
                            f"{', '.join(INTERPRETED_LARGE_BATCH_CASES)} case only"
                        )
                        variant["scope"] = list(dict.fromkeys([*variant.get("scope", []), note]))
                        continue
                    for form in forms:
                        for step in range(STEPS_TRIED) if form.per_step else [None]:
                            if (form.label, step) in raised:
                                continue
                            try:
                                if form.label not in widths:
                                    widths[form.label] = hidden_width(fabricator, model, form, step)
                                if case == WINNERS:
                                    h = _winners(variant, fabricator, model, form, step, widths[form.label], started)
                                    if h is None:
                                        continue
                                else:
                                    h = _hidden(
                                        case,
                                        batch,
                                        scale,
                                        dtype,
                                        seed=batch * 31 + (step or 0),
                                        width=widths[form.label],
                                    )
                                record = _run_case(fabricator, model, form, h, step)
                            except OutsideSteps as error:
                                if step is None or step < NUM_STEPS:
                                    _note(variant, f"not built: {error}")
                                    return _finish(variant, fabricator)
                                raised.add((form.label, step))  # compute_logits does not wrap this step
                                _scope(
                                    variant, f"spec_step_idx {step} not run: compute_logits does not wrap it ({error})"
                                )
                                continue
                            except CannotBuild as error:
                                _note(variant, f"not built: {error}")
                                return _finish(variant, fabricator)
                            if record["kind"] == "compute_logits raised":
                                raised.add((form.label, step))
                                _note(variant, record["detail"])
                                variant["failed_ops"] += [op for op in record["ops"] if op not in variant["failed_ops"]]
                                continue
                            record.update(
                                dtype=dtype_name,
                                case=case,
                                batch=batch,
                                step=step,
                                form=form.label,
                                width=h.shape[-1],
                                steps_passed=[
                                    form.environment.passed_step("compute_logits", step),
                                    form.environment.passed_step("get_top_tokens", step),
                                ],
                            )
                            variant["cases"].append(record)
                            variant["compared"] += record["has_logits"] and record["kind"] == "tokens"
                            variant["raised"] = variant["raised"] or record["kind"] != "tokens"
            _finish(variant, fabricator)
    return variant


def _winners(variant: dict, fabricator, model, form: CallForm, step, width: int, started: int) -> torch.Tensor | None:
    """The winners case's rows; every 16th id where this configuration's kernels ran interpreted."""
    rows = winner_rows(fabricator, model, form, step, width)
    if rows is None:
        _scope(variant, "winners case not built: no head input seen in compute_logits")
    elif InterpretedLaunches.count > started:
        _scope(variant, f"kernels run in Triton's interpreter: the winners case takes every {WINNER_STRIDE}th id")
        rows = rows[::WINNER_STRIDE]
    return rows


def _scope(variant: dict, note: str) -> None:
    variant["scope"] = list(dict.fromkeys([*variant.get("scope", []), note]))


def _finish(variant: dict, fabricator) -> dict:
    reached = [(c["winners"], c["batch"]) for c in variant["cases"] if c["case"] == WINNERS and "winners" in c]
    if reached:
        distinct, rows = min(reached)
        variant["scope"] = [n for n in variant.get("scope", []) if not n.startswith(WINNERS_REACHED)]
        _scope(variant, f"{WINNERS_REACHED} {distinct} distinct ids won its {rows} rows")
    variant["points"].update(fabricator.points)
    variant["scope"] = list(dict.fromkeys([*variant.get("scope", []), *fabricator.notes]))
    variant["choices"] = {point: fabricator.choices.get(point, 0) for point in variant["points"]}
    variant["variant"] = fabricator.variant()
    if variant["recipe"] is None:
        variant["recipe"] = [asdict(s) for s in fabricator.recipe]
    return variant


def _note(variant: dict, text: str) -> None:
    if text not in variant["notes"]:
        variant["notes"].append(text)


def _run_case(fabricator, model, form: CallForm, h: torch.Tensor, step: int | None) -> dict:
    """Both methods as the caller calls them. compute_logits failing means this configuration cannot
    be run here (noted by the caller); get_top_tokens failing where it ran is a mismatch."""
    from .fabricate import CannotBuild, OutsideSteps

    cl_args, cl_kwargs = form.environment.bind("compute_logits", h, step)
    gtt_args, gtt_kwargs = form.environment.bind("get_top_tokens", h, step)
    with torch.no_grad():
        try:
            logits = fabricator.call(model, "compute_logits", *cl_args, **cl_kwargs)
        except CannotBuild:
            raise
        except Exception as error:
            return {
                "kind": "compute_logits raised",
                "has_logits": False,
                "ids": [],
                "mismatch": None,
                "detail": f"compute_logits raised {type(error).__name__}: {error} ({_where(error)})",
                "ops": failing_kernel(error),
            }
        try:
            inspect.signature(model.get_top_tokens).bind(*gtt_args, **gtt_kwargs)
        except TypeError as error:
            return {
                "kind": "TypeError",
                "has_logits": True,
                "ids": [],
                "mismatch": {"detail": f"get_top_tokens rejects the call {form.text()}: TypeError: {error}"},
            }
        try:
            ids = fabricator.call(model, "get_top_tokens", *gtt_args, **gtt_kwargs)
        except Exception as error:
            if isinstance(error, CannotBuild) and not isinstance(error, OutsideSteps):
                raise  # a layer past the last, where compute_logits wrapped the step, is the method's own error
            return {
                "kind": "get_top_tokens raised",
                "has_logits": True,
                "ids": [],
                "mismatch": {
                    "detail": f"get_top_tokens raised {type(error).__name__}: {error} ({_where(error)}) "
                    "where compute_logits returned logits"
                },
            }
    return _compare(logits, ids)


def _guarded(target: dict, rank: int, world: int) -> dict:
    """Whatever goes wrong with one drafter makes it not verified, never a crash or a pass."""
    try:
        return verify_target(target, rank, world)
    except Exception as error:
        return {
            "target": target,
            "variants": [],
            "recipe": None,
            "not_verified": f"the harness failed: {type(error).__name__}: {error} ({_where(error)})",
        }


def _where(error: BaseException, inside: str | None = None) -> str:
    """The raising line; with ``inside``, the deepest line in that package (``vllm/platforms/rocm.py:215``)."""
    frames = traceback.extract_tb(error.__traceback__)
    if inside is not None:
        marker = f"{os.sep}{inside}{os.sep}"
        ours = [f for f in frames if marker in f.filename]
        if ours:
            return f"at {inside}{os.sep}{ours[-1].filename.rsplit(marker, 1)[1]}:{ours[-1].lineno}"
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def _compare(logits, ids) -> dict:
    record = {"kind": "tokens", "ids": ids.tolist(), "mismatch": None, "has_logits": logits is not None}
    if logits is None:  # ranks other than 0 get no logits under TP: their ids are compared across ranks
        return record
    expected = logits.argmax(-1)
    record["winners"] = int(expected.unique().numel())  # distinct ids that won a row (the winners case's reach)
    wrong = (expected != ids.to(expected.device)).nonzero().flatten().tolist()
    if wrong:
        row = wrong[0]
        want, got = int(expected[row]), int(ids[row])
        got_value = float(logits[row, got]) if 0 <= got < logits.shape[-1] else None  # an id it never produces
        record["mismatch"] = {
            "row": row,
            "argmax_id": want,
            "get_top_tokens_id": got,
            "argmax_logit": float(logits[row, want]),
            "get_top_tokens_logit": got_value,
            "vocab": int(logits.shape[-1]),
            "rows": len(wrong),
        }
    return record


def foreign_vllm(imported: str | None, root: str) -> str | None:
    """Why the imported vLLM is not the tree under test (a ``.pth`` file, a site hook or a stale
    path can put another one first): verifying it would test other code. None when it is the tree's."""
    expected = Path(root).resolve() / "vllm"
    if imported is not None and Path(imported).resolve().is_relative_to(expected):
        return None
    return f"the worker imported vLLM from {imported}, not from the tree under test ({expected})"


def main(argv: list[str]) -> int:
    plan_path, rank, world, port, out_path = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    progress_path = plan.get("progress")
    started = time.perf_counter()
    import vllm

    foreign = foreign_vllm(vllm.__file__, plan["root"])
    if foreign:
        print(foreign, file=sys.stderr)
        return FOREIGN_VLLM_EXIT
    torchvision_schemas = torchvision_without_its_ops()  # noqa: F841  (kept alive while vLLM runs)
    InterpretedLaunches.install()
    from vllm.config import set_current_vllm_config

    torch.manual_seed(0)
    with set_current_vllm_config(_vllm_config()):
        _init_distributed(rank, world, port)
        set_up_s = time.perf_counter() - started
        results = []
        for target in plan["targets"]:
            began = time.perf_counter()
            results.append(_guarded(target, rank, world))
            results[-1]["seconds"] = time.perf_counter() - began
            if rank == 0 and progress_path:
                with open(progress_path, "a", encoding="utf-8") as progress:
                    progress.write(f"{len(results)}\n")
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump({"rank": rank, "world": world, "set_up_s": set_up_s, "results": results}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
