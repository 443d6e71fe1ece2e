"""``--factor-pre-head`` and the drafter-only placement: what the gate refuses, what the scan reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.apply.changes import UnsafeRewrite
from mtp_audit.apply.factoring import check_factored, rewrite_factored
from mtp_audit.fix import plan_fix, write_fix
from mtp_audit.locate import locate
from mtp_audit.report.pr_body import render_pr_body


def _consistency(tree: Path) -> dict[str, tuple[str, str | None]]:
    scanned = run_cli("scan", str(tree), "--format", "json", "--fail-on", "never")
    assert scanned.returncode == 0, scanned.stderr
    return {r["class"]: (r["status"], r["consistency"]) for r in json.loads(scanned.stdout)["drafters"]}


@pytest.fixture
def long_head(tmp_path: Path):
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head", tmp_path / "tree", "input")
    result = plan_fix(locate(tree), ["LongHeadMTPModel"], False, None)
    (insertions,) = [[i for i in result.plan.insertions if i.target.module.endswith("long_head_mtp")]]
    path = "vllm/model_executor/models/long_head_mtp.py"
    return tree, path, (tree / path).read_text(), insertions


def test_factored_rewrite_passes_its_gate_and_scans_as_mirror(long_head):
    tree, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    assert rewrite.new.count("self._pre_head(layer, hidden_states)") == 2
    assert rewrite.new.count("def _pre_head(self, layer, hidden_states: torch.Tensor) -> torch.Tensor:") == 1
    (tree / path).write_text(rewrite.new)
    assert _consistency(tree)["LongHeadMTP"] == ("supported", "mirror")


def test_gate_refuses_a_helper_that_is_not_the_old_block(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.new = rewrite.new.replace("layer.fold(hidden_states, layer.fold_scale)", "layer.fold(hidden_states)")
    with pytest.raises(UnsafeRewrite, match="with _pre_head inlined"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_gate_refuses_a_helper_that_reads_a_local_it_is_not_passed(long_head):
    """Inlined, the helper is the old block (same AST), but ``layer`` is compute_logits's local: in the
    helper it is an unbound global, a NameError at run time."""
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.new = rewrite.new.replace("self._pre_head(layer, hidden_states)", "self._pre_head(hidden_states)")
    rewrite.new = rewrite.new.replace("def _pre_head(self, layer, hidden_states", "def _pre_head(self, hidden_states")
    with pytest.raises(UnsafeRewrite, match="reads layer, a local of compute_logits it is not passed"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_gate_refuses_a_helper_that_reads_a_name_nothing_binds(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.old = source.replace("_NORM_KERNEL = None", "_OTHER_KERNEL = None")
    rewrite.new = rewrite.new.replace("_NORM_KERNEL = None", "_OTHER_KERNEL = None")
    with pytest.raises(UnsafeRewrite, match="reads _NORM_KERNEL, neither its parameter nor the module's name"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_gate_refuses_a_change_outside_compute_logits(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.new = rewrite.new.replace(
        "    def load_weights(self, weights):\n", "    def load_weights(self, weights):  # noqa\n"
    )
    with pytest.raises(UnsafeRewrite, match="outside compute_logits"):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_without_the_flag_compute_logits_is_untouched(tmp_path):
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head", tmp_path / "tree", "input")
    result = run_cli("fix", str(tree), "--all", "--diff")
    assert result.returncode == 0, result.stderr
    assert "_pre_head" not in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.startswith("-") and not line.startswith("---")]


def test_a_super_caller_takes_the_method_and_the_base_stays_untouched(tmp_path):
    tree = build_tree(FIXTURES / "fix" / "placement_mixin", tmp_path / "tree", "input")
    result = run_cli("fix", str(tree), "--all")
    assert result.returncode == 0, result.stderr
    stderr = " ".join(result.stderr.split())
    assert "placement: get_top_tokens goes into MTPMixin with the compute_logits of CausalMixin inlined" in stderr
    assert "BackendForCausalLM" in stderr  # named as the reason
    assert "get_top_tokens" not in (tree / "vllm/model_executor/models/backend_causal.py").read_text()
    assert _consistency(tree)["BackendForMTP"] == ("supported", "mirror")


MODELS = "vllm/model_executor/models"
# A drafter whose compute_logits is super()'s too, reaching a base that no class outside the drafters inherits.
OTHER = (
    "import torch\nfrom torch import nn\n\n\nclass OtherBase(nn.Module):\n"
    "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:\n"
    "        return self.logits_processor(self.head, hidden_states)\n\n\nclass OtherMTP(OtherBase):\n"
    "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:\n"
    "        return super().compute_logits(hidden_states)\n"
)


def _mixin_tree(tmp_path: Path, files: dict[str, str], registered: dict[str, tuple[str, str]]) -> Path:
    tree = build_tree(FIXTURES / "fix" / "placement_mixin", tmp_path / "tree", "input")
    for name, text in files.items():
        (tree / MODELS / name).write_text(text)
    registered = {**registered, "BackendForMTP": ("backend_models", "BackendForMTP")}
    entries = "".join(f'    "{arch}": ("{module}", "{cls}"),\n' for arch, (module, cls) in registered.items())
    (tree / MODELS / "registry.py").write_text("_SPECULATIVE_DECODING_MODELS = {\n" + entries + "}\n")
    return tree


def _planned(tree: Path):
    result = plan_fix(locate(tree), None, True, None)
    write_fix(result)
    return result, {i.target.name: i.source.owner.name for i in result.plan.insertions}


def test_the_move_keeps_every_other_planned_method_in_place(tmp_path: Path) -> None:
    """Another super() caller fixed in the same run keeps its own two methods: only the base that a
    class outside the drafters inherits is swapped for the inlined method, with its own body."""
    tree = _mixin_tree(tmp_path, {"a_other_mtp.py": OTHER}, {"AOtherModel": ("a_other_mtp", "OtherMTP")})
    result, planned = _planned(tree)
    assert planned == {"MTPMixin": "MTPMixin", "OtherMTP": "OtherMTP", "OtherBase": "OtherBase"}
    assert sorted(r.path for r in result.rewrites) == [f"{MODELS}/a_other_mtp.py", f"{MODELS}/backend_mtp.py"]
    other = (tree / MODELS / "a_other_mtp.py").read_text()
    assert other.count("def get_top_tokens") == 2 and "bias" not in other
    assert "self.lm_head.bias" in (tree / MODELS / "backend_mtp.py").read_text()
    assert "get_top_tokens" not in (tree / MODELS / "backend_causal.py").read_text()
    assert [str(n) for n in result.placement_notes] == [
        "get_top_tokens goes into MTPMixin with the compute_logits of CausalMixin inlined, not into CausalMixin, "
        "whose subclasses BackendForCausalLM are not drafters"
    ]
    assert {o.record.arch: o.reason for o in result.plan.outcomes} == {
        "AOtherModel": "get_top_tokens added to OtherMTP, OtherBase",
        "BackendForMTP": "get_top_tokens added to MTPMixin",
    }


def test_no_move_when_a_drafter_inherits_the_base_method_itself(tmp_path: Path) -> None:
    """A drafter that inherits compute_logits from the base directly needs the base's own method:
    moving it into the super() caller would leave that drafter without one."""
    direct = "from .backend_causal import CausalMixin\n\n\nclass DirectCausal(CausalMixin): ...\n"
    tree = _mixin_tree(tmp_path, {"direct_causal.py": direct}, {"DirectModel": ("direct_causal", "DirectCausal")})
    result, planned = _planned(tree)
    assert planned == {"MTPMixin": "MTPMixin", "CausalMixin": "CausalMixin"}
    assert result.placement_notes == []
    assert "def get_top_tokens" in (tree / MODELS / "backend_causal.py").read_text()
    assert {o.record.arch: o.reason for o in result.plan.outcomes} == {
        "BackendForMTP": "get_top_tokens added to MTPMixin, CausalMixin",
        "DirectModel": "inherited from CausalMixin (fixed in the same run)",
    }
    assert [(i.base.name, i.cls.name, i.drafter) for i in result.inheritors] == [
        ("CausalMixin", "BackendForCausalLM", None),
        ("CausalMixin", "DirectCausal", "DirectModel"),  # a drafter, named by its architecture
        ("MTPMixin", "BackendForMTP", "BackendForMTP"),
    ]
    assert _consistency(tree)["DirectCausal"] == ("supported", "mirror")


# Bases that non-drafters inherit and that must keep their method, each for its own reason, planned
# before CausalMixin (their architectures sort first); then two super() callers of CausalMixin, which has two
# subclasses outside the drafters.
GROUPS = """import torch
from torch import nn

