"""The text pre-filter must never change what the facts say."""

from __future__ import annotations

import pytest

from mtp_audit.index import facts as facts_module
from mtp_audit.index.classes import init_values
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


class Processor(LogitsProcessor):
    @torch.no_grad()
    def forward(
        self, lm_head, hidden_states
    ):
        return super().forward(lm_head, hidden_states)

    def _get_logits(self, hidden_states, lm_head): return None


class OnlyMethods:
    def logits_processor(self, lm_head, hidden_states):
        return hidden_states
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


INIT_SHAPES = '''\
class Shapes(Base):
    @some_decorator(
        "spans lines",
    )
    def __init__(self, config, prefix=""):
        super().__init__()
        if config.tie:
            self.head = Head(
                config.vocab_size,
                config.hidden_size,
            ).to(config.dtype)
        else:
            for _ in range(2):
                with context():
                    self.head = other_head(config)  # a comment
        self.wrapped = (
            Wrapped(config)
        )
        self.ternary = Left(
            config,
        ) if config.left else Right(config)
        self.continued = \\
            Continued(config)
        self.register_buffer(
            "table",
            make_table(config),
            persistent=False,
        )
        self.helper(config)
        self.total += 1

        def nested():
            self.from_nested = Nested()

        class Inner:
            def __init__(self):
                self.inner = Inner()

        match config.kind:
            case "a":
                self.matched = Matched()
        try:
            self.tried = Tried(config)
        except ValueError:
            self.tried = None

    def compute_logits(self, hidden_states):
        return self.logits_processor(self.head, hidden_states)


class OneLineBody:
    def __init__(self, config):
        if config.tie: self.head = Head(config)
        self.norm = Norm(config)


class Documented:
    def __init__(self, config):
        """Several lines, one of them
        self.fake = Fake(config)
        """
        self.real = Real(config)


class LatePlaceholder:
    def __init__(self, *args):
        """Why this class cannot run here,
        over two lines."""
        raise NotImplementedError("not on this platform")


class RaisesLater:
    def __init__(self, config):
        self.model = Model(config)
        raise ValueError("unsupported")


class Built:
    processor_cls = Masking

    def __init__(self, config):
        processor = Local(config)
        unused = Unused(config)
        self.local = processor
        self.model = First(config)
        self._build(config)
        self.choice = Left(config) if config.left else Right(config)
        if config.flag:
            self.flagged = Flagged(config)
        self.from_class = self.processor_cls(config)

    def _build(self, config):
        self.model = Second(config)
        self._deeper()

    def _deeper(self):
        self.deep = Deep()

    def other(self):
        self.never = Never()


def make_processor(size):
    return Masking(size)


def not_a_factory(size):
    processor = Masking(size)
    return processor
'''


def _callees(cls) -> dict[str, list[str]]:
    """What ``__init__`` may leave in each attribute on an instance of the class itself, by callee ("<other>": not a
    call the facts follow)."""
    steps = cls.init_steps
    found = init_values(
        (cls.name, steps.get("__init__", [])), lambda name, _caller: (cls.name, steps[name]) if name in steps else None
    )
    return {attr: [value.callee or "<other>" for _, value in values] for attr, values in found.values.items()}


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
        assert a.init_steps == b.init_steps, a.name
        assert (a.class_attrs, a.class_attr_lines) == (b.class_attrs, b.class_attr_lines), a.name
        assert a.defined_methods == b.defined_methods, a.name
    assert cut.factories == full.factories
    for platform in cut.bindings:
        for name in set(cut.bindings[platform]) | set(full.bindings[platform]):
            assert cut.bindings[platform].get(name) == full.bindings[platform].get(name), (platform, name)


