"""``fix --patches``: the series applies with ``git am`` and gives the tree ``fix`` writes."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree, run_cli
from mtp_audit.apply.changes import Rewrite
from mtp_audit.apply.families import split_families
from mtp_audit.apply.plan import Action, Outcome, Plan
from mtp_audit.classify.analysis import Insertion
from mtp_audit.errors import UsageError
from mtp_audit.fix import plan_fix
from mtp_audit.index.fact_types import MethodFacts
from mtp_audit.locate import locate
from mtp_audit.model import ClassKey, DrafterRecord, Status
from mtp_audit.report.patches import AUTHOR, build_patches, render_index, write_patches
from mtp_audit.report.pr_body import read_verify_report
from mtp_audit.resolve.mro import MethodHit

SERIES = FIXTURES / "fix" / "series"
GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]


def _git_checkout(tree: Path) -> None:
    subprocess.run([*GIT, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=tree, check=True)
    subprocess.run([*GIT, "commit", "-qm", "base"], cwd=tree, check=True)


def _python_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted((root / "vllm").rglob("*.py"))}


@pytest.fixture
def series(tmp_path: Path) -> tuple[Path, Path, subprocess.CompletedProcess]:
    if shutil.which("git") is None:
        pytest.fail("git is needed to apply the series")
    tree = build_tree(SERIES, tmp_path / "tree", "input")
    _git_checkout(tree)
    out = tmp_path / "out"
    result = run_cli("fix", str(tree), "--all", "--patches", str(out))
    return tree, out, result


def test_series_applies_in_order_and_equals_fix(series, tmp_path):
    tree, out, result = series
    assert result.returncode == 0, result.stderr
    before = _python_files(tree)
    assert (
        subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True, check=True).stdout
        == ""
    ), "--patches wrote into the tree"
    patches = sorted(out.glob("*.patch"))
    applied = subprocess.run(
        [*GIT, "am", "--keep-non-patch", *map(str, patches)], cwd=tree, capture_output=True, text=True, check=False
    )
    assert applied.returncode == 0, applied.stdout + applied.stderr

    reference = build_tree(SERIES, tmp_path / "reference", "input")
    assert run_cli("fix", str(reference), "--all").returncode == 0
    after = _python_files(tree)
    assert {k: v for k, v in after.items() if not k.startswith("tests/")} == _python_files(reference)
    assert after != before

    log = subprocess.run(
        ["git", "log", "--format=%s", f"-{len(patches)}"], cwd=tree, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert all(re.fullmatch(r"\[Spec Decode\] .+: implement get_top_tokens\(\)", s) for s in log), log
    rescan = run_cli("scan", str(tree), "--format", "json", "--fail-on", "never")
    assert '"missing_fixable"' not in rescan.stdout
    assert '"unproven"' not in rescan.stdout and '"divergent"' not in rescan.stdout


def test_each_patch_is_one_family_with_its_test(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    touched = {}
    for patch in sorted(out.glob("*.patch")):
        text = patch.read_text()
        files = re.findall(r"^diff --git a/(\S+) b/", text, flags=re.MULTILINE)
        touched[patch.name] = files
        tests = [f for f in files if f.startswith("tests/v1/spec_decode/")]
        assert len(tests) == 1, files
        assert "## Purpose" in text and "## Test Plan" in text and "## Test Result" in text
        assert f"pytest -q {tests[0]}" in text
    # Three families from the tree: the platform package, and the predictor with both the wrapper
    # it serves and the lite drafter whose delegate inherits from it.
    families = sorted(tuple(f for f in files if not f.startswith("tests/")) for files in touched.values())
    assert families == [
        (
            "vllm/model_executor/models/wrap_lite_mtp.py",
            "vllm/model_executor/models/wrap_mtp.py",
            "vllm/model_executor/models/wrap_predictor.py",
        ),
        ("vllm/models/plat/amd/mtp.py", "vllm/models/plat/nvidia/mtp.py"),
    ]


def test_index_lists_inheritors_that_are_not_drafters(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    index = (out / "README.md").read_text()
    non_drafters = index.split("## Classes that inherit a written method and are not drafters")[1].split("##")[0]
    assert "`ScorerPredictor`" in non_drafters and "`WrapPredictor`" in non_drafters
    assert "WrapLitePredictor" not in non_drafters  # a drafter's delegate is part of the drafter
    for patch in out.glob("*.patch"):
        assert f"[{patch.name}]({patch.name})" in index
    assert "blast radius: ScorerPredictor" in " ".join(result.stderr.split())


def test_generated_test_is_valid_python_naming_each_drafter(series):
    _, out, result = series
    assert result.returncode == 0, result.stderr
    plat = next(p for p in out.glob("*.patch") if "PlatMTP" in p.name).read_text()
    added = "\n".join(
        line[1:]
        for line in plat.split("+++ b/tests/v1/spec_decode/")[1].splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )
    compile(added, "generated_test.py", "exec")
    assert '("vllm.models.plat.amd.mtp", "PlatMTP", False)' in added
    assert '("vllm.models.plat.nvidia.mtp", "PlatMTP", False)' in added


def test_patches_refuse_a_folder_holding_a_series(series):
    tree, out, _ = series
    again = run_cli("fix", str(tree), "--all", "--patches", str(out))
    assert again.returncode == 2 and "already holds a patch series" in again.stderr


def test_a_crlf_file_applies_with_keep_cr(tmp_path):
    case = FIXTURES / "fix" / "crlf"
    tree = build_tree(case, tmp_path / "tree", "input")
    _git_checkout(tree)
    out = tmp_path / "out"
    result = run_cli("fix", str(tree), *(case / "args.txt").read_text().split(), "--patches", str(out))
    assert result.returncode == 0, result.stderr
    assert "git am --keep-non-patch --keep-cr *.patch" in (out / "README.md").read_text()
    applied = subprocess.run(
        [*GIT, "am", "--keep-non-patch", "--keep-cr", *map(str, sorted(out.glob("*.patch")))],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
    )
    assert applied.returncode == 0, applied.stderr
    for path in (case / "expected").rglob("*.py"):
        assert (tree / path.relative_to(case / "expected")).read_bytes() == path.read_bytes()


# The same series made in process (the mutation run sees only code that runs in the test's process),
# checked against what git itself reads and writes: git am applies it, format-patch names the
# commits alike, and git's own counts and blob ids are those in the patches.

CASES = [
    "series",
    "factor_pre_head",
    "no_final_newline",
    "placement_mixin",
    "crlf",
    "same_name_per_platform",
    "file_encodings",  # a latin-1 file and a BOM: each file's diff in its own bytes
]


def _git(tree: Path, *args: str) -> str:
    return subprocess.run([*GIT, *args], cwd=tree, capture_output=True, text=True, check=True).stdout


def _planned(case: Path, tree: Path):
    args = (case / "args.txt").read_text().split()
    models = [args[i + 1] for i, a in enumerate(args) if a == "--model"]
    return plan_fix(locate(tree), models or None, "--all" in args, None, factor_pre_head="--factor-pre-head" in args)


@pytest.mark.parametrize("name", CASES)
def test_series_in_process_is_what_git_reads_and_writes(name: str, tmp_path: Path) -> None:
    case = FIXTURES / "fix" / name
    tree = build_tree(case, tmp_path / "tree", "input")
    if name == "series":  # an executable file keeps its mode
        (tree / "vllm/models/plat/nvidia/mtp.py").chmod(0o755)
    _git_checkout(tree)
    result = _planned(case, tree)
    out = tmp_path / "out"
    written = write_patches(result, out, "mtp-audit fix", None)
    assert written == sorted(out.glob("*.patch")) and len(written) == len(split_families(result.plan, result.rewrites))
    index = (out / "README.md").read_text()
    keep_cr = any("\r\n" in r.old for r in result.rewrites)
    flags = "--keep-non-patch --keep-cr" if keep_cr else "--keep-non-patch"
    assert f"\ngit am {flags} *.patch   # --keep-non-patch keeps" in index
    _git(tree, "am", "--keep-non-patch", *(["--keep-cr"] if keep_cr else []), *map(str, written))

    # the tree is the one fix writes, plus one generated test per patch
    for path in (case / "expected").rglob("*.py"):
        assert (tree / path.relative_to(case / "expected")).read_bytes() == path.read_bytes(), path
    commits = _git(tree, "log", "--reverse", "--format=%H", f"-{len(written)}").split()
    assert len(commits) == len(written)
    assert _git(tree, "log", "--format=%an <%ae>|%aI", "-1") == f"{AUTHOR}|1970-01-01T00:00:00+00:00\n"
    names = _git(tree, "format-patch", "-o", str(tmp_path / "git"), f"-{len(written)}").split()
    assert [Path(n).name for n in names] == [p.name for p in written]

    for number, (patch, commit) in enumerate(zip(written, commits), 1):
        text = patch.read_bytes().decode("utf-8", "surrogateescape")  # a file's diff may be latin-1
        assert re.match(r"From [0-9a-f]{40} Mon Sep 17 00:00:00 2001\n", text)  # format-patch's mbox line
        subject = re.search(r"^Subject: (.*)$", text, re.MULTILINE).group(1)
        message = _git(tree, "log", "--format=%b", "-1", commit)
        assert message.startswith("## Purpose\n") and message.rstrip() in text  # the description, whole
        prefix = f"[PATCH {number}/{len(written)}]" if len(written) > 1 else "[PATCH]"
        assert subject == f"{prefix} {_git(tree, 'log', '--format=%s', '-1', commit).strip()}"
        # the summary and the per-file counts are git's
        stat = text.split("\n---\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert stat[-1] == _git(tree, "show", "--shortstat", "--format=", commit).strip("\n")
        counted = {}
        for line in _git(tree, "show", "--numstat", "--format=", commit).splitlines():
            added, removed, path = line.split("\t")
            counted[path] = (int(added), int(removed))
        shown = {}
        for line in stat[:-1]:
            path, bar = re.fullmatch(r" (\S+) \| (.*)", line).groups()
            total, signs = bar.split(" ")
            added, removed = counted[path]
            assert (int(total), signs) == (added + removed, "+" * min(added, 60) + "-" * min(removed, 60)), line
            shown[path] = total
        assert set(shown) == set(counted)
        assert re.findall(r"^diff --git a/(\S+) b/(\S+)$", text, re.MULTILINE) == [(p, p) for p in shown]
        # each file's index line names the blobs git has before and after, with the file's mode
        for path, old, new, mode in re.findall(
            r"^diff --git a/(\S+) .*\n(?:new file mode \d+\n)?index (\w+)\.\.(\w+) ?(\d*)", text, re.MULTILINE
        ):
            before = _git(tree, "rev-parse", f"{commit}~1:{path}").strip() if old != "0000000" else "0000000"
            assert old == before[:7] and new == _git(tree, "rev-parse", f"{commit}:{path}").strip()[:7]
            listed = _git(tree, "ls-tree", commit, path).split()[0]
            assert (mode or re.search(rf"new file mode (\d+)\n(?=index \w+\.\.{new})", text).group(1)) == listed
        # the index row of this patch: its drafters, platforms and files with their added/removed lines
        row = next(
            line for line in index.splitlines() if line.startswith(f"| {number} | [{patch.name}]({patch.name}) |")
        )
        files = [p for p, _ in re.findall(r"^diff --git a/(\S+) b/(\S+)$", text, re.MULTILINE)]
        cell = "<br>".join(f"`{p}` +{counted[p][0]}" + (f" -{counted[p][1]}" if counted[p][1] else "") for p in files)
        assert row.endswith(f" | {cell} |")


def _series_in_process(name: str, tmp_path: Path, files: dict[str, str] | None = None, entry: str = ""):
    """The series of a fix fixture, with ``files`` added to its models folder and ``entry`` to its registry."""
    case = FIXTURES / "fix" / name
    tree = build_tree(case, tmp_path / "tree", "input")
    models = tree / "vllm/model_executor/models"
    for file, text in (files or {}).items():
        (models / file).write_text(text)
    (models / "registry.py").write_text((models / "registry.py").read_text().replace("}", entry + "}"))
    result = _planned(case, tree)
    written = write_patches(result, tmp_path / "out", "mtp-audit fix", None)
    return result, {p.name: p.read_text() for p in written}, (tmp_path / "out" / "README.md").read_text()


def test_each_patch_describes_its_own_family_and_the_index_all_of_them(tmp_path: Path) -> None:
    other = "from .wrap_predictor import WrapPredictor\n\n\nclass OtherScorer(WrapPredictor):\n    pass\n"
    result, patches, index = _series_in_process("series", tmp_path / "series", {"other_scorer.py": other})
    plat, wrap = (patches[n] for n in sorted(patches))
    assert "PlatMTP" in plat and "Wrap" not in plat.split("\n---\n")[0]  # no other family's drafters or classes
    assert "mtp-audit fix --model WrapLiteMTPModel --model WrapMTPModel\n" in wrap
    assert "mtp-audit fix --model PlatMTPModel\n" in plat
    assert "`ScorerPredictor` (vllm/model_executor/models/wrap_predictor.py:15) from `WrapPredictor`" in wrap
    assert '("vllm.model_executor.models.wrap_mtp", "WrapMTP", True),' in wrap  # takes spec_step_idx
    assert '("vllm.models.plat.amd.mtp", "PlatMTP", False),' in plat
    assert "tests/v1/spec_decode/test_wrap_lite_mtp_get_top_tokens.py" in wrap
    assert "tests/v1/spec_decode/test_plat_mtp_get_top_tokens.py" in plat
    assert "vLLM 0.99.0, one patch per model family" in index and ": 2 patches\n" in index
    assert (
        "\n\n- `OtherScorer` (vllm/model_executor/models/other_scorer.py:4) inherits the method written into "
        "`WrapPredictor` on cpu, cuda, rocm, tpu, xpu: supported/mirror\n"
        "- `ScorerPredictor` (vllm/model_executor/models/wrap_predictor.py:15) inherits the method written into "
        "`WrapPredictor` on cpu, cuda, rocm, tpu, xpu: supported/mirror\n\n" in index
    )
    assert (
        "WrapLitePredictor" not in index
        and "- none moved\n" in index
        and "## Refused (nothing written for these)\n\n- none\n" in index
    )
    assert "| `PlatMTPModel` (PlatMTP) | cpu, cuda, rocm, tpu, xpu |" in index
    assert "| `WrapLiteMTPModel` (WrapLiteMTP)<br>`WrapMTPModel` (WrapMTP) | cpu, cuda, rocm, tpu, xpu |" in index

    result, patches, index = _series_in_process("placement_mixin", tmp_path / "placement")
    (note,), (moved,) = map(str, result.placement_notes), patches.values()
    assert note.startswith("get_top_tokens goes into MTPMixin with the compute_logits of CausalMixin inlined")
    assert f"- {note}\n" in index and note in " ".join(moved.split())  # the patch's description names it too
    none = "- none: every class that inherits a written method is a drafter or a drafter's delegate\n"
    assert f"## Classes that inherit a written method and are not drafters\n\n{none}" in index

    models = FIXTURES / "fix" / "refusals" / "input" / "vllm/model_executor/models"
    two = {  # a second base that a masking drafter inherits: refused as the first
        f"{name.replace('mtp', 'two')}.py": (models / f"{name}.py")
        .read_text()
        .replace("MTP", "Two")
        .replace("_mtp", "_two")
        for name in ("base_mtp", "masked_mtp")
    }
    entry = '    "BaseTwoModel": ("base_two", "BaseTwo"),\n    "MaskedTwoModel": ("masked_two", "MaskedTwo"),\n'
    result, patches, index = _series_in_process("refusals", tmp_path / "refusals", two, entry)
    assert patches == {} and ": 0 patches\n" in index and "\n| - | - | - | - | - |\n" in index
    refused = index.split("## Refused (nothing written for these)\n\n")[1].splitlines()
    assert refused[0].startswith(
        "- `BaseMTPModel` (BaseMTP, vllm/model_executor/models/base_mtp.py, cpu, cuda, rocm, tpu, xpu): "
        "blast radius: adding get_top_tokens to BaseMTP would make MaskedMTPModel"
    )
    assert refused[1].startswith(
        "- `BaseTwoModel` (BaseTwo, vllm/model_executor/models/base_two.py, cpu, cuda, rocm, tpu, xpu): "
        "blast radius: adding get_top_tokens to BaseTwo would make MaskedTwoModel"
    )


def test_patches_in_process_refuse_a_folder_holding_a_series(tmp_path: Path) -> None:
    case = FIXTURES / "fix" / "series"
    tree = build_tree(case, tmp_path / "tree", "input")
    result = _planned(case, tree)
    out = tmp_path / "out"
    write_patches(result, out, "mtp-audit fix", None)
    with pytest.raises(UsageError, match=r"already holds a patch series \(0001-Spec-Decode-PlatMTP-"):
        write_patches(result, out, "mtp-audit fix", None)


# Families from plain plan data: which drafters and files go into one patch, and how it is named.


def _outcome(arch: str | None, cls: str, module: str, *owners: str, action: Action = Action.FIX) -> Outcome:
    """A drafter ``cls`` of ``module``, fixed by methods written into ``owners`` (``module.Class``) in turn."""
    record = DrafterRecord(arch, cls, module, module.replace(".", "/") + ".py", 1, ["cuda"], Status.MISSING_FIXABLE, "")
    insertions = []
    for owner in owners or (f"{module}.{cls}",):
        key = ClassKey(owner.rsplit(".", 1)[0], owner.rsplit(".", 1)[1], 1)
        insertions.append(Insertion(key, MethodHit(key, MethodFacts("compute_logits", 2, ""), 0)))
    return Outcome(record, action, "", insertions)


def _rewrite_of(module: str) -> Rewrite:
    return Rewrite(module.replace(".", "/") + ".py", "", "", [], False, [])


def _families(outcomes: list[Outcome], modules: list[str]) -> list[tuple[str, list[str], list[str], str]]:
    plan = Plan(outcomes, [i for o in outcomes for i in o.insertions])
    return [
        (f.name, [o.record.cls for o in f.outcomes], [r.path for r in f.rewrites], f.slug)
        for f in split_families(plan, [_rewrite_of(m) for m in modules])
    ]


M = "vllm.model_executor.models"


def test_families_join_files_one_fix_touches_and_the_platforms_of_one_architecture() -> None:
    outcomes = [
        _outcome("WrapModel", "Wrap", f"{M}.wrap", f"{M}.wrap.Wrap", f"{M}.head.Head"),  # a wrapper and its delegate
        _outcome("DSModel", "DSMTP", f"{M}.ds_v4.nvidia.mtp"),  # one architecture, a class per platform
        _outcome("DSModel", "DSMTP", f"{M}.ds_v4.xpu.mtp"),
        _outcome("LoneModel", "Lone", f"{M}.lone"),
        _outcome("Refused", "Gone", f"{M}.gone", action=Action.REFUSED),  # writes nothing: in no family
    ]
    modules = [f"{M}.head", f"{M}.wrap", f"{M}.ds_v4.xpu.mtp", f"{M}.lone", f"{M}.ds_v4.nvidia.mtp"]
    models = M.replace(".", "/")
    assert _families(outcomes, modules) == [
        ("DSMTP", ["DSMTP", "DSMTP"], [f"{models}/ds_v4/nvidia/mtp.py", f"{models}/ds_v4/xpu/mtp.py"], "ds_v4_mtp"),
        ("Lone", ["Lone"], [f"{models}/lone.py"], "lone"),
        ("Wrap", ["Wrap"], [f"{models}/head.py", f"{models}/wrap.py"], "wrap"),
    ]


def test_family_names_most_registered_first_then_by_name_with_the_rest_counted() -> None:
    owners = [f"{M}.shared.Base"]
    outcomes = [
        _outcome(arch, cls, f"{M}.{cls.lower()}", *owners)
        for arch, cls in [("E1", "Echo"), ("D1", "Delta"), ("Z1", "Zulu"), ("Z2", "Zulu"), ("A1", "Alpha")]
    ]
    [(name, classes, paths, slug)] = _families(outcomes, [f"{M}.shared"])
    assert name == "Zulu, Alpha, Delta and 1 more"
    assert classes == ["Echo", "Delta", "Zulu", "Zulu", "Alpha"] and slug == "shared"
    three = _families(outcomes[:3], [f"{M}.shared"])
    assert three[0][0] == "Delta, Echo, Zulu"


def test_two_families_of_one_class_name_say_their_architectures() -> None:
    outcomes = [
        _outcome("OtherMTPModel", "SameMTP", "vllm.other.mtp"),
        _outcome("OtherMTP2Model", "SameMTP", "vllm.other.mtp"),
        _outcome(None, "SameMTP", f"{M}.same_mtp"),  # unregistered: its class name stands for it
        _outcome("AModel", "alpha", f"{M}.alpha"),
        _outcome("BModel", "Same_Alpha", f"{M}.same_alpha"),
    ]
    modules = ["vllm.other.mtp", f"{M}.same_mtp", f"{M}.alpha", f"{M}.same_alpha"]
    names = [f[0] for f in _families(outcomes, modules)]
    # sorted without case ("_" before any letter)
    assert names == ["alpha", "Same_Alpha", "SameMTP (OtherMTP2Model, OtherMTPModel)", "SameMTP (SameMTP)"]
    assert [f[3] for f in _families(outcomes[:1], ["vllm.other.mtp"])] == ["vllm_other_mtp"]  # no models folder


def test_a_package_init_is_its_package_and_a_fix_writing_nothing_is_an_error() -> None:
    outcome = _outcome("PkgModel", "PkgMTP", f"{M}.pkg")
    plan = Plan([outcome], outcome.insertions)
    [family] = split_families(plan, [Rewrite(f"{M.replace('.', '/')}/pkg/__init__.py", "", "", [], False, [])])
    assert family.slug == "pkg" and family.platforms == ["cuda"]
    with pytest.raises(ValueError, match="PkgMTP: a fix that writes no file"):
        split_families(plan, [_rewrite_of(f"{M}.other")])
    with pytest.raises(ValueError, match=r"rewrites that no fixed drafter needs: \S*/other\.py, \S*/more\.py$"):
        split_families(plan, [_rewrite_of(f"{M}.pkg"), _rewrite_of(f"{M}.other"), _rewrite_of(f"{M}.more")])


def test_patch_file_names_are_those_git_format_patch_gives(tmp_path: Path) -> None:
    """Subjects of every length around the 52-character cut (which may end on a letter, an X, a dash or a
    dot), runs of dots and of other characters."""
    from mtp_audit.report.patches import _file_name

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run([*GIT, "init", "-q"], cwd=repo, check=True)
    names = [f"{'X' * n}MTP" for n in range(24, 36)] + [f"{'Y' * n}.MTP" for n in range(25, 28)]
    names += ["A.B, C-D and 3 more", "Deep..Seek_V3MTP", "E . .F", "(G)"]
    subjects = [f"[Spec Decode] {name}: implement get_top_tokens()" for name in names]
    for number, subject in enumerate(subjects):
        (repo / "f.txt").write_text(str(number))
        subprocess.run([*GIT, "add", "f.txt"], cwd=repo, check=True)
        subprocess.run([*GIT, "commit", "-qm", subject], cwd=repo, check=True)
    made = _git(repo, "format-patch", "--keep-subject", "-o", str(tmp_path / "out"), "--root").split()
    assert [Path(m).name for m in made] == [_file_name(n, s) for n, s in enumerate(subjects, 1)]


def test_each_patch_has_its_own_verify_rows_test_command_and_signature(tmp_path: Path) -> None:
    """Written into a folder that does not exist yet; each description keeps the verify rows of its own
    drafters, names its own generated test; each patch ends in format-patch's signature block."""
    case = FIXTURES / "fix" / "series"
    tree = build_tree(case, tmp_path / "tree", "input")
    result = _planned(case, tree)
    report = tmp_path / "verify.json"
    row = {"platforms": ["cuda"], "tp": 1, "verdict": "pass", "rows": 390, "detail": "exact"}
    report.write_text(
        json.dumps(
            {
                "vllm_version": "0.99.0",
                "results": [
                    {**row, "arch": a, "class": c}
                    for a, c in [("PlatMTPModel", "PlatMTP"), ("WrapMTPModel", "WrapMTP"), ("Other", "WrapMTP")]
                ],
            }
        )
    )
    out = tmp_path / "new" / "series"
    plat, wrap = (p.read_text() for p in write_patches(result, out, "mtp-audit fix", read_verify_report(report)))
    assert "| `PlatMTPModel` | `PlatMTP` | cuda | 1 | pass | 390 | exact |" in plat and "WrapMTP" not in plat
    assert "| `WrapMTPModel` | `WrapMTP` | cuda | 1 | pass | 390 | exact |" in wrap and "PlatMTP" not in wrap
    assert "`Other`" not in wrap  # another architecture's row of the same class is not this drafter's
    # a drafter of the patch that the report has no row for is named, not passed over
    assert "Not in the verify report: `WrapLiteMTPModel` (WrapLiteMTP). Paste their" in wrap
    assert "pytest -q tests/v1/spec_decode/test_plat_mtp_get_top_tokens.py\n" in plat
    assert "pytest -q tests/v1/spec_decode/test_wrap_lite_mtp_get_top_tokens.py\n" in wrap
    summary = '+"""get_top_tokens selects the tokens of compute_logits(...).argmax(-1).\n'
    assert summary + "+\n+For WrapLiteMTP, WrapMTP.\n" in wrap
    for text in (plat, wrap):
        assert re.search(r"\n\+.*\n-- \nmtp-audit \S+\n\n\Z", text)  # as git writes "-- \n<version>\n\n"
        assert re.search(r"(\| exact \||tables here\.)\n---\n vllm/", text)  # the description ends at the diffstat


