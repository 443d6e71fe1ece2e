"""``verify --emit-test``: the recipe of a passing run, written as a standalone pytest."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from string import Template

from .. import __version__
from ..errors import UsageError
from ..synthesize.layout import ruff_format
from ..templating import template
from .constants import HIDDEN, NUM_STEPS, START_LAYER, TARGET_VOCAB, VOCAB
from .run import TargetOutcome, Verdict

EMITTED_CASES = ["random", "ties", "padding", "large"]


def _line_formats() -> dict[str, Template]:
    formats = {}
    for line in template("verify_test_steps.tmpl").splitlines():
        if line.strip() and not line.startswith("#"):
            kind, text = line.split(": ", 1)
            formats[kind] = Template(text)
    return formats


def _expression(path: str) -> str:
    """``model.layers[0].head`` as Python: element indices become string keys."""
    return re.sub(r"\[(\d+)\]", r'["\1"]', path)


def to_emit(outcomes: list[TargetOutcome]) -> TargetOutcome | None:
    """The run an emitted test is written from: the first that passed, of a drafter (a class of one
    module) that passed at every TP size run; one that mismatched, or was not verified, at any size
    gets no test (a passing one would vouch for a method verify just found wrong)."""
    failed = {_drafter(o) for o in outcomes if o.verdict != Verdict.PASS}
    return next(
        (o for o in outcomes if o.verdict == Verdict.PASS and o.recipe is not None and _drafter(o) not in failed),
        None,
    )


def _drafter(outcome: TargetOutcome) -> tuple[str | None, str, str]:
    return outcome.record.arch, outcome.record.cls, outcome.record.module


def emit_test(target: Path, outcome: TargetOutcome) -> None:
    record = outcome.record
    assert outcome.recipe is not None
    formats = _line_formats()
    unsupported = sorted({step["kind"] for step in outcome.recipe} - set(formats))
    if unsupported:
        raise UsageError(
            f"--emit-test cannot yet write the {', '.join(unsupported)} attribute(s) that "
            f"{record.cls} needs; its verify run stands on its own"
        )
    imports = {f"from {record.module} import {record.cls}"}
    lines = []
    for step in outcome.recipe:
        args = dict(step["args"])
        name = None
        if "cls" in args and args["cls"]:
            module, _, name = args["cls"].rpartition(".")
            imports.add(f"from {module} import {name}")
        lines.append(
            "    "
            + formats[step["kind"]].substitute(
                target=_expression(f"{step['path']}.{step['attr']}"),
                owner=_expression(step["path"]),
                attr=step["attr"],
                name=name or "",
                **{k: v for k, v in args.items() if k != "cls"},
            )
        )
    calls = sorted(
        {tuple(c["steps_passed"]) for c in outcome.cases},
        key=lambda pair: tuple(-1 if s is None else s for s in pair),
    )
    passing = [v["variant"] for v in outcome.variants if v["verdict"] == Verdict.PASS]
    dtypes = sorted({c["dtype"] for c in outcome.cases}, key=["float32", "bfloat16"].index)
    # the run's cases the test can rebuild from its seeds (the winners case needs the run's head inputs)
    cases = sorted({c["case"] for c in outcome.cases} & set(EMITTED_CASES), key=EMITTED_CASES.index)
    ops = sorted({step["args"]["cls"].rpartition(".")[2] for step in outcome.recipe if step["kind"] == "custom_op"})
    custom = (
        f", and vLLM's own custom op(s) {', '.join(ops)} (where the implementation vLLM dispatches to "
        "needs a kernel that is not here, the first of the op's other implementations that runs)"
        if ops
        else ""
    )
    built_from = textwrap.fill(
        "The drafter is built without its __init__ or weights: only the attributes its two methods read, from "
        f"vLLM's real ParallelLMHead, LogitsProcessor and RMSNorm (random, non-unit weights){custom}. "
        f"Configuration: {passing[0] if passing else 'default'}.",
        width=79,
    )
    text = Template(template("verify_test.py.tmpl")).substitute(
        cls=record.cls,
        tool_version=__version__,
        model=record.arch or record.cls,
        imports="\n".join(sorted(imports)),
        vocab=VOCAB,
        hidden=HIDDEN,
        start_layer=START_LAYER,
        build="\n".join(lines),
        calls=[list(pair) for pair in calls],
        target_vocab=TARGET_VOCAB,
        width=max((c.get("width", HIDDEN) for c in outcome.cases), default=HIDDEN),
        dtypes="[" + ", ".join(f"torch.{name}" for name in dtypes) + "]",
        cases=repr(cases),
        built_from=built_from,
    )
    target.write_text(ruff_format(text))


FAMILY_TEST_COLUMNS = 88  # vLLM's line length: the test goes into its tree


def render_family_test(title: str, drafters: list[tuple[str, str, bool]]) -> str:
    """A standalone pytest for the drafters of one patch, written without importing vLLM.

    ``drafters``: (module, class, whether compute_logits takes ``spec_step_idx``). No
    recipe from a verify run is needed: the test builds what the methods read when it runs.
    """
    text = Template(template("verify_test_family.py.tmpl")).substitute(
        title=textwrap.fill(f"For {title}.", width=FAMILY_TEST_COLUMNS),
        tool_version=__version__,
        vocab=VOCAB,
        hidden=HIDDEN,
        num_steps=NUM_STEPS,
        start_layer=START_LAYER,
        drafters=repr(sorted(set(drafters))),
    )
    return ruff_format(text)
