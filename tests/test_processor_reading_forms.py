"""More forms of the scanned vLLM's LogitsProcessor (index/processor.py): how its flags are stored and tested, bases and
bases of bases, pass-through calls, head signatures; each case kills mutants the other tests let through."""

from __future__ import annotations

import pytest
from test_processor_reading import FORWARD, INIT, TOP_TOKENS, source

from mtp_audit.index.processor import head_signature, processor_paths


def flags(text: str):
    paths = processor_paths(text, "lp.py")
    assert paths is not None
    return [(f.param, f.path, f.default) for f in paths.flags]


def processor(init: str = INIT, forward: str = FORWARD, top: str = TOP_TOKENS) -> str:
    return source("class LogitsProcessor(nn.Module):" + init + forward + top)


# _stores 3-10: ``self.a, self.b = a, b`` (and a tuple stored whole)
def test_flag_stored_in_a_tuple_assignment():
    init = INIT.replace(
        "self.scale = scale\n        self.logits_as_input = logits_as_input",
        "self.scale, self.logits_as_input = scale, logits_as_input\n        self.shape = (vocab_size, scale)",
    )
    assert flags(processor(init)) == [("logits_as_input", "call", "False")]


# _one_sided_flags 25, 26: a local (a Name target) or a subscript store in __init__
def test_init_with_a_local_and_a_subscript_store():
    init = INIT.replace(
        "self.scale = scale",
        "size = vocab_size\n        self.table = {}\n        self.table[0] = size\n        self.scale = scale",
    )
    assert flags(processor(init)) == [("logits_as_input", "call", "False")]


# _one_sided_flags 64: a flag parameter without a default
def test_flag_without_a_default():
    init = INIT.replace("logits_as_input=False", "*, logits_as_input")
    assert flags(processor(init)) == [("logits_as_input", "call", None)]


# _tests_of 20, 22-27: a local holding ``not self.flag`` / ``bool(self.flag)``; 21, 28: a local from a local;
# 41: an annotated local
def test_flag_tested_through_locals_of_other_forms():
    forms = [
        "keep = not self.logits_as_input\n        if not keep:",
        "as_input = bool(self.logits_as_input)\n        if as_input:",
        "first = self.logits_as_input\n        second = first\n        if second:",
        "as_input: bool = self.logits_as_input\n        if as_input:",
    ]
    for form in forms:
        forward = FORWARD.replace("if self.logits_as_input:", form)
        assert flags(processor(forward=forward)) == [("logits_as_input", "call", "False")], form


# _bases_here 15, 18, 19, 21, 25: two bases, and a base of a base; 1, 24: a chain eight deep
def test_methods_from_two_bases_and_a_base_of_a_base():
    two = source(
        "class _Init(nn.Module):" + INIT,
        "class _Call:" + FORWARD,
        "class LogitsProcessor(_Init, _Call):" + TOP_TOKENS,
    )
    assert flags(two) == [("logits_as_input", "call", "False")]
    chain = source(
        "class _Init(nn.Module):" + INIT,
        "class _Call(_Init):" + FORWARD,
        "class LogitsProcessor(_Call):" + TOP_TOKENS,
    )
    assert flags(chain) == [("logits_as_input", "call", "False")]


def test_a_chain_of_eight_bases_is_followed():
    classes = ["class B8(nn.Module):" + INIT + FORWARD]
    classes += [f"class B{i}(B{i + 1}):\n    pass\n" for i in range(7, 0, -1)]
    classes.append("class LogitsProcessor(B1):" + TOP_TOKENS)
    assert flags(source(*classes)) == [("logits_as_input", "call", "False")]


# head_signature 5, 16, 29: no class; a processor with get_top_tokens and no call entry
def test_head_signature_without_class_or_call():
    assert head_signature("x = 1\n", "f") is None
    only_top = source("class LogitsProcessor(nn.Module):" + INIT + TOP_TOKENS)
    signature = head_signature(only_top, "f")
    assert signature is not None and signature.call is None


