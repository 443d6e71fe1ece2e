"""The module-level statements of a module, run for one platform: which name is bound to
what (a local class, an import, a module), and whether importing the module raises."""

from __future__ import annotations

import ast
import builtins
import dataclasses
import re
from typing import TYPE_CHECKING, Union

from .ast_tools import FUNCTIONS, _strings, absolute_module, dotted, match_as_if, walk, walk_statements
from .fact_types import ModuleFacts, Target, TryOutcome
from .platforms import PLATFORM, evaluate, literal_string, string_values

if TYPE_CHECKING:
    from .facts import _Source


def _is_all(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "__all__"


class _Interpreter:
    """Runs module-level statements for one platform, binding names to targets."""

    def __init__(self, facts: ModuleFacts, platform: str, text: _Source):
        self.facts = facts
        self.platform = platform
        self.text = text
        self.state: dict[str, list[Target]] = {}
        self.all_names: list[str] | None = None
        self.exports: Exports = _NO_ALL  # what ``import *`` of this module binds, as far as ``__all__`` tells
        self.error: str | None = None
        self.bases_then: dict[int, dict[str, list[Target]]] = {}  # class line -> its base names' targets then
        # the names bound where the bindings do not say (``ModuleFacts.bound_otherwise``): a ``def`` or a walrus
        # run on some path, a ``try`` handler not run because the tool does not see what the body may raise
        self.maybe_bound: set[str] = set()
        self.walrus = ":=" in text.reduced.source  # only then are statements' expressions searched for one
        self.collections: dict[str, Collection] = _NO_COLLECTIONS  # name -> its literal, for ``__getattr__``
        self.unbound: dict[str, str] = {}  # name -> the decided ``if`` whose branch taken here leaves it unbound
        self.raises_undecided: list[UndecidedRaise] = []  # raises an undecided ``if`` may take, for a ``try`` to catch

    def fork(self) -> _Interpreter:
        other = _Interpreter(self.facts, self.platform, self.text)
        other.state = {k: list(v) for k, v in self.state.items()}
        other.all_names = list(self.all_names) if self.all_names is not None else None
        other.exports = self.exports
        other.collections = self.collections
        other.bases_then = self.bases_then  # a class runs in one branch: every fork records into one dict
        other.maybe_bound = self.maybe_bound  # so does a def
        other.walrus = self.walrus
        other.unbound = self.unbound  # read only for a name no branch binds in the end
        other.raises_undecided = self.raises_undecided  # the enclosing ``try`` reads those its body added
        return other

    def run(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            if self.error:
                return
            self.statement(statement)

    def bind(self, name: str, targets: list[Target]) -> None:
        """Rebinding moves the name last: the bindings keep the order of the statements that made them, which
        tells resolution whether a star import ran after a name's binding (and may have rebound it)."""
        self.state.pop(name, None)
        self.state[name] = targets

    def statement(self, node: ast.stmt) -> None:
        """By the statement's type (one dict lookup: most statements are imports and assignments)."""
        handler = _STATEMENTS.get(type(node))
        if self.walrus:
            self.maybe_bound.update(_walrus_targets(node))
        if handler is None:
            self.simple(node)
        else:
            handler(self, node)

    def define_class(self, node: ast.ClassDef) -> None:
        self.remember_bases(self.text.line(node))
        self.bind(node.name, [Target("class", str(self.text.line(node)))])

    def define_function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.state.pop(node.name, None)
        self.maybe_bound.add(node.name)

    def unfollowed(self, names: list[str], node: ast.stmt) -> None:
        """Mark names a statement binds in a way the tool does not follow (a loop, ``A, B = pair``): never left
        at an earlier binding, they resolve to nothing, saying which statement (the record goes unresolved)."""
        for name in names:
            self.bind(name, [self.statement_unknown(node)])

    def statement_unknown(self, node: ast.stmt) -> Target:
        """An unknown binding made by ``node``, named by its first line and line number (what a reason shows)."""
        return Target("unknown", self.text.lines[node.lineno - 1].strip()[:80], str(self.text.line(node)))

    def assigned(self, node: ast.stmt, value: ast.expr) -> list[Target]:
        """What ``value``, assigned by the statement ``node``, binds: an expression the tool does not follow
        is named by that statement and its line, so that a reason points at it (``X = make()``, line 8)."""
        return [
            self.statement_unknown(node) if target.kind == "unknown" and not target.b else target
            for target in self.expression(value)
        ]

    def within(self, node: ast.With | ast.AsyncWith) -> None:
        """``with``: the body runs, so its bindings happen, and what it raises propagates, unless a manager may
        suppress it: then the body runs as a ``try`` whose handler does nothing (``contextlib.suppress(E)``:
        ``except E``; a manager the tool does not know may swallow anything: a bare ``except``)."""
        self.unfollowed([n for i in node.items if i.optional_vars for n in stored_names(i.optional_vars)], node)
        caught = suppressed(node.items, self.state)
        if caught is None:
            self.run(node.body)
            return
        self.attempt(swallowing_try(node, caught))

    def loop(self, node: ast.For | ast.AsyncFor | ast.While) -> None:
        """A loop runs its body any number of times: what it binds, its target included, is not followed, and
        what it raises does not count (it may never run)."""
        self.unfollowed(bound_names([node]), node)

    def match(self, node: ast.Match) -> None:
        """``match`` runs as its ``if``/``elif`` chain (``case "cuda":`` on ``current_platform.device_type`` is
        decided per platform, a pattern the tool cannot decide keeps its case as an alternative); the names a
        pattern captures are not followed."""
        captured = [n.name for c in node.cases for n in walk(c.pattern) if getattr(n, "name", None)]
        self.unfollowed(captured, node)
        self.run(match_as_if(node))

    def check(self, node: ast.Assert) -> None:
        """``assert COND``: where COND is decided false, importing the module raises AssertionError there;
        where it cannot be decided, nothing (as for an ``if`` that cannot be)."""
        if self.truth(node.test) is False:
            self.error = _raise_reason(failed_assert(node), self.text)

    def delete(self, node: ast.Delete) -> None:
        """``del NAME`` unbinds it where it runs: a later lookup finds it unavailable, saying where it went."""
        for target in node.targets:
            for name in stored_names(target):
                self.bind(name, [Target("unavailable", f"{name} is deleted (line {self.text.line(node)}: del)")])

    def remember_bases(self, line: int) -> None:
        """What the class's base names are bound to as its statement runs: Python evaluates the bases
        then, so a later rebinding (``class X(X):``, ``Base = Other`` after the class) does not apply."""
        cls = self.facts.class_at(line)
        if cls is None:
            return
        heads = {_head(code) for code in cls.bases}
        self.bases_then[line] = {name: list(self.state[name]) for name in heads if name in self.state}

    def truth(self, test: ast.expr) -> bool | None:
        """A condition's truth here, module-level names included (``cp.is_rocm()``, ``if _IS_ROCM:``)."""
        return evaluate(test, self.platform, all_names=self.all_names, lookup=self.lookup)

    def lookup(self, name: str) -> bool | str | list[str] | None:
        """What ``name`` holds, for ``platforms.evaluate``: ``PLATFORM`` when it is vLLM's
        current_platform, a bool when it is bound to one (a flag), the strings of a literal collection
        (``_LAZY = {"X"}``, read for ``__getattr__``), else None."""
        targets = self.state.get(name)
        if targets is not None and len(targets) == 1 and targets[0].kind == "unknown":
            held = self.collections.get(name)  # still bound to its literal (a rebinding would say what else)
            return list(held) if held is not None else None  # a dict's keys
        return platform_or_flag(targets)

    def conditional(self, node: ast.If) -> None:
        truth = self.truth(node.test)
        if truth is not None:
            before = dict(self.unbound)
            self.run(node.body if truth else node.orelse)  # an ``elif`` is an ``if`` alone in ``orelse``
            self.note_unbound(node, truth, before)
        else:  # unknown: both branches may run; keep every binding as an alternative
            taken, skipped = self.fork(), self.fork()
            taken.run(node.body)
            skipped.run(node.orelse)
            self.merge(taken, skipped)
            choice = self.choice(node)
            self.note_choice(choice, taken, skipped)
            for branch in (taken, skipped):
                if branch.error and not self.error:  # dropped here; a ``try`` around it may catch it
                    self.raises_undecided.append(UndecidedRaise(branch.error, choice, branch))

    def note_unbound(self, node: ast.If, truth: bool, before: dict[str, str]) -> None:
        """Name the decided ``if`` (or ``elif``) whose branch taken here leaves unbound a name another branch
        binds, so that "not defined" says which statement decides it; an inner ``elif`` noted first is
        the more precise."""
        header = f"{self.text.line(node)}: {self.text.lines[node.lineno - 1].strip()[:80]}"
        for name in bound_names([node]):
            if name in self.state or self.unbound.get(name) != before.get(name):
                continue
            if truth:
                self.unbound[name] = f"{header} is the branch taken, which does not bind {name}"
            elif node.orelse:
                self.unbound[name] = f"{header} is false, and its else does not bind {name}"
            else:
                self.unbound[name] = f"{header} is false, with no else: {name} is not defined"

    def choice(self, node: ast.If) -> str:
        """An undecided ``if`` as a reason names it: ``LINE: if TEST:``."""
        written = hasattr(node.test, "lineno")  # else the ``if`` a ``match`` case runs as: name the case
        header = f"if {self.text.segment(node.test)}:" if written else self.text.lines[node.lineno - 1].strip()
        return f"{self.text.line(node)}: {header}"

    def note_choice(self, choice: str, taken: _Interpreter, skipped: _Interpreter) -> None:
        """Mark the bindings an undecided ``if`` chooses between (a name its branches bind differently, left
        with alternatives) with that ``if`` (``choice``), so that a reason can say which statement decides."""
        for name, targets in self.state.items():
            if len(targets) > 1 and taken.state.get(name) != skipped.state.get(name):
                self.state[name] = [dataclasses.replace(t, under=(choice, *t.under)) for t in targets]

    def attempt(self, node: ast.Try) -> None:
        """``try``: a body of imports and plain bindings with handlers keeps every outcome (``fallback``);
        otherwise the body's imports are taken to succeed, so ``else`` and ``finally`` run after it,
        as they do in Python. A ``raise`` in the body runs the handlers that may catch it instead (up
        to the first that surely does), each an alternative; one that none can catch propagates. As
        for an unknown condition, a handler that raises is dropped (when all do, the body's raise is
        the reason)."""
        if self.fallback(node):
            return
        pending = len(self.raises_undecided)
        self.run(node.body)
        catching = _catching(node.handlers, raised_name(self.error)) if self.error else []
        if catching:
            caught = self.handled(catching)
            self.state, self.all_names, self.exports = caught.state, caught.all_names, caught.exports
            self.error = self.error if caught.error else None
        elif not self.error:
            for handler in node.handlers:  # the body may raise what the tool does not see (``except NameError:``)
                self.maybe_bound.update(bound_names(handler.body))
            self.run(node.orelse)
            self.catch_undecided(node, pending)
        self.run(node.finalbody)

    def handled(self, catching: list[ast.ExceptHandler]) -> _Interpreter:
        """The handlers that may run, each from the bindings made before the raise, merged as alternatives."""
        handlers = []
        for handler in catching:
            branch = self.fork()
            branch.run(handler.body)
            handlers.append(branch)
        caught = handlers[0]
        for other in handlers[1:]:
            both = self.fork()
            both.merge(caught, other)
            caught = both
        return caught

    def catch_undecided(self, node: ast.Try, pending: int) -> None:
        """A raise the body takes under an undecided ``if`` (``if envs.X: raise ImportError``) that a handler may
        catch: the handlers' bindings are alternatives to the completed body's, marked with that ``if``."""
        for raised in list(self.raises_undecided[pending:]):
            catching = _catching(node.handlers, raised_name(raised.error))
            if not catching:
                continue  # propagates: an enclosing ``try`` may catch it
            self.raises_undecided.remove(raised)
            caught = raised.branch.handled(catching)
            if caught.error:
                continue
            completed = self.fork()
            self.merge(completed, caught)
            self.note_choice(raised.choice, completed, caught)

    def fallback(self, node: ast.Try) -> bool:
        """``try: from .fast import X`` / ``except ImportError: from .slow import X``: whether the body's
        import raises depends on what it imports, which another module's facts say; so every outcome
        is kept, each binding marked with the outcome it holds under (``Target.when``), and resolution
        picks. False (nothing done) unless the body holds imports and nothing but simple bindings."""
        positions = [i for i, s in enumerate(node.body) if isinstance(s, (ast.Import, ast.ImportFrom))]
        if not positions or not node.handlers or not all(isinstance(s, _BINDING) for s in node.body):
            return False
        lines = tuple(self.text.line(node.body[i]) for i in positions)
        imports = tuple(self.imported(node.body[i]) for i in positions)  # type: ignore[arg-type]
        handlers = tuple(caught_names(h.type) for h in node.handlers)
        ran = self.fork()
        ran.run(node.body)
        ran.run(node.orelse)
        outcomes = [(ran, TryOutcome(lines, imports, handlers))]
        for statement, position in enumerate(positions):
            before = self.fork()
            before.run(node.body[:position])
            for number, handler in enumerate(node.handlers):
                caught = before.fork()
                caught.run(handler.body)
                outcomes.append((caught, TryOutcome(lines, imports, handlers, statement, number)))
        self.state = _by_outcome(outcomes)
        self.all_names, self.exports = ran.all_names, ran.exports
        self.run(node.finalbody)
        return True

    def imported(self, node: ast.Import | ast.ImportFrom) -> tuple[str, ...]:
        """The modules an import statement may import: ``import a.b`` a.b; ``from m import x`` m, and m.x
        where that is a submodule (resolution checks)."""
        if isinstance(node, ast.Import):
            return tuple(alias.name for alias in node.names)
        source = absolute_module(self.facts.module, self.facts.is_package, node.level, node.module)
        return (source, *(f"{source}.{alias.name}" for alias in node.names if alias.name != "*"))

    def merge(self, first: _Interpreter, second: _Interpreter) -> None:
        if first.error and second.error:
            self.error = first.error
            return
        branches = [b for b in (first, second) if not b.error]
        order = list(dict.fromkeys(name for branch in branches for name in branch.state))
        merged: dict[str, list[Target]] = {}
        for branch in branches:
            for name, targets in branch.state.items():
                bucket = merged.setdefault(name, [])
                held = _with_stars_after(targets, name, list(branch.state), order)
                bucket.extend(t for t in held if t not in bucket)
        self.state = merged
        self.all_names = branches[0].all_names
        self.exports = _merged_exports([b.exports for b in branches])

    def simple(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.bind(alias.asname, [Target("module", alias.name)])
                else:
                    head = alias.name.split(".")[0]
                    self.bind(head, [Target("module", head)])
        elif isinstance(node, ast.ImportFrom):
            source = absolute_module(self.facts.module, self.facts.is_package, node.level, node.module)
            for alias in node.names:
                if alias.name == "*":
                    self.bind(f"*{source}", [Target("module", source)])
                    return
                self.bind(alias.asname or alias.name, [Target("import", source, alias.name)])
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is None:
                return
            for target in targets:
                if not isinstance(target, ast.Name):
                    self.unpack(target, node.value, node)
                elif target.id == "__all__":
                    self.all_names = string_values(node.value) or []
                    self.exports = _literal_names(node.value)
                else:
                    self.bind(target.id, self.assigned(node, node.value))
        elif isinstance(node, ast.AugAssign) and _is_all(node.target):
            self.all_names = (self.all_names or []) + (string_values(node.value) or [])
            self.exports = _extended(self.exports, _literal_names(node.value))
        elif isinstance(node, ast.AugAssign):
            self.unfollowed(stored_names(node.target), node)
        elif (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Attribute)
            and _is_all(node.value.func.value)
        ):
            call = node.value  # __all__.extend([...]) / __all__.append("...")
            values = string_values(call.args[0]) if call.args else None
            self.all_names = (self.all_names or []) + (values or [])
            added = _literal_names(call.args[0]) if call.func.attr == "extend" and len(call.args) == 1 else None
            if call.func.attr == "append" and len(call.args) == 1 and literal_string(call.args[0]) is not None:
                added = [literal_string(call.args[0])]  # type: ignore[list-item]
            self.exports = _extended(self.exports, added)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _is_globals(node.value.func):
            self.unfollowed([n for n in self.state if not n.startswith("*")], node)  # globals().update(...)
        elif isinstance(node, ast.Raise):
            self.error = _raise_reason(node, self.text)

    def unpack(self, target: ast.expr, value: ast.expr, node: ast.stmt) -> None:
        """``A, B = x, y`` binds pairwise, and ``globals()["A"] = x`` binds A; any other target that binds names
        (``A, B = pair``, ``*rest``) is not followed, and ``globals()[key] = x`` may rebind any name so far."""
        if _pairwise(target, value):
            values = [self.assigned(node, v) for v in value.elts]  # type: ignore[attr-defined]
            for name, targets in zip(target.elts, values):  # type: ignore[attr-defined]
                self.bind(name.id, targets)
        elif isinstance(target, ast.Subscript) and _is_globals(target.value):
            key = literal_string(target.slice)
            if key is None:
                self.unfollowed([n for n in self.state if not n.startswith("*")], node)
            else:
                self.bind(key, self.assigned(node, value))
        else:
            self.unfollowed(stored_names(target), node)

    def expression(self, node: ast.expr) -> list[Target]:
        """What an expression evaluates to, as targets."""
        if isinstance(node, ast.Name) and node.id not in self.state and isinstance(vars(builtins).get(node.id), type):
            return [Target("import", "builtins", node.id)]  # unbound here: Python looks in builtins (``X = object``)
        if isinstance(node, ast.Name):
            return list(self.state.get(node.id, [Target("unknown", node.id)]))
        if isinstance(node, ast.Attribute):
            return [attribute_of(base, node.attr, node) for base in self.expression(node.value)]
        if isinstance(node, ast.Constant):  # with its line, for the reason a platform has no class
            return [Target("constant", repr(node.value)[:40], str(self.text.line(node)))]
        if isinstance(node, ast.IfExp):
            return self.conditional_expression(node)
        truth = self.truth(node) if isinstance(node, _CONDITIONS) else None
        if truth is not None:  # a flag: _IS_ROCM = current_platform.is_rocm()
            return [Target("constant", repr(truth), str(self.text.line(node)))]
        if isinstance(node, ast.Call) and dotted(node.func) in QUIET_MANAGERS:  # a lock, for ``with _LOCK:``
            return [Target("unknown", f"{dotted(node.func)}()", str(self.text.line(node)))]
        return [Target("unknown", type(node).__name__)]

    def conditional_expression(self, node: ast.IfExp) -> list[Target]:
        """``A if COND else B``: an arm per platform; where COND is undecided, both, each marked with the
        expression (as ``note_choice`` marks an undecided ``if``), so that a reason says which one decides."""
        truth = self.truth(node.test)
        arms = [node.body] if truth is True else [node.orelse] if truth is False else [node.body, node.orelse]
        values = [self.expression(arm) for arm in arms]
        out: list[Target] = []
        for value in values:
            out.extend(t for t in value if t not in out)
        if len(values) == 1 or values[0] == values[1]:
            return out
        choice = f"{self.text.line(node)}: {' '.join(self.text.segment(node).split())}"
        return [dataclasses.replace(t, under=(choice, *t.under)) for t in out]


@dataclasses.dataclass(frozen=True)
class UndecidedRaise:
    """A raise under an undecided ``if``: what it raises, that ``if`` (``LINE: if TEST:``), and the branch that
    raised, holding the bindings made before the raise."""

    error: str
    choice: str
    branch: _Interpreter


_STATEMENTS = {
    ast.ClassDef: _Interpreter.define_class,
    ast.If: _Interpreter.conditional,
    ast.Try: _Interpreter.attempt,
    ast.FunctionDef: _Interpreter.define_function,
    ast.AsyncFunctionDef: _Interpreter.define_function,
    ast.With: _Interpreter.within,
    ast.AsyncWith: _Interpreter.within,
    ast.For: _Interpreter.loop,
    ast.AsyncFor: _Interpreter.loop,
    ast.While: _Interpreter.loop,
    ast.Match: _Interpreter.match,
    ast.Assert: _Interpreter.check,
    ast.Delete: _Interpreter.delete,
}
# A module-level literal ``__getattr__`` reads: the strings of a set, list or tuple, or a dict of strings to literals.
Collection = Union[list[str], dict[str, object]]
_NO_COLLECTIONS: dict[str, Collection] = {}
_CURRENT_PLATFORM = Target("import", "vllm.platforms", PLATFORM)
# ``from typing import TYPE_CHECKING as ONLY_TYPING``: false at run time under any name
_TYPE_CHECKING = [Target("import", module, "TYPE_CHECKING") for module in ("typing", "typing_extensions")]


def attribute_of(base: Target, attr: str, node: ast.expr) -> Target:
    """What attribute ``attr`` of ``base`` is: a name of a module (``node``, the expression, says what
    else could not be followed)."""
    if base.kind == "module":
        return Target("import", base.a, attr)
    if base.kind == "import":
        return Target("import", f"{base.a}.{base.b}", attr)
    return Target("unknown", dotted(node) or "expression")


def platform_or_flag(targets: list[Target] | None) -> bool | str | None:
    """What a name bound to ``targets`` means to ``platforms.evaluate``: ``PLATFORM`` when it is vLLM's
    current_platform, a bool when it is a flag (``_IS_ROCM = current_platform.is_rocm()``) or
    ``typing.TYPE_CHECKING`` under another name (False), else None."""
    if targets == [_CURRENT_PLATFORM]:
        return PLATFORM
    if targets is not None and len(targets) == 1 and targets[0] in _TYPE_CHECKING:
        return False
    if targets is not None and len(targets) == 1 and targets[0].kind == "constant":
        return {"True": True, "False": False}.get(targets[0].a)
    return None


def failed_assert(node: ast.Assert) -> ast.Raise:
    """The raise a failing ``assert`` is, for ``_raise_reason`` (facts and import chains word it alike)."""
    failure = ast.Call(ast.Name("AssertionError", ast.Load()), [node.msg] if node.msg else [], [])
    return ast.copy_location(ast.Raise(exc=failure), node)


_CONDITIONS = (ast.Call, ast.Compare, ast.BoolOp, ast.UnaryOp)  # what may be a decided platform condition
_BINDING = (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr, ast.Pass)


# ``__all__`` as far as it is read: absent (``_NO_ALL``: ``import *`` binds every name not starting with ``_``),
# the names of a literal list or tuple, or None (bound to something else: the tool assumes it lists any name).
Exports = Union[list[str], None, tuple[()]]
_NO_ALL: tuple[()] = ()


# Context managers that never suppress what their body raises (by the name they are called by).
QUIET_MANAGERS = frozenset(
    {
        *("warnings.catch_warnings", "catch_warnings", "contextlib.nullcontext", "nullcontext", "open"),
        *("torch.no_grad", "no_grad", "torch.inference_mode", "inference_mode", "torch.enable_grad"),
        *("threading.Lock", "threading.RLock", "Lock", "RLock"),
        *("contextlib.redirect_stdout", "contextlib.redirect_stderr", "redirect_stdout", "redirect_stderr"),
    }
)


def suppressed(items: list[ast.withitem], state: dict[str, list[Target]]) -> list[ast.expr] | None:
    """What a ``with`` statement's managers may suppress: None, nothing (each is a ``suppress()`` or in
    ``QUIET_MANAGERS``, called or a name bound to one such as a lock); the exception names of its
    ``suppress(E, ...)``; or ``[]``, anything (a manager the tool does not know)."""
    caught: list[ast.expr] | None = None
    for item in items:
        manager = item.context_expr
        called = dotted(manager.func) if isinstance(manager, ast.Call) else None
        if called in QUIET_MANAGERS:
            continue
        if called is not None and called.rsplit(".", 1)[-1] == "suppress" and not manager.keywords:  # type: ignore[attr-defined]
            if manager.args:  # type: ignore[attr-defined]
                caught = [*(caught or []), *manager.args]  # type: ignore[attr-defined]
            continue
        bound = state.get(manager.id) if isinstance(manager, ast.Name) else None
        if bound and len(bound) == 1 and bound[0].kind == "unknown" and bound[0].a[:-2] in QUIET_MANAGERS:
            continue
        return []
    return caught


def swallowing_try(node: ast.With | ast.AsyncWith, caught: list[ast.expr]) -> ast.Try:
    """The ``try`` a ``with`` whose managers may suppress ``caught`` (``suppressed``; ``[]``: anything) runs as:
    its body, with one handler that does nothing (``contextlib.suppress(E)``: ``except E: pass``)."""
    kind = ast.Tuple(elts=caught, ctx=ast.Load()) if caught else None
    handler = ast.ExceptHandler(type=kind, name=None, body=[])
    return ast.Try(body=node.body, handlers=[handler], orelse=[], finalbody=[])


def stored_names(target: ast.expr) -> list[str]:
    """The names an assignment (or ``del``, or ``as``) target binds: ``A``, ``A, *B``; not ``a.b`` or ``a[i]``."""
    return [n.id for n in walk(target) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)]


def _walrus_targets(statement: ast.stmt) -> list[str]:
    """The names ``NAME := ...`` binds in the statement's own expressions (an ``if``'s test, an assignment's
    value; not in the statements it holds, which run on their own)."""
    return [
        node.target.id
        for child in ast.iter_child_nodes(statement)
        if not isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))
        for node in walk(child)
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name)
    ]


