"""The call contract's building blocks: how a caller's arguments bind to a drafter's parameters,
which parameters a method reads, and what a contract says about its speculators."""

from __future__ import annotations

import pytest

from mtp_audit.classify.calls import Contract, bind, first_read, form, passed_to_top_tokens, reads, where
from mtp_audit.classify.shape_types import Param, ParamKind
from mtp_audit.model import CallerRecord, CallPair, ModelCall, Reach


def call(method: str, *args: str, file: str = "spec.py", line: int = 10) -> ModelCall:
    keywords = tuple(a.split("=", 1)[0] for a in args if "=" in a)
    return ModelCall(method, args, keywords, len(args) - len(keywords), file, line)


def params(*spec: str) -> list[Param]:
    """``"a"`` positional, ``"/a"`` positional-only, ``"*a"`` *args, ``"**a"`` **kwargs, ``"a="`` keyword-only."""
    out = []
    for item in spec:
        if item.startswith("**"):
            out.append(Param(item[2:], None, ParamKind.STARSTAR))
        elif item.startswith("*"):
            out.append(Param(item[1:], None, ParamKind.STAR))
        elif item.startswith("/"):
            out.append(Param(item[1:], None, ParamKind.POSONLY))
        elif item.endswith("="):
            out.append(Param(item[:-1], "None", ParamKind.KWONLY))
        else:
            out.append(Param(item, None, ParamKind.POS))
    return out


@pytest.mark.parametrize(
    ("spec", "args", "bound", "errors"),
    [
        (("hidden_states",), ("h",), {"hidden_states"}, []),
        (("hidden_states", "spec_step_idx"), ("h",), {"hidden_states"}, []),
        (("hidden_states", "spec_step_idx"), ("h", "2"), {"hidden_states", "spec_step_idx"}, []),
        (("hidden_states",), ("h", "2"), {"hidden_states"}, ["2 positional arguments"]),
        (("hidden_states", "*rest"), ("h", "2", "3"), {"hidden_states"}, []),
        (("/hidden_states",), ("h",), {"hidden_states"}, []),
        (("/hidden_states",), ("hidden_states=h",), set(), ["hidden_states="]),  # positional-only by keyword
        (("hidden_states", "spec_step_idx"), ("h", "spec_step_idx=1"), {"hidden_states", "spec_step_idx"}, []),
        (("hidden_states", "spec_step_idx="), ("h", "spec_step_idx=1"), {"hidden_states", "spec_step_idx"}, []),
        (("hidden_states",), ("h", "spec_step_idx=1", "other=2"), {"hidden_states"}, ["spec_step_idx=", "other="]),
        (("hidden_states", "**kwargs"), ("h", "spec_step_idx=1"), {"hidden_states"}, []),
        (("*args",), ("h", "2"), set(), []),
        ((), ("h",), set(), ["1 positional arguments"]),
    ],
)
def test_arguments_bind_as_python_binds_them(spec, args, bound, errors) -> None:
    assert bind(params(*spec), call("get_top_tokens", *args)) == (bound, errors)


def test_reads_sees_only_loads_of_the_name_in_the_body() -> None:
    text = "    def get_top_tokens(self, hidden_states, spec_step_idx=0):\n        return f(hidden_states)\n"
    assert reads(text, "hidden_states")
    assert not reads(text, "spec_step_idx")  # a parameter, never read
    assert not reads("def f(self, x):\n    x = 1\n    return 2\n", "x")  # stored, not read
    assert reads("def f(self, x):\n    y = x\n", "x")
    assert reads("def broken(self, x:\n", "x")  # unparsable: assume it reads
    assert reads("", "x")


def test_first_read_names_the_statement_and_its_line_in_the_file() -> None:
    text = (
        "    def compute_logits(self, hidden_states, spec_step_idx=0):\n"
        "        if spec_step_idx > 0:\n"
        "            head = self.heads[spec_step_idx]\n"
        "        return head(hidden_states)\n"
    )
    # an ``if`` is the block, not the statement: the first statement inside that reads it
    assert first_read(text, "spec_step_idx", 40) == "(line 42: `head = self.heads[spec_step_idx]`)"
    assert first_read(text, "hidden_states", 40) == "(line 43: `return head(hidden_states)`)"
    two_on_a_line = "def f(self, a):\n    x = 1\n    y = 2; z = a\n"
    assert first_read(two_on_a_line, "a", 7) == "(line 9: `z = a`)"
    inner = "def f(self, a):\n    if cond:\n        for i in b:\n            use(a)\n"
    assert first_read(inner, "a", 1) == "(line 4: `use(a)`)"
    nested_first = "def f(self, a):\n    if cond:\n        use(a)\n    b = a\n"  # the first by line, not by depth
    assert first_read(nested_first, "a", 1) == "(line 3: `use(a)`)"
    in_a_case = "def f(self, a):\n    match mode:\n        case 1:\n            use(a)\n"  # a ``match`` is a block too
    assert first_read(in_a_case, "a", 1) == "(line 4: `use(a)`)"
    assert first_read(text, "absent", 40) is None
    assert first_read("def broken(self, x:\n", "x", 1) is None