from .backend_causal import CausalMixin


class APlain(nn.Module):  # no super() caller to move the method into
    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.logits_processor(self.lm_head, hidden_states)


class APlainScorer(APlain): ...


class BBase(nn.Module):
    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.logits_processor(self.lm_head, hidden_states)


class BMixin(BBase):  # passes another name: the base's body cannot be inlined
    def compute_logits(self, h: torch.Tensor) -> torch.Tensor | None:
        return super().compute_logits(h)


class BDrafter(BMixin): ...


class BScorer(BBase): ...


class CBase(nn.Module):
    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.logits_processor(self.lm_head, hidden_states)


class CMixin(CBase):  # a class outside the drafters inherits the caller too
    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return super().compute_logits(hidden_states)


class CDrafter(CMixin): ...


class CBaseScorer(CBase): ...


class CMixinScorer(CMixin): ...


class MTPMixin2(CausalMixin):
    def compute_logits(self, hidden_states: "torch.Tensor") -> "torch.Tensor | None":
        return super().compute_logits(hidden_states)


class BackendForMTP2(MTPMixin2): ...


class BackendForSeq(CausalMixin): ...
"""


def test_each_base_that_must_keep_its_method_keeps_it_and_the_next_one_still_moves(tmp_path: Path) -> None:
    classes = ("APlain", "BDrafter", "CDrafter", "BackendForMTP2")  # drafters are planned by architecture
    registered = {f"A{n}Model": ("groups", c) for n, c in enumerate(classes)}
    tree = _mixin_tree(tmp_path, {"groups.py": GROUPS}, registered)
    result, planned = _planned(tree)
    assert planned == {
        "APlain": "APlain",
        "BMixin": "BMixin",
        "BBase": "BBase",
        "CMixin": "CMixin",
        "CBase": "CBase",
        "MTPMixin2": "MTPMixin2",
        "MTPMixin": "MTPMixin",
    }
    assert [str(n) for n in result.placement_notes] == [
        "get_top_tokens goes into MTPMixin2, MTPMixin with the compute_logits of CausalMixin inlined, not into "
        "CausalMixin, whose subclasses BackendForCausalLM, BackendForSeq are not drafters"
    ]
    assert "get_top_tokens" not in (tree / MODELS / "backend_causal.py").read_text()
    written = (tree / MODELS / "groups.py").read_text()
    assert written.count("def get_top_tokens") == 6
    assert written.count("self.lm_head.bias") == 1 and "self.lm_head.bias" in written.split("class MTPMixin2")[1]


CALL = "        hidden_states = self._pre_head(layer, hidden_states)\n        logits = "
RETURN = (
    "        return _NORM_KERNEL(\n            hidden_states,\n            layer.norm.weight.data,\n"
    "            layer.norm.variance_epsilon,\n        )  # the head reads the folded, normed stream\n"
)


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("", "\nclass Broken(:\n", "the rewrite does not parse"),
        (CALL, "        hidden_states = self._pre_head(hidden_states, layer)\n        logits = ", "its own parameter"),
        (
            CALL,
            "        hidden_states = self._pre_head(layer, hidden_states=hidden_states)\n        logits = ",
            "its own",
        ),
        (CALL, "        hidden_states = self._pre_head(layer, hidden_states)[0]\n        logits = ", "does not call"),
        (
            CALL,
            "        hidden_states = self.other._pre_head(layer, hidden_states)\n        logits = ",
            "does not call",
        ),
        (CALL, "        hidden_states = head._pre_head(layer, hidden_states)\n        logits = ", "does not call"),
        (CALL, "        hidden_states = self._post_head(layer, hidden_states)\n        logits = ", "does not call"),
        (
            CALL,
            "        hidden_states = self._pre_head(layer, hidden_states * 1)\n        logits = ",
            "its own parameter",
        ),
        ("        return _NORM_KERNEL(\n", "        hidden_states = _NORM_KERNEL(\n", "does not end in a return"),
        (
            RETURN,
            RETURN.replace("return _NORM_KERNEL", "_NORM_KERNEL") + "        return\n",
            "does not end in a return",
        ),
        (
            "        return _NORM_KERNEL(\n            hidden",
            "        return\n        (\n            hidden",
            "a return",
        ),
    ],
)
def test_gate_refuses_a_helper_call_or_helper_it_cannot_inline(long_head, old: str, new: str, message: str):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    assert old in rewrite.new
    rewrite.new = rewrite.new.replace(old, new, 1) if old else rewrite.new + new
    with pytest.raises(UnsafeRewrite, match=message):
        check_factored(rewrite, {"LongHeadPredictor"})


def test_gate_refuses_a_helper_the_plan_did_not_make_or_a_class_that_had_the_method(long_head):
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    with pytest.raises(UnsafeRewrite, match="class LongHeadPredictor has a _pre_head the plan did not make"):
        check_factored(rewrite, set())
    plain = rewrite_factored(path, source, insertions, binds_torch=True)
    for name in ("_pre_head", "get_top_tokens"):
        plain.old = source.replace(
            "    def load_weights", f"    def {name}(self):\n        pass\n\n    def load_weights", 1
        )
        with pytest.raises(UnsafeRewrite, match="class LongHeadPredictor already defines get_top_tokens or _pre_head"):
            check_factored(plain, {"LongHeadPredictor"})


@pytest.mark.parametrize(
    "name",
    [
        "crlf",
        "cross_file",
        "form_feed",
        "import_above_class",
        "inherited",
        "needs_import",
        "no_final_newline",
        "quoted_annotations",
        "same_name_per_platform",
        "tabs",
    ],
)
def test_a_class_the_helper_does_not_take_gets_the_plain_rewrite(name: str, tmp_path: Path) -> None:
    """The factoring rewrite writes the plain mirror, byte for byte, into a class it does not factor."""
    case = FIXTURES / "fix" / name
    tree = build_tree(case, tmp_path / "tree", "input")
    args = (case / "args.txt").read_text().split()
    models = [args[i + 1] for i, a in enumerate(args) if a == "--model"]
    result = plan_fix(locate(tree), models or None, "--all" in args, None)
    assert result.rewrites
    for plain in result.rewrites:
        insertions = [i for i in result.plan.insertions if (i.target.name, i.target.line) in plain.targets]
        factored = rewrite_factored(plain.path, plain.old, insertions, binds_torch=not plain.added_import)
        assert (factored.new, factored.added_import, factored.factored) == (plain.new, plain.added_import, [])


def test_factor_pre_head_writes_a_file_without_a_final_newline(tmp_path: Path) -> None:
    """The wrapper's method goes at the end of a file whose last line has no newline, beside a factored class."""
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"
    (tree / path).write_text((tree / path).read_text().rstrip("\n"))
    result = plan_fix(locate(tree), None, True, None, factor_pre_head=True)
    assert [o.action for o in result.plan.outcomes] == ["fix", "fix"]
    write_fix(result)
    assert (tree / path).read_text() == (case / "expected" / path).read_text()


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_factor_pre_head_writes_the_expected_file_in_its_own_newline(newline: str, tmp_path: Path) -> None:
    """A file whose lines end in CRLF or a bare CR gets the expected file's bytes in its newline (libcst
    writes a bare-CR module back without its last newline: it is put back)."""
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"
    (tree / path).write_bytes((tree / path).read_bytes().replace(b"\n", newline.encode()))
    result = plan_fix(locate(tree), None, True, None, factor_pre_head=True)
    [factored] = [r for r in result.rewrites if r.factored]
    assert factored.path == path and factored.new == (case / "expected" / path).read_text().replace("\n", newline)


