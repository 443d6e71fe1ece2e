"""What vLLM's ``LogitsProcessor`` runs, read off its source with ``ast`` (nothing imported): the methods its
call and its ``get_top_tokens`` reach, the constructor arguments that pick a branch of one path alone, the
parameters a head call binds to, and where its get_top_tokens masks the ids past ``org_vocab_size``. The
mirror rule takes a processor's call and its get_top_tokens to select the same tokens; these say where a
drafter's processor may not."""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from ..model import HeadSignature, ParamKind, SignatureParam
from .ast_tools import self_attribute, walk_statements

# vLLM's processor as drafters import it: the module that names it and the class's name there.
VLLM_LOGITS_PROCESSOR = ("vllm.model_executor.layers.logits_processor", "LogitsProcessor")
PROCESSOR_CLASS = VLLM_LOGITS_PROCESSOR[1]

# What ``self.logits_processor(...)`` runs: nn.Module's ``__call__``, which runs ``forward``.
CALL_ENTRIES = ("__call__", "forward")


@dataclass(frozen=True)
class ProcessorFlag:
    """A parameter of ``LogitsProcessor.__init__`` stored as ``self.<attr>`` that one of the two paths reads and
    the other never does: a condition tests it (``logits_as_input``: the call returns its input unchanged, while
    get_top_tokens applies the head all the same; ``how`` "tests"), or, where it has a default, any statement
    reads it (``org_vocab_size`` up to vLLM 0.33: the call cuts the logits to it, get_top_tokens masks only the
    head's padding; ``how`` "reads"). Built with another value than its default, the processor's call and its
    get_top_tokens may select different tokens. ``path``: "call" or "get_top_tokens", the one that reads it;
    ``test``: the method and ``file:line`` of that read; ``fallback``: the parameter (name, position) whose
    value the attribute takes when this one is not given (``self.org_vocab_size = org_vocab_size or
    vocab_size``): passing the same value for both is passing none."""

    param: str
    position: int  # among the parameters after ``self``
    default: str | None  # the default's code; None: none
    attr: str
    path: str
    test: str
    how: str = "tests"
    fallback: tuple[str, int] | None = None


@dataclass(frozen=True)
class ProcessorPaths:
    """The methods of the tree's ``LogitsProcessor`` that its call and its ``get_top_tokens`` run through
    ``self.<method>``, transitively, the entries included: method -> the chain that first reaches it. A
    subclass overriding a method one path runs and the other does not may make them select different tokens;
    so may a constructor argument that picks a branch of one path alone (``flags``)."""

    call: dict[str, tuple[str, ...]]
    top_tokens: dict[str, tuple[str, ...]]
    flags: tuple[ProcessorFlag, ...] = ()
    guards: tuple[ProcessorGuard, ...] = ()


@dataclass(frozen=True)
class ProcessorGuard:
    """``if <test on self.<attr>>: raise ...`` in what one path alone runs, ``attr`` stored from the ``__init__``
    parameter ``param`` (vLLM's get_top_tokens raises for a scale that is not positive, its call does not): a
    processor built with a value that makes ``test`` true has one path raise where the other returns tokens.
    ``path``: "call" or "get_top_tokens"; ``where``: the method and ``file:line`` of the ``if``."""

    param: str
    position: int
    attr: str
    test: str
    path: str
    where: str

    def raises_for(self, value: object) -> bool | None:
        """Whether ``test`` holds with ``self.<attr>`` holding ``value`` (a literal); None where that is not
        known (it reads anything else, or an operation the reading does not evaluate)."""
        try:
            return bool(_evaluated(ast.parse(self.test, mode="eval").body, self.attr, value))
        except (_Unknown, SyntaxError, TypeError, ValueError, ArithmeticError):
            return None


class _Unknown(Exception):
    """A part of a guard's test the reading does not evaluate."""


_COMPARISONS = {
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}


