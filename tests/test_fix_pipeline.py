"""The fix pipeline in process (plan, blast radius, rewrite, write), on the fix fixture trees.

``test_fix_fixtures.py`` runs the same cases through the CLI in a subprocess;
here the public functions are called directly, so that a change to the
planning or writing code is seen by tests that run in the same process
(the mutation run measures exactly those).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree
from mtp_audit.apply.changes import Rewrite
from mtp_audit.apply.write import diff_bytes, unified_diff, write_all
from mtp_audit.errors import UsageError
from mtp_audit.fix import plan_fix, write_fix
from mtp_audit.locate import locate
from mtp_audit.resolve.model_types import model_type_map

CASES = sorted(p for p in (FIXTURES / "fix").iterdir() if p.is_dir())


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _fix(tree: Path, args: list[str]):
    source = locate(tree)
    models = [args[i + 1] for i, a in enumerate(args) if a == "--model"]
    types = model_type_map(source.package_dir) if source.package_dir else {}
    return plan_fix(source, models or None, "--all" in args, None, types, factor_pre_head="--factor-pre-head" in args)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fix_in_process(case: Path, tmp_path: Path) -> None:
    tree = build_tree(case, tmp_path / "tree", "input")
    before = _files(tree)
    args = (case / "args.txt").read_text().split()
    result = _fix(tree, args)
    write_fix(result)
    after = _files(tree)
    changed = {path for path in after if after[path] != before.get(path)}
    expected = _files(case / "expected") if (case / "expected").is_dir() else {}
    assert changed == set(expected)
    for path in changed:
        assert after[path] == expected[path], path
    assert sorted(r.path for r in result.rewrites) == sorted(changed)

    said = [o for o in result.plan.outcomes if o.action in ("refused", "skipped")]
    if (case / "expected_stderr.txt").exists():
        needle = (case / "expected_stderr.txt").read_text().strip()
        assert any(needle in " ".join(o.reason.split()) for o in said), [o.reason for o in said]
    fixed = [o for o in result.plan.outcomes if o.action == "fix"]
    assert all(o.insertions and o.reason.startswith(("get_top_tokens added to", "inherited from")) for o in fixed)

    again = _fix(tree, args)
    assert again.rewrites == [] and again.plan.insertions == []


def test_blast_radius_names_the_victim_and_writes_nothing(tmp_path: Path) -> None:
    """A method added to a base would be inherited by a subclass whose compute_logits masks the
    logits: the fix is refused, with the subclass named, and no file changes."""
    case = FIXTURES / "fix" / "refusals"
    tree = build_tree(case, tmp_path / "tree", "input")
    before = _files(tree)
    result = _fix(tree, (case / "args.txt").read_text().split())
    write_fix(result)
    assert _files(tree) == before
    blocked = [o for o in result.plan.outcomes if o.reason.startswith("blast radius: ")]
    assert blocked and all(o.action == "refused" and not result.plan.insertions for o in blocked)
    assert all("would make MaskedMTPModel" in o.reason and "divergent" in o.reason for o in blocked)


def _rewrite(root: Path, name: str, old: str, new: str) -> Rewrite:
    (root / name).write_text(old)
    return Rewrite(name, old, new, ["Drafter"], False, [("Drafter", 1)])


def test_write_all_replaces_each_file_and_keeps_its_mode(tmp_path: Path) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    second = _rewrite(tmp_path, "b.py", "z = 1\n", "z = 1\nw = 2\n")
    os.chmod(tmp_path / "b.py", 0o640)
    write_all(tmp_path, [first, second])
    assert (tmp_path / "a.py").read_text() == first.new and (tmp_path / "b.py").read_text() == second.new
    assert stat.S_IMODE((tmp_path / "b.py").stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]  # no temporary file left


def test_write_all_writes_nothing_when_one_file_changed_since_it_was_read(tmp_path: Path) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    second = _rewrite(tmp_path, "b.py", "z = 1\n", "z = 1\nw = 2\n")
    (tmp_path / "b.py").write_text("z = 2\n")
    with pytest.raises(UsageError, match="b.py changed since it was analysed"):
        write_all(tmp_path, [first, second])
    assert (tmp_path / "a.py").read_text() == "x = 1\n"


def test_write_all_writes_nothing_when_one_file_is_read_only(tmp_path: Path) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    second = _rewrite(tmp_path, "b.py", "z = 1\n", "z = 1\nw = 2\n")
    os.chmod(tmp_path / "b.py", 0o444)  # refused even for root, who could write it
    with pytest.raises(
        UsageError,
        match=r"b.py is read-only \(mode 0444\); nothing written, "
        "make it writable and run fix again",
    ):
        write_all(tmp_path, [first, second])
    assert (tmp_path / "a.py").read_text() == "x = 1\n" and (tmp_path / "b.py").read_text() == "z = 1\n"


def test_write_all_rewrites_a_symlinked_file_where_it_lives(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "drafter.py"
    target.write_text("x = 1\n")
    (tmp_path / "link.py").symlink_to(target)
    write_all(tmp_path, [Rewrite("link.py", "x = 1\n", "x = 1\ny = 2\n", [], False, [])])
    assert (tmp_path / "link.py").is_symlink() and target.read_text() == "x = 1\ny = 2\n"


def test_unified_diff_shows_only_the_insertion() -> None:
    diff = unified_diff(Rewrite("pkg/m.py", "a\nb\n", "a\nnew\nb\n", [], False, []))
    assert diff.startswith("--- a/pkg/m.py\n+++ b/pkg/m.py\n")
    assert [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == ["+new"]


def test_unified_diff_marks_a_last_line_without_a_newline_as_git_does() -> None:
    """Without git's marker the removed and the added last line run together into one line."""
    diff = unified_diff(Rewrite("pkg/m.py", "a\nb", "a\nb\nnew\n", [], False, []))
    assert diff.endswith(" a\n-b\n\\ No newline at end of file\n+b\n+new\n")


