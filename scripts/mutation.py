"""Mutation run over the code that decides safety and truth, and its score.

    python scripts/mutation.py                  # every group (about two hours on 2 busy cores)
    python scripts/mutation.py apply platforms  # some groups
    python scripts/mutation.py --score          # the score of the last run, nothing run
    python scripts/mutation.py classify --score --diffs survivors.txt  # and each survivor's diff

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
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "mutation.md"

_FACTS = "mtp_audit.index.facts."
# mutmut names a mutant <module>.x_<function>__mutmut_<n> or <module>.xǁ<Class>ǁ<method>__mutmut_<n>
GROUPS = {
    "apply": ["mtp_audit.apply.*"],
    "resolve": ["mtp_audit.resolve.*"],
    "classify": ["mtp_audit.classify.*"],
    "platforms": ["mtp_audit.index.platforms.*"],
    # the dispatch interpreter of facts.py: module-level statements and __getattr__, per platform
    "dispatch": [_FACTS + name for name in (
        "x_extract_facts__*", "x__reads_platform__*", "x_absolute_module__*", "x_dotted__*", "x__blocks__*",
        "x_walk_statements__*", "x__is_all__*", "xǁ_Interpreterǁ*", "x__raise_reason__*", "x__lazy_candidates__*",
        "x__evaluate_getattr__*", "x__run_function_body__*", "x__return_value__*")],
}
# mutmut's exit codes (mutmut/stats.py); anything else is "suspicious"
STATUS = {1: "killed", 3: "killed", 36: "timeout", -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout",
          0: "survived", 5: "no tests", 33: "no tests", 34: "skipped", 37: "killed", None: "not run",
          -9: "segfault", -11: "segfault"}
KILLED = ("killed", "timeout")  # a mutant that never finishes is caught by the time limit


def equivalent_mutants() -> dict[str, str]:
    """Mutant -> why it is equivalent: the rows ``| `name` | why |`` of the section
    "Equivalent mutants" of docs/mutation.md."""
    if not DOC.exists():
        return {}
    section = DOC.read_text().split("\n## Equivalent mutants\n", 1)[-1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `(mtp_audit\.[^`]+)` \| (.+?) \|$", section, re.MULTILINE))


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


def in_group(name: str, group: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GROUPS[group])


def report(groups: list[str], diffs: Path | None = None) -> float | None:
    results, equivalent = outcomes(), equivalent_mutants()
    print(f"{'group':<10} {'mutants':>7} {'killed':>7} {'survived':>8} {'no tests':>8} {'equiv.':>6} "
          f"{'not run':>7} {'score':>7}")
    total_killed = total_counted = 0
    unexplained = []
    for group in groups:
        names = sorted(n for n in results if in_group(n, group))
        counts = Counter(results[n] for n in names)
        killed = sum(counts[s] for s in KILLED)
        equiv = sum(1 for n in names if n in equivalent and results[n] not in (*KILLED, "not run"))
        run = len(names) - counts["not run"]
        counted = run - equiv
        unexplained += [
            (n, results[n]) for n in names if results[n] not in (*KILLED, "not run") and n not in equivalent
        ]
        score = f"{100 * killed / counted:.1f}%" if counted else "-"
        print(f"{group:<10} {len(names):>7} {killed:>7} {counts['survived']:>8} {counts['no tests']:>8} {equiv:>6} "
              f"{counts['not run']:>7} {score:>7}")
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
    parser.add_argument("--fail-under", type=float, help="exit 1 when the score is below this percentage")
    args = parser.parse_args()
    groups = args.groups or list(GROUPS)
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        parser.error(f"unknown group {', '.join(unknown)}; the groups are {', '.join(GROUPS)}")
    if not args.score:
        env = {**os.environ, "MTP_AUDIT_FUZZ_EXAMPLES": os.environ.get("MTP_AUDIT_FUZZ_EXAMPLES", "30")}
        env.pop("PYTHONPATH", None)  # the tests must import the mutated copy under mutants/, not the checkout
        patterns = [p for g in groups for p in GROUPS[g]]
        run = subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", str(args.jobs), *patterns],
                             cwd=ROOT, env=env, check=False)
        if run.returncode:
            print(f"mutmut run failed (exit {run.returncode})", file=sys.stderr)
            return run.returncode
    score = report(groups, args.diffs.resolve() if args.diffs else None)
    return 1 if args.fail_under is not None and (score is None or score < args.fail_under) else 0


if __name__ == "__main__":
    sys.exit(main())
