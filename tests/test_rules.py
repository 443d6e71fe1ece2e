"""The compute_logits shape rules, each against its own VALID / INVALID examples.

Examples are collected from every ShapeRule class, listed in RULES or not, so a
rule dropped from RULES leaves its INVALID examples decided by another rule (or
by none) and fails here.
"""

from __future__ import annotations

import pytest

from mtp_audit.classify.shape_types import HeadSignature, ParamKind, SignatureParam
from mtp_audit.classify.shapes import RULES, Example, ShapeRule, _decompose, analyze_compute_logits, params_of
from mtp_audit.synthesize.mirror import mirror_code

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
    # every answer says why, and carries the parameters the call contract checks callers against
    assert isinstance(shape.reason, str) and shape.reason
    assert shape.params == params_of(_decompose(example.code, 1)[1])
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


BRANCHES = (
    "def compute_logits(self, hidden_states):\n"
    "    if self.first:\n"
    "        return self.logits_processor({first})\n"
    "    else:\n"
    "        return self.logits_processor({second})\n"
)


@pytest.mark.parametrize(
    ("first", "second", "head", "hidden", "extra_args"),
    [
        ("self.lm_head, hidden_states", "self.lm_head, hidden_states", "self.lm_head", "hidden_states", False),
        ("self.lora_head, hidden_states", "self.lm_head, hidden_states", None, "hidden_states", False),
        ("self.lm_head, hidden_states", "self.lm_head, self.norm(hidden_states)", "self.lm_head", None, False),
        (
            "self.lm_head, hidden_states, embedding_bias=self.bias",
            "self.lm_head, hidden_states",
            "self.lm_head",
            "hidden_states",
            True,
        ),
        (
            "self.lm_head, hidden_states=hidden_states",
            "self.lm_head, hidden_states=hidden_states",
            "self.lm_head",
            "hidden_states",
            False,
        ),
        (
            "lm_head=self.lm_head, hidden_states=hidden_states",
            "self.lm_head, hidden_states",
            "self.lm_head",
            "hidden_states",
            False,
        ),
    ],
)
def test_a_head_call_in_every_arm_keeps_what_the_arms_agree_on(first, second, head, hidden, extra_args):
    """The head and hidden states of the arms, when every arm passes the same (by position or keyword); the
    choice between arms always counts as a transform before the head, so no single head call is claimed."""
    shape = analyze_compute_logits(BRANCHES.format(first=first, second=second), 30)
    assert (shape.kind, shape.rule, shape.rule_id, shape.line) == ("head", "head", None, 31)
    assert shape.reason == "compute_logits returns self.logits_processor(...) in each of 2 arms of the `if` at line 31"
    assert (shape.head, shape.hidden, shape.pre_transform, shape.extra_args) == (head, hidden, True, extra_args)


@pytest.mark.parametrize(
    ("signature", "body", "head", "hidden", "pre_transform"),
    [
        ("self, hidden_states", "assert self.lm_head is not None", "self.lm_head", "hidden_states", False),
        ("self, hidden_states", "hidden_states = self.norm(hidden_states)", "self.lm_head", "hidden_states", True),
        ("self, hidden_states", "", "self.lm_head", "hidden_states", False),
        ("self", "", "self.lm_head", "self.hidden", True),
    ],
)
def test_a_transform_before_the_head_is_anything_but_an_assert(signature, body, head, hidden, pre_transform):
    """Asserts before the head call change nothing; any other statement, or hidden states that are not
    the first parameter, count as a transform the mirror must keep."""
    hidden_arg = "self.hidden" if signature == "self" else "hidden_states"
    code = f"def compute_logits({signature}):\n" + (f"    {body}\n" if body else "")
    code += f"    return self.logits_processor(self.lm_head, {hidden_arg})\n"
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.head, shape.hidden, shape.pre_transform) == ("head", head, hidden, pre_transform)