def test_the_index_lists_every_placement_moved_and_a_tree_without_a_version(tmp_path: Path) -> None:
    two = (
        "import torch\nfrom torch import nn\n\n\nclass CausalTwo(nn.Module):\n"
        '    def compute_logits(self, hidden_states: "torch.Tensor") -> "torch.Tensor | None":\n'
        "        return self.logits_processor(self.lm_head, hidden_states, self.lm_head.bias)\n\n\n"
        "class TwoForCausalLM(CausalTwo): ...\n\n\nclass MTPTwo(CausalTwo):\n"
        "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:\n"
        "        return super().compute_logits(hidden_states)\n\n\nclass TwoForMTP(MTPTwo): ...\n"
    )
    entry = '    "TwoForMTP": ("causal_two", "TwoForMTP"),\n'
    result, _, index = _series_in_process("placement_mixin", tmp_path, {"causal_two.py": two}, entry)
    notes = [str(n) for n in result.placement_notes]
    assert len(notes) == 2 and "## Placements chosen to reach drafters only\n\n- " + "\n- ".join(notes) + "\n" in index
    unversioned = replace(result, tree=replace(result.tree, vllm_version=None))
    assert "\n\nvLLM (unknown version), one patch per model family" in render_index(unversioned, [])


def test_a_family_test_passes_vllms_lint_at_88_columns(tmp_path):
    """A generated test goes into vLLM's tree: pyflakes, pycodestyle and bugbear at vLLM's 88 columns
    find nothing, a family named by a long title included (its name wraps in the docstring)."""
    import subprocess
    import sys

    from mtp_audit.verify.emit import render_family_test

    title = "DeepSeekMTP, DeepseekV32MTP, OpenPanguMultiTokenPredictor and 3 more (DeepSeekMTPModel)"
    path = tmp_path / "test_family.py"
    path.write_text(render_family_test(title, [("vllm.model_executor.models.deepseek_mtp", "DeepSeekMTP", True)]))
    lint = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "E,F,B", "--line-length", "88", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout


