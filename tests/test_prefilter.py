"""The text pre-filter must never change what the facts say."""

from __future__ import annotations

import pytest

from mtp_audit.index import facts as facts_module
from mtp_audit.index.facts import extract_facts
from mtp_audit.index.prefilter import reduce_source, whole

TRICKY = """\
import torch


@decorate(
    "multi-line decorator",
)
# a comment between decorator and def
def helper(
    x,
) -> int:
    return x


class Spread(
    Base,
):
    attr: int = 3

    @classmethod
    # a comment
    def build(cls):
        return cls()

    def __init__(self, config):
        super().__init__()
        self.model = Predictor(config)
        self.other = (
            Wrapped(config)
        )
        self.not_a_call = factory(config).child
        self.annotated: Head
        self.head: Head = Head(
            config.size,
        )

    def compute_logits(
        self,
        hidden_states,
    ):
        return self.logits_processor(self.lm_head, hidden_states)


class Placeholder:
    def __init__(self, *args):
        raise NotImplementedError("not on this platform")


class OneLine(Base): ...
"""

COLUMN_ZERO_DOCSTRING = '''\
class Odd:
    def method(self):
        """Text
at column zero."""
        return 1

    def compute_logits(self, hidden_states):
        return self.logits_processor(self.lm_head, hidden_states)
'''


def _whole_facts(source: str, monkeypatch, module: str = "pkg.mod"):
    monkeypatch.setattr(facts_module, "reduce_source", whole)
    return extract_facts(source, module, "pkg/mod.py", False)


def _same(cut, full) -> None:
    assert [c.name for c in cut.classes] == [c.name for c in full.classes]
    for a, b in zip(cut.classes, full.classes):
        assert (a.line, a.bases, a.annotations, a.init_raises) == (b.line, b.bases, b.annotations, b.init_raises)
        assert {k: (v.line, v.code) for k, v in a.methods.items()} == {
            k: (v.line, v.code) for k, v in b.methods.items()
        }
        assert a.init_attrs == b.init_attrs, a.name
    for platform in cut.bindings:
        for name in set(cut.bindings[platform]) | set(full.bindings[platform]):
            assert cut.bindings[platform].get(name) == full.bindings[platform].get(name), (platform, name)


def test_cut_is_smaller_and_keeps_real_line_numbers():
    reduced = reduce_source(TRICKY)
    assert "def build" not in reduced.source and "def helper" not in reduced.source
    assert "def compute_logits" in reduced.source
    line = reduced.source.splitlines().index("    def compute_logits(")
    assert TRICKY.splitlines()[reduced.lines[line] - 1] == "    def compute_logits("


@pytest.mark.parametrize("source", [TRICKY, COLUMN_ZERO_DOCSTRING], ids=["tricky", "column-zero-docstring"])
def test_facts_equal_with_and_without_the_cut(source, monkeypatch):
    cut = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(source, monkeypatch))
    spread = next((c for c in cut.classes if c.name == "Spread"), None)
    if spread:
        assert spread.init_attrs == {
            "model": ["Predictor"],
            "other": ["Wrapped"],
            "not_a_call": ["<other>"],
            "annotated": [],
            "head": ["Head"],
        }
        placeholder = next(c for c in cut.classes if c.name == "Placeholder")
        assert placeholder.init_raises == "__init__ raises NotImplementedError: not on this platform"


@pytest.mark.integration
def test_facts_equal_on_real_vllm(vllm_release, monkeypatch):
    root = vllm_release("0.34.0")
    files = sorted((root / "vllm/model_executor/models").glob("*_mtp.py")) + sorted(
        (root / "vllm/models").rglob("mtp.py")
    )
    files += [root / "vllm/model_executor/models" / name for name in ("llama.py", "interfaces.py", "deepseek_v2.py")]
    for path in files:
        source = path.read_text()
        cut = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
        with monkeypatch.context() as patch:
            full = _whole_facts(source, patch)
        _same(cut, full)


PLATFORM_FREE = """\
from .base import Base as Alias
import torch.nn as nn

class Local(Alias):
    pass

Exported = Local
"""

PLATFORM_FREE_RAISING = """\
from .base import Base
raise ImportError("this module needs a GPU build")
"""

PLATFORM_DEPENDENT = """\
from vllm.platforms import current_platform
from .base import Base

if current_platform.is_rocm():
    from .rocm import Head
else:
    from .cuda import Head

Shared = Base
"""

STARS_IN_PLATFORM_ORDER = """\
from vllm.platforms import current_platform

if current_platform.is_cpu():
    from .a import *
    from .b import *
else:
    from .b import *
    from .a import *
"""

LAZY = """\
__all__ = ["Drafter"]

def __getattr__(name):
    if name == "Drafter":
        from .drafter import Drafter
        return Drafter
    raise AttributeError(name)
"""


@pytest.mark.parametrize(
    "source",
    [PLATFORM_FREE, PLATFORM_FREE_RAISING, PLATFORM_DEPENDENT, STARS_IN_PLATFORM_ORDER, LAZY],
    ids=["platform-free", "platform-free-raising", "platform-dependent", "star-order", "lazy"],
)
def test_platforms_read_once_or_shared_say_what_five_readings_say(source, monkeypatch):
    shared = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
    monkeypatch.setattr(facts_module, "_reads_platform", lambda tree, getattr_def: True)
    monkeypatch.setattr(facts_module, "_share_with_earlier", lambda bindings, earlier: bindings)
    each = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
    # in order: a name is looked up in star imports in the order they were bound
    assert {p: list(b.items()) for p, b in shared.bindings.items()} == {
        p: list(b.items()) for p, b in each.bindings.items()
    }
    assert shared.import_errors == each.import_errors
    assert set(shared.bindings) == set(facts_module.PLATFORMS)


def test_platform_dependent_bindings_differ_where_the_branch_does():
    facts = extract_facts(PLATFORM_DEPENDENT, "pkg.mod", "pkg/mod.py", False)
    heads = {platform: [t.a for t in names["Head"]] for platform, names in facts.bindings.items()}
    assert heads["rocm"] == ["pkg.rocm"] and heads["cuda"] == ["pkg.cuda"]
    assert all(names["Shared"] == facts.bindings["cuda"]["Shared"] for names in facts.bindings.values())


def test_a_platform_free_raise_fails_the_import_everywhere():
    facts = extract_facts(PLATFORM_FREE_RAISING, "pkg.mod", "pkg/mod.py", False)
    assert set(facts.import_errors) == set(facts_module.PLATFORMS)
    assert all("needs a GPU build" in why for why in facts.import_errors.values())