def test_where_and_form_quote_the_call() -> None:
    model_call = call("get_top_tokens", "h", "spec_step_idx=i", file="v1/spec.py", line=7)
    assert where(model_call) == "v1/spec.py:7"
    assert form(model_call) == "get_top_tokens(h, spec_step_idx=i)"


def _contract() -> Contract:
    logits = call("compute_logits", "h", "spec_step_idx=i", line=11)
    other_logits = call("compute_logits", "h", "extra", line=21)
    return Contract(
        (
            Reach(
                "Speculator",
                "spec.py",
                5,
                pairs=[CallPair(call("get_top_tokens", "h", "spec_step_idx=i", line=12), (logits,))],
                logits=[logits],
            ),
            Reach(
                "Eagle",
                "eagle.py",
                3,
                pairs=[CallPair(call("get_top_tokens", "h", "extra", file="eagle.py", line=22), (other_logits,))],
            ),
            Reach(
                "Medusa",
                "medusa.py",
                8,
                logits=[call("compute_logits", "h", file="medusa.py", line=30)],
                other=["propose"],
            ),
            Reach("Custom", "custom.py", 2),
        )
    )


def test_a_contract_lists_each_speculator_as_a_caller_record() -> None:
    assert _contract().records() == [
        CallerRecord("Speculator", "spec.py", 12, ("h", "spec_step_idx=i"), ("h", "spec_step_idx=i"), 11),
        CallerRecord("Eagle", "eagle.py", 22, ("h", "extra"), ("h", "extra"), 21),
        CallerRecord("Medusa", "medusa.py", None, None, ("h",), 30),
        CallerRecord("Custom", "custom.py", None, None, None, None),
    ]


def test_a_contract_knows_who_reaches_get_top_tokens() -> None:
    contract = _contract()
    assert contract.known and not contract.uncalled
    assert [r.speculator for r, _ in contract.pairs()] == ["Speculator", "Eagle"]
    unreached = Contract(contract.reaches[2:])
    assert unreached.known and unreached.uncalled
    assert unreached.unreached_reason() == (
        "no speculator that can hold it calls get_top_tokens: Medusa (medusa.py:8) drafts with compute_logits, "
        "propose; Custom (custom.py:2) calls no logits method of the drafter"
    )
    assert not Contract(()).known and not Contract(()).uncalled


def test_only_callers_whose_compute_logits_call_binds_are_viable() -> None:
    contract = _contract()
    takes_step = params("hidden_states", "spec_step_idx")
    assert [r.speculator for r, _ in contract.viable_pairs(takes_step)] == ["Speculator", "Eagle"]
    assert [r.speculator for r, _ in contract.viable_pairs(params("hidden_states", "extra"))] == ["Eagle"]
    assert contract.viable_pairs(params("hidden_states")) == []


def test_the_parameters_some_caller_passes_to_get_top_tokens() -> None:
    contract = _contract()
    assert passed_to_top_tokens(contract, params("hidden_states", "spec_step_idx")) == {
        "hidden_states",
        "spec_step_idx",
    }
    assert passed_to_top_tokens(contract, params("hidden_states", "extra")) == {"hidden_states", "extra"}
    assert passed_to_top_tokens(Contract(()), params("hidden_states")) == set()
    # only the first caller passes spec_step_idx: it still counts
    assert passed_to_top_tokens(contract, params("hidden_states", "*rest", "spec_step_idx=")) == {
        "hidden_states",
        "spec_step_idx",
    }


def test_a_get_top_tokens_call_with_no_compute_logits_on_its_path() -> None:
    contract = Contract((Reach("Bare", "bare.py", 1, pairs=[CallPair(call("get_top_tokens", "h", line=40), ())]),))
    assert contract.records() == [CallerRecord("Bare", "spec.py", 40, ("h",), None, None)]
    assert [r.speculator for r, _ in contract.viable_pairs(params("hidden_states"))] == ["Bare"]


