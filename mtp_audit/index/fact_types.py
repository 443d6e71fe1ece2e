"""What a module's facts are: plain, cacheable data (the facts cache keeps them as they are).

``extract_facts`` (``facts``) builds them; resolution and classification read them.
"""

from __future__ import annotations

import bisect
import functools
import textwrap
from dataclasses import dataclass, field
from typing import Literal

from ..depth import check_depth
from .prefilter import physical_lines

# A Literal, not an Enum: facts are cached, and a plain string keeps their entries small and fast to load.
TargetKind = Literal["class", "import", "module", "constant", "unknown", "unavailable"]
MethodHow = Literal["def", "async", "conditional", "none", "deleted", "outside", "logits"]


@dataclass(frozen=True)
class TryOutcome:
    """One way a module-level ``try`` whose body imports can end: the body ran through (``failed_at``
    -1), or its import statement ``failed_at`` raised and handler ``handler`` caught it. Which one
    happens on a platform depends on other modules (does the import raise, and what), so the facts
    keep every outcome and resolution picks (``resolve.attempts``)."""

    lines: tuple[int, ...]  # the body's import statements, in order
    imports: tuple[tuple[str, ...], ...]  # per statement, the modules it may import (``from m import x``: m, m.x)
    handlers: tuple[tuple[str, ...], ...]  # per handler, the exception names it catches; () for a bare except
    failed_at: int = -1
    handler: int = -1


@dataclass(frozen=True)
class Target:
    """What a module-level name is bound to.

    kind: ``class`` (a = line of the local class), ``import`` (a = module,
    b = name; ``a.b`` may be a submodule), ``module`` (a = module), ``constant`` (a = its
    repr, b = its line: ``X = None`` on a platform without the class is decided, not unfollowed),
    ``unknown`` (a = code that could not be followed; b = its line, where a is the statement that
    binds the name in a way the tool does not follow, such as a loop), ``unavailable`` (a = why the name
    cannot be had: its import raises). ``when``: the ``try`` outcomes under which the
    binding holds (all of them; empty: always). ``stars_after``: the modules of star imports that
    ran after this binding on its own path (a ``try`` outcome, an ``if`` branch) but come before
    the name in the merged bindings' order, so that resolution still lets them rebind it. ``under``: the
    ``if`` statements the tool cannot decide that choose this binding among others (``3: if envs.X:``, the
    line and the statement's first line), outermost first.
    """

    kind: TargetKind
    a: str = ""
    b: str = ""
    when: tuple[TryOutcome, ...] = ()
    stars_after: tuple[str, ...] = ()
    under: tuple[str, ...] = ()


@dataclass
class MethodFacts:
    name: str
    line: int
    text: str  # the ``def`` with its decorators, as it stands in the file (indented)
    # How the name is bound, when not by a plain ``def`` in the class body: "async" (async def),
    # "conditional" (a def under ``if``/``try`` in the class body), "none" (``= None``),
    # "deleted" (``del`` in the class body: lookup goes on to the bases), "outside" (setattr
    # or an attribute assignment after the class), "logits" (``get_top_tokens = compute_logits``: the
    # class's own compute_logits under the other name). ``where`` says it in words, for reasons.
    how: MethodHow = "def"
    where: str = ""
    # the file ``line`` is in when not its owner's: a planned mirror (``synthetic_mirror``) of a
    # compute_logits its class inherits from another module, where its text was read
    file: str = ""

    @property
    def code(self) -> str:
        """The ``def`` at column 0, as libcst prints it."""
        return libcst_code(self.text)


@functools.cache
def libcst_code(text: str) -> str:
    """Parse one method's text with libcst (imported here: scans that classify nothing never pay for it)."""
    import libcst as cst

    check_depth(textwrap.dedent(text))
    if text[:1] in (" ", "\t"):  # an indented method: give it back a class, ending its line as the file does
        first = physical_lines(text)[0]
        module = cst.parse_module("class _:" + (first[len(first.rstrip("\r\n")) :] or "\n") + text)
        function = module.body[0].body.body[0]
    else:
        module = cst.parse_module(text)
        function = module.body[0]
    return module.code_for_node(function.with_changes(leading_lines=()))


@dataclass(frozen=True)
class Assigned:
    """One value ``__init__`` (with the methods it runs on ``self``) may leave in ``self.X``: ``callee``, the
    dotted callee of a call (``Cls`` of ``Cls(...)``, ``self.processor_cls`` of a class attribute's, a factory's
    name), or "" where the value is no call the tool follows; ``line`` and ``code`` name the statement;
    ``arguments``, the call's, as written: (keyword, code), the keyword "" for a positional one, "*" and "**" for
    unpacked ones (what the logits processor is built with may pick a branch of its call alone); kept for the
    calls of a callee named like a processor (``prefilter.ARGUMENTS_KEPT``), None for others."""

    callee: str
    line: int
    code: str
    arguments: tuple[tuple[str, str], ...] | None = None