def bound_names(statements: list[ast.stmt]) -> list[str]:
    """Every name the statements bind, in nested blocks too (not inside a ``def`` or ``class``)."""
    return list(dict.fromkeys(name for statement in walk_statements(statements) for name in statement_names(statement)))


def statement_names(statement: ast.stmt) -> list[str]:
    """The names one statement binds itself, not those of the statements it holds."""
    names: list[str] = []
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        names.extend(a.asname or a.name.split(".")[0] for a in statement.names if a.name != "*")
    elif isinstance(statement, (*FUNCTIONS, ast.ClassDef)):
        names.append(statement.name)
    for child in ast.iter_child_nodes(statement):
        if not isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            names.extend(stored_names(child))  # type: ignore[arg-type]
    return names


def _pairwise(target: ast.expr, value: ast.expr) -> bool:
    """``A, B = x, y``: names against as many values, nothing starred."""
    return (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and all(isinstance(e, ast.Name) for e in target.elts)
        and not any(isinstance(e, ast.Starred) for e in value.elts)
    )


def _is_globals(node: ast.expr) -> bool:
    """``globals()`` (a subscript's value), or a method of it (``globals().update``)."""
    if isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "globals"


def _literal_names(node: ast.expr) -> list[str] | None:
    """The strings of a literal list or tuple (a bare string is not one: ``import *`` would take its
    characters as the names)."""
    return string_values(node) if isinstance(node, (ast.List, ast.Tuple)) else None