def test_test_modules_get_free_names_when_slugs_clash_or_exist_upstream(tmp_path: Path) -> None:
    """``plat_mtp.py`` and ``plat/{amd,nvidia}/mtp.py`` have one slug, and the tree already has the
    wrap family's test: each family gets a name of its own (its package path), never a refusal."""
    tree = build_tree(SERIES, tmp_path / "tree", "input")
    models = tree / "vllm/model_executor/models"
    head = "        return self.logits_processor(self.lm_head, hidden_states)\n"
    (models / "plat_mtp.py").write_text(
        f"from torch import nn\n\n\nclass FlatMTP(nn.Module):\n    def compute_logits(self, hidden_states):\n{head}"
    )
    registry = models / "registry.py"
    registry.write_text(registry.read_text().replace("}", '    "FlatMTPModel": ("plat_mtp", "FlatMTP"),\n}'))
    upstream = tree / "tests/v1/spec_decode/test_wrap_lite_mtp_get_top_tokens.py"
    upstream.parent.mkdir(parents=True)
    upstream.write_text("# upstream's own test\n")
    tests = {p.family.name: p.test_path for p in build_patches(_planned(SERIES, tree))}
    assert sorted(tests.values()) == [
        "tests/v1/spec_decode/test_model_executor_models_wrap_lite_mtp_get_top_tokens.py",
        "tests/v1/spec_decode/test_models_plat_mtp_get_top_tokens.py",
        "tests/v1/spec_decode/test_plat_mtp_get_top_tokens.py",
    ], tests


