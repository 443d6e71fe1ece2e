"""Mutation run over the code that decides safety and truth, and its score.

    python scripts/mutation.py                  # every group (about two hours on 2 busy cores)
    python scripts/mutation.py apply platforms  # some groups
    python scripts/mutation.py --score          # the score of the last run, nothing run
    python scripts/mutation.py classify --score --diffs survivors.txt  # and each survivor's diff
    python scripts/mutation.py --sample         # the fixed sample of .ci/run: fails if one survives

mutmut (configured in pyproject.toml, ``[tool.mutmut]``) copies the package
to ``mutants/``, runs each mutant against the in-process tests that reach the
mutated function, and keeps the outcome there. The score counts the mutants
of the chosen groups: killed (a test failed, or it ran past its time limit)
over those not listed as equivalent in docs/mutation.md.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "mutation.md"

_INDEX = "mtp_audit.index."
# mutmut names a mutant <module>.x_<function>__mutmut_<n> or <module>.xǁ<Class>ǁ<method>__mutmut_<n>
GROUPS = {
    "apply": ["mtp_audit.apply.*", "mtp_audit.report.patches.*"],  # the --patches series (moved to report/)
    "resolve": ["mtp_audit.resolve.*"],
    "classify": ["mtp_audit.classify.*"],
    "platforms": ["mtp_audit.index.platforms.*"],
    "processor": ["mtp_audit.index.processor.*"],  # what vLLM's LogitsProcessor runs, read off its source
    # the dispatch interpreter of the facts: module-level statements and __getattr__, per platform
    "dispatch": [
        _INDEX + name
        for name in (
            "facts.x_extract_facts__*",
            "facts.x__reads_platform__*",
            "ast_tools.x_absolute_module__*",
            "ast_tools.x_dotted__*",
            "ast_tools.x__blocks__*",
            "ast_tools.x_walk_statements__*",
            "interpreter.x__is_all__*",
            "interpreter.xǁ_Interpreterǁ*",
            "interpreter.x__raise_reason__*",
            "module_getattr.x__lazy_candidates__*",
            "module_getattr.x__evaluate_getattr__*",
            "module_getattr.x__run_function_body__*",
            "module_getattr.x__assign__*",
            "module_getattr.x__targets__*",
            "module_getattr.x__imported__*",
            "module_getattr.x__value__*",
            "module_getattr.x__item__*",
            "module_getattr.x__formatted__*",
            "module_getattr.x__mapping__*",
        )
    ],
}
# mutmut's exit codes (mutmut/stats.py); anything else is "suspicious"
STATUS = {
    1: "killed",
    3: "killed",
    36: "timeout",
    -24: "timeout",
    24: "timeout",
    152: "timeout",
    255: "timeout",
    0: "survived",
    5: "no tests",
    33: "no tests",
    34: "skipped",
    37: "killed",
    None: "not run",
    -9: "segfault",
    -11: "segfault",
}
KILLED = ("killed", "timeout")  # a mutant that never finishes is caught by the time limit


# The fixed sample (.ci/run): bugs that would let a fix write a wrong file or a scan report the wrong
# class, one per line, each as (the mutated function, the line the mutant writes). Named by what the
# mutant changes rather than by mutmut's number, which shifts when the function is edited.
SAMPLE = [
    # the rewrite gate: skipped, blinded, or letting edits through
    ("mtp_audit.apply.rewrite.x_rewrite_file", "check_rewrite(None, old_tree)"),
    (
        "mtp_audit.apply.rewrite.x_rewrite_file",
        "missing = [i for i in insertions if (i.target.name, i.target.line) in classes]",
    ),
    ("mtp_audit.apply.rewrite.x_check_rewrite", "if inserted is not None:"),
    ("mtp_audit.apply.rewrite.x_check_rewrite", "if [c.name for c in old_all] == [c.name for c in new_all]:"),
    ("mtp_audit.apply.rewrite.x_check_rewrite", "added = 1"),
    # the MRO: C3 and cycles
    ("mtp_audit.resolve.mro.xǁHierarchyǁmro", "if key not in self._active:"),
    ("mtp_audit.resolve.mro.x__c3", "if in_tails[head]:"),
    ("mtp_audit.resolve.mro.x__c3", "in_tails = Counter(item for s in seqs for item in s[2:])"),
    # platform dispatch: a raising branch kept, a platform predicate inverted
    ("mtp_audit.index.interpreter.xǁ_Interpreterǁmerge", "if first.error or second.error:"),
    ("mtp_audit.index.interpreter.xǁ_Interpreterǁmerge", "branches = [b for b in (first, second) if b.error]"),
    ("mtp_audit.index.platforms.x_evaluate", "return None if inner is None else inner"),
    (
        "mtp_audit.index.platforms.x_evaluate",
        "return platform not in PLATFORM_PREDICATES[predicate] "
        'if platform in DEVICE_TYPE else predicate == "is_out_of_tree"',
    ),
    # following names: cycles, a platform's import error, star imports
    ("mtp_audit.resolve.names.x_resolve_name", "seen = _seen & {key}"),
    ("mtp_audit.resolve.names.x_resolve_name", "error = index.import_error(platform)"),
    ("mtp_audit.resolve.names.x__last_star_giving", "if all(isinstance(r, Missing) for r in found):"),
    # the registry: which classes are drafters
    (
        "mtp_audit.resolve.registry.x_registry_reading",
        "drafter = OTHER_DICT_DRAFTER.search(arch) and (pair is not None and OTHER_DICT_DRAFTER.search(pair[1]))",
    ),
    ("mtp_audit.resolve.registry.x__pair", "if len(pair) != 2 or None not in pair:"),
    ("mtp_audit.resolve.registry.x__pair", 'if all(part.isidentifier() for part in module_name.split(".")):'),
    # the call contract: binding a caller's arguments
    ("mtp_audit.classify.calls.x_bind", "if call.positional >= len(positional) and not star:"),
    ("mtp_audit.classify.calls.x_bind", "elif starstar:"),
    # the call contract: comparing the values a caller gives the two methods
    ("mtp_audit.classify.calls.x_agree", 'if first.lstrip("=") != second.lstrip("="):'),
    ("mtp_audit.classify.calls.x_agree", "return True if any(c is not _NOT_CONSTANT for c in constants) else None"),
    (
        "mtp_audit.classify.calls.x_argument_gaps",
        "gaps.append(ArgumentGap(logits, param.name, value, top_value, same is not False, rebound))",
    ),
]
# In-process tests that reach the sampled functions; the rest of the selection is not needed.
SAMPLE_TESTS = [
    "tests/test_rewrite_gate.py",
    "tests/test_mro.py",
    "tests/test_dispatch.py",
    "tests/test_names.py",
    "tests/test_registry.py",
    "tests/test_calls.py",
    "tests/test_contract_rules.py",
]
_COPIED = ["mtp_audit", "templates", "tests", "docs"]
_GENERATE = """
import json, sys
import mutmut.__main__ as m
from mutmut.mutation.diff_apply import get_diff_for_mutant
m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); m.create_mutants(2)
diffs = {}
for meta, source in json.loads(sys.argv[1]).items():
    for name in json.load(open(meta))["exit_code_by_key"]:
        diffs[name] = get_diff_for_mutant(name, path=source)