def _evaluated(node: ast.expr, attr: str, value: object) -> object:
    """``node`` evaluated with ``self.<attr>`` as ``value``: literals, ``not``, ``-``, ``and``/``or`` and
    comparisons only (nothing of the tree runs)."""
    match node:
        case ast.Constant(value=constant):
            return constant
        case ast.UnaryOp(op=ast.Not(), operand=operand):
            return not _evaluated(operand, attr, value)
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            number = _evaluated(operand, attr, value)
            if isinstance(number, bool) or not isinstance(number, (int, float)):
                raise _Unknown
            return -number
        case ast.BoolOp(op=ast.And(), values=values):
            return all(_evaluated(v, attr, value) for v in values)
        case ast.BoolOp(op=ast.Or(), values=values):
            return any(_evaluated(v, attr, value) for v in values)
        case ast.Compare(left=left, ops=ops, comparators=comparators):
            current = _evaluated(left, attr, value)
            for op, comparator in zip(ops, comparators):
                other = _evaluated(comparator, attr, value)
                if type(op) not in _COMPARISONS or not _COMPARISONS[type(op)](current, other):
                    if type(op) not in _COMPARISONS:
                        raise _Unknown
                    return False
                current = other
            return True
    if _self_attribute_read(node) == attr:
        return value
    raise _Unknown


def processor_paths(
    logits_processor_source: str, file: str, name: str = PROCESSOR_CLASS, line: int | None = None
) -> ProcessorPaths | None:
    """What ``LogitsProcessor``'s call and its ``get_top_tokens`` run, read off its source in ``file`` (nothing
    imported; ``name``: the class's name there); None where the class is not found."""
    processor = _processor_class(logits_processor_source, name, line)
    if processor is None:
        return None
    methods = _methods(processor)
    call, top_tokens = _reached(methods, CALL_ENTRIES), _reached(methods, ("get_top_tokens",))
    flags = _one_sided_flags(methods, call, top_tokens, file)
    return ProcessorPaths(call, top_tokens, flags, _one_sided_guards(methods, call, top_tokens, file))


def _one_sided_guards(
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    call: dict[str, tuple[str, ...]],
    top_tokens: dict[str, tuple[str, ...]],
    file: str,
) -> tuple[ProcessorGuard, ...]:
    """The ``ProcessorGuard`` conditions of the processor: an ``if`` whose body starts with ``raise`` in a method
    one path runs, testing an attribute stored from an ``__init__`` parameter, where no method of the other path
    raises under the same test."""
    init = methods.get("__init__")
    if init is None:
        return ()
    positions = {p.name: i for i, p in enumerate(_signature(init))}
    stored = {  # attr -> param, for ``self.attr = param`` (plain, annotated)
        attr: value.id
        for target, value in _stores(init)
        if (attr := _self_attribute_read(target)) is not None and isinstance(value, ast.Name) and value.id in positions
    }

    def raising(names: dict[str, tuple[str, ...]]) -> list[tuple[str, ast.If]]:
        return [
            (name, node)
            for name in names
            if name in methods
            for node in ast.walk(methods[name])
            if isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise)
        ]

    guards = []
    for path, one, other in (("call", call, top_tokens), ("get_top_tokens", top_tokens, call)):
        elsewhere = {ast.unparse(node.test) for _, node in raising(other)}
        for name, node in raising(one):
            test = ast.unparse(node.test)
            read = {_self_attribute_read(n) for n in ast.walk(node.test)} & set(stored)
            if test in elsewhere or len(read) != 1:
                continue
            [attr] = read
            param = stored[attr]
            guards.append(ProcessorGuard(param, positions[param], attr, test, path, f"{name}, {file}:{node.lineno}"))
    return tuple(guards)