def test_cut_is_smaller_and_keeps_real_line_numbers():
    reduced = reduce_source(TRICKY)
    assert "return cls()" not in reduced.source and "return x" not in reduced.source
    assert "    def build(self): pass" in reduced.source  # a method's name stays bound (the facts list it)
    assert "def helper(): pass" in reduced.source  # a module-level def still rebinds its name
    assert "def compute_logits" in reduced.source
    line = reduced.source.splitlines().index("    def compute_logits(")
    assert TRICKY.splitlines()[reduced.lines[line] - 1] == "    def compute_logits("


@pytest.mark.parametrize("source", [TRICKY, COLUMN_ZERO_DOCSTRING], ids=["tricky", "column-zero-docstring"])
def test_facts_equal_with_and_without_the_cut(source, monkeypatch):
    cut = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(source, monkeypatch))
    spread = next((c for c in cut.classes if c.name == "Spread"), None)
    if spread:
        assert _callees(spread) == {
            "model": ["Predictor"],
            "other": ["Wrapped"],
            "not_a_call": ["<other>"],
            "annotated": [],
            "head": ["Head"],
        }
        placeholder = next(c for c in cut.classes if c.name == "Placeholder")
        assert placeholder.init_raises == "__init__ raises NotImplementedError: not on this platform"
        assert spread.defined_methods == {"build": 21, "__init__": 24, "compute_logits": 36}
        processor = next(c for c in cut.classes if c.name == "Processor")  # only their names and lines stay
        assert processor.defined_methods == {"forward": 53, "_get_logits": 58}
        assert next(c for c in cut.classes if c.name == "OnlyMethods").defined_methods == {"logits_processor": 62}


ONE_LINE_AND_CHAINED = """\
class Base:
    def _build(self, config): self.logits_processor = Masking(config.vocab_size)

    def _typed(self, config: Config) -> None: self._build(config)


class Chained(Base):
    def __init__(self, config):
        super().__init__()
        config.processor = self.logits_processor = Masking(config.vocab_size)
        (processor,) = self.head = (Head(config),)
        rows[0] = self.norm = Norm(
            config.hidden_size,
        )
        height, width = self.size = (config.height, config.width)
        self._typed(config)
"""


def test_cut_keeps_one_line_helpers_and_chained_targets_of_any_shape(monkeypatch):
    """A helper whose body is on its ``def`` line, and a chained assignment whose first target is not a plain name
    (an attribute, a subscript, a tuple), set self all the same: the cut must keep them (QA mirror3 #5)."""
    cut = extract_facts(ONE_LINE_AND_CHAINED, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(ONE_LINE_AND_CHAINED, monkeypatch))
    by_name = {c.name: c for c in cut.classes}
    assert _callees(by_name["Base"]) == {}
    assert set(by_name["Base"].init_steps) == {"_build", "_typed"}
    assert _callees(by_name["Chained"]) == {
        "logits_processor": ["Masking"],
        "head": ["<other>"],
        "norm": ["Norm"],
        "size": ["<other>"],
    }


BRACKETED_AND_NESTED = """\
class Bracketed:
    def __init__(self, config):
        self.logits_processor = Plain(config)
        (self.logits_processor) = Masking(config)
        [self.lm_head] = [Head(config)]
        (self.norm): Norm = Norm(config)
        (self.f(config))
        self.a, self.b = self._build(config)

    def _build(self, config):
        (self.model) = Inner(config)
        (count, self.norm_out) = 1, NormOut(config)
        setattr(
            self, "head_out", HeadOut(config)
        )
        return A(), B()


class NestedStores:
    def __init__(self, config):
        def later():
            setattr(self, "logits_processor", Masking(config))
            self.head, other = Head(config), None
            [self.norm] = [Norm(config)]
            self.f(config)
            x = self.skip = Skip()

        self.logits_processor = Plain(config)
        later()
"""