@pytest.mark.parametrize(
    "text, encoding, line",
    [
        ("# café\nx = 1", "latin-1", "# café\n".encode("latin-1")),
        ("# café\nx = 1", "utf-8-sig", "\ufeff# café\n".encode()),
    ],
)
def test_diff_bytes_are_the_files_bytes(text: str, encoding: str, line: bytes) -> None:
    """The diff of a file in another encoding (or with a BOM) holds its lines as the file holds them."""
    diff = diff_bytes(Rewrite("pkg/m.py", text, text + "\ny = 2\n", [], False, [], encoding=encoding))
    assert b"\n " + line in diff and diff.startswith(b"--- a/pkg/m.py\n")


MODELS = "vllm/model_executor/models"
FAMILY = {
    "registry.py": '_SPECULATIVE_DECODING_MODELS = {\n    "ParentModel": ("parent_lm", "ParentLM"),\n'
    '    "ChildModel": ("child_eagle", "ChildEagle"),\n    "DoneModel": ("done_mtp", "DoneMTP"),\n'
    '    "CappedModel": ("capped_mtp", "CappedMTP"),\n}\n',
    "child_eagle.py": "from .parent_lm import ParentLM\n\n\nclass ChildEagle(ParentLM):\n    pass\n",
    "done_mtp.py": (FIXTURES / "fix" / "inherited" / "input" / MODELS / "parent_lm.py")
    .read_text()
    .replace("ParentLM", "DoneMTP")
    + "\n    def get_top_tokens(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
    "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n",
    "capped_mtp.py": "import torch\nfrom torch import nn\n\n\nclass CappedMTP(nn.Module):\n"
    "    def compute_logits(self, hidden_states):\n"
    "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
    "        return 30.0 * torch.tanh(logits / 30.0)\n",
}


def test_each_selected_drafter_gets_an_outcome_that_says_what_happens(tmp_path: Path) -> None:
    """Fixed, fixed through a base fixed in the same run, already supported, refused: one each."""
    tree = build_tree(FIXTURES / "fix" / "inherited", tmp_path / "tree", "input")
    for name, text in FAMILY.items():
        (tree / MODELS / name).write_text(text)
    result = _fix(
        tree, ["--model", "ParentModel", "--model", "ChildModel", "--model", "DoneModel", "--model", "CappedModel"]
    )
    outcomes = {o.record.arch: (o.action, o.reason) for o in result.plan.outcomes}
    assert outcomes == {
        "ParentModel": ("fix", "get_top_tokens added to ParentLM"),
        "ChildModel": ("fix", "inherited from ParentLM (fixed in the same run)"),
        "DoneModel": ("supported", "already supported (mirror)"),
        "CappedModel": (
            "refused",
            "missing_manual: logits soft-capped after the head call (line 8: `torch.tanh(logits / 30.0)`)",
        ),
    }
    assert [(i.target.name, i.source.owner.name) for i in result.plan.insertions] == [("ParentLM", "ParentLM")]
    assert [r.path for r in result.rewrites] == [f"{MODELS}/parent_lm.py"]
    assert {o.record.arch: o.record.cls for o in result.plan.outcomes} == {
        "ParentModel": "ParentLM",
        "ChildModel": "ChildEagle",
        "DoneModel": "DoneMTP",
        "CappedModel": "CappedMTP",
    }


