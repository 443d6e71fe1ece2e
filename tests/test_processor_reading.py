"""Reading the scanned vLLM's own LogitsProcessor (index/processor.py): which methods its call and its get_top_tokens
run, the parameters a head call binds to, and the constructor flags one path alone tests, however the class
is laid out in its file."""

from __future__ import annotations

import textwrap

from mtp_audit.index.processor import has_local_argmax, head_signature, processor_paths

FORWARD = """
    def forward(self, lm_head, hidden_states, embedding_bias=None):
        if self.logits_as_input:
            return hidden_states
        return self._get_logits(lm_head, hidden_states)

    def _get_logits(self, lm_head, hidden_states):
        return lm_head(hidden_states) * self.scale
"""
INIT = """
    def __init__(self, vocab_size, scale=1.0, logits_as_input=False):
        self.scale = scale
        self.logits_as_input = logits_as_input
"""
TOP_TOKENS = """
    def get_top_tokens(self, lm_head, hidden_states, embedding_bias=None):
        return (lm_head(hidden_states) * self.scale).argmax(-1)
"""


def source(*classes: str) -> str:
    return "\n\n".join(textwrap.dedent(c).strip() + "\n" for c in classes)


def flags_of(text: str) -> list[tuple[str, str]]:
    paths = processor_paths(text, "logits_processor.py")
    assert paths is not None
    return [(f.param, f.path) for f in paths.flags]


def test_methods_a_base_of_the_same_file_defines_are_the_processors():
    """__init__ and forward moved to a base class in the file: read from there, not taken as absent."""
    moved = source("class _Base(nn.Module):" + INIT + FORWARD, "class LogitsProcessor(_Base):" + TOP_TOKENS)
    paths = processor_paths(moved, "logits_processor.py")
    assert paths is not None and {"forward", "_get_logits"} <= set(paths.call)
    assert flags_of(moved) == [("logits_as_input", "call")]


def test_get_top_tokens_from_a_mixin_of_the_same_file_is_local_argmax():
    mixed = source(
        "class TopTokensMixin:" + TOP_TOKENS, "class LogitsProcessor(nn.Module, TopTokensMixin):" + INIT + FORWARD
    )
    assert has_local_argmax(mixed)
    signature = head_signature(mixed, "logits_processor.py")
    assert signature is not None and [p.name for p in signature.top_tokens] == [
        "lm_head",
        "hidden_states",
        "embedding_bias",
    ]


def test_a_call_that_passes_everything_on_binds_as_forward_does():
    passing = "\n    def __call__(self, *args, **kwargs):\n        return super().__call__(*args, **kwargs)\n"
    text = source("class LogitsProcessor(nn.Module):" + INIT + passing + FORWARD + TOP_TOKENS)
    signature = head_signature(text, "logits_processor.py")
    assert signature is not None and signature.call is not None
    assert [p.name for p in signature.call] == ["lm_head", "hidden_states", "embedding_bias"]
    own = (
        "\n    def __call__(self, lm_head, hidden_states, *rest):\n"
        "        return self.forward(lm_head, hidden_states)\n"
    )
    signature = head_signature(source("class LogitsProcessor(nn.Module):" + INIT + own + FORWARD + TOP_TOKENS), "f")
    assert (
        signature is not None
        and signature.call is not None
        and [p.name for p in signature.call][:2]
        == [
            "lm_head",
            "hidden_states",
        ]
    )


def test_flags_stored_and_tested_in_other_forms():
    annotated = INIT.replace("self.logits_as_input = logits_as_input", "self.logits_as_input: bool = logits_as_input")
    by_getattr = FORWARD.replace("if self.logits_as_input:", 'if getattr(self, "logits_as_input", False):')
    by_property = FORWARD.replace("if self.logits_as_input:", "if self.returns_input:") + (
        "\n    @property\n    def returns_input(self):\n        return self.logits_as_input\n"
    )
    by_match = FORWARD.replace(
        "if self.logits_as_input:\n            return hidden_states",
        "match self.logits_as_input:\n            case True:\n                return hidden_states",
    )
    for init, forward in ((annotated, FORWARD), (INIT, by_getattr), (INIT, by_property), (INIT, by_match)):
        assert flags_of(source("class LogitsProcessor(nn.Module):" + init + forward + TOP_TOKENS)) == [
            ("logits_as_input", "call")
        ], (init, forward)