@pytest.mark.parametrize(
    ("arguments", "hidden", "pre_transform"),
    [
        ("lm_head=self.lm_head, hidden_states=hidden_states", "hidden_states", False),
        ("hidden_states=hidden_states, lm_head=self.lm_head", "hidden_states", False),
        ("self.lm_head, hidden_states=hidden_states", "hidden_states", False),
        ("self.lm_head, hidden_states=self.norm(hidden_states)", "self.norm(hidden_states)", True),
    ],
)
def test_a_head_call_by_keyword_is_the_same_call(arguments, hidden, pre_transform):
    """get_top_tokens takes lm_head and hidden_states by the same names: passed by keyword, they are the
    same head and hidden states as in first and second place, and the reason shows the call as written."""
    shape = analyze_compute_logits(
        f"def compute_logits(self, hidden_states):\n    return self.logits_processor({arguments})\n", 1
    )
    assert (shape.kind, shape.head, shape.hidden, shape.pre_transform, shape.extra_args) == (
        "head",
        "self.lm_head",
        hidden,
        pre_transform,
        False,
    )
    assert shape.reason == f"compute_logits returns self.logits_processor({arguments})"


HEAD_ARGUMENTS_REASON = "self.logits_processor called with arguments get_top_tokens does not take (line {})"


ONE_HEAD_CALL = "def compute_logits(self, hidden_states):\n    return self.logits_processor({})\n"


ASSUMED = "get_top_tokens, whose signature was not read, assumed (lm_head, hidden_states, embedding_bias=...)"


@pytest.mark.parametrize(
    ("code", "line", "problem"),
    [
        (
            ONE_HEAD_CALL.format("self.lm_head, hidden_states, self.bias, 2.0"),
            2,
            "no parameter takes positional argument 4",
        ),
        (ONE_HEAD_CALL.format("self.lm_head, *self.rest"), 2, "`*self.rest` unpacks arguments"),
        (ONE_HEAD_CALL.format("self.lm_head, **self.options"), 2, "`**self.options` unpacks arguments"),
        (
            BRANCHES.format(first="self.lm_head, hidden_states", second="self.lm_head, hidden_states, scale=2.0"),
            5,
            "no parameter `scale`",
        ),
        (
            ONE_HEAD_CALL.format("self.lm_head, hidden_states, self.bias, embedding_bias=self.bias"),
            2,
            "two values for `embedding_bias`",
        ),
    ],
)
def test_a_head_call_get_top_tokens_cannot_take(code, line, problem):
    """More than (lm_head, hidden_states, embedding_bias), or arguments unpacked from a sequence or a mapping,
    in the one head call or in any arm; the reason says which argument, and that the signature was assumed
    (no tree's LogitsProcessor was read)."""
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.rule, shape.rule_id) == ("manual", "head-arguments", "MTP109")
    assert shape.reason.startswith(f"{HEAD_ARGUMENTS_REASON.format(line)}: {problem}")
    assert shape.reason.endswith(ASSUMED)
    assert [p.name for p in shape.params] == ["hidden_states"]


POST = "def compute_logits(self, hidden_states):\n    logits = self.logits_processor(self.lm_head, hidden_states)\n"


@pytest.mark.parametrize(
    ("tail", "post", "reason"),
    [
        (
            "    out = logits.new_full((logits.shape[0], self.vocab), float('-inf'))\n"
            "    out[:, self.draft_id_to_target_id] = logits[..., : self.draft_vocab]\n    return out\n",
            "d2t_scatter",
            "logits scattered to the target vocabulary after the head call "
            "(line 4: `out[:, self.draft_id_to_target_id] = logits[..., : self.draft_vocab]`)",
        ),
        (
            "    return soft_cap(logits, 30.0)\n",
            "softcap",
            "logits soft-capped after the head call (line 3: `return soft_cap(logits, 30.0)`)",
        ),
        (
            "    return self.softcap(logits)\n",
            "softcap",
            "logits soft-capped after the head call (line 3: `return self.softcap(logits)`)",
        ),
    ],
)
def test_what_is_done_after_the_head_call_is_named(tail, post, reason):
    """A cut that comes with a draft-to-target scatter is part of the scatter; a soft-cap is found by name
    (tanh, soft_cap, softcap) whatever function applies it."""
    shape = analyze_compute_logits(POST + tail, 1)
    assert (shape.kind, shape.post, shape.reason) == ("manual", post, reason)