def _one_sided_flags(
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    call: dict[str, tuple[str, ...]],
    top_tokens: dict[str, tuple[str, ...]],
    file: str,
) -> tuple[ProcessorFlag, ...]:
    """The ``ProcessorFlag`` parameters of the processor's ``__init__``."""
    init = methods.get("__init__")
    if init is None:
        return ()
    params = _signature(init)
    positional = [*init.args.posonlyargs, *init.args.args]
    first_default = len(positional) - len(init.args.defaults)
    defaults = {a.arg: d for a, d in zip(positional[first_default:], init.args.defaults)}
    defaults.update({a.arg: d for a, d in zip(init.args.kwonlyargs, init.args.kw_defaults) if d is not None})
    names = {p.name for p in params}
    stored = [  # (attr, param): ``self.attr = <an expression reading param>`` (``param``, ``bool(param)``)
        (target.attr, read.id)
        for target, value in _stores(init)
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
        for read in ast.walk(value)
        if isinstance(read, ast.Name) and read.id in names
    ]
    positions = {p.name: i for i, p in enumerate(params)}
    flags = []
    for attr, param in dict.fromkeys(stored):
        for path, one, other in (("call", call, top_tokens), ("get_top_tokens", top_tokens, call)):
            if any(_reads_attr(methods[name], attr) for name in other if name in methods):
                continue
            default = ast.unparse(defaults[param]) if param in defaults else None
            tested = next((t for name in one if name in methods for t in _tests_of(methods[name], attr, methods)), None)
            if tested is not None:
                test = f"{tested[0]}, {file}:{tested[1]}"
                flags.append(ProcessorFlag(param, positions[param], default, attr, path, test))
                continue
            read = next((r for name in one if name in methods for r in _reads_of(methods[name], attr)), None)
            if read is not None and param in defaults:
                fallback = next(
                    ((name, positions[name]) for name in _fallbacks(init, attr, param) if name in positions), None
                )
                test = f"{read[0]}, {file}:{read[1]}"
                flags.append(ProcessorFlag(param, positions[param], default, attr, path, test, "reads", fallback))
    return tuple(sorted(flags, key=lambda flag: flag.how != "tests"))  # a branch picked first, where both


def _reads_of(function: ast.FunctionDef | ast.AsyncFunctionDef, attr: str) -> list[tuple[str, int]]:
    """Where ``function`` reads ``self.<attr>`` (``getattr(self, "<attr>")`` too): (its name, the line)."""
    return [
        (function.name, node.lineno)
        for node in ast.walk(function)
        if _self_attribute_read(node) == attr and not isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))
    ]


def _fallbacks(init: ast.FunctionDef | ast.AsyncFunctionDef, attr: str, param: str) -> list[str]:
    """The names ``self.<attr>`` falls back to where ``param`` is not given: ``<param> or <name>``,
    ``<name> if <param> is None else <param>``, ``<param> if <param> is not None else <name>``."""
    found = []
    for target, value in _stores(init):
        if _self_attribute_read(target) != attr:
            continue
        match value:
            case ast.BoolOp(op=ast.Or(), values=[ast.Name(id=given), ast.Name(id=other)]) if given == param:
                found.append(other)
            case ast.IfExp(
                test=ast.Compare(left=ast.Name(id=tested), ops=[ast.Is()], comparators=[ast.Constant(value=None)]),
                body=ast.Name(id=other),
                orelse=ast.Name(id=given),
            ) if tested == given == param:
                found.append(other)
            case ast.IfExp(
                test=ast.Compare(left=ast.Name(id=tested), ops=[ast.IsNot()], comparators=[ast.Constant(value=None)]),
                body=ast.Name(id=given),
                orelse=ast.Name(id=other),
            ) if tested == given == param:
                found.append(other)
    return found


