"""The blast-radius check analyses a drafter again under a new plan only where that plan changes what
the drafter's analysis read of the last one (``apply.plan.Reanalyses``): the planned methods of the
classes it looked a method up in. Reusing an analysis must give exactly what analysing it again gives,
and must not happen where a class it read gets another method."""

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import FIXTURES, build_tree
from mtp_audit import fix
from mtp_audit.apply import plan as planning
from mtp_audit.classify import memo
from mtp_audit.errors import UsageError
from mtp_audit.locate import locate
from mtp_audit.model import PLATFORMS, ClassKey, Consistency
from mtp_audit.scan import scan
from mtp_audit.synthesize.answers import planned_overlay

FIX_CASES = sorted((FIXTURES / "fix").iterdir())


def _analysed_afresh(self, scanner, res, platform, overlay):
    return scanner.analyzers[platform].analyze(res.key, overlay, contract=res.contract)


def _planned(result: fix.FixResult) -> tuple:
    """What a fix decides and would write, comparable between two runs."""
    plan = result.plan
    return (
        [(o.record.arch, o.record.cls, o.action, o.reason, o.insertions) for o in plan.outcomes],
        plan.insertions,
        [str(note) for note in result.placement_notes],
        result.inheritors,
        [(r.path, r.new) for r in result.rewrites],
    )


@pytest.mark.parametrize("case", FIX_CASES, ids=lambda c: c.name)
def test_a_sweep_plans_the_same_with_analyses_reused_or_made_afresh(case: Path, tmp_path: Path, monkeypatch) -> None:
    tree = locate(build_tree(case, tmp_path / "tree", "input"))
    memo.use_cache(None)
    try:
        reused = fix.plan_fix(tree, None, True, None)
    except UsageError:
        pytest.skip("the fix stops with a usage error: nothing planned")
    monkeypatch.setattr(planning.Reanalyses, "analyze", _analysed_afresh)
    assert _planned(reused) == _planned(fix.plan_fix(tree, None, True, None))


def test_an_analysis_is_made_again_only_where_the_plan_changes_a_class_it_read(tmp_path: Path, monkeypatch) -> None:
    # a drafter whose mirror goes into its base: its analysis also reads a class the plan writes nothing into
    tree = locate(build_tree(FIXTURES / "fix" / "annotation_import", tmp_path / "tree", "input"))
    memo.use_cache(None)
    _, scanner, resolutions = scan(tree, None)
    res = next(r for r in resolutions if any(i.target != r.key for a in r.analyses.values() for i in a.insertions))
    platform = next(p for p, a in res.analyses.items() if a.insertions)
    insertion = res.analyses[platform].insertions[0]
    assert insertion.target != res.key
    plan = planned_overlay([insertion], scanner.hierarchies[PLATFORMS[0]])
    made: list[object] = []
    analyze = scanner.analyzers[platform].analyze
    monkeypatch.setattr(scanner.analyzers[platform], "analyze", lambda *a, **k: made.append(a) or analyze(*a, **k))
    reanalyses = planning.Reanalyses()

    first = reanalyses.analyze(scanner, res, platform, plan)
    assert first.consistency == Consistency.MIRROR and len(made) == 1

    # a method planned into a class the drafter never looks in: the same analysis, not made again
    elsewhere = ClassKey("vllm.elsewhere", "Unrelated", 1)
    assert reanalyses.analyze(scanner, res, platform, {**plan, elsewhere: plan[insertion.target]}) is first
    assert len(made) == 1

    # another method planned into the class it reads its get_top_tokens from: analysed again, and judged by it
    method = plan[insertion.target]["get_top_tokens"]
    other = replace(method, text="def get_top_tokens(self, hidden_states):\n    return hidden_states.argmax(-1)\n")
    again = reanalyses.analyze(scanner, res, platform, {insertion.target: {"get_top_tokens": other}})
    assert len(made) == 2 and again is not first
    assert again.consistency != Consistency.MIRROR

    # back to the first plan: the last analysis read another method there, so it is made again
    assert reanalyses.analyze(scanner, res, platform, plan).consistency == Consistency.MIRROR
    assert len(made) == 3