@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_a_factored_file_that_needs_import_torch_keeps_its_newline(newline: str, long_head) -> None:
    _, path, source, insertions = long_head
    unbound = source.replace("import torch\n", "import math\n", 1)  # the same lines, torch not bound
    expected = rewrite_factored(path, unbound, insertions, binds_torch=False)
    assert expected.added_import and expected.factored
    styled = rewrite_factored(path, unbound.replace("\n", newline), insertions, binds_torch=False)
    assert styled.new == expected.new.replace("\n", newline)


def test_the_pre_head_block_is_found_after_a_docstring_and_another_method(tmp_path: Path) -> None:
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"
    head = "class LongHeadPredictor(nn.Module):\n"
    extra = '    """The per-step heads."""\n\n    def __init__(self):\n        super().__init__()\n\n'
    (tree / path).write_text((tree / path).read_text().replace(head, head + extra))
    write_fix(plan_fix(locate(tree), None, True, None, factor_pre_head=True))
    assert (tree / path).read_text() == (case / "expected" / path).read_text().replace(head, head + extra)


def test_a_one_line_class_is_refused_by_the_factoring_rewrite(tmp_path: Path) -> None:
    tree = build_tree(FIXTURES / "fix" / "inherited", tmp_path / "tree", "input")
    (tree / MODELS / "child_eagle.py").write_text(
        "from .parent_lm import ParentLM\n\n\nclass ChildEagle(ParentLM): pass\n"
    )
    result = plan_fix(locate(tree), ["child_eagle"], False, None)
    [outcome] = result.plan.outcomes
    assert outcome.reason == "unsafe rewrite refused: class ChildEagle has a one-line body; add the method by hand"
    [insertion] = outcome.insertions
    source = (tree / MODELS / "child_eagle.py").read_text()
    with pytest.raises(UnsafeRewrite, match="class ChildEagle has a one-line body; add the method by hand"):
        rewrite_factored(f"{MODELS}/child_eagle.py", source, [insertion], binds_torch=False)