@pytest.mark.parametrize(
    "case, written",
    [
        ("dispatch_if_elif", ["vllm/models/fork/nvidia/mtp.py", "vllm/models/fork/xpu/mtp.py"]),
        (
            "dispatch_raise",
            ["vllm/models/gated/nvidia/mtp.py", "vllm/models/lazyraise/nvidia/mtp.py", "vllm/models/maybe/mtp.py"],
        ),
    ],
)
def test_fix_all_writes_each_platform_class_and_no_unreachable_one(
    case: str, written: list[str], tmp_path: Path
) -> None:
    """One architecture, a different class per platform: each missing one is fixed, on its own
    analyses; a class only a raising branch imports (maybe/legacy.py) is never touched."""
    tree = build_tree(FIXTURES / "scan" / case, tmp_path / "tree")
    result = _fix(tree, ["--all"])
    assert sorted(r.path for r in result.rewrites) == written
    assert all(o.action == "fix" for o in result.plan.outcomes)


def test_a_refused_drafter_listed_first_does_not_hide_the_blast_radius(tmp_path: Path) -> None:
    tree = build_tree(FIXTURES / "fix" / "refusals", tmp_path / "tree", "input")
    result = _fix(tree, ["--model", "MaskedMTPModel", "--model", "BaseMTPModel"])
    assert [(o.record.arch, o.action) for o in result.plan.outcomes] == [
        ("MaskedMTPModel", "refused"),
        ("BaseMTPModel", "refused"),
    ]
    assert result.plan.outcomes[1].reason.startswith("blast radius: ") and result.rewrites == []


def test_blast_radius_names_every_victim_with_its_place_and_platforms(tmp_path: Path) -> None:
    case = FIXTURES / "fix" / "refusals"
    tree = build_tree(case, tmp_path / "tree", "input")
    masked = (tree / MODELS / "masked_mtp.py").read_text()
    cuda_only = (
        "from vllm.platforms import current_platform\n\nif not current_platform.is_cuda():\n"
        '    raise ImportError("CappedTwo needs CUDA")\n'
    )
    (tree / MODELS / "capped_two.py").write_text(
        cuda_only
        + masked.replace("MaskedMTP", "CappedTwo").replace(
            "logits[..., self.limit :] = -torch.inf", "logits = logits.clamp(max=self.cap)"
        )
    )
    registry = tree / MODELS / "registry.py"
    registry.write_text(registry.read_text().replace("}", '    "CappedTwoModel": ("capped_two", "CappedTwo"),\n}'))
    result = _fix(tree, ["--model", "BaseMTPModel"])
    [outcome] = result.plan.outcomes
    assert outcome.action == "refused" and result.rewrites == []
    parts = re.split(r"; (?=adding get_top_tokens to )", outcome.reason.removeprefix("blast radius: "))
    found = [re.match(r"(.+\)) (\w+) on ([a-z,]+): .+", p).groups() for p in parts]
    everywhere = "cpu,cuda,rocm,tpu,xpu"
    assert found == [
        (
            f"adding get_top_tokens to BaseMTP would make MaskedMTPModel (MaskedMTP, {MODELS}/masked_mtp.py:6)",
            "divergent",
            everywhere,
        ),
        (
            f"adding get_top_tokens to BaseMTP would make CappedTwoModel (CappedTwo, {MODELS}/capped_two.py:10)",
            "unproven",
            "cuda",
        ),
    ]


def test_blast_radius_blames_only_the_classes_a_victim_inherits_from(tmp_path: Path) -> None:
    """An unrelated drafter fixed in the same run is not refused with the blocked one."""
    tree = build_tree(FIXTURES / "fix" / "refusals", tmp_path / "tree", "input")
    base = (tree / MODELS / "base_mtp.py").read_text()
    (tree / MODELS / "other_mtp.py").write_text(base.replace("BaseMTP", "OtherMTP"))
    registry = tree / MODELS / "registry.py"
    registry.write_text(registry.read_text().replace("}", '    "OtherMTPModel": ("other_mtp", "OtherMTP"),\n}'))
    result = _fix(tree, ["--model", "BaseMTPModel", "--model", "OtherMTPModel"])
    assert [(o.record.arch, o.action) for o in result.plan.outcomes] == [
        ("BaseMTPModel", "refused"),
        ("OtherMTPModel", "fix"),
    ]
    assert [r.path for r in result.rewrites] == [f"{MODELS}/other_mtp.py"]