@pytest.mark.parametrize(
    ("first_test", "second_test", "rule"),
    [
        ("self.use_lora()", None, "head"),  # a call in a condition is no head call
        ("self.logits_processor(self.lora_head, hidden_states) is not None", None, "several-heads"),
        ("self.use_lora", "self.logits_processor(self.lm_head, hidden_states) is None", "several-heads"),
    ],
)
def test_a_head_call_in_a_condition_is_one_head_call_too_many(first_test, second_test, rule):
    code = f"def compute_logits(self, hidden_states):\n    if {first_test}:\n"
    code += "        return self.logits_processor(self.lora_head, hidden_states)\n"
    if second_test:
        code += f"    elif {second_test}:\n        return self.logits_processor(self.norm_head, hidden_states)\n"
    code += "    else:\n        return self.logits_processor(self.lm_head, hidden_states)\n"
    assert analyze_compute_logits(code, 1).rule == rule


@pytest.mark.parametrize(
    ("arm", "rule"),
    [
        ("return self.model.compute_logits(hidden_states)", "several-heads"),
        (
            "logits = self.logits_processor(self.lora_head, hidden_states)\n"
            "        return self.logits_processor(self.lm_head, hidden_states)",
            "several-heads",
        ),
        (
            "h = self.norm(hidden_states)\n        return self.logits_processor(self.lm_head, h)",
            "head",
        ),
    ],
)
def test_each_arm_must_end_in_its_only_head_call(arm, rule):
    """Arms are mirrored one by one only when each ends in a self.logits_processor call and calls no other
    head before it; a delegating arm, or an arm with a second head call, makes several head calls."""
    code = (
        "def compute_logits(self, hidden_states):\n    if self.first:\n"
        f"        {arm}\n    else:\n        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    shape = analyze_compute_logits(code, 1)
    assert shape.rule == rule, shape.reason


def test_only_the_logits_of_a_head_call_in_a_block_count_as_masked():
    """A store into a subscript of another variable after a head call inside a block masks nothing; the
    block itself is what the mirror cannot copy."""
    code = (
        "def compute_logits(self, hidden_states):\n    with torch.no_grad():\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        "    stats = {}\n    stats['calls'] = 1\n    return logits\n"
    )
    shape = analyze_compute_logits(code, 1)
    assert (shape.rule, shape.reason) == (
        "conditional-head",
        "the head call (line 3) is inside `with torch.no_grad():` (line 2), which a mirror does not copy",
    )
    masked = analyze_compute_logits(code.replace("stats['calls'] = 1", "logits[:, 0] = 0"), 1)
    assert (masked.rule, masked.reason) == (
        "post-mask",
        "logits masked after the head call (line 5: `logits[:, 0] = 0`)",
    )


def test_a_mask_inside_the_block_is_named_at_its_own_line():
    code = (
        "def compute_logits(self, hidden_states):\n    with torch.no_grad():\n"
        "        logits = self.logits_processor(self.lm_head, hidden_states)\n"
        "        logits[:, self.blocked] = float('-inf')\n    return logits\n"
    )
    shape = analyze_compute_logits(code, 10)
    assert (shape.rule, shape.reason) == (
        "post-mask",
        "logits masked after the head call (line 13: `logits[:, self.blocked] = float('-inf')`)",
    )


@pytest.mark.parametrize(
    ("store", "line"),
    [("wide[:, targets] = logits.flip(-1)", 6), ("wide[:, targets + 1] = logits", 6)],
    ids=["flipped", "shifted"],
)
def test_a_scatter_that_is_not_the_d2t_one_is_named_not_the_allocation_before_it(store, line):
    """``wide = logits.new_full(...)`` takes only the logits' shape: the reason names the statement that moves
    their values (QA: it named the allocation)."""
    code = (
        "def compute_logits(self, hidden_states):\n"
        "    logits = self.logits_processor(self.lm_head, hidden_states)\n"
        "    targets = torch.arange(self.draft_vocab) + self.draft_id_to_target_id\n"
        '    wide = logits.new_full((logits.shape[0], self.vocab), float("-inf"))\n'
        "    zeros = torch.zeros_like(logits)\n"
        f"    {store}\n"
        "    return wide\n"
    )
    shape = analyze_compute_logits(code, 1)
    assert (shape.rule, shape.reason) == (
        "post-other",
        f"logits post-processed after the head call (line {line}: `{store}`)",
    )


@pytest.mark.parametrize(
    ("first_arm", "after", "rule", "reason"),
    [
        (
            "if hidden_states is None:\n            return None\n"
            "        return self.logits_processor(self.lora_head, hidden_states)",
            "",
            "several-heads",
            "several head calls (lines 5, 7), one inside `if self.first:` (line 2), whose arms do not each end in "
            "their own head call, or return it before a fallthrough that does; a mirror copies only such arms",
        ),
        (
            "logits = self.logits_processor(self.lora_head, hidden_states)",
            "    return logits[..., : self.vocab_size]\n",
            "post-vocab",
            "the vocabulary of the logits changed after the head call (line 6: `logits[..., : self.vocab_size]`)",
        ),
        (
            "logits = self.logits_processor(self.lora_head, hidden_states)",
            "    logits = logits.float()\n    return logits\n",
            "post-other",
            "logits post-processed after the head call (line 6: `logits = logits.float()`)",
        ),
    ],
)
def test_arms_that_do_more_than_call_the_head_are_not_mirrored_arm_by_arm(first_arm, after, rule, reason):
    """An arm that may return before its head call, or logits the body changes after the `if`: a
    get_top_tokens mirroring each arm's head call would select other tokens. The reason names what
    blocks the mirror: the statement after the `if`, where the arms themselves would do."""
    second_arm = "logits = " if after else "return "
    code = (
        f"def compute_logits(self, hidden_states):\n    if self.first:\n        {first_arm}\n    else:\n"
        f"        {second_arm}self.logits_processor(self.lm_head, hidden_states)\n{after}"
    )
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.rule, shape.reason) == ("manual", rule, reason)


