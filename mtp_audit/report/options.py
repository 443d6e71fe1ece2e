"""Which options of a command go together: a combination that would be ignored is a usage error."""

from __future__ import annotations

from ..errors import UsageError
from ..verify.constants import MAX_TP

COMPARE_FORMATS = ("concise", "table", "json", "markdown")  # github and sarif annotate files; a comparison has none
MODEL_TYPE_FORMATS = ("concise", "table", "json", "markdown")


def check_scan_options(
    fmt: str,
    compare: bool,
    by_model_type: bool,
    tree_given: bool,
    model: bool,
    verbose: bool = False,
    show_all: bool = False,
    fail_on_given: bool = False,
    tree_options: tuple[str, ...] = (),
) -> None:
    """``tree_options``: the options given that say how to read the tree (``--vllm``, ``--plugin-path``...)."""
    if compare:
        if tree_given:
            raise UsageError("--compare scans the two releases it names; give no PATH or --vllm-version with it")
        if tree_options:
            raise UsageError(
                f"--compare scans the two releases it names as released, with vLLM's own registry; "
                f"{', '.join(tree_options)} do{'es' * (len(tree_options) == 1)} not apply to it"
            )
        if by_model_type or model:
            raise UsageError(
                "--compare lists every drafter that changed; --model and --by-model-type do not apply to it"
            )
        if fmt not in COMPARE_FORMATS:
            raise UsageError(f"--compare prints {', '.join(COMPARE_FORMATS)}; not {fmt}")
    if by_model_type:
        if model:
            raise UsageError("--by-model-type prints every model_type; --model does not apply to it")
        if fmt not in MODEL_TYPE_FORMATS:
            raise UsageError(f"--by-model-type prints {', '.join(MODEL_TYPE_FORMATS)}; not {fmt}")
    if verbose or show_all:
        flag = "--verbose" if verbose else "--show-all"
        if compare or by_model_type:
            option, lists = (
                ("--compare", "the drafters that changed") if compare else ("--by-model-type", "every model_type")
            )
            raise UsageError(f"{flag} does not apply to {option}, which lists {lists}")
        if fmt != "concise":
            raise UsageError(
                f"{flag} goes with the concise report (the default format); the other formats show every record "
                "and reason"
            )
    if fail_on_given and (compare or by_model_type):
        raise UsageError(
            f"--fail-on does not apply to {'--compare' if compare else '--by-model-type'}: it reports, and exits 0"
        )


def check_fix_options(
    model: bool,
    sweep_all: bool,
    diff: bool,
    check: bool,
    pr_body: bool,
    patches: bool,
    verify_report: bool,
    vllm_version: bool,
) -> None:
    if verify_report and not pr_body and not patches:
        raise UsageError("--verify-report goes with --pr-body or --patches")
    if patches and (diff or check):
        raise UsageError("--patches writes a patch series; it does not go with --diff or --check")
    if not model and not sweep_all:
        raise UsageError("fix needs a target: --model NAME (repeatable) or --all (every missing_fixable drafter)")
    if model and sweep_all:
        raise UsageError("give --model NAME or --all, not both")
    if vllm_version and not (diff or check or patches):
        raise UsageError(
            "fix --vllm-version needs --diff, --check or --patches: the cached release sources stay untouched"
        )


def check_verify_options(model: bool, sweep_all: bool) -> None:
    if sweep_all == model:
        raise UsageError("verify needs --model NAME ... or --all (not both)")


def tp_sizes(tp: str) -> list[int]:
    """``verify --tp``: the sizes, sorted; each starts that many worker processes, so a size past
    ``MAX_TP`` (a typo such as 12 for 1,2) is a usage error rather than a machine full of torch workers."""
    try:
        sizes = sorted({int(x) for x in tp.split(",") if x.strip()})
    except ValueError:
        raise UsageError(f"--tp takes sizes like 1,2, not {tp!r}") from None
    if not sizes or min(sizes) < 1:
        raise UsageError("--tp needs at least one size of 1 or more")
    if max(sizes) > MAX_TP:
        raise UsageError(f"--tp sizes go up to {MAX_TP} (one worker process per rank), not {max(sizes)}")
    return sizes
