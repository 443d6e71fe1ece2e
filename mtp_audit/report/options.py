"""Which ``scan`` options go together: a combination that would be ignored is a usage error."""

from __future__ import annotations

from ..errors import UsageError

COMPARE_FORMATS = ("concise", "table", "json", "markdown")  # github and sarif annotate files; a comparison has none
MODEL_TYPE_FORMATS = ("concise", "table", "json", "markdown")


def check_scan_options(fmt: str, compare: bool, by_model_type: bool, tree_given: bool, model: bool,
                       verbose: bool = False, show_all: bool = False) -> None:
    if compare:
        if tree_given:
            raise UsageError("--compare scans the two releases it names; give no PATH or --vllm-version with it")
        if by_model_type or model:
            raise UsageError("--compare lists every drafter that changed; --model and --by-model-type do not "
                             "apply to it")
        if fmt not in COMPARE_FORMATS:
            raise UsageError(f"--compare prints {', '.join(COMPARE_FORMATS)}; not {fmt}")
    if by_model_type:
        if model:
            raise UsageError("--by-model-type prints every model_type; --model does not apply to it")
        if fmt not in MODEL_TYPE_FORMATS:
            raise UsageError(f"--by-model-type prints {', '.join(MODEL_TYPE_FORMATS)}; not {fmt}")
    if (verbose or show_all) and (fmt != "concise" or compare or by_model_type):
        flag = "--verbose" if verbose else "--show-all"
        raise UsageError(f"{flag} goes with the concise report (the default format); the other formats show "
                         "every record and reason")
