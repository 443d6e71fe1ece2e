"""How a drafter builds vLLM's LogitsProcessor, against the flags read off it (classify/analysis.py:
``_same_literal``, ``_built_with_flag``, ``processor_difference``): drafters added to the processor_flags scan
fixture, one case each, found by mutation testing (each kills mutants the fixture alone let through)."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES, build_tree
from mtp_audit.locate import locate
from mtp_audit.model import DrafterRecord
from mtp_audit.scan import scan

CASE = FIXTURES / "scan" / "processor_flags"
MODELS = Path("vllm/model_executor/models")
LP = Path("vllm/model_executor/layers/logits_processor.py")

DRAFTER = """

class {name}(_ToyHeadMTP):
    def __init__(self, config):
        super().__init__()
        self.lm_head = nn.Linear(8, config.vocab_size)
        self.logits_processor = {construction}
"""


def records(tmp_path: Path, drafters: dict[str, str], *, lp_edit=None, header: str = "") -> dict[str, DrafterRecord]:
    tree = build_tree(CASE, tmp_path / "tree")
    module = tree / MODELS / "toy_flags_mtp.py"
    module.write_text(
        header + module.read_text() + "".join(DRAFTER.format(name=n, construction=c) for n, c in drafters.items())
    )
    registry = tree / MODELS / "registry.py"
    text = registry.read_text()
    first = text.index('    "ToyFlagDefaultMTPModel"')
    rows = "".join(f'    "{n}Model": ("toy_flags_mtp", "{n}"),\n' for n in drafters)
    registry.write_text(text[:first] + rows + text[first:])
    if lp_edit:
        (tree / LP).write_text(lp_edit((tree / LP).read_text()))
    result, _, _ = scan(locate(tree))
    return {r.cls: r for r in result.records}


def status(record: DrafterRecord) -> str:
    return record.status.value


# _same_literal 3, 4, 5, 8, 10; _built_with_flag 38, 43: the default written another way (0x0 for 0) is the default
def test_the_default_written_another_way_is_the_default(tmp_path: Path) -> None:
    def int_default(text: str) -> str:
        return text.replace("reduce_locally=False", "reduce_locally=0")

    got = records(
        tmp_path,
        {"ToyFlagHexMTP": "LogitsProcessor(config.vocab_size, reduce_locally=0x0)"},
        lp_edit=int_default,
    )
    assert status(got["ToyFlagHexMTP"]) == "missing_fixable"


# _same_literal 9: 0 is not the default False (docstring: "0 and False are not")
def test_zero_is_not_the_default_false(tmp_path: Path) -> None:
    got = records(tmp_path, {"ToyFlagZeroMTP": "LogitsProcessor(config.vocab_size, logits_as_input=0)"})
    assert status(got["ToyFlagZeroMTP"]) == "missing_manual"


# _same_literal 1, 2: a flag parameter with no default: any value passed may pick the branch
def test_a_flag_without_a_default_passed_true(tmp_path: Path) -> None:
    def no_default(text: str) -> str:
        return text.replace("logits_as_input=False, soft_cap=None, *,", "soft_cap=None, *, logits_as_input,")

    got = records(
        tmp_path,
        {"ToyFlagNoDefaultMTP": "LogitsProcessor(config.vocab_size, logits_as_input=True)"},
        lp_edit=no_default,
    )
    assert status(got["ToyFlagNoDefaultMTP"]) == "missing_manual"


# processor_difference 13, 14, 16-20: a processor class from outside vLLM is not known to select as vLLM's does
def test_a_processor_from_another_package(tmp_path: Path) -> None:
    got = records(
        tmp_path,
        {"ToyOtherProcessorMTP": "OtherProcessor(config.vocab_size)"},
        header="from otherpkg.heads import OtherProcessor\n",
    )
    record = got["ToyOtherProcessorMTP"]
    assert status(record) == "missing_manual", record
    assert "otherpkg.heads.OtherProcessor, a class outside the tree" in record.reason