@pytest.mark.parametrize(
    "arms",
    [
        "    if self.first:\n        return self.logits_processor(self.h1, hidden_states)\n    else:\n"
        "        logits = self.logits_processor(self.h2, hidden_states)\n        return logits\n",
        "    if self.first:\n        if self.second:\n"
        "            logits = self.logits_processor(self.h1, hidden_states)\n"
        "        else:\n            logits = self.logits_processor(self.h3, hidden_states)\n"
        "    else:\n        logits = self.logits_processor(self.h2, hidden_states)\n    return logits\n",
        "    if self.first:\n        return self.logits_processor(self.h1, hidden_states)\n    else:\n"
        "        logits = self.logits_processor(self.h2, hidden_states)\n    return logits\n",
    ],
    ids=["return-and-assign", "nested", "return-and-assign-then-return"],
)
def test_arms_in_their_own_forms_are_mirrored_branch_by_branch(arms: str):
    """Each arm ends in its head call in its own form (``return CALL``, ``NAME = CALL`` then
    ``return NAME``, a nested if/else); the mirror returns the get_top_tokens call in every arm."""
    code = f"def compute_logits(self, hidden_states):\n{arms}"
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.rule) == ("head", "head"), shape.reason
    mirror = mirror_code(code)
    calls = code.count("self.logits_processor(")
    assert mirror.count("return self.logits_processor.get_top_tokens(self.h") == calls, mirror
    assert "logits" not in mirror.replace("logits_processor", ""), mirror