def _extended(exports: Exports, added: list[str] | None) -> Exports:
    """``__all__`` after ``+=``/``extend``/``append``: unreadable when either part is (or ``__all__`` was unbound)."""
    if isinstance(exports, list) and added is not None:
        return [*exports, *added]
    return None


def _merged_exports(branches: list[Exports]) -> Exports:
    """``__all__`` after branches that may each run: the same in all, or the union of lists; otherwise
    unreadable (one branch without ``__all__`` exports names the other's list may leave out)."""
    if all(e == branches[0] for e in branches):
        return branches[0]
    if all(isinstance(e, list) for e in branches):
        return list(dict.fromkeys(n for e in branches for n in e))  # type: ignore[union-attr]
    return None


def _head(code: str) -> str:
    """The name a base expression starts with (``nn`` of ``nn.Module``, ``Generic`` of ``Generic[T]``)."""
    return code.split("[", 1)[0].split(".", 1)[0].strip()


def catches(names: tuple[str, ...], raised: str | None) -> bool | None:
    """Does an ``except`` naming ``names`` catch ``raised`` (an exception's name; None: not known)?
    Decided for built-in exceptions by their hierarchy; None where a name is not a built-in one."""
    if not names:
        return True
    answer: bool | None = False
    for name in names:
        handler, exception = _builtin_exception(name), _builtin_exception(raised)
        if handler is BaseException or (
            handler is not None and exception is not None and issubclass(exception, handler)
        ):
            return True
        if handler is None or exception is None:
            answer = None
    return answer