def _stores(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[ast.expr, ast.expr]]:
    """(target, value) of each assignment in ``function``: plain, annotated, augmented, and the pairs of
    ``a, b = x, y``."""
    out: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    out += list(zip(target.elts, node.value.elts))
                else:
                    out.append((target, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            out.append((node.target, node.value))
    return out


def _tests_of(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    attr: str,
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] | None = None,
) -> list[tuple[str, int]]:
    """Where a condition of ``function`` (``if``, ``while``, a conditional expression, an ``assert``, a
    ``match``'s subject) reads ``self.<attr>`` (``getattr(self, "<attr>", ...)`` too), a local that holds it
    (``as_input = self.logits_as_input``, ``not`` it, ``bool()`` of it), or a method or property of the class
    (``methods``) whose body reads it (``if self._returns_input():``): (its name, the line)."""
    readers = {name for name, method in (methods or {}).items() if method is not function and _reads_attr(method, attr)}

    def reads(node: ast.AST, names: set[str]) -> bool:
        return any(
            _self_attribute_read(n) == attr
            or (isinstance(n, ast.Name) and n.id in names)
            or (isinstance(n, ast.Attribute) and _self_attribute_read(n) in readers)
            for n in ast.walk(node)
        )

    def holds(value: ast.expr | None, names: set[str]) -> bool:  # the flag itself, not data computed with it
        match value:
            case ast.UnaryOp(op=ast.Not(), operand=inner) | ast.Call(func=ast.Name(id="bool"), args=[inner]):
                return holds(inner, names)
            case ast.Name(id=name):
                return name in names
        return isinstance(value, ast.Attribute) and _self_attribute_read(value) == attr

    assignments = [n for n in ast.walk(function) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.NamedExpr))]
    held: set[str] = set()
    for _ in assignments:  # locals from locals from it...
        grown = {
            t.id
            for n in assignments
            if holds(n.value, held)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        if grown <= held:
            break
        held |= grown
    tests = [n.test for n in ast.walk(function) if isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert))]
    tests += [n.subject for n in ast.walk(function) if isinstance(n, ast.Match)]
    return [(function.name, test.lineno) for test in tests if reads(test, held)]


def _reads_attr(function: ast.FunctionDef | ast.AsyncFunctionDef, attr: str) -> bool:
    return attr in _attributes_read(function)