# _passes_on 2, 3, 4, 5, 7, 11, 12, 13, 21: a __call__ that does not pass everything on binds by its own signature
def test_calls_that_do_not_pass_everything_on():
    cases = [
        "def __call__(self, x, *args, **kwargs):\n        return self.forward(*args, **kwargs)",
        "def __call__(self, x, /, *args, **kwargs):\n        return self.forward(*args, **kwargs)",
        "def __call__(self, *args, flag=False, **kwargs):\n        return self.forward(*args, **kwargs)",
        "def __call__(self, *args):\n        return self.forward(*args)",
        "def __call__(self, *args, **kwargs):\n        unused = None\n        return self.forward(*args, **kwargs)",
        "def __call__(self, *args, **kwargs):\n        return self.forward(*args)",
        "def __call__(self, *args, **kwargs):\n        return self.forward(*other, **kwargs)",
        "def __call__(self, *args, **kwargs):\n        return self.forward(*args, 1, **kwargs)",
    ]
    for case in cases:
        text = processor(forward="\n    " + case + "\n" + FORWARD)
        signature = head_signature(text, "f")
        assert signature is not None and signature.call is not None
        assert [p.name for p in signature.call][:1] != ["lm_head"], case


# _stores 4: a tuple assignment after the flag's own store keeps the earlier stores
def test_tuple_assignment_after_the_flag_store():
    init = INIT.replace("self.scale = scale", "self.scale = scale") + "        self.a, self.b = 1, 2\n"
    assert flags(processor(init)) == [("logits_as_input", "call", "False")]


# _tests_of 25: ``not`` of a local that holds the flag
def test_not_of_a_local_holding_the_flag():
    forward = FORWARD.replace(
        "if self.logits_as_input:", "first = self.logits_as_input\n        keep = not first\n        if not keep:"
    )
    assert flags(processor(forward=forward)) == [("logits_as_input", "call", "False")]


# _tests_of 28: a local copied from another name that holds no flag tests nothing
def test_a_local_that_does_not_hold_the_attribute_is_no_test_of_it():
    init = INIT + "        self.soft_cap = None if vocab_size else vocab_size\n"
    forward = FORWARD.replace(
        "return self._get_logits(lm_head, hidden_states)",
        "out = hidden_states\n        if out is None:\n            raise ValueError\n"
        "        return self._get_logits(lm_head, out)",
    )
    assert flags(processor(init, forward)) == [("logits_as_input", "call", "False")]


# _bases_here 22, 23: a class name bound twice makes a base cycle by name (legal Python); the depth bound stops it
def test_a_base_cycle_by_rebinding_terminates():
    text = source(
        "class _B(nn.Module):" + INIT,
        "class _A(_B):" + FORWARD,
        "class _B(_A):\n    pass\n",
        "class LogitsProcessor(_A):" + TOP_TOKENS,
    )
    paths = processor_paths(text, "lp.py")
    assert paths is not None


@pytest.mark.parametrize(
    ("text", "may_patch"),
    [
        ("p = self.logits_processor", True),  # another name bound to it
        ("x == self.logits_processor", True),  # read generously: the test only decides what is parsed
        ("self.logits_processor = p = q", True),
        ("self.logits_processor = p\nx = 1", True),
        ("setattr(self.logits_processor, 'a', 1)", True),
        ("setattr  (\n self.logits_processor, 'a', 1)", True),
        ("m.register_forward_hook(h)", True),
        ("m.register_forward_pre_hook(h)", True),
        ("self.logits_processor._call_impl = f", True),
        ("p =self.logits_processor.x", False),  # an attribute of it, which the facts read
        ("p = self.logits_processor (", False),
        ("p = self.logits_processor[0]", False),
        ("self.logits_processor=p==q", False),
        ("self.logits_processor = f(p)", False),
        ("getattr(self.logits_processor, 'a')", False),
        ("m.register_forward_x(h)", False),
        ("= self.logits_processor_x", False),
        ("f(self.logits_processor)", False),
        ("= self.logits_processor", True),  # at the very start of the text, and what precedes it
        ("p =\t\xa0self.logits_processor", True),  # any whitespace, as the pattern's \\s
        ("self.logits_processor, a =", False),  # nothing before it: not the text's last character
        ("self.logits_processor setattr(", False),
    ],
)
def test_the_text_test_for_a_module_that_may_change_the_processor(text, may_patch):
    """Which module texts are parsed to look for changes to ``self.logits_processor`` the facts do not read."""
    from mtp_audit.classify.analysis import _may_patch_the_processor

    assert _may_patch_the_processor(text) is may_patch
    assert _may_patch_the_processor(f"class A:\n    def f(self):\n        {text}\n") is may_patch