def test_the_config_class_a_drafter_declares_in_its_own_body() -> None:
    from mtp_audit.resolve.callers import declared_config

    source = (
        "class Other:\n    speculator_config_class = NotMine\n\n\n"
        "class Drafter(Base):\n    '''doc'''\n\n    speculator_config_class: type = configs.MTPConfig\n"
        "    def compute_logits(self, hidden_states):\n        speculator_config_class = Local\n\n"
        "class After:\n    speculator_config_class = AlsoNotMine\n"
    )
    assert declared_config(source, "Drafter", 5) == "configs.MTPConfig"
    assert declared_config(source, "Other", 1) == "NotMine"
    assert declared_config("class Plain:\n    pass\n\nspeculator_config_class = Module\n", "Plain", 1) is None
    assert declared_config("class Short:\n    x = 1\n", "Short", 9) is None  # a line past the end
    assert declared_config("class Short:\n    x = 1\n", "Short", 3) is None  # the line just past it
    indented = "if x:\n    class Nested:\n        speculator_config_class = NestedConfig\n    y = 1\n"
    assert declared_config(indented, "Nested", 2) == "NestedConfig"
    # a statement after the class, at its own indentation, is not in its body
    one_line = "if x:\n    class Nested: pass\n    speculator_config_class = Outer\n"
    assert declared_config(one_line, "Nested", 2) is None
    after = "if x:\n    class Nested:\n        a = 1\n    speculator_config_class = Outer\n"
    assert declared_config(after, "Nested", 2) is None


def test_the_speculators_that_can_hold_a_drafter() -> None:
    """One that passes ``spec_step_idx=`` to both methods cannot hold a drafter whose compute_logits
    takes the hidden states alone; one whose get_top_tokens call a mirror takes stays (the argmax flag
    runs the drafter through it); one that hands the drafter on stays (what it does there is not known);
    where none can, all stay (the selection may have missed the one that does)."""
    both = Reach(
        "Multi",
        "multi.py",
        1,
        pairs=[
            CallPair(call("get_top_tokens", "h", "spec_step_idx=i"), (call("compute_logits", "h", "spec_step_idx=i"),))
        ],
        logits=[call("compute_logits", "h", "spec_step_idx=i")],
    )
    other_branch = Reach(
        "Layered",
        "layered.py",
        2,
        pairs=[CallPair(call("get_top_tokens", "h"), (call("compute_logits", "h", "spec_step_idx=i"),))],
        logits=[call("compute_logits", "h", "spec_step_idx=i")],
    )
    handing_on = Reach(
        "Handing", "hand.py", 3, logits=[call("compute_logits", "h", "spec_step_idx=i")], unfollowed=["x"]
    )
    plain = Reach("Plain", "plain.py", 4, pairs=[CallPair(call("get_top_tokens", "h"), (call("compute_logits", "h"),))])
    hidden_only = params("hidden_states")
    held = Contract((both, other_branch, handing_on, plain)).held(hidden_only)
    assert [r.speculator for r in held.reaches] == ["Layered", "Handing", "Plain"]
    assert Contract((both,)).held(hidden_only) == Contract((both,))
    assert Contract((both, plain)).held(params("hidden_states", "spec_step_idx")) == Contract((both, plain))


def test_a_held_speculator_keeps_only_the_paths_that_can_run_the_drafter() -> None:
    """A speculator with two drafting paths, one passing ``spec_step_idx=`` to both methods: for a drafter
    whose methods take the hidden states alone, that path fails before a token is chosen, so it is not
    one of the drafter's callers; the other path is. One whose every path fails stays out even where it
    also hands the drafter on elsewhere: it never gets that far."""
    stepped = CallPair(
        call("get_top_tokens", "h", "spec_step_idx=i", line=20), (call("compute_logits", "h", "spec_step_idx=i"),)
    )
    plain = CallPair(call("get_top_tokens", "h", line=30), (call("compute_logits", "h"),))
    both_paths = Reach("TwoPaths", "two.py", 1, pairs=[stepped, plain], logits=[*stepped.logits, *plain.logits])
    failing = Reach("Failing", "fail.py", 2, pairs=[stepped], logits=list(stepped.logits), unfollowed=["fail.py:9"])
    held = Contract((both_paths, failing)).held(params("hidden_states"))
    assert [(r.speculator, r.pairs) for r in held.reaches] == [("TwoPaths", [plain])]
    assert [record.line for record in held.records()] == [30]
    assert both_paths.pairs == [stepped, plain]  # the contract read is left as read
    stepped_drafter = Contract((both_paths, failing)).held(params("hidden_states", "spec_step_idx"))
    assert stepped_drafter == Contract((both_paths, failing))