@pytest.mark.parametrize("classes", [["LongHeadPredictor"], ["LongHeadPredictor", "OtherHeadPredictor"]])
def test_each_planned_class_with_a_long_pre_head_is_factored(classes: list[str], tmp_path: Path) -> None:
    """Factored, and said so: the pull-request description explains the helper."""
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"

    def predictors(text: str) -> str:
        predictor = (
            "\n\n\nclass LongHeadPredictor" + text.split("class LongHeadMTP")[0].split("class LongHeadPredictor")[1]
        )
        return text.split("\n\n\nclass LongHeadPredictor")[0] + "".join(
            predictor.replace("LongHeadPredictor", name).rstrip("\n") + "\n" for name in classes
        )

    (tree / path).write_text(predictors((tree / path).read_text()))
    entries = "".join(f'    "{name}Model": ("long_head_mtp", "{name}"),\n' for name in classes)
    (tree / MODELS / "registry.py").write_text("_SPECULATIVE_DECODING_MODELS = {\n" + entries + "}\n")
    result = plan_fix(locate(tree), None, True, None, factor_pre_head=True)
    assert [(r.path, r.classes, r.factored, r.encoding) for r in result.rewrites] == [(path, classes, classes, "utf-8")]
    body = " ".join(render_pr_body(result, "mtp-audit fix --factor-pre-head --all").split())
    named = ", ".join(f"`{name}` ({path})" for name in classes)
    assert f"In {named} the hidden-state transform before the head moves into a private `_pre_head` helper" in body
    write_fix(result)
    assert (tree / path).read_text() == predictors((case / "expected" / path).read_text())