@pytest.mark.parametrize(
    "statement",
    [
        "self.cached = self.logits_processor(self.lm_head, hidden_states)\n    return self.cached",
        "logits = self.logits_processor(self.lm_head, hidden_states) * 2\n    return logits",
    ],
)
def test_a_head_call_assigned_to_an_attribute_or_inside_an_expression_is_not_plain(statement):
    shape = analyze_compute_logits(f"def compute_logits(self, hidden_states):\n    {statement}\n", 1)
    assert (shape.kind, shape.rule, shape.reason) == (
        "manual",
        "conditional-head",
        "the head call is not a plain `return` or assignment (line 2)",
    )


@pytest.mark.parametrize(
    ("returned", "then"),
    [
        ("logits[:, :, : self.vocab]", "truncated to self.vocab entries of the vocabulary"),
        ("F.pad(logits, (0, self.padding))", "padded"),
    ],
)
def test_logits_by_hand_name_a_vocabulary_cut_or_pad_after_them(returned, then):
    """The cut is of the last dimension whatever the tensor's rank; a pad is named with its call."""
    code = (
        "def compute_logits(self, hidden_states):\n    logits = torch.matmul(hidden_states, self.weight.t())\n"
        f"    return {returned}\n"
    )
    shape = analyze_compute_logits(code, 1)
    assert (shape.rule, shape.post) == ("by-hand", "vocab")
    assert shape.reason == f"logits computed by hand (torch.matmul, line 2), then {then} (line 3: `{returned}`)"


def test_the_parameters_keep_their_kinds_and_defaults():
    """The call contract binds callers' arguments against these: kinds and defaults as written."""
    code = (
        "def compute_logits(self, a, /, hidden_states=None, *args, spec_step_idx: int = 0, **kw):\n"
        "    return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    params = analyze_compute_logits(code, 1).params
    assert [(p.name, p.default, p.kind) for p in params] == [
        ("a", None, "posonly"),
        ("hidden_states", "None", "pos"),
        ("args", None, "star"),
        ("spec_step_idx", "0", "kwonly"),
        ("kw", None, "starstar"),
    ]


def _body(lines: str) -> str:
    return "def compute_logits(self, hidden_states):\n" + "".join(f"    {line}\n" for line in lines.split("\n"))


@pytest.mark.parametrize(
    ("code", "rule", "post", "reason"),
    [
        (
            "@torch.compile\n@torch.no_grad()\n" + _body("return self.logits_processor(self.lm_head, hidden_states)"),
            "decorated",
            None,
            "compute_logits is wrapped (torch.compile, torch.no_grad()); the wrapper may change the logits, and a "
            "mirror would not go through it",
        ),
        (
            _body(
                "logits = self.logits_processor(self.lm_head, hidden_states)\nreturn logits + hidden_states @ self.bias"
            ),
            "by-hand",
            None,
            "logits computed by hand (@, line 3)",
        ),
        (
            _body("return compute_logits(self.head, hidden_states)"),
            "no-head",
            None,
            "no self.logits_processor call in compute_logits",
        ),
        (_body('"""Not used."""'), "stub", None, "compute_logits has only a docstring"),
        (_body("pass"), "stub", None, "compute_logits is a stub (line 2)"),
        (_body('raise ValueError("no head")'), "stub", None, "compute_logits is a stub (line 2)"),
        (_body("raise NotImplementedError"), "stub", None, "compute_logits raises NotImplementedError (line 2)"),
        (
            _body(
                "i, out = 0, []\nwith torch.no_grad():\n    while i < 2:\n"
                "        out.append(self.logits_processor(self.heads[i], hidden_states))\n        i += 1\nreturn out"
            ),
            "head-loop",
            None,
            "the head is called once per iteration of a loop (line 4: `while i < 2`)",
        ),
        (
            _body(
                "with torch.no_grad():\n    out = []\n    for head in self.heads:\n"
                "        out.append(self.logits_processor(head, hidden_states))\nreturn out"
            ),
            "head-loop",
            None,
            "the head is called once per iteration of a loop (line 4: `for head in self.heads`); a list of logits is "
            "returned (line 6: `return out`)",
        ),
    ],
)
def test_each_objection_says_what_it_found(code, rule, post, reason):
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.rule, shape.post, shape.reason) == (
        "stub" if rule == "stub" else "manual",
        rule,
        post,
        reason,
    )


