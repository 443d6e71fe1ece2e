"""The speculators that call a drafter, as the human formats show them (when the scan found any)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from mtp_audit.model import CallerRecord, DrafterRecord, ScanResult, SourceTree, Status
from mtp_audit.report.callers import describe_caller
from mtp_audit.report.concise import render_concise
from mtp_audit.report.markdown import render_markdown
from mtp_audit.report.table import render_table

SPECULATOR = "vllm/v1/worker/gpu/spec_decode/speculator.py"
CALLED = CallerRecord(
    "MTPSpeculator",
    SPECULATOR,
    580,
    ("hidden_states", "spec_step_idx=spec_step_idx"),
    ("hidden_states", "spec_step_idx=spec_step_idx"),
)
OTHER_ARGS = CallerRecord("EagleSpeculator", SPECULATOR, 212, ("hidden_states",), ("hidden_states", "spec_step_idx=0"))
NOT_REACHED = CallerRecord(
    "DFlashSpeculator", "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py", None, None, ("hidden_states",)
)


def test_describe_caller():
    assert describe_caller(CALLED) == (
        "called by MTPSpeculator (speculator.py:580) as get_top_tokens(hidden_states, spec_step_idx=spec_step_idx)"
    )
    assert describe_caller(OTHER_ARGS) == (
        "called by EagleSpeculator (speculator.py:212) as "
        "get_top_tokens(hidden_states), compute_logits(hidden_states, "
        "spec_step_idx=0)"
    )
    # vLLM 0.34 has a speculator.py in each speculator's folder: the folder is named
    assert describe_caller(NOT_REACHED).startswith("not reached by DFlashSpeculator (dflash/speculator.py)")
    proposer = CallerRecord("Step3p5MTPProposer", "vllm/v1/spec_decode/step3p5.py", 266, ("h",), ("h",))
    assert describe_caller(proposer) == "called by Step3p5MTPProposer (step3p5.py:266) as get_top_tokens(h)"
    plugin = CallerRecord("AcmeSpeculator", "acme/speculators.py", 9, ("h",), ("h",))
    assert describe_caller(plugin) == "called by AcmeSpeculator (speculators.py:9) as get_top_tokens(h)"


def test_callers_in_verbose_table_and_markdown():
    record = DrafterRecord(
        "ToyMTPModel",
        "ToyMTP",
        "vllm.model_executor.models.toy_mtp",
        "vllm/model_executor/models/toy_mtp.py",
        5,
        ["cpu", "cuda", "rocm", "tpu", "xpu"],
        Status.MISSING_FIXABLE,
        "compute_logits returns self.logits_processor(self.lm_head, hidden_states)",
        callers=[CALLED, NOT_REACHED],
    )
    result = ScanResult(SourceTree(Path("/x"), Path("/x/vllm"), "0.99.0"), [record], [], [])
    phrase = describe_caller(CALLED)
    verbose = " ".join(line.text for line in render_concise(result, 80, verbose=True))
    assert " ".join(phrase.split()) in " ".join(verbose.split())
    assert phrase not in " ".join(line.text for line in render_concise(result, None))
    assert phrase in render_markdown(result)
    console = Console(width=100, record=True, file=io.StringIO())
    render_table(result, console)
    assert "MTPSpeculator (speculator.py:580)" in console.export_text()