def test_a_parameter_both_paths_read_is_no_flag():
    both = FORWARD.replace(
        "return self._get_logits(lm_head, hidden_states)",
        "return self._get_logits(lm_head, hidden_states) * self.scale",
    )
    both = both.replace("if self.logits_as_input:", "if self.scale > 1:")
    assert flags_of(source("class LogitsProcessor(nn.Module):" + INIT + both + TOP_TOKENS)) == []


def test_a_parameter_one_path_reads_is_a_flag_with_its_fallback():
    """Up to vLLM 0.33 the call cuts the logits to ``org_vocab_size`` and get_top_tokens never reads it: a
    parameter with a default that one path reads in any statement (not only a condition) is a flag, and the
    parameter its attribute falls back to (``org_vocab_size or vocab_size``) is recorded; one without a default
    is not (every drafter passes it)."""
    init = INIT.replace("scale=1.0,", "org_vocab_size=None, scale=1.0,") + (
        "        self.org_vocab_size = org_vocab_size or vocab_size\n        self.vocab = vocab_size\n"
    )
    cut = FORWARD.replace(
        "return lm_head(hidden_states) * self.scale",
        "return (lm_head(hidden_states) * self.scale)[..., : self.org_vocab_size][..., : self.vocab]",
    )
    paths = processor_paths(source("class LogitsProcessor(nn.Module):" + init + cut + TOP_TOKENS), "lp.py")
    assert paths is not None
    flags = {flag.param: flag for flag in paths.flags}
    assert sorted(flags) == ["logits_as_input", "org_vocab_size"]
    read = flags["org_vocab_size"]
    assert (read.path, read.how, read.default, read.fallback) == ("call", "reads", "None", ("vocab_size", 0))
    assert read.test.startswith("_get_logits, lp.py:")
    assert [flag.how for flag in paths.flags] == ["tests", "reads"]  # a branch picked first
    for spelled in (
        "vocab_size if org_vocab_size is None else org_vocab_size",
        "org_vocab_size if org_vocab_size is not None else vocab_size",
    ):
        other = init.replace("org_vocab_size or vocab_size", spelled)
        paths = processor_paths(source("class LogitsProcessor(nn.Module):" + other + cut + TOP_TOKENS), "lp.py")
        assert paths is not None and paths.flags[-1].fallback == ("vocab_size", 0), spelled


def test_a_raise_one_path_alone_guards_is_read_and_judged_for_literals_only():
    """``if self.scale <= 0.0: raise`` in get_top_tokens alone: a guard; a raise both paths guard alike is none;
    its test is evaluated for a literal, and anything it cannot evaluate is not judged (None)."""
    top = TOP_TOKENS.replace(
        "        return (lm_head",
        "        if not self.scale > 0 or self.scale is None:\n            raise ValueError\n        return (lm_head",
    )
    paths = processor_paths(source("class LogitsProcessor(nn.Module):" + INIT + FORWARD + top), "lp.py")
    assert paths is not None
    [guard] = paths.guards
    assert (guard.param, guard.position, guard.attr, guard.path) == ("scale", 1, "scale", "get_top_tokens")
    assert guard.where.startswith("get_top_tokens, lp.py:")
    assert [guard.raises_for(v) for v in (-2, 0.0, 3.5)] == [True, True, False]
    assert guard.raises_for("text") is None  # a comparison Python refuses: not judged
    both = FORWARD.replace(
        "        if self.logits_as_input:",
        "        if not self.scale > 0 or self.scale is None:\n"
        "            raise ValueError\n        if self.logits_as_input:",
    )
    paths = processor_paths(source("class LogitsProcessor(nn.Module):" + INIT + both + top), "lp.py")
    assert paths is not None and paths.guards == ()
