"""The verify worker: one process per TP rank, importing the real vLLM code.

Run by ``mtp-audit verify`` (never imported by scan or fix) as
``python -m mtp_audit.verify.worker PLAN.json RANK WORLD PORT OUT.json``.
For every target class and case it calls ``compute_logits`` and
``get_top_tokens`` on the same inputs and records, per row, whether
``get_top_tokens`` selected ``compute_logits(...).argmax(-1)``.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
import traceback
from dataclasses import asdict

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import torch  # noqa: E402

from .constants import HIDDEN, NUM_STEPS, VOCAB  # noqa: E402

BATCHES = (1, 7, 65)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _cases() -> list[tuple[str, object, float]]:
    from .fabricate import HeadRows

    return [
        ("random", None, 1.0),
        ("ties", HeadRows("ties"), 1.0),
        ("padding", HeadRows("negative"), 1.0),
        ("large", None, 1e4),
    ]


def _hidden(case: str, batch: int, scale: float, dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if case in ("ties", "padding"):
        h = torch.ones(batch, HIDDEN) + 0.05 * torch.randn(batch, HIDDEN, generator=generator)
    else:
        h = torch.randn(batch, HIDDEN, generator=generator) * scale
    return h.to(dtype)


def _init_distributed(rank: int, world: int, port: int) -> None:
    from vllm.distributed.parallel_state import init_distributed_environment, initialize_model_parallel

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    init_distributed_environment(world_size=world, rank=rank, local_rank=rank, backend=backend,
                                 distributed_init_method=f"tcp://127.0.0.1:{port}")
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
    from .fabricate import CannotBuild, Fabricator

    result = {"target": target, "cases": [], "not_verified": None, "recipe": None}
    try:
        module = importlib.import_module(target["module"])
        cls = getattr(module, target["cls"])
    except Exception as error:  # any import failure means: cannot run it here
        result["not_verified"] = f"importing {target['module']} failed: {type(error).__name__}: {error}"
        return result
    for name in ("compute_logits", "get_top_tokens"):
        if not hasattr(cls, name):
            result["not_verified"] = f"{target['cls']} has no {name}"
            return result
    takes_step = "spec_step_idx" in inspect.signature(cls.compute_logits).parameters
    if takes_step and "spec_step_idx" not in inspect.signature(cls.get_top_tokens).parameters:
        result["cases"].append({"dtype": "-", "case": "signature", "batch": 0, "step": None, "ids": [],
                                "has_logits": True, "mismatch": {"detail": "compute_logits takes spec_step_idx, "
                                                                 "get_top_tokens does not accept it"}})
        return result
    steps = list(range(NUM_STEPS)) if takes_step else [None]
    for dtype_name, dtype in DTYPES.items():
        for case, override, scale in _cases():
            fabricator = Fabricator(VOCAB, HIDDEN, dtype, seed=7, head_override=override)
            model = fabricator.instance(cls)
            for batch in BATCHES:
                for step in steps:
                    kwargs = {} if step is None else {"spec_step_idx": step}
                    h = _hidden(case, batch, scale, dtype, seed=batch * 31 + (step or 0))
                    try:
                        with torch.no_grad():
                            logits = fabricator.call(model, "compute_logits", h, **kwargs)
                            ids = fabricator.call(model, "get_top_tokens", h, **kwargs)
                    except CannotBuild as error:
                        result["not_verified"] = str(error)
                        return result
                    except Exception as error:
                        result["not_verified"] = (f"the methods raised {type(error).__name__}: {error} "
                                                  f"({_where(error)})")
                        return result
                    result["cases"].append(_compare(dtype_name, case, batch, step, logits, ids))
            if result["recipe"] is None:
                result["recipe"] = [asdict(s) for s in fabricator.recipe]
    return result


def _guarded(target: dict, rank: int, world: int) -> dict:
    """Whatever goes wrong with one drafter makes it not verified, never a crash or a pass."""
    try:
        return verify_target(target, rank, world)
    except Exception as error:
        return {"target": target, "cases": [], "recipe": None,
                "not_verified": f"the harness failed: {type(error).__name__}: {error} ({_where(error)})"}


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"


def _compare(dtype: str, case: str, batch: int, step, logits, ids) -> dict:
    record = {"dtype": dtype, "case": case, "batch": batch, "step": step,
              "ids": ids.tolist(), "mismatch": None, "has_logits": logits is not None}
    if logits is None:  # ranks other than 0 get no logits under TP: their ids are compared across ranks
        return record
    expected = logits.argmax(-1)
    if logits.shape[-1] != VOCAB:
        record["mismatch"] = {"detail": f"compute_logits returned {logits.shape[-1]} columns for a vocabulary of {VOCAB}"}
        return record
    wrong = (expected != ids.to(expected.device)).nonzero().flatten().tolist()
    if wrong:
        row = wrong[0]
        want, got = int(expected[row]), int(ids[row])
        got_value = float(logits[row, got]) if 0 <= got < logits.shape[-1] else float("nan")
        record["mismatch"] = {"row": row, "argmax_id": want, "get_top_tokens_id": got,
                              "argmax_logit": float(logits[row, want]), "get_top_tokens_logit": got_value,
                              "rows": len(wrong)}
    return record


def main(argv: list[str]) -> int:
    plan_path, rank, world, port, out_path = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    with open(plan_path, encoding="utf-8") as handle:
        plan = json.load(handle)
    from vllm.config import set_current_vllm_config

    torch.manual_seed(0)
    with set_current_vllm_config(_vllm_config()):
        _init_distributed(rank, world, port)
        results = [_guarded(t, rank, world) for t in plan["targets"]]
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump({"rank": rank, "world": world, "results": results}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