def test_a_drafter_already_inconsistent_before_the_fix_does_not_block_it(tmp_path: Path) -> None:
    """OwnTop masks its logits and has its own (divergent) get_top_tokens: adding one to its base
    changes nothing for it, so the base is fixed."""
    tree = build_tree(FIXTURES / "fix" / "refusals", tmp_path / "tree", "input")
    masked = (tree / MODELS / "masked_mtp.py").read_text().replace("MaskedMTP", "OwnTop")
    (tree / MODELS / "masked_mtp.py").unlink()
    (tree / MODELS / "own_top.py").write_text(
        masked + "\n    def get_top_tokens(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    )
    (tree / MODELS / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "BaseMTPModel": ("base_mtp", "BaseMTP"),\n'
        '    "OwnTopModel": ("own_top", "OwnTop"),\n}\n'
    )
    result = _fix(tree, ["--all"])
    assert [(o.record.arch, o.action) for o in result.plan.outcomes] == [("BaseMTPModel", "fix")]
    assert [r.path for r in result.rewrites] == [f"{MODELS}/base_mtp.py"]


def test_write_all_replaces_through_a_hidden_file_beside_the_target(tmp_path: Path, monkeypatch) -> None:
    """Written next to the file (the same file system, so the replace is atomic), under a name
    that says whose it is should a crash leave it behind."""
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    replaced = []
    real_replace = os.replace

    def spy(source, target):
        replaced.append((Path(source), Path(target), Path(source).read_text()))
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", spy)
    write_all(tmp_path, [first])
    [(source, target, text)] = [r for r in replaced if r[1].name == "a.py"]  # the journal is replaced too
    assert source.parent == target.parent == tmp_path.resolve() and text == first.new
    assert source.name.startswith(".a.py.") and "mtp-audit" in source.name


def test_write_all_removes_its_temporary_file_when_the_replace_fails(tmp_path: Path, monkeypatch) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")

    def fail(source, target):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError, match="disk full"):
        write_all(tmp_path, [first])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"] and (tmp_path / "a.py").read_text() == "x = 1\n"


def test_a_fix_that_writes_two_classes_names_both(tmp_path: Path) -> None:
    tree = build_tree(FIXTURES / "fix" / "cross_file", tmp_path / "tree", "input")
    result = _fix(tree, (FIXTURES / "fix" / "cross_file" / "args.txt").read_text().split())
    assert [o.reason for o in result.plan.outcomes] == ["get_top_tokens added to SplitMTP, SplitPredictor"]


def _refused(root: Path, rewrites: list[Rewrite], message: str, also: tuple[Path, ...] = ()) -> None:
    """write_all refuses with exactly ``message`` and leaves every file as it was."""
    before = {r.path: (root / r.path).read_bytes() for r in rewrites if (root / r.path).exists()}
    with pytest.raises(UsageError) as refusal:
        write_all(root, rewrites, also)
    assert str(refusal.value) == message
    assert {r.path: (root / r.path).read_bytes() for r in rewrites if (root / r.path).exists()} == before


@pytest.mark.parametrize("links", [1, 2])
def test_write_all_refuses_a_file_with_other_hard_links(tmp_path: Path, links: int) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    second = _rewrite(tmp_path, "b.py", "z = 1\n", "z = 1\nw = 2\n")
    for number in range(links):
        os.link(tmp_path / "b.py", tmp_path / f"b-{number}.txt")
    _refused(
        tmp_path,
        [first, second],
        f"b.py has {links} other hard link(s), which would keep the old content; nothing written "
        "(break the link, e.g. cp then mv, and run fix again)",
    )


def test_write_all_refuses_a_file_it_cannot_read(tmp_path: Path) -> None:
    first = _rewrite(tmp_path, "a.py", "x = 1\n", "x = 1\ny = 2\n")
    (tmp_path / "a.py").unlink()
    _refused(tmp_path, [first], "a.py: cannot be read (No such file or directory); nothing written")