def _builtin_exception(name: str | None) -> type[BaseException] | None:
    value = getattr(builtins, name.rsplit(".", 1)[-1], None) if name else None
    return value if isinstance(value, type) and issubclass(value, BaseException) else None


def _catching(handlers: list[ast.ExceptHandler], raised: str | None) -> list[ast.ExceptHandler]:
    """The handlers that may run for ``raised``, in order, up to the first that surely catches it."""
    out = []
    for handler in handlers:
        caught = catches(caught_names(handler.type), raised)
        if caught is not False:
            out.append(handler)
        if caught:
            break
    return out


def caught_names(node: ast.expr | None) -> tuple[str, ...]:
    """The exception names an ``except`` clause names (``()``: a bare ``except``, which catches all)."""
    if node is None:
        return ()
    elements = node.elts if isinstance(node, ast.Tuple) else [node]
    return tuple(dotted(e) or "?" for e in elements)


def _unbound(name: str, outcome: TryOutcome) -> str:
    if outcome.failed_at < 0:
        return f"{name} is not bound when the imports at line {outcome.lines[0]} succeed"
    return f"{name} is not bound when the import at line {outcome.lines[outcome.failed_at]} raises"


def _by_outcome(outcomes: list[tuple[_Interpreter, TryOutcome]]) -> dict[str, list[Target]]:
    """The bindings after a ``try`` with several outcomes: a name bound alike in all of them keeps its
    targets; any other holds each outcome's targets marked with it (unbound there: unavailable; an
    outcome that raises makes every name unavailable under it)."""
    names = list(dict.fromkeys(name for interpreter, _ in outcomes for name in interpreter.state))
    if any(interpreter.error for interpreter, _ in outcomes):
        merged = {}
    else:
        merged = {n: outcomes[0][0].state[n] for n in names if all(n in i.state for i, _ in outcomes)}
        merged = {n: t for n, t in merged.items() if all(i.state[n] == t for i, _ in outcomes)}
    differing = [name for name in names if name not in merged]
    order = [*merged, *differing]  # the names bound differently go last
    for name in differing:
        targets: list[Target] = []
        for interpreter, outcome in outcomes:
            if interpreter.error:
                held = [Target("unavailable", interpreter.error)]
            else:
                held = interpreter.state.get(name, [Target("unavailable", _unbound(name, outcome))])
                held = _with_stars_after(held, name, list(interpreter.state), order)
            targets.extend(dataclasses.replace(t, when=(*t.when, outcome)) for t in held)
        merged[name] = targets
    return merged


