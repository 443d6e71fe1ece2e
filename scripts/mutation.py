"""Mutation run over the code that decides safety and truth, and its score.

    python scripts/mutation.py                  # every group (about two hours on 2 busy cores)
    python scripts/mutation.py apply platforms  # some groups
    python scripts/mutation.py --score          # the score of the last run, nothing run

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

_INDEX = "mtp_audit.index."
# mutmut names a mutant <module>.x_<function>__mutmut_<n> or <module>.xǁ<Class>ǁ<method>__mutmut_<n>
GROUPS = {
    "apply": ["mtp_audit.apply.*"],
    "resolve": ["mtp_audit.resolve.*"],
    "classify": ["mtp_audit.classify.*"],
    "platforms": ["mtp_audit.index.platforms.*"],
    # the dispatch interpreter of the facts: module-level statements and __getattr__, per platform
    "dispatch": [_INDEX + name for name in (
        "facts.x_extract_facts__*", "facts.x__reads_platform__*", "ast_tools.x_absolute_module__*",
        "ast_tools.x_dotted__*", "ast_tools.x__blocks__*", "ast_tools.x_walk_statements__*",
        "interpreter.x__is_all__*", "interpreter.xǁ_Interpreterǁ*", "interpreter.x__raise_reason__*",
        "module_getattr.x__lazy_candidates__*", "module_getattr.x__evaluate_getattr__*",
        "module_getattr.x__run_function_body__*", "module_getattr.x__return_value__*")],
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
    found = {}
    for meta in (ROOT / "mutants").rglob("*.py.meta"):
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            found[name] = STATUS.get(code, "suspicious")
    return found


def in_group(name: str, group: str) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in GROUPS[group])


def report(groups: list[str]) -> float | None:
    results, equivalent = outcomes(), equivalent_mutants()
    print(f"{'group':<10} {'mutants':>7} {'killed':>7} {'survived':>8} {'no tests':>8} {'equiv.':>6} "
          f"{'not run':>7} {'score':>7}")
    total_killed = total_counted = 0
    unexplained = []
    for group in groups:
        names = sorted(n for n in results if in_group(n, group))
        counts = Counter(results[n] for n in names)
        killed = sum(counts[s] for s in KILLED)
        equiv = sum(1 for n in names if n in equivalent and results[n] not in KILLED)
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
    return score


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("groups", nargs="*", help=f"some of {', '.join(GROUPS)} (default: all)")
    parser.add_argument("--score", action="store_true", help="only print the score of the last run")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="mutants run at once")
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
    score = report(groups)
    return 1 if args.fail_under is not None and (score is None or score < args.fail_under) else 0


if __name__ == "__main__":
    sys.exit(main())