def test_write_all_refuses_a_file_whose_folder_it_cannot_write(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    first = _rewrite(tmp_path, "sub/a.py", "x = 1\n", "x = 1\ny = 2\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path / "sub" and real_access(path, mode))
    mode = stat.S_IMODE((tmp_path / "sub").stat().st_mode)
    _refused(  # the folder is named, not the writable file (it was called read-only)
        tmp_path,
        [first],
        f"sub/a.py: its folder is not writable (mode {mode:04o}), and the file is replaced by a new one written "
        "there; nothing written, make the folder writable and run fix again",
    )


def test_write_all_refuses_a_file_it_cannot_write(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    first = _rewrite(tmp_path, "sub/a.py", "x = 1\n", "x = 1\ny = 2\n")
    real_access = os.access
    target = tmp_path / "sub" / "a.py"
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != target and real_access(path, mode))
    mode = stat.S_IMODE(target.stat().st_mode)
    said = f"sub/a.py is read-only (mode {mode:04o}); nothing written, make it writable and run fix again"
    _refused(tmp_path, [first], said)


def test_write_all_refuses_a_tree_where_its_journal_cannot_go(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "sub").mkdir()
    first = _rewrite(tmp_path, "sub/a.py", "x = 1\n", "x = 1\ny = 2\n")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != tmp_path and real_access(path, mode))
    _refused(tmp_path, [first], f"{tmp_path} is not writable: the write journal goes there; nothing written")


def test_write_all_writes_through_a_symlink_only_into_a_root_the_scan_read(tmp_path: Path) -> None:
    tree, plugin = tmp_path / "tree", tmp_path / "plugin"
    tree.mkdir()
    plugin.mkdir()
    (plugin / "drafter.py").write_text("x = 1\n")
    (tree / "link.py").symlink_to(plugin / "drafter.py")
    rewrite = Rewrite("link.py", "x = 1\n", "x = 1\ny = 2\n", [], False, [])
    real = (plugin / "drafter.py").resolve()
    _refused(
        tree,
        [rewrite],
        f"link.py resolves to {real}, outside {tree}; nothing written "
        "(mtp-audit never writes through a symlink out of the tree)",
    )
    write_all(tree, [rewrite], also=(plugin,))  # an installed plugin's directory: the scan read it
    assert real.read_text() == "x = 1\ny = 2\n"


def test_write_all_refuses_a_method_the_file_encoding_cannot_hold(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_bytes("# café\nx = 1\n".encode("latin-1"))
    rewrite = Rewrite("a.py", "# café\nx = 1\n", "# café\nx = 1\ny = '→'\n", [], False, [], encoding="latin-1")
    _refused(
        tmp_path,
        [rewrite],
        "a.py: the new method has text that latin-1 (the file's encoding) cannot hold (ordinal not in range(256)); "
        "nothing written",
    )


def test_an_edit_during_the_write_puts_back_each_file_in_its_own_encoding(tmp_path: Path, monkeypatch) -> None:
    """The first file is written, then the user saves the second: the first gets its old bytes back."""
    from mtp_audit.apply import write

    old = "# café\nx = 1\n"
    rewrites = []
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_bytes(old.encode("latin-1"))
        rewrites.append(Rewrite(name, old, old + "y = 2\n", [], False, [], encoding="latin-1"))
    real_replace = write._replace

    def replace_then_edit(path, data, expected):
        real_replace(path, data, expected)
        if path.name == "a.py":
            (tmp_path / "b.py").write_bytes(old.encode("latin-1") + b"# saved by the user\n")

    monkeypatch.setattr(write, "_replace", replace_then_edit)
    with pytest.raises(UsageError) as refusal:
        write_all(tmp_path, rewrites)
    assert str(refusal.value) == "b.py changed while fix was writing; nothing written (put back: a.py), run fix again"
    assert (tmp_path / "a.py").read_bytes() == old.encode("latin-1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py", "b.py"]


def test_a_fix_description_names_every_class_written_and_every_base_it_inherits_from() -> None:
    from mtp_audit.apply.plan import _describe
    from mtp_audit.classify.analysis import Insertion
    from mtp_audit.index.fact_types import MethodFacts
    from mtp_audit.model import ClassKey
    from mtp_audit.resolve.mro import MethodHit

    def insertion(target: str, owner: str) -> Insertion:
        method = MethodFacts("compute_logits", 2, "    def compute_logits(self, h):\n        return h\n")
        return Insertion(ClassKey("m", target, 1), MethodHit(ClassKey("m", owner, 1), method, 0))

    written = [insertion("A", "A"), insertion("B", "B")]
    inherited = [insertion("C", "BaseX"), insertion("D", "BaseY"), insertion("E", "BaseX")]
    assert _describe(written + inherited, written) == (
        "get_top_tokens added to A, B; inherited from BaseX, BaseY (fixed in the same run)"
    )
    assert _describe(inherited, []) == "inherited from BaseX, BaseY (fixed in the same run)"


def test_each_asked_record_gets_one_outcome_that_names_it(tmp_path: Path) -> None:
    """A drafter with nothing to write (no compute_logits, a placeholder) is skipped; one that needs
    a human, or that no speculator calls get_top_tokens on, is refused."""
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "shapes")
    asked = ["--model", "StubMTP", "--model", "NoLogitsMTP", "--model", "MaskMTP"]
    outcomes = [(o.record.arch, o.action, o.reason.split(":")[0]) for o in _fix(tree, asked).plan.outcomes]
    assert outcomes == [
        ("StubMTP", "skipped", "not_applicable"),
        ("NoLogitsMTP", "skipped", "not_applicable"),
        ("MaskMTP", "refused", "missing_manual"),
    ]
    tree = build_tree(FIXTURES / "scan" / "call_contract", tmp_path / "contract")
    [outcome] = _fix(tree, ["--model", "toy_dspark"]).plan.outcomes
    assert (outcome.record.arch, outcome.action) == ("ToyDSparkModel", "refused")
    assert outcome.reason.startswith("not_applicable: no speculator that can hold it calls get_top_tokens")


OWN_TOP = (
    "import torch\n\nfrom .masked_mtp import MaskedMTP\n\n\nclass OwnTop(MaskedMTP):\n"
    "    def get_top_tokens(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
    "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
)


@pytest.mark.parametrize("elsewhere", ["base_mtp:BaseMTP", "own_top:OwnTop"], ids=["safe", "already-divergent"])
def test_a_victim_on_one_platform_only_blocks_the_fix(tmp_path: Path, elsewhere: str) -> None:
    """PlatMTP's base is MaskedMTP on CUDA only: the method added to BaseMTP would make it divergent
    there. On the platforms looked at before CUDA it is safe after the fix, or was divergent before
    it already: neither hides CUDA."""
    tree = build_tree(FIXTURES / "fix" / "refusals", tmp_path / "tree", "input")
    (tree / MODELS / "own_top.py").write_text(OWN_TOP)
    module, name = elsewhere.split(":")
    (tree / MODELS / "plat_mtp.py").write_text(
        "from vllm.platforms import current_platform\n\n"
        f"if current_platform.is_cuda():\n    from .masked_mtp import MaskedMTP as PlatBase\n"
        f"else:\n    from .{module} import {name} as PlatBase\n\n\nclass PlatMTP(PlatBase):\n    pass\n"
    )
    (tree / MODELS / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "BaseMTPModel": ("base_mtp", "BaseMTP"),\n'
        '    "PlatMTPModel": ("plat_mtp", "PlatMTP"),\n}\n'
    )
    result = _fix(tree, ["--model", "BaseMTPModel"])
    [outcome] = result.plan.outcomes
    assert outcome.action == "refused" and result.rewrites == []
    assert outcome.reason.startswith(
        f"blast radius: adding get_top_tokens to BaseMTP would make PlatMTPModel (PlatMTP, {MODELS}/plat_mtp.py:9) "
        "divergent on cuda: "
    )


def test_the_blast_radius_reads_how_the_speculators_call_each_drafter(tmp_path: Path) -> None:
    """ToyStepMTP keeps its own compute_logits(hidden_states, spec_step_idx) and would inherit the
    get_top_tokens(hidden_states) written into ToyMTP: the refusal names the speculator whose call
    passes spec_step_idx to it (a call that would raise), as a scan of the fixed tree would."""
    tree = build_tree(FIXTURES / "scan" / "call_contract", tmp_path / "contract")
    (tree / MODELS / "toy_step_mtp.py").write_text(
        "import torch\n\nfrom .toy_mtp import ToyMTP\n\n\nclass ToyStepMTP(ToyMTP):\n"
        "    def compute_logits(self, hidden_states: torch.Tensor, spec_step_idx: int = 0) -> torch.Tensor:\n"
        "        return super().compute_logits(hidden_states)\n"
    )
    [outcome] = _fix(tree, ["--model", "ToyMTPModel"]).plan.outcomes
    assert outcome.action == "refused"
    assert outcome.reason.startswith(
        "blast radius: adding get_top_tokens to ToyMTP would make ToyStepMTP "
        f"(ToyStepMTP, {MODELS}/toy_step_mtp.py:6) divergent on cpu,cuda,rocm,tpu,xpu: "
        "get_top_tokens inherited from ToyMTP; "
        "MultiModuleSpeculator (vllm/v1/worker/gpu/spec_decode/multi_module.py:9) "
        "calls get_top_tokens(hidden_states, spec_step_idx=spec_step_idx)"
    )


def test_a_drafter_refused_for_two_of_its_classes_names_each_victim(tmp_path: Path) -> None:
    """Wrapper delegates compute_logits to a BaseMTP: the fix writes into both, and each has a masked
    subclass among the drafters. The refusal names both conflicts, one after the other."""
    tree = build_tree(FIXTURES / "fix" / "refusals", tmp_path / "tree", "input")
    (tree / MODELS / "wrapper.py").write_text(
        "import torch\nfrom torch import nn\n\nfrom .base_mtp import BaseMTP\n\n\nclass Wrapper(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.model = BaseMTP()\n\n"
        "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        return self.model.compute_logits(hidden_states)\n\n\nclass MaskedWrapper(Wrapper):\n"
        "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        logits = super().compute_logits(hidden_states)\n"
        "        logits[..., self.limit :] = -torch.inf\n        return logits\n"
    )
    registry = tree / MODELS / "registry.py"
    added = '    "WrapperModel": ("wrapper", "Wrapper"),\n    "MaskedWrapperModel": ("wrapper", "MaskedWrapper"),\n}'
    registry.write_text(registry.read_text().replace("}", added))
    result = _fix(tree, ["--model", "WrapperModel"])
    [outcome] = result.plan.outcomes
    assert outcome.action == "refused" and [i.target.name for i in outcome.insertions] == ["Wrapper", "BaseMTP"]
    parts = re.split(r"; (?=adding get_top_tokens to )", outcome.reason.removeprefix("blast radius: "))
    assert [re.match(r"adding get_top_tokens to (\w+) would make (.+?) divergent on ", p).groups() for p in parts] == [
        ("Wrapper", f"MaskedWrapperModel (MaskedWrapper, {MODELS}/wrapper.py:16)"),
        ("BaseMTP", f"MaskedMTPModel (MaskedMTP, {MODELS}/masked_mtp.py:6)"),
    ]
    assert result.rewrites == []


def test_two_modules_that_are_one_file_are_rewritten_once(tmp_path: Path) -> None:
    """A symlinked module is the file it links to: one rewrite with each class's method once (the
    class both modules plan, and one only the link plans); diff, write and a second fix agree."""
    tree = build_tree(FIXTURES / "fix" / "needs_import", tmp_path / "tree", "input")
    models = tree / "vllm/model_executor/models"
    (models / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "LinkMTPModel": ("link_mtp", "LinkMTP"),\n'
        '    "RealMTPModel": ("real_mtp", "LinkMTP"),\n'
        '    "OtherMTPModel": ("link_mtp", "OtherMTP"),\n'
        "}\n"
    )
    head = (
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    (models / "real_mtp.py").write_text(f"class LinkMTP:\n{head}\n\nclass OtherMTP:\n{head}")
    (models / "link_mtp.py").symlink_to("real_mtp.py")
    result = plan_fix(locate(tree), None, True, None)
    assert [(r.path, r.classes) for r in result.rewrites] == [
        ("vllm/model_executor/models/real_mtp.py", ["LinkMTP", "OtherMTP"])
    ]
    write_fix(result)
    assert (models / "link_mtp.py").is_symlink()
    assert (models / "real_mtp.py").read_text().count("def get_top_tokens") == 2
    assert plan_fix(locate(tree), None, True, None).rewrites == []


def test_modules_that_are_one_file_through_a_linked_folder_are_named_by_the_real_one(tmp_path: Path) -> None:
    """``aa_linked/`` links to ``real/``: the rewrite is named by ``real/``'s path, though the link's sorts
    first and neither path's last part is a link."""
    tree = build_tree(FIXTURES / "fix" / "needs_import", tmp_path / "tree", "input")
    models = tree / "vllm/model_executor/models"
    (models / "real").mkdir()
    (models / "real/__init__.py").write_text("")
    (models / "aa_linked").symlink_to("real")
    (models / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "LinkedMTPModel": ("aa_linked.one_mtp", "OneMTP"),\n'
        '    "RealMTPModel": ("real.one_mtp", "OneMTP"),\n'
        "}\n"
    )
    (models / "real/one_mtp.py").write_text(
        "class OneMTP:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    result = plan_fix(locate(tree), None, True, None)
    assert [(r.path, r.classes) for r in result.rewrites] == [
        ("vllm/model_executor/models/real/one_mtp.py", ["OneMTP"])
    ]


def test_a_file_registered_only_through_a_link_is_written_diffed_and_patched_by_its_own_path(tmp_path: Path) -> None:
    """Only the link (to the file, or to a folder above it) is a registered module: the rewrite, its diff
    and its patch name the file itself (git will not patch through a link), and the family is still
    the drafter's."""
    from mtp_audit.apply.families import split_families

    tree = build_tree(FIXTURES / "fix" / "needs_import", tmp_path / "tree", "input")
    models = tree / "vllm/model_executor/models"
    (models / "real").mkdir()
    (models / "real/__init__.py").write_text("")
    (models / "linked").symlink_to("real")
    (models / "alias_mtp.py").symlink_to("real_mtp.py")
    (models / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "AliasMTPModel": ("alias_mtp", "AliasMTP"),\n'
        '    "LinkedMTPModel": ("linked.one_mtp", "OneMTP"),\n'
        "}\n"
    )
    head = (
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    (models / "real_mtp.py").write_text(f"class AliasMTP:\n{head}")
    (models / "real/one_mtp.py").write_text(f"class OneMTP:\n{head}")
    result = plan_fix(locate(tree), None, True, None)
    assert sorted((r.path, r.modules) for r in result.rewrites) == [
        ("vllm/model_executor/models/real/one_mtp.py", ("vllm.model_executor.models.linked.one_mtp",)),
        ("vllm/model_executor/models/real_mtp.py", ("vllm.model_executor.models.alias_mtp",)),
    ]
    assert all(f"+++ b/{r.path}\n" in unified_diff(r) for r in result.rewrites)
    families = split_families(result.plan, result.rewrites)
    assert sorted((f.name, [r.path for r in f.rewrites]) for f in families) == [
        ("AliasMTP", ["vllm/model_executor/models/real_mtp.py"]),
        ("OneMTP", ["vllm/model_executor/models/real/one_mtp.py"]),
    ]
    write_fix(result)
    assert (models / "alias_mtp.py").is_symlink() and (models / "linked").is_symlink()
    assert "def get_top_tokens" in (models / "real_mtp.py").read_text()


def test_modules_that_are_one_file_and_differ_in_a_method_are_refused_naming_both_paths() -> None:
    from types import SimpleNamespace

    from mtp_audit.fix import _one_insertion_per_class
    from mtp_audit.model import ClassKey

    def planned(module: str, text: str) -> SimpleNamespace:
        owner = ClassKey(module, "LinkMTP", 4)
        return SimpleNamespace(target=owner, source=SimpleNamespace(method=SimpleNamespace(text=text), owner=owner))

    same = [(SimpleNamespace(path="a/link.py"), [planned("a.link", "x")])]
    same.append((SimpleNamespace(path="b/real.py"), [planned("b.real", "x")]))
    assert [i.target.module for i in _one_insertion_per_class(same)[0]] == ["a.link"]
    same[1][1][0].source.method.text = "y"
    assert _one_insertion_per_class(same) == (
        [],
        "a/link.py and b/real.py are one file (a link), and class LinkMTP (line 4) would get a different "
        "method from each; add it by hand",
    )


def test_the_blast_radius_judges_an_inheriting_drafter_as_its_callers_call_it(tmp_path: Path) -> None:
    """ToyGemmaMTP inherits the method written into ToyMTP and takes a spec_step_idx no speculator passes:
    equivalent (its re-scan says so), not divergent."""
    from conftest import run_cli

    tree = build_tree(FIXTURES / "fix" / "blast_radius_caller_contract", tmp_path / "tree", "input")
    done = run_cli("fix", str(tree), "--model", "ToyMTPModel", "--diff")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert (
        "drafter ToyGemmaMTPModel) inherits get_top_tokens from ToyMTP on cpu,cuda,rocm,tpu,xpu: supported/equivalent"
        in said
    )