def _with_stars_after(targets: list[Target], name: str, path_order: list[str], merged_order: list[str]) -> list[Target]:
    """``targets`` of ``name`` on one path (an outcome, a branch), with the star imports that ran after
    that binding there but precede ``name`` in the merged order: merged, the order no longer says they
    may rebind it (``from .base import X``, ``from .more import *``, then a ``try`` that rebinds X
    only when its import works)."""
    if name.startswith("*") or name not in path_order:
        return targets
    later_here = path_order[path_order.index(name) + 1 :]
    later_merged = set(merged_order[merged_order.index(name) + 1 :])
    stars = tuple(key[1:] for key in later_here if key.startswith("*") and key not in later_merged)  # "*m" -> m
    return [dataclasses.replace(t, stars_after=(*t.stars_after, *stars)) for t in targets] if stars else targets


def raised_name(reason: str) -> str | None:
    """The exception a ``_raise_reason`` names (``...: import raises ImportError (line 4): ...``), if any."""
    found = re.search(r"(?:import|__getattr__) raises ([\w.]+) \(line", reason)
    return found.group(1).rsplit(".", 1)[-1] if found else None


def _raise_reason(node: ast.Raise, text: _Source) -> str:
    line = text.line(node)
    exc = node.exc
    if isinstance(exc, ast.Call):
        name = dotted(exc.func) or "an exception"
        arguments = [*exc.args, *(k.value for k in exc.keywords)]
        message = next((text for a in arguments if (text := literal_string(a)) is not None), None)
        if message is None:
            strings = _strings(exc)
            message = " ".join(strings) if strings else None
        return f"import raises {name} (line {line})" + (f": {message}" if message else "")
    return f"import raises (line {line})"