@functools.lru_cache(maxsize=256)
def _attributes_read(function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
    """What ``_self_references`` lists, as a set, walked once per method: each flag asks it of every method."""
    return frozenset(_self_references(function))


def _self_attribute_read(node: ast.AST) -> str | None:
    """NAME of ``self.NAME`` or of ``getattr(self, "NAME")`` (with a default or not); None for anything else."""
    match node:
        case ast.Call(func=ast.Name(id="getattr"), args=[ast.Name(id="self"), ast.Constant(value=str(name)), *_]):
            return name
    return self_attribute(node)


def head_signature(
    logits_processor_source: str, file: str, name: str = PROCESSOR_CLASS, line: int | None = None
) -> HeadSignature | None:
    """The parameters of ``LogitsProcessor.get_top_tokens`` and of what its call runs (``__call__`` where
    the class defines one, else ``forward``), read off its source in ``file``; None where the class or its
    get_top_tokens is not found."""
    processor = _processor_class(logits_processor_source, name, line)
    methods = _methods(processor) if processor is not None else {}
    top_tokens = methods.get("get_top_tokens")
    if top_tokens is None:
        return None
    call = next((methods[name] for name in CALL_ENTRIES if name in methods and not _passes_on(methods[name])), None)
    return HeadSignature(
        f"{file}:{top_tokens.lineno}", _signature(top_tokens), _signature(call) if call is not None else None
    )


def _passes_on(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """``def __call__(self, *args, **kwargs): return super().__call__(*args, **kwargs)`` (or ``self.forward``):
    it binds nothing itself, so what a head call's arguments bind to is what it passes them on to."""
    arguments = function.args
    if (
        arguments.args[1:]
        or arguments.posonlyargs
        or arguments.kwonlyargs
        or not (arguments.vararg and arguments.kwarg)
    ):
        return False
    body = [s for s in function.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    match body:
        case [ast.Return(value=ast.Call() as call)] | [ast.Expr(value=ast.Call() as call)]:
            return (
                [type(a) for a in call.args] == [ast.Starred]
                and ast.unparse(call.args[0].value) == arguments.vararg.arg
                and [(k.arg, ast.unparse(k.value)) for k in call.keywords] == [(None, arguments.kwarg.arg)]
            )
    return False


def _signature(function: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[SignatureParam, ...]:
    """The parameters of a method, ``self`` (its first) left out, in the order Python binds them."""
    arguments = function.args
    positional = [(a, ParamKind.POSONLY) for a in arguments.posonlyargs] + [(a, ParamKind.POS) for a in arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    params = [SignatureParam(a.arg, kind, i < first_default) for i, (a, kind) in enumerate(positional)]
    if arguments.vararg is not None:
        params.append(SignatureParam(arguments.vararg.arg, ParamKind.STAR, False))
    params += [
        SignatureParam(a.arg, ParamKind.KWONLY, default is None)
        for a, default in zip(arguments.kwonlyargs, arguments.kw_defaults)
    ]
    if arguments.kwarg is not None:
        params.append(SignatureParam(arguments.kwarg.arg, ParamKind.STARSTAR, False))
    return tuple(params[1:]) if positional else tuple(params)


def outside_vocab_mask(
    logits_processor_source: str, name: str = PROCESSOR_CLASS, line: int | None = None
) -> int | None:
    """The line where ``LogitsProcessor.get_top_tokens`` (or a method of the class it runs on
    ``self``) sets every column from ``self.org_vocab_size`` on to ``-inf`` (vLLM 0.34's
    ``_mask_outside_vocab``); None where it does not (0.33 masks only the shard padding): there a
    ``get_top_tokens`` can select ids a cut to ``org_vocab_size`` removes."""
    processor = _processor_class(logits_processor_source, name, line)
    methods = _methods(processor) if processor is not None else {}
    if "get_top_tokens" not in methods:
        return None
    reached = [methods[name] for name in _reached(methods, ("get_top_tokens",)) if name in methods]
    return next((line for method in reached if (line := _org_vocab_mask(method)) is not None), None)


def _processor_class(
    logits_processor_source: str, name: str = PROCESSOR_CLASS, line: int | None = None
) -> ast.ClassDef | None:
    """The module-level class ``name`` of the source (in a module-level block too; the one on ``line`` where
    given, else the last); None where it does not parse or lacks one. Its ``bases_here`` are the classes of the
    same module it derives from, which ``_methods`` reads too."""
    try:
        module = ast.parse(logits_processor_source)
    except SyntaxError:
        return None
    defined = [node for node in walk_statements(module.body) if isinstance(node, ast.ClassDef)]
    classes = {node.name: node for node in defined}
    processor = next((c for c in defined if c.name == name and c.lineno == line), None) if line else classes.get(name)
    if processor is not None:
        processor.bases_here = _bases_here(processor, classes)  # type: ignore[attr-defined]
    return processor


def _bases_here(cls: ast.ClassDef, classes: dict[str, ast.ClassDef], depth: int = 0) -> list[ast.ClassDef]:
    """The classes of the module ``cls`` derives from (by name, depth first, each once): where the methods it
    does not define itself come from (a base holding ``__init__`` and ``forward``, a mixin's get_top_tokens)."""
    found: list[ast.ClassDef] = []
    for base in cls.bases:
        here = classes.get(base.id) if isinstance(base, ast.Name) and depth < 8 else None
        if here is not None and here is not cls and here not in found:
            found += [here, *(c for c in _bases_here(here, classes, depth + 1) if c not in found)]
    return found


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The methods ``cls`` defines, then those it inherits from the classes of its module it derives from."""
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for owner in (cls, *getattr(cls, "bases_here", ())):
        for item in owner.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.setdefault(item.name, item)
    return methods


def _reached(
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef], entries: tuple[str, ...]
) -> dict[str, tuple[str, ...]]:
    """Each method the ``entries`` reach through ``self.<method>`` (called or only read), the entries
    included, with the chain that reaches it first (breadth first)."""
    chains = {entry: (entry,) for entry in entries}
    queue = [entry for entry in entries if entry in methods]
    for name in queue:  # grows as it goes
        for reference in _self_references(methods[name]):
            if reference in methods and reference not in chains:
                chains[reference] = (*chains[name], reference)
                queue.append(reference)
    return chains


def _self_references(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """Names of the ``self.<name>`` attributes a method reads (``getattr(self, "<name>")`` too), in order."""
    return [name for node in ast.walk(function) if (name := _self_attribute_read(node)) is not None]


def _org_vocab_mask(function: ast.FunctionDef) -> int | None:
    """The line of ``x[..., lower:] = -inf`` whose ``lower`` reads ``self.org_vocab_size`` (directly or
    through local names assigned from it)."""
    derived = {"self.org_vocab_size"}
    assignments = [node for node in ast.walk(function) if isinstance(node, ast.Assign)]
    for _ in assignments:  # names assigned from names assigned from it...
        for node in assignments:
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and _reads(node.value, derived):
                derived.add(node.targets[0].id)
    for node in assignments:
        target = node.targets[0] if len(node.targets) == 1 else None
        if not isinstance(target, ast.Subscript) or "inf" not in ast.unparse(node.value):
            continue
        last = target.slice.elts[-1] if isinstance(target.slice, ast.Tuple) else target.slice
        if isinstance(last, ast.Slice) and last.upper is None and last.lower is not None:
            if _reads(last.lower, derived):
                return node.lineno
    return None


def _reads(expression: ast.expr, names: set[str]) -> bool:
    return any(
        isinstance(node, (ast.Name, ast.Attribute)) and ast.unparse(node) in names for node in ast.walk(expression)
    )


def defines_processor(logits_processor_source: str, name: str = PROCESSOR_CLASS) -> bool:
    """Whether the source defines the class ``name`` once, at module level and outside any block (where vLLM's
    processor lives, as opposed to a module that imports it, or picks one under a condition)."""
    if f"class {name}" not in logits_processor_source:
        return False
    try:
        module = ast.parse(logits_processor_source)
    except SyntaxError:
        return False
    defined = [c for c in walk_statements(module.body) if isinstance(c, ast.ClassDef) and c.name == name]
    return len(defined) == 1 and defined[0] in module.body


def processor_reading(logits_processor_source: str, name: str = PROCESSOR_CLASS, line: int | None = None) -> tuple:
    """What the scan reads off a processor class, file names and lines left out: two definitions (one per
    platform) that give equal readings are read alike."""
    paths = processor_paths(logits_processor_source, "", name, line)
    signature = head_signature(logits_processor_source, "", name, line)
    return (
        None if paths is None else (sorted(paths.call), sorted(paths.top_tokens)),
        None
        if paths is None
        else [(f.param, f.position, f.default, f.attr, f.path, f.how, f.fallback) for f in paths.flags],
        None if paths is None else [(g.param, g.position, g.attr, g.test, g.path) for g in paths.guards],
        outside_vocab_mask(logits_processor_source, name, line) is not None,
        None if signature is None else (signature.top_tokens, signature.call),
        has_local_argmax(logits_processor_source, name, line),
    )


def has_local_argmax(logits_processor_source: str, name: str = PROCESSOR_CLASS, line: int | None = None) -> bool:
    """True when ``LogitsProcessor.get_top_tokens`` exists (vLLM 0.17 and later)."""
    if "def get_top_tokens" not in logits_processor_source:
        return False
    processor = _processor_class(logits_processor_source, name, line)
    return processor is not None and isinstance(_methods(processor).get("get_top_tokens"), ast.FunctionDef)