print(json.dumps(diffs))
"""


def _sample_config(text: str, sources: list[str]) -> str:
    """pyproject.toml with mutmut limited to the sampled files and their tests."""

    def replace(key: str, values: list[str], text: str) -> str:
        pattern = re.compile(rf"^{key} = \[.*?^\]$|^{key} = \[.*?\]$", re.MULTILINE | re.DOTALL)
        assert pattern.search(text), f"{key} not found in [tool.mutmut]"
        return pattern.sub(f"{key} = {json.dumps(values)}", text, count=1)

    text = replace("only_mutate", sources, text)
    return replace("pytest_add_cli_args_test_selection", ["-m", "not integration", *SAMPLE_TESTS], text)


def run_sample(jobs: int) -> int:
    """Run the fixed sample in a scratch copy (the full run's mutants/ is left alone); 1 if one survives."""
    start = time.monotonic()
    sources = sorted({function.rsplit(".", 1)[0].replace(".", "/") + ".py" for function, _ in SAMPLE})
    env = {**os.environ, "MTP_AUDIT_FUZZ_EXAMPLES": os.environ.get("MTP_AUDIT_FUZZ_EXAMPLES", "10")}
    env.pop("PYTHONPATH", None)
    with tempfile.TemporaryDirectory(prefix="mtp-mutation-sample-") as scratch:
        work = Path(scratch)
        for item in _COPIED:
            (shutil.copytree if (ROOT / item).is_dir() else shutil.copy)(ROOT / item, work / item)
        (work / "pyproject.toml").write_text(_sample_config((ROOT / "pyproject.toml").read_text(), sources))
        metas = {f"mutants/{source}.meta": source for source in sources}
        made = subprocess.run(
            [sys.executable, "-c", _GENERATE, json.dumps(metas)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode:
            print(made.stdout[-3000:], made.stderr[-3000:], "generating the sample's mutants failed", sep="\n")
            return 2
        diffs = json.loads(made.stdout.splitlines()[-1])
        generated = time.monotonic() - start
        chosen, stale = {}, []
        for function, line in SAMPLE:
            found = [
                name
                for name, diff in diffs.items()
                if name.startswith(function + "__mutmut_")
                and any(d[1:].strip() == line for d in diff.splitlines() if d.startswith("+ "))
            ]
            if found:
                chosen[found[0]] = line
            else:
                stale.append(f"{function}: no mutant writes `{line}`")
        if stale:
            print("the sample no longer matches the code (edit SAMPLE in scripts/mutation.py):", *stale, sep="\n  ")
            return 2
        run = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(jobs), *chosen],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        results = {}
        for meta in metas:
            for name, code in json.loads((work / meta).read_text())["exit_code_by_key"].items():
                results[name] = STATUS.get(code, "suspicious")
    if run.returncode:
        print(run.stdout[-3000:], run.stderr[-3000:], f"mutmut run failed (exit {run.returncode})", sep="\n")
        return 2
    alive = [(name, results.get(name, "not run")) for name in chosen if results.get(name) not in KILLED]
    print(
        f"mutation sample: {len(chosen) - len(alive)} of {len(chosen)} mutants killed "
        f"in {time.monotonic() - start:.0f} s ({generated:.0f} s to make the mutants)"
    )
    for name, status in alive:
        print(f"  {status}: {name}: `{chosen[name]}`")
    return 1 if alive else 0


def equivalent_mutants() -> dict[str, str]:
    """Mutant (or a pattern, ``*`` for any mutant number of a function) -> why it is equivalent: the
    rows ``| `name` | why |`` of every table of docs/mutation.md headed ``| mutant | why it is
    equivalent |`` (the main section's, and each pass's own)."""
    if not DOC.exists():
        return {}
    found: dict[str, str] = {}
    for table in re.findall(r"^\| mutant \| why it is equivalent \|\n((?:\|.*\n?)*)", DOC.read_text(), re.MULTILINE):
        found.update(re.findall(r"^\| `(mtp_audit\.[^`]+)` \| (.+?) \|$", table, re.MULTILINE))
    return found


def outcomes() -> dict[str, str]:
    """Every mutant mutmut has generated, with its last status."""
    return {name: status for name, (status, _) in _outcomes_and_sources().items()}


def _outcomes_and_sources() -> dict[str, tuple[str, Path]]:
    """Mutant -> (last status, the source file it mutates, relative to the root)."""
    found = {}
    for meta in (ROOT / "mutants").rglob("*.py.meta"):
        source = meta.relative_to(ROOT / "mutants").with_suffix("")
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found[name] = (STATUS.get(code, "suspicious"), source)
    return found


def write_diffs(names: list[tuple[str, str]], into: Path) -> None:
    """The diff of each named mutant, as ``mutmut show`` prints it, into one file (to read survivors
    of a run made elsewhere without its ``mutants/`` tree)."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    sources = _outcomes_and_sources()
    os.chdir(ROOT)  # mutmut reads mutants/<source>
    with into.open("w") as out:
        for name, status in names:
            out.write(f"# {name}: {status}\n{get_diff_for_mutant(name, path=sources[name][1])}\n\n")


def is_equivalent(name: str, equivalent: dict[str, str]) -> bool:
    return name in equivalent or any(fnmatch.fnmatchcase(name, p) for p in equivalent if "*" in p)


def in_group(name: str, group: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GROUPS[group])


def report(groups: list[str], diffs: Path | None = None) -> float | None:
    results, equivalent = outcomes(), equivalent_mutants()
    print(
        f"{'group':<10} {'mutants':>7} {'killed':>7} {'survived':>8} {'no tests':>8} {'equiv.':>6} "
        f"{'not run':>7} {'score':>7}"
    )
    total_killed = total_counted = 0
    unexplained = []
    for group in groups:
        names = sorted(n for n in results if in_group(n, group))
        counts = Counter(results[n] for n in names)
        killed = sum(counts[s] for s in KILLED)
        equiv = sum(1 for n in names if is_equivalent(n, equivalent) and results[n] not in (*KILLED, "not run"))
        run = len(names) - counts["not run"]
        counted = run - equiv
        unexplained += [
            (n, results[n])
            for n in names
            if results[n] not in (*KILLED, "not run") and not is_equivalent(n, equivalent)
        ]
        score = f"{100 * killed / counted:.1f}%" if counted else "-"
        print(
            f"{group:<10} {len(names):>7} {killed:>7} {counts['survived']:>8} {counts['no tests']:>8} {equiv:>6} "
            f"{counts['not run']:>7} {score:>7}"
        )
        total_killed += killed
        total_counted += counted
    if not total_counted:
        print("no mutant of these groups has been run")
        return None
    score = 100 * total_killed / total_counted
    print(f"score: {total_killed}/{total_counted} = {score:.1f}% of the non-equivalent mutants run are killed")
    for name, status in unexplained:
        print(f"  {status}: {name}  (mutmut show {name})")
    if diffs:
        write_diffs(unexplained, diffs)
        print(f"the diffs of these {len(unexplained)} mutants: {diffs}")
    return score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("groups", nargs="*", help=f"some of {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--score", action="store_true", help="only print the score of the last run")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
    parser.add_argument("--diffs", type=Path, help="write the diff of every unexplained survivor to this file")
    parser.add_argument(
        "--sample", action="store_true", help="run only the fixed sample (SAMPLE); exit 1 if one survives"
    )
    parser.add_argument("--fail-under", type=float, help="exit 1 when the score is below this percentage")
    args = parser.parse_args()
    if args.sample:
        return run_sample(args.jobs)
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
    if not args.score:
        env = {**os.environ, "MTP_AUDIT_FUZZ_EXAMPLES": os.environ.get("MTP_AUDIT_FUZZ_EXAMPLES", "30")}
        env.pop("PYTHONPATH", None)  # the tests must import the mutated copy under mutants/, not the checkout
        patterns = [p for g in groups for p in GROUPS[g]]
        run = subprocess.run(
            [sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *patterns],
            cwd=ROOT,
            env=env,
            check=False,
        )
        if run.returncode:
            print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
            return run.returncode
    score = report(groups, args.diffs.resolve() if args.diffs else None)
    return 1 if args.fail_under is not None and (score is None or score < args.fail_under) else 0


if __name__ == "__main__":
    sys.exit(main())
