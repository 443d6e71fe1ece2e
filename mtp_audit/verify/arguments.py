"""The values a caller's two calls pass, evaluated as that caller would evaluate them.

A call form is the argument texts of one caller's ``get_top_tokens`` and ``compute_logits``
calls (``["hidden_states", "spec_step_idx=spec_step_idx + 1"]``). verify can reproduce only
what is known outside the caller: the hidden states (the expression ``compute_logits`` gets
for them, bound to the fabricated tensor wherever it appears), the caller's step variable
(the one name the step arguments read, bound to each step tried), constants, and integer
arithmetic on those. Anything else (an attribute such as ``self.draft_step``, another local,
other hidden states, ``*args``) holds a value only the caller's run time knows: the form
cannot be run as called, and ``CallArgument`` says which argument, never a stand-in value.
Free of torch: the verify worker evaluates with tensors, the tests without.
"""

from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

from ..index.ast_tools import unparse

HIDDEN_STATES = "hidden_states"  # the hidden states' keyword; by position they come first
STEP_PARAMETER = "step"  # in the name of the parameter that takes the step (spec_step_idx, step_idx)

INTEGER_OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
SIGNS = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class CallArgument(Exception):
    """A caller passes an argument whose value only exists inside that caller."""


@dataclass(frozen=True)
class Argument:
    """One argument as written: its keyword (None by position) and its expression."""

    text: str
    keyword: str | None
    value: ast.expr

    @classmethod
    def parse(cls, text: str, method: str) -> Argument:
        try:
            call = ast.parse(f"f({text})", mode="eval").body
        except SyntaxError as error:
            raise CallArgument(f"{method}'s argument {text!r} does not parse: {error.msg}") from None
        match call:
            case ast.Call(args=[ast.Starred()]) | ast.Call(keywords=[ast.keyword(arg=None)]):
                raise CallArgument(f"{method}'s argument {text!r} unpacks what only its caller holds")
            case ast.Call(args=[value], keywords=[]):
                return cls(text, None, value)
            case ast.Call(args=[], keywords=[ast.keyword(arg=keyword, value=value)]):
                return cls(text, keyword, value)
        raise CallArgument(f"{method}'s argument {text!r} is not one argument")

    def reads(self) -> set[str]:
        return {node.id for node in ast.walk(self.value) if isinstance(node, ast.Name)}


def _arguments(texts: tuple[str, ...], method: str) -> list[Argument]:
    return [Argument.parse(text, method) for text in texts]


def _hidden_expression(arguments: list[Argument]) -> ast.expr | None:
    """What compute_logits gets as its hidden states: the first positional argument, or the keyword."""
    for position, argument in enumerate(arguments):
        if argument.keyword == HIDDEN_STATES or (position == 0 and argument.keyword is None):
            return argument.value
    return None


@dataclass(frozen=True)
class CallEnvironment:
    """The names a call form's arguments may read: the hidden states' expression and the step variable."""

    hidden: str | None  # compute_logits' hidden-states expression, as ast.unparse writes it
    step: str | None  # the caller's step variable, None when neither call passes one
    get_top_tokens: tuple[Argument, ...]
    compute_logits: tuple[Argument, ...]

    @classmethod
    def of(
        cls,
        get_top_tokens: tuple[str, ...],
        compute_logits: tuple[str, ...],
        parameters: dict[str, tuple[str, ...]] | None = None,
    ) -> CallEnvironment:
        """The environment of one caller's form (``parameters``: each method's parameter names, self
        left out, to place positional arguments); CallArgument when an argument cannot be evaluated."""
        parameters = parameters or {}
        gtt, cl = _arguments(get_top_tokens, "get_top_tokens"), _arguments(compute_logits, "compute_logits")
        hidden = _hidden_expression(cl) or _hidden_expression(gtt)
        hidden_text = unparse(hidden) if hidden is not None else None
        step = _step_variable(cl, parameters.get("compute_logits", ())) or _step_variable(
            gtt, parameters.get("get_top_tokens", ())
        )
        environment = cls(hidden_text, step, tuple(gtt), tuple(cl))
        placeholder = object()  # stands for the tensor: arithmetic on it is refused as on the tensor
        for method, arguments in (("get_top_tokens", gtt), ("compute_logits", cl)):
            for argument in arguments:
                environment.evaluate(argument, placeholder, 0, method)
        return environment

    @property
    def per_step(self) -> bool:
        return self.step is not None

    def passed_step(self, method: str, step: int | None) -> int | None:
        """The value of the first argument of ``method`` that reads the step variable (None: none does)."""
        for argument in getattr(self, method):
            if self.step in argument.reads():
                return self.evaluate(argument, None, step or 0, method)
        return None

    def bind(self, method: str, hidden: object, step: int | None) -> tuple[list, dict]:
        """``method``'s positional and keyword arguments, evaluated with these values."""
        positional, keywords = [], {}
        for argument in getattr(self, method):
            value = self.evaluate(argument, hidden, step or 0, method)
            if argument.keyword is None:
                positional.append(value)
            else:
                keywords[argument.keyword] = value
        return positional, keywords

    def evaluate(self, argument: Argument, hidden: object, step: int, method: str) -> object:
        def value_of(node: ast.expr) -> object:
            if unparse(node) == self.hidden:
                return hidden
            match node:
                case ast.Constant(value=constant):
                    return constant
                case ast.Name(id=name) if name == self.step:
                    return step
                case ast.UnaryOp(op=sign, operand=operand) if type(sign) in SIGNS:
                    return SIGNS[type(sign)](integer(operand))
                case ast.BinOp(left=left, op=op, right=right) if type(op) in INTEGER_OPERATORS:
                    try:
                        return INTEGER_OPERATORS[type(op)](integer(left), integer(right))
                    except ArithmeticError as error:
                        raise unknown(node, f"raises {type(error).__name__}") from None
            raise unknown(node, _what(node, self))

        def integer(node: ast.expr) -> int:
            value = value_of(node)
            if type(value) is not int:
                raise unknown(node, "not an integer: only integer arithmetic is evaluated")
            return value

        def unknown(node: ast.expr, why: str) -> CallArgument:
            return CallArgument(
                f"{method}'s argument {argument.text} cannot be evaluated outside its caller: {unparse(node)} {why}"
            )

        return value_of(argument.value)


def _step_variable(arguments: list[Argument], parameters: tuple[str, ...]) -> str | None:
    """The caller's step variable: the one name read by the argument a step parameter
    (``spec_step_idx``) receives, by keyword or by position. Any other name is the caller's own."""
    for position, argument in enumerate(arguments):
        receiver = argument.keyword or (parameters[position] if position < len(parameters) else None)
        names = argument.reads()
        if receiver and STEP_PARAMETER in receiver and len(names) == 1:
            return names.pop()
    return None


def _what(node: ast.expr, environment: CallEnvironment) -> str:
    """Why the value of ``node`` is only known to the caller."""
    known = f"the step variable {environment.step}" if environment.step else "no step variable"
    hidden = f" ({environment.hidden})" if environment.hidden else ""
    match node:
        case ast.Attribute():
            return f"is an attribute, not the hidden states compute_logits gets{hidden}: only run time can tell"
        case ast.Name():
            return f"is a name of the caller other than the hidden states{hidden} and {known}"
        case ast.Subscript() | ast.Call():
            return f"is computed by the caller, not the hidden states compute_logits gets{hidden}"
    return "is an expression only the caller's run time can evaluate"