@pytest.mark.parametrize(
    ("arguments", "head", "hidden", "pre_transform"),
    [
        ("self.lm_head, embedding_bias=self.bias", "self.lm_head", None, True),
        ("hidden_states=hidden_states, embedding_bias=self.bias", None, "hidden_states", False),
    ],
)
def test_a_head_call_without_its_head_or_hidden_states_is_read_without_them(arguments, head, hidden, pre_transform):
    """Such a call raises when it runs; the scan still reads it, with no head or hidden states to compare."""
    shape = analyze_compute_logits(_body(f"return self.logits_processor({arguments})"), 1)
    assert (shape.kind, shape.head, shape.hidden, shape.pre_transform) == ("head", head, hidden, pre_transform)


@pytest.mark.parametrize(
    ("tail", "named"),
    [
        (
            "if self.suppressed is not None:\n    logits.masked_fill_(self.suppressed, -1e4)\nreturn logits",
            "line 4: `logits.masked_fill_(self.suppressed, -1e4)`",
        ),
        (
            "if self.draft_id_to_target_id is not None:\n"
            "    logits = torch.zeros(self.shape).scatter_(1, self.draft_id_to_target_id, logits)\nreturn logits",
            "line 4: `torch.zeros(self.shape).scatter_(1, self.draft_id_to_target_id, logits)`",
        ),
        ("logits = logits[..., : self.vocab_size]\nreturn logits", "line 3: `logits[..., : self.vocab_size]`"),
        ("out = logits * 2\nreturn out", "line 3: `out = logits * 2`"),
    ],
)
def test_post_processing_names_the_statement_that_does_it(tail, named):
    """The mask, the scatter or the cut itself, not the `if` that guards it; else the first statement that is
    not the final `return NAME`."""
    shape = analyze_compute_logits(_body("logits = self.logits_processor(self.lm_head, hidden_states)\n" + tail), 1)
    assert shape.reason.endswith(f"after the head call ({named})"), shape.reason


@pytest.mark.parametrize(
    ("before", "head", "hidden", "other_head", "other_hidden"),
    [
        ("head = self.lm_head", "head", "hidden_states", False, False),
        ("step = spec_step_idx % 1", "self.lm_head", "hidden_states", False, False),
        ("rows = hidden_states.shape[0]\n    assert rows > 0", "self.lm_head", "hidden_states", False, False),
        ("states = hidden_states", "self.lm_head", "states", False, False),
        (
            "if self.lora:\n        head = self.lora_head\n    else:\n        head = self.lm_head",
            "head",
            "hidden_states",
            False,
            False,
        ),
        ("head = self.draft_head", "head", "hidden_states", True, False),
        ("hidden_states = self.norm(hidden_states)", "self.lm_head", "hidden_states", False, True),
        ("hidden_states.mul_(self.scale)", "self.lm_head", "hidden_states", False, True),
        ("states = self.norm(hidden_states)", "self.lm_head", "states", False, True),
        ("states = hidden_states\n    hidden_states[:, 0] = 0", "self.lm_head", "states", False, True),
        ("", "self.lm_head", "self.norm(hidden_states)", False, True),
        ("", "self.lm_head", "spec_step_idx", False, True),
    ],
)
def test_only_what_reaches_the_head_proves_another_head_call(before, head, hidden, other_head, other_hidden):
    """A statement before the head proves nothing by being there: only a head or hidden states that are
    provably not (self.lm_head, the first parameter as passed) do; a local bound once to them is them, one
    bound in several places proves nothing either way."""
    code = "def compute_logits(self, hidden_states, spec_step_idx=0):\n" + (f"    {before}\n" if before else "")
    code += f"    return self.logits_processor({head}, {hidden})\n"
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.other_head, shape.other_hidden) == ("head", other_head, other_hidden)