def test_a_guard_before_the_pre_head_block_stays_in_compute_logits(tmp_path: Path) -> None:
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"
    step = "        current_step_idx = spec_step_idx % self.num_mtp_layers\n"
    guard = "        if spec_step_idx < 0:\n            raise ValueError(spec_step_idx)\n"
    (tree / path).write_text((tree / path).read_text().replace(step, guard + step))
    result = plan_fix(locate(tree), None, True, None, factor_pre_head=True)
    assert [r.factored for r in result.rewrites if r.path == path] == [["LongHeadPredictor"]]
    write_fix(result)
    assert (tree / path).read_text() == (case / "expected" / path).read_text().replace(step, guard + step)


def test_the_factoring_rewrite_refuses_a_file_whose_planned_classes_moved(tmp_path: Path) -> None:
    case = FIXTURES / "fix" / "factor_pre_head"
    tree = build_tree(case, tmp_path / "tree", "input")
    path = f"{MODELS}/long_head_mtp.py"
    insertions = plan_fix(locate(tree), ["LongHeadMTP"], False, None).plan.insertions
    assert sorted(i.target.name for i in insertions) == ["LongHeadMTP", "LongHeadPredictor"]
    moved = "# edited since the scan\n" + (tree / path).read_text()
    with pytest.raises(
        UnsafeRewrite,
        match=f"{path}: the file no longer has the classes planned for: "
        + ", ".join(i.target.name for i in insertions)
        + "; scan again",
    ):
        rewrite_factored(path, moved, insertions, binds_torch=True)