def test_patches_refuse_a_folder_that_is_not_empty_before_anything_is_written(tmp_path: Path) -> None:
    """The index is DIR/README.md: a folder holding anything (a checkout's own README, notes) is refused, so
    nothing there is replaced; ``--patches .`` in a checkout writes nothing into it."""
    case = FIXTURES / "fix" / "series"
    tree = build_tree(case, tmp_path / "tree", "input")
    (tree / "README.md").write_text("the project's own\n")
    for folder in (tree, tmp_path / "notes"):
        folder.mkdir(exist_ok=True)
        (folder / "README.md").write_text("the project's own\n")
        result = run_cli("fix", str(tree), "--all", "--patches", str(folder))
        assert result.returncode == 2 and "give a new or empty folder; nothing written" in result.stderr
        assert (folder / "README.md").read_text() == "the project's own\n" and not list(folder.glob("*.patch"))


def test_a_verify_report_is_read_before_the_series_and_matched_to_the_tree(tmp_path: Path) -> None:
    """A malformed report fails before the folder is made (even with nothing to fix); one of another vLLM
    is refused; a detail's newlines stay inside its table row; --quiet prints no summary; "1 patch"."""
    case = FIXTURES / "fix" / "series"
    tree = build_tree(case, tmp_path / "tree", "input")
    out = tmp_path / "out"
    report = tmp_path / "verify.json"
    for content in ("[]", "[" * 100_000 + "]" * 100_000):
        report.write_text(content)
        result = run_cli(
            "fix", str(tree), "--model", "PlatMTPModel", "--patches", str(out), "--verify-report", str(report)
        )
        assert result.returncode == 2 and "not a `mtp-audit verify --json` file" in result.stderr, result.stderr
        assert "internal error" not in result.stderr and not out.exists()
    row = {"arch": "PlatMTPModel", "class": "PlatMTP", "platforms": ["cuda"], "tp": 1, "verdict": "fail", "rows": 2}
    report.write_text(json.dumps({"vllm_version": "0.1.0", "results": [{**row, "detail": "x"}]}))
    result = run_cli("fix", str(tree), "--model", "PlatMTPModel", "--patches", str(out), "--verify-report", str(report))
    assert result.returncode == 2 and "verifies vLLM 0.1.0, not this tree's 0.99.0" in result.stderr
    assert not out.exists()
    report.write_text(json.dumps({"vllm_version": "0.99.0", "results": [{**row, "detail": "line one\nline two"}]}))
    args = ("--model", "PlatMTPModel", "--patches", str(out), "--verify-report", str(report))
    result = run_cli("fix", str(tree), *args, "--quiet")
    assert result.returncode == 0 and result.stderr == ""
    [patch] = out.glob("*.patch")
    assert "| `PlatMTPModel` | `PlatMTP` | cuda | 1 | fail | 2 | line one line two |" in patch.read_text()
    assert "drafters: 1 patch\n" in (out / "README.md").read_text()