@pytest.mark.parametrize(
    ("arms", "other_head", "other_hidden"),
    [
        (("self.other_head", "self.other_head"), True, False),  # every arm's head agrees, and is another
        (("self.lm_head", "self.lm_head"), False, False),
        (("self.lm_head", "self.other_head"), False, False),  # the arms disagree: no single head to judge
    ],
)
def test_branched_heads_are_judged_when_the_arms_agree(arms, other_head, other_hidden):
    """A head call in each arm of an `if`: the head the arms agree on decides, as a single call's does."""
    code = "def compute_logits(self, hidden_states):\n    if self.flag:\n"
    code += f"        return self.logits_processor({arms[0]}, hidden_states)\n    else:\n"
    code += f"        return self.logits_processor({arms[1]}, hidden_states)\n"
    shape = analyze_compute_logits(code, 1)
    assert (shape.kind, shape.other_head, shape.other_hidden) == ("head", other_head, other_hidden)


@pytest.mark.parametrize(
    ("tail", "post", "named"),
    [
        ("if self.debug:\n    print(logits.shape)\nreturn logits", "other", "line 4: `print(logits.shape)`"),
        (
            "if self.keep is not None:\n    logits = torch.where(self.keep, logits, -1e4)\nreturn logits",
            "mask",
            "line 4: `torch.where(self.keep, logits, -1e4)`",
        ),
        (
            "if self.scale is not None:\n    logits = logits * self.scale\nreturn logits",
            "other",
            "line 4: `logits = logits * self.scale`",
        ),
        (
            "kept = logits\nif self.banned is not None:\n    kept[:, self.banned] = -1e4\nreturn logits",
            "mask",
            "line 5: `kept[:, self.banned] = -1e4`",
        ),
        ("self.seen[:, 0] = 1\nreturn logits", "other", "line 3: `self.seen[:, 0] = 1`"),
    ],
)
def test_only_changes_of_the_logits_decide_what_follows_the_head(tail, post, named):
    """Statements that only read the logits or change other tensors are no mask or cut; the reason names
    the statement inside the `if`, not the `if`."""
    shape = analyze_compute_logits(_body("logits = self.logits_processor(self.lm_head, hidden_states)\n" + tail), 1)
    assert (shape.kind, shape.post) == ("manual", post)
    assert shape.reason.endswith(f"({named})"), shape.reason


D2T_HEAD = "def compute_logits(self, hidden_states):\n    logits = self.logits_processor(self.lm_head, hidden_states)\n"
D2T_WIDE = "    wide = logits.new_full((logits.shape[0], self.vocab), float('-inf'))\n"


