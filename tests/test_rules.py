"""The compute_logits shape rules, each against its own VALID / INVALID examples.

Examples are collected from every ShapeRule class, listed in RULES or not, so a
rule dropped from RULES leaves its INVALID examples decided by another rule (or
by none) and fails here.
"""

from __future__ import annotations

import pytest

from mtp_audit.classify.shapes import RULES, Example, ShapeRule, _decompose, analyze_compute_logits, params_of

DEFINED = ShapeRule.__subclasses__()
BY_NAME = {rule.name: rule for rule in DEFINED}
CASES = [
    pytest.param(rule, valid, example, id=f"{rule.id}-{rule.name}-{'valid' if valid else 'invalid'}{i}")
    for rule in DEFINED
    for valid, examples in ((True, rule.VALID), (False, rule.INVALID))
    for i, example in enumerate(examples)
]


def _objects(rule: type[ShapeRule], example: Example) -> bool:
    """Whether ``rule`` alone objects to the example, or cannot run on it (it relies on an earlier rule)."""
    body, func = _decompose(example.code, 1)
    try:
        return rule().check(body, params_of(func)) is not None
    except (StopIteration, TypeError, IndexError):
        return True


def _before(rule: type[ShapeRule]) -> set[str]:
    """Names of the rules ``rule`` must run after, directly or through them."""
    seen: set[str] = set()
    todo = list(rule.after)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(BY_NAME[name].after)
    return seen


@pytest.mark.parametrize(("rule", "valid", "example"), CASES)
def test_rule_examples(rule: type[ShapeRule], valid: bool, example: Example):
    shape = analyze_compute_logits(example.code, 1)
    assert (shape.kind, shape.rule) == (example.kind, example.finding), shape.reason
    if valid:
        assert not _objects(rule, example)
    else:
        assert shape.rule_id == rule.id
        body, func = _decompose(example.code, 1)
        assert rule().check(body, params_of(func)).rule == example.finding


def test_every_rule_is_described_and_unique():
    for rule in DEFINED:
        assert rule.id.startswith("MTP") and rule.name and rule.message and rule.__doc__, rule
        assert rule.VALID and rule.INVALID, f"{rule.name} has no examples"
        assert "\n" not in rule.message
    assert len({r.id for r in DEFINED}) == len({r.name for r in DEFINED}) == len(DEFINED)


def test_rules_run_after_the_rules_they_rely_on():
    names = [rule.name for rule in RULES]
    for index, rule in enumerate(RULES):
        assert set(rule.after) <= set(names[:index]), f"{rule.name} runs before one of {rule.after}"


@pytest.mark.parametrize("rule", DEFINED, ids=lambda r: r.name)
def test_every_overlap_between_rules_is_declared(rule: type[ShapeRule]):
    """Where another rule would also object to (or cannot run on) one of this rule's INVALID examples,
    the order matters: that rule must declare it runs after this one."""
    for example in rule.INVALID:
        for other in DEFINED:
            if other is not rule and _objects(other, example):
                assert rule.name in _before(other), (
                    f"{other.name} also objects to an example of {rule.name} but does not run after it"
                )


def test_rules_doc_is_current():
    from mtp_audit.report.rules_doc import DOC, render

    assert DOC.read_text() == render(), "docs/rules.md drifted: run `python -m mtp_audit.report.rules_doc`"


LOOP = (
    "def compute_logits(self, hidden_states):\n{start}"
    "    for hs, lm_head in zip(hidden_states, self.lm_heads):\n"
    "        out.append(self.logits_processor(lm_head, hs))\n"
    "    return {returned}\n"
)


@pytest.mark.parametrize(
    ("start", "returned", "collected"),
    [
        ("    out = []\n", "out", True),
        ("    out = [h for h in ()]\n", "out", True),
        ("    out = list()\n", "out", True),
        ("    out: list = []\n", "out", True),
        ("    out = []\n", "[out[0], out[1]]", True),
        ("    other = []\n    out = make()\n", "out", False),  # another name starts as a list, not this one
        ("    out = tuple()\n", "out", False),
        ("    out: tuple = ()\n", "out", False),
    ],
)
def test_a_head_loop_says_when_it_returns_a_list(start: str, returned: str, collected: bool):
    code = LOOP.format(start=start, returned=returned)
    shape = analyze_compute_logits(code, 10)
    assert shape.rule == "head-loop", shape.reason
    lines = start.count("\n")
    header = "for hs, lm_head in zip(hidden_states, self.lm_heads)"
    loop = f"the head is called once per iteration of a loop (line {11 + lines}: `{header}`)"
    listed = f"a list of logits is returned (line {13 + lines}: `return {returned}`)"
    assert shape.reason == (f"{loop}; {listed}" if collected else loop)