LONG_MTP = "vllm/model_executor/models/long_mtp.py"
VARIANT = "class LongVariantMTP(LongMTP):\n    def _pre_head(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"


@pytest.mark.parametrize(
    ("edit", "extra", "clash"),
    [
        ({}, {}, f"its subclass LongVariantMTP ({LONG_MTP}:14) binds _pre_head (line 15)"),
        (
            {VARIANT: "class LongVariantMTP(LongMTP):\n    _pre_head = None\n\n    def _other(self, hidden_states):\n"},
            {},
            f"its subclass LongVariantMTP ({LONG_MTP}:14) binds _pre_head (line 15)",
        ),
        (
            {VARIANT: "class LongVariantMTP(LongMTP):\n    def _pre_head_cache(self, hidden_states):\n"},
            {
                "deep_mtp.py": "from .long_mtp import LongVariantMTP\n\n\nclass DeepMTP(LongVariantMTP):\n"
                "    def __init__(self) -> None:\n        self._pre_head = print\n"
            },
            "its subclass DeepMTP (vllm/model_executor/models/deep_mtp.py:4) binds _pre_head (line 6)",
        ),
        (
            {
                VARIANT: "class LongVariantMTP(LongMTP):\n    def _pre_head_cache(self, hidden_states):\n",
                "class LongMTP(nn.Module):\n": "class LongMTP(nn.Module):\n"
                "    if True:\n        from os import sep as _pre_head\n\n",
            },
            {},
            "it binds _pre_head (line 7)",
        ),
        (
            {VARIANT: "class LongVariantMTP(Cached, LongMTP):\n    def _pre_head_cache(self, hidden_states):\n"},
            {
                "cached.py": "class Cached:\n    def _pre_head(self, hidden_states):\n        return hidden_states\n",
                "long_mtp.py+": "from .cached import Cached\n",
            },
            f"its subclass LongVariantMTP ({LONG_MTP}:15) through Cached "
            "(vllm/model_executor/models/cached.py:1), which binds _pre_head (line 2)",
        ),
        ({VARIANT: "class LongVariantMTP(LongMTP):\n    def _pre_head_cache(self, hidden_states):\n"}, {}, None),
    ],
    ids=["subclass_method", "subclass_attribute", "grandchild_instance_attribute", "own_import", "mixin", "no_clash"],
)
def test_a_helper_that_a_class_or_any_inheritor_binds_is_refused(
    tmp_path: Path, edit: dict[str, str], extra: dict[str, str], clash: str | None
) -> None:
    """``self._pre_head(...)`` in the rewritten compute_logits reaches the subclass's binding on its
    instances: the inherited compute_logits would change silently. The clash is named, with its line."""
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head_subclass", tmp_path / "tree", "input")
    source = (tree / LONG_MTP).read_text()
    for old, new in edit.items():
        assert old in source
        source = source.replace(old, new)
    (tree / LONG_MTP).write_text(source)
    for file, text in extra.items():
        if file.endswith("+"):  # prepended to a file of the fixture
            target = tree / "vllm" / "model_executor" / "models" / file[:-1]
            target.write_text(text + target.read_text())
        else:
            (tree / "vllm" / "model_executor" / "models" / file).write_text(text)
    result = plan_fix(locate(tree), ["LongMTP"], False, None, factor_pre_head=True)
    (outcome,) = result.plan.outcomes
    if clash is None:
        assert outcome.action == "fix" and [r.factored for r in result.rewrites] == [["LongMTP"]]
    else:
        assert outcome.action == "refused" and result.rewrites == []
        assert outcome.reason == (
            f"unsafe rewrite refused: {LONG_MTP}: no _pre_head helper in LongMTP: {clash}, and "
            "LongMTP.compute_logits would call that one there; fix without --factor-pre-head writes the plain mirror"
        )