@pytest.mark.parametrize(
    ("tail", "target_map"),
    [
        (
            "    ids = torch.arange(self.draft_vocab) + self.draft_id_to_target_id\n"
            + D2T_WIDE
            + "    wide[:, ids] = logits\n    return wide\n",
            "offset",
        ),
        (D2T_WIDE + "    wide[:, self.draft_id_to_target_id] = logits\n    return wide\n", "absolute"),
        (  # a bias after the scatter
            D2T_WIDE
            + "    wide[:, self.draft_id_to_target_id] = logits\n    wide = wide + self.bias\n    return wide\n",
            None,
        ),
        (  # a bias before it
            "    logits = logits + self.bias\n"
            + D2T_WIDE
            + "    wide[:, self.draft_id_to_target_id] = logits\n    return wide\n",
            None,
        ),
        (  # filled with zeros: another argmax where every draft logit is negative
            "    wide = logits.new_full((logits.shape[0], self.vocab), 0.0)\n"
            "    wide[:, self.draft_id_to_target_id] = logits\n    return wide\n",
            "not a scatter",
        ),
        (  # padded into a slice of columns: no ids, no scatter (and no crash reading the ids)
            D2T_WIDE + "    wide[:, 0:5] = logits\n    return wide\n",
            "not a scatter",
        ),
    ],
)
def test_a_draft_to_target_scatter_is_read_from_its_statements(tail, target_map):
    """The map a scatter applies (what LocalArgmaxMixin is compared with) stands only when the tail does
    nothing else to the logits; the name draft_id_to_target_id alone makes no scatter."""
    shape = analyze_compute_logits(D2T_HEAD + tail, 1)
    if target_map == "not a scatter":
        assert shape.post != "d2t_scatter"
    else:
        assert (shape.post, shape.target_map) == ("d2t_scatter", target_map)


def test_a_recognised_scatter_is_not_said_to_come_with_a_local_it_reads():
    """A local the scatter reads (the vocabulary size) is part of it: the reason names no other statement."""
    tail = (
        "    vocab = self.config.vocab_size\n"
        "    wide = logits.new_full((logits.shape[0], vocab), float('-inf'))\n"
        "    wide[:, self.draft_id_to_target_id] = logits\n    return wide\n"
    )
    shape = analyze_compute_logits(D2T_HEAD + tail, 1)
    assert (shape.post, shape.target_map) == ("d2t_scatter", "absolute")
    assert "not only the scatter" not in shape.reason


def _signature(top_tokens: str, call: str | None) -> HeadSignature:
    """A tree's signatures from their parameter lists (``name`` or ``name=`` for one with a default)."""

    def params(text: str) -> tuple[SignatureParam, ...]:
        return tuple(SignatureParam(p.rstrip("="), ParamKind.POS, not p.endswith("=")) for p in text.split())

    return HeadSignature("logits_processor.py:9", params(top_tokens), params(call) if call is not None else None)


@pytest.mark.parametrize(
    ("arguments", "top_tokens", "call", "problem"),
    [
        (
            "self.lm_head, hidden_states, embedding_bias=b",
            "lm_head hidden_states",
            None,
            "no parameter `embedding_bias`",
        ),
        ("self.lm_head, hidden_states, skip_gather=False", "lm_head hidden_states skip_gather=", None, None),
        (
            "self.lm_head, hidden_states, self.bias",
            "lm_head hidden_states skip_gather=",
            "lm_head hidden_states embedding_bias= skip_gather=",
            "`self.bias` is `embedding_bias` in the call but `skip_gather` in get_top_tokens",
        ),
        (
            "self.lm_head, hidden_states",
            "lm_head hidden_states temperature",
            "lm_head hidden_states",
            "no value for `temperature`",
        ),
        (
            "self.lm_head, embedding_bias=b",
            "lm_head hidden_states embedding_bias=",
            "lm_head hidden_states embedding_bias=",
            None,
        ),
    ],
)
def test_head_arguments_bind_to_the_trees_signatures(arguments, top_tokens, call, problem):
    """Bound as Python binds them, to the tree's get_top_tokens and call; a call that itself lacks a value
    raises as much as its mirror, so only a value the mirror alone lacks is named."""
    code = f"def compute_logits(self, hidden_states):\n    return self.logits_processor({arguments})\n"
    shape = analyze_compute_logits(code, 1, _signature(top_tokens, call))
    if problem is None:
        assert shape.kind == "head", shape.reason
    else:
        assert shape.rule == "head-arguments"
        assert shape.reason.startswith(f"{HEAD_ARGUMENTS_REASON.format(2)}: {problem}; get_top_tokens(")
        assert shape.reason.endswith(" at logits_processor.py:9")
