"""Which model runner (V1 or V2) a drafter can run with, read statically from vLLM's config.

A V1 proposer (``vllm/v1/spec_decode``) holds a drafter only under the V1 model runner. The
``VllmConfig`` of ``vllm/config/vllm.py`` keeps a speculative method off V1 in two ways: its
``use_v2_model_runner`` property forces V2 for it (0.25 to 0.28: ``if method == "dspark": return
True``), or what its ``__post_init__`` runs when V1 is chosen raises for it (0.29 on:
``_validate_v1_model_runner``, "Model Runner V1 does not support: dspark speculative decoding").
Conditions are evaluated as the selection evaluates them (``CallerIndex.truth``); the config's own
checks (``self._is_dflash_candidate_draft()``) are read from their bodies, a list they build
(``unsupported.append(...)``) being true where an append surely runs.

Nothing is imported or run: CPython's ``ast`` reads the file.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from ..index.ast_tools import walk

V2_SWITCH = "use_v2_model_runner"  # the VllmConfig property that picks the runner
CONSTRUCTORS = ("__post_init__", "__init__")  # run for every config: their V1 branch validates V1
ENVIRONMENT = ("envs", "os.environ", "os.getenv")  # a user's explicit override
MAX_DEPTH = 8  # checks calling checks: deeper is a cycle


class RunnerChoice:
    """The runner-choosing code of one ``VllmConfig`` class: its switch, its checks and the branches
    its constructors run under V1."""

    def __init__(self, config: ast.ClassDef, substituted: Callable[[ast.FunctionDef], ast.FunctionDef]):
        """``substituted``: a method with its locals assigned once (and module constants) read as their values."""
        self.methods = {item.name: substituted(item) for item in config.body if isinstance(item, ast.FunctionDef)}
        switch = self.methods[V2_SWITCH]
        self.switch = [s for s in switch.body if not _environment_override(s)]
        self.v1_branches = [
            branch
            for name in CONSTRUCTORS
            if name in self.methods
            for statement in self.methods[name].body
            if (branch := _v1_branch(statement)) is not None
        ]

    @classmethod
    def find(cls, tree: ast.Module, substituted: Callable[[ast.FunctionDef], ast.FunctionDef]) -> RunnerChoice | None:
        """The choice of the class of ``tree`` that defines the switch; None where none does."""
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and any(
                isinstance(item, ast.FunctionDef) and item.name == V2_SWITCH for item in node.body
            ):
                return cls(node, substituted)
        return None

    def v1_refused(self, truth: Callable[[ast.expr], object], unknown: object) -> bool:
        """Whether a branch its constructors run under V1 surely raises."""
        return any(self._surely(branch, self._raising(truth, unknown), truth, unknown) for branch in self.v1_branches)

    def _raising(
        self, truth: Callable[[ast.expr], object], unknown: object, depth: int = 0
    ) -> Callable[[ast.stmt], bool]:
        """A ``raise``, or a call of one of its methods (``self._validate_v1_model_runner()``) that surely raises."""

        def raises(statement: ast.stmt) -> bool:
            if isinstance(statement, ast.Raise):
                return True
            called = _own_method_called(statement)
            return (
                called in self.methods
                and depth < MAX_DEPTH
                and self._surely(self.methods[called].body, self._raising(truth, unknown, depth + 1), truth, unknown)
            )

        return raises

    def nonempty(self, name: str, truth: Callable[[ast.expr], object], unknown: object) -> object:
        """The truth of what check ``name`` returns when it returns a list it builds: True where an
        ``append`` to it surely runs, else ``unknown``; None when it returns no such list."""
        function = self.methods[name]
        built = _returned_list(function)
        if built is None:
            return None

        def appends(statement: ast.stmt) -> bool:
            call = statement.value if isinstance(statement, ast.Expr) else None
            return (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr == "append"
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == built
            )

        return True if self._surely(function.body, appends, truth, unknown) else unknown

    def _surely(
        self,
        body: list[ast.stmt],
        effect: Callable[[ast.stmt], bool],
        truth: Callable[[ast.expr], object],
        unknown: object,
    ) -> bool:
        """Whether running ``body`` surely reaches a statement ``effect`` picks before leaving: an ``if``
        runs the arm its test decides, both where undecided (then both must reach it)."""
        for statement in body:
            if effect(statement):
                return True
            if isinstance(statement, ast.If):
                decided = truth(statement.test)
                arms = [statement.body, statement.orelse]
                if decided is not unknown:
                    arms = [arms[0] if decided else arms[1]]
                if all(self._surely(arm, effect, truth, unknown) for arm in arms):
                    return True
                if any(_may_leave(arm) for arm in arms):
                    return False
            elif _may_leave([statement]):
                return False
        return False


def _own_method_called(statement: ast.stmt) -> str | None:
    """``m`` of a statement ``self.m()``."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if isinstance(call, ast.Call) and not call.args and not call.keywords and _dotted(call.func).startswith("self."):
        return _dotted(call.func).removeprefix("self.")
    return None


def _environment_override(statement: ast.stmt) -> bool:
    """``if envs.VLLM_USE_V2_MODEL_RUNNER is not None: return ...``: the user's explicit choice, which
    vLLM's own forcing below it says V1 cannot serve (see docs/call-contract.md)."""
    return (
        isinstance(statement, ast.If)
        and any(isinstance(s, ast.Return) for s in statement.body)
        and any(_dotted(n).startswith(ENVIRONMENT) for n in walk(statement.test) if _dotted(n))
    )


def _v1_branch(statement: ast.stmt) -> list[ast.stmt] | None:
    """What ``if self.use_v2_model_runner: ... else: V1`` (or ``if not ...: V1``) runs under V1."""
    if not isinstance(statement, ast.If):
        return None
    test = statement.test
    if _dotted(test) == f"self.{V2_SWITCH}":
        return statement.orelse
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and _dotted(test.operand) == f"self.{V2_SWITCH}":
        return statement.body
    return None


def _returned_list(function: ast.FunctionDef) -> str | None:
    """``L`` where the function binds ``L = []`` (annotated too) first and ends ``return L``."""
    body = function.body
    if not body or not isinstance(body[-1], ast.Return) or not isinstance(body[-1].value, ast.Name):
        return None
    name = body[-1].value.id
    for statement in body:
        target = statement.target if isinstance(statement, ast.AnnAssign) else None
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
        if isinstance(target, ast.Name) and target.id == name:
            value = statement.value  # type: ignore[union-attr]
            return name if isinstance(value, ast.List) and not value.elts else None
    return None


def _may_leave(body: list[ast.stmt]) -> bool:
    """Whether ``body`` may return or raise (nested functions aside)."""
    return any(isinstance(node, (ast.Return, ast.Raise)) for node in _outside_functions(body))


def _outside_functions(body: list[ast.stmt]) -> Iterator[ast.AST]:
    todo: list[ast.AST] = list(body)
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo += ast.iter_child_nodes(node)


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""