def test_a_drafter_that_inherits_a_refused_method_is_refused_with_it(tmp_path: Path) -> None:
    """LongVariantMTP's copy of the mirror is dropped for LongMTP's own: when LongMTP's rewrite is
    refused, LongVariantMTP would get nothing, and is refused too (it was said fixed)."""
    tree = build_tree(FIXTURES / "fix" / "factor_pre_head_subclass", tmp_path / "tree", "input")
    result = plan_fix(locate(tree), None, True, None, factor_pre_head=True)
    assert [(o.record.cls, o.action) for o in result.plan.outcomes] == [
        ("LongMTP", "refused"),
        ("LongVariantMTP", "refused"),
    ]
    assert result.plan.outcomes[0].reason == result.plan.outcomes[1].reason and result.rewrites == []


CLOSURE = "        current = lambda: hidden_states  # noqa: E731\n"


def _with_line_before_the_chain(source: str, line: str) -> str:
    anchor = "        # Forward returns the residual stream; fold it before the head.\n"
    assert anchor in source
    return source.replace(anchor, line + anchor, 1)


@pytest.mark.parametrize(
    "line, factored",
    [
        (CLOSURE, False),  # a closure reads compute_logits's hidden_states: the chain stays where it is
        ("        later = (hidden_states * k for k in range(2))\n", False),  # a generator runs later too
        ("        def current():\n            return hidden_states\n\n", False),
        ("        widths = [hidden_states.shape[i] for i in range(2)]\n", True),  # runs where it stands
    ],
)
def test_a_closure_over_the_hidden_states_keeps_the_plain_mirror(long_head, line: str, factored: bool):
    """Moved into the helper, the chain would rebind the helper's own ``hidden_states``; a closure made before
    it (and called in it) reads compute_logits's, so compute_logits would compute something else."""
    tree, path, source, _ = long_head
    (tree / path).write_text(_with_line_before_the_chain(source, line))
    result = plan_fix(locate(tree), ["LongHeadMTPModel"], False, None, factor_pre_head=True)
    (rewrite,) = result.rewrites
    assert ("def _pre_head(" in rewrite.new) is factored
    assert rewrite.factored == (["LongHeadPredictor"] if factored else [])


def test_gate_refuses_a_helper_that_rebinds_what_a_closure_reads(long_head):
    """The gate, on its own: a helper made despite the closure (the AST inlines to the old one) is refused."""
    _, path, source, insertions = long_head
    rewrite = rewrite_factored(path, source, insertions, binds_torch=True)
    rewrite.old = _with_line_before_the_chain(source, CLOSURE)
    rewrite.new = _with_line_before_the_chain(rewrite.new, CLOSURE)
    with pytest.raises(UnsafeRewrite, match="_pre_head in LongHeadPredictor rebinds hidden_states, which a closure"):
        check_factored(rewrite, {"LongHeadPredictor"})