@dataclass
class InitStep:
    """One statement of ``__init__`` or of a method it may run on self, as what it does to ``self``: it sets
    ``self.<attr>`` to one of ``values`` (none: an annotation without a value), or (``attr`` "") runs
    ``self.<called>(...)``, which the instance's class looks up in its MRO; ``nested``: under a block, so it may
    not run, or run instead of another; ``line``: the statement's."""

    line: int
    nested: bool
    attr: str = ""
    values: list[Assigned] = field(default_factory=list)
    called: str = ""


@dataclass
class ClassFacts:
    name: str
    line: int
    bases: list[str]
    methods: dict[str, MethodFacts] = field(default_factory=dict)
    # ``__init__`` (where the body defines it unconditionally) and each method of the body that sets an attribute
    # of self or runs a method on self -> its statements that do, in order (locals read into values): what
    # ``__init__`` leaves in each self.X is read off these per instance class (``init_values``), a method it runs
    # on self being the one that class's MRO finds, an override in a subclass or one a base defines
    init_steps: dict[str, list[InitStep]] = field(default_factory=dict)
    # NAME -> the dotted value of ``NAME = value`` in the class body ("" for any other value, or under a condition):
    # what ``self.NAME(...)`` calls where no instance attribute hides it
    class_attrs: dict[str, str] = field(default_factory=dict)
    class_attr_lines: dict[str, int] = field(default_factory=dict)  # NAME -> the line of its last such binding
    # every method the body defines (under a condition too): line; a processor subclass's overrides are read
    # off these against the methods the tree's LogitsProcessor runs, known only once the tree is
    defined_methods: dict[str, int] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)  # class-level X: Type
    init_raises: str | None = None  # __init__ only raises: a placeholder class
    # platform -> base name -> what it was bound to when the class statement ran, kept only where that
    # differs from the module's final binding (``class X(X):`` redefining X, ``Base`` rebound later)
    bound_then: dict[str, dict[str, list[Target]]] = field(default_factory=dict)
    # name -> lines of the class body that bind it, for the names a watched method's parameter defaults read:
    # a default is evaluated in the class body as its ``def`` runs, so a binding between two defs of the same
    # text gives them other defaults
    default_rebinds: dict[str, list[int]] = field(default_factory=dict)
    # platform -> the watched methods there, kept only where a class-body ``if`` decided per platform
    # (``if current_platform.is_rocm():``) makes them differ; ``methods`` marks such a method "conditional"
    methods_by_platform: dict[str, dict[str, MethodFacts]] = field(default_factory=dict)
    # the first class decorator not known to leave compute_logits and get_top_tokens alone, as
    # ``@NAME (line N)``: it may set or wrap them; "" where there is none
    decorated_by: str = ""

    def methods_on(self, platform: str) -> dict[str, MethodFacts]:
        """The watched methods as the class body binds them on ``platform``."""
        return self.methods_by_platform.get(platform, self.methods)


@dataclass
class ModuleFacts:
    module: str
    path: str  # relative to the tree root
    is_package: bool
    classes: list[ClassFacts] = field(default_factory=list)
    bindings: dict[str, dict[str, list[Target]]] = field(default_factory=dict)  # platform -> name
    import_errors: dict[str, str] = field(default_factory=dict)  # platform -> why import fails
    # platform -> the names ``__all__`` lists (None: not a literal list, taken to list any name); a platform
    # absent: no ``__all__`` (``import *`` binds the names not starting with ``_``)
    exports: dict[str, list[str] | None] = field(default_factory=dict)
    unlisted: dict[str, str] = field(default_factory=dict)  # platform -> why ``__getattr__`` may serve other names
    # platform -> name -> the decided ``if`` (``LINE: if ...: ...``) whose branch taken there leaves the name unbound
    unbound: dict[str, dict[str, str]] = field(default_factory=dict)
    # platform -> the names only ``__getattr__`` serves (the module does not bind them): importing one runs it
    served: dict[str, list[str]] = field(default_factory=dict)
    # module-level function -> the callees of its one statement, ``return Cls(...)`` (both arms of a conditional
    # expression): what a call of that factory gives
    factories: dict[str, list[str]] = field(default_factory=dict)
    getattr_line: int | None = None  # where the module ``__getattr__`` is defined, for reasons naming it
    parse_error: str | None = None
    # platform -> the names the bindings leave out that the module may bind there: by a module-level ``def``
    # (resolution looks for classes) or a walrus on some path Python may take, or in a ``try`` handler the tool
    # does not run (the body may raise what it does not see); ``from module import name`` may find them
    bound_otherwise: dict[str, list[str]] = field(default_factory=dict)

    def class_at(self, line: int) -> ClassFacts | None:
        """Classes are collected in source order: a binary search finds one among thousands
        (a 1200-deep chain in one file); the scan is for an order that is not."""
        at = bisect.bisect_left(self.classes, line, key=lambda cls: cls.line)
        if at < len(self.classes) and self.classes[at].line == line:
            return self.classes[at]
        for cls in self.classes:
            if cls.line == line:
                return cls
        return None