def test_cut_keeps_bracketed_targets_and_a_nested_defs_setattr_and_target_lists(monkeypatch):
    """``(self.a) = A()`` and ``[self.a] = [A()]`` store on self as ``self.a = A()`` does (the cut dropped them); a
    def nested in ``__init__`` stores through ``setattr`` and target lists too, and ``self.a, self.b = self.m()`` runs
    the method first."""
    cut = extract_facts(BRACKETED_AND_NESTED, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(BRACKETED_AND_NESTED, monkeypatch))
    by_name = {c.name: c for c in cut.classes}
    assert _callees(by_name["Bracketed"]) == {
        "logits_processor": ["Masking"],
        "lm_head": ["Head"],
        "norm": ["Norm"],
        "model": ["Inner"],
        "norm_out": ["NormOut"],
        "head_out": ["HeadOut"],
        "a": ["<other>"],
        "b": ["<other>"],
    }
    assert _callees(by_name["NestedStores"]) == {
        "logits_processor": ["Masking", "Plain"],  # in the order of their lines
        "head": ["Head"],
        "norm": ["Norm"],
    }


def test_init_cut_keeps_what_the_tree_walk_reads_and_no_more(monkeypatch):
    reduced = reduce_source(INIT_SHAPES)
    assert "config.hidden_size" not in reduced.source  # a call's arguments go
    assert "self.helper(config)" in reduced.source  # it may run a method of the class
    assert "def nested" not in reduced.source
    assert "Unused" not in reduced.source and "return processor" not in reduced.source
    assert "self.never = Never()" in reduced.source  # a subclass's __init__, in any module, may run it on self
    assert "some_decorator" not in reduced.source
    assert '"table"' in reduced.source  # register_buffer's first argument names the attribute
    cut = extract_facts(INIT_SHAPES, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(INIT_SHAPES, monkeypatch))
    by_name = {c.name: c for c in cut.classes}
    assert _callees(by_name["Shapes"]) == {
        "head": ["<other>", "other_head"],  # a method of a call's result: no class named
        "wrapped": ["Wrapped"],
        "ternary": ["Left", "Right"],  # either arm
        "continued": ["Continued"],
        "table": ["<other>"],
        "tried": ["Tried", "<other>"],
        "matched": ["Matched"],  # a match case is a block: it may run
        "from_nested": ["Nested"],  # a def in __init__ stores on self if it is called (Inner's self is another)
        "total": ["<other>"],  # ``self.total += 1``: a value of its own, read as ``self.total + 1``
    }
    assert _callees(by_name["OneLineBody"]) == {"head": ["Head"], "norm": ["Norm"]}
    assert _callees(by_name["Documented"]) == {"real": ["Real"]}
    assert by_name["LatePlaceholder"].init_raises == "__init__ raises NotImplementedError: not on this platform"
    assert _callees(by_name["Built"]) == {
        "local": ["Local"],
        "model": ["Second"],  # _build runs after First is assigned
        "deep": ["Deep"],
        "choice": ["Left", "Right"],
        "flagged": ["Flagged"],
        "from_class": ["self.processor_cls"],
    }
    assert by_name["Built"].class_attrs == {"processor_cls": "Masking"}
    assert cut.factories == {"make_processor": ["Masking"]}
    assert by_name["RaisesLater"].init_raises is None and _callees(by_name["RaisesLater"]) == {"model": ["Model"]}


@pytest.mark.integration
def test_facts_equal_on_real_vllm(vllm_release, monkeypatch):
    """Every file of a real release: the cut must say what the whole file says."""
    root = vllm_release("0.34.0")
    files = sorted((root / "vllm").rglob("*.py"))
    assert len(files) > 3000
    for path in files:
        source = path.read_text(errors="replace")
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


def test_a_module_level_def_rebinds_an_imported_name(monkeypatch):
    source = "from .ops import init\n\n\n@cache\ndef init(\n    path,\n):\n    return path\n"
    cut = extract_facts(source, "pkg.mod", "pkg/mod.py", False)
    _same(cut, _whole_facts(source, monkeypatch))
    assert all("init" not in names for names in cut.bindings.values())  # the def replaced the import
