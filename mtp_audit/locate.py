"""Stage 1: find the source tree to audit, without importing vLLM."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import UsageError
from .model import HeadSignature, ParamKind, PluginDist, SignatureParam, SourceTree

REGISTRY = Path("model_executor/models/registry.py")
REGISTRY_PACKAGE = Path("model_executor/models/registry/__init__.py")  # the registry split into a package
LOGITS_PROCESSOR = Path("model_executor/layers/logits_processor.py")
# vLLM's processor as drafters import it: the module that names it and the class's name there.
VLLM_LOGITS_PROCESSOR = ("vllm.model_executor.layers.logits_processor", "LogitsProcessor")
PROCESSOR_CLASS = VLLM_LOGITS_PROCESSOR[1]
# The entry-point groups vLLM loads plugins from (see resolve/plugins.py).
GENERAL = "vllm.general_plugins"
PLATFORM = "vllm.platform_plugins"
GROUPS = (GENERAL, PLATFORM)


def registry_file(package_dir: Path) -> Path | None:
    """The file of ``vllm.model_executor.models.registry`` under a ``vllm`` package folder: its package's
    ``__init__.py`` where it is one (Python imports the package before a same-named module), else
    ``registry.py``; None when neither is there."""
    for relative in (REGISTRY_PACKAGE, REGISTRY):
        if (package_dir / relative).is_file():
            return package_dir / relative
    return None


def locate(path: Path | None) -> SourceTree:
    """Resolve PATH (a checkout, a ``vllm`` package dir, or a plugin dir)."""
    if path is None:
        cwd = Path.cwd().resolve()
        for folder in (cwd, *cwd.parents):  # the checkout the current directory is in, as git finds a repository
            if registry_file(folder / "vllm"):
                return _vllm_tree(folder)
        return _installed_vllm()
    path = path.expanduser()
    if not path.exists():
        raise UsageError(f"{path}: no such directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory; give a vLLM checkout, a vllm package or a directory of model files")
    path = path.resolve()
    if registry_file(path / "vllm"):
        return _vllm_tree(path)
    if registry_file(path) and path.name == "vllm":
        return _vllm_tree(path.parent)
    if registry_file(path):
        raise UsageError(
            f"{path}: holds vLLM's package ({REGISTRY}) under another name than vllm, and its modules are "
            "vllm.*: give a directory where it is named vllm (a copy, or a symlink named vllm in an empty folder)"
        )
    if (path / "vllm").is_dir() or path.name == "vllm":
        raise UsageError(f"{path}: looks like vLLM but has no {REGISTRY}; is the tree complete?")
    enclosing = next((folder for folder in path.parents if folder.name == "vllm" and registry_file(folder)), None)
    if enclosing is not None:  # read alone, it would be a plugin directory judged against another vLLM
        raise UsageError(
            f"{path}: is part of the vLLM package at {enclosing}, whose drafters are judged with the rest of "
            f"that tree (its registry, speculators and bases); give {enclosing.parent}, with --model to narrow it"
        )
    if not _holds_python(path):
        raise UsageError(f"{path}: no Python files here; give a vLLM checkout or a directory of model files")
    return SourceTree(root=path, package_dir=None, vllm_version=None)


def _installed_vllm() -> SourceTree:
    """The installed vllm package, as the ``mtp-audit`` script finds it: the current directory is left out of the
    search (``python -m`` puts it first on ``sys.path``), having been looked at as a checkout already."""
    import sys

    here = {"", ".", str(Path.cwd())}
    searched = sys.path[:]
    sys.path[:] = [entry for entry in searched if entry not in here]
    try:  # the import system's finders (an editable install's too) locate the package and run none of it
        spec = importlib.util.find_spec("vllm")
    finally:
        sys.path[:] = searched
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            "no PATH given, the current directory is not a vLLM checkout and no "
            "vllm package is installed; pass the path of a vLLM tree"
        )
    package_dir = Path(next(iter(spec.submodule_search_locations))).resolve()
    if not registry_file(package_dir):
        raise UsageError(f"no PATH given, and the installed vllm package ({package_dir}) has no {REGISTRY}")
    return _vllm_tree(package_dir.parent)


def _vllm_tree(root: Path) -> SourceTree:
    package_dir = root / "vllm"
    return SourceTree(root=root, package_dir=package_dir, vllm_version=read_version(root))


_VERSION_RE = re.compile(r"^Version:\s*(\S+)", re.MULTILINE)


def read_version(root: Path) -> str | None:
    """The version from ``vllm/_version.py`` or a ``vllm-*.dist-info`` beside it."""
    version_file = root / "vllm" / "_version.py"
    if version_file.is_file():
        try:
            tree = ast.parse(version_file.read_text(encoding="utf-8"))
        except (SyntaxError, ValueError, OSError):  # unreadable, not UTF-8, a null byte: no version, not an error
            tree = None
        found = None
        for node in tree.body if tree else ():
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = {t.id for t in node.targets if isinstance(t, ast.Name)}
                if names & {"__version__", "version"} and isinstance(node.value.value, str):
                    found = node.value.value  # the last assignment is the one Python keeps
        if found is not None:
            return found
    for meta in sorted(root.glob("vllm-*.dist-info/METADATA")):
        match = _VERSION_RE.search(meta.read_text(encoding="utf-8", errors="replace"))
        if match:
            return match.group(1)
    return None


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


def processor_paths(logits_processor_source: str, file: str, name: str = PROCESSOR_CLASS) -> ProcessorPaths | None:
    """What ``LogitsProcessor``'s call and its ``get_top_tokens`` run, read off its source in ``file`` (nothing
    imported; ``name``: the class's name there); None where the class is not found."""
    processor = _processor_class(logits_processor_source, name)
    if processor is None:
        return None
    methods = _methods(processor)
    call, top_tokens = _reached(methods, CALL_ENTRIES), _reached(methods, ("get_top_tokens",))
    return ProcessorPaths(call, top_tokens, _one_sided_flags(methods, call, top_tokens, file))


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
            if any(attr in _self_references(methods[name]) for name in other if name in methods):
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
        if _self_attribute(node) == attr and not isinstance(getattr(node, "ctx", None), (ast.Store, ast.Del))
    ]


def _fallbacks(init: ast.FunctionDef | ast.AsyncFunctionDef, attr: str, param: str) -> list[str]:
    """The names ``self.<attr> = <param> or <name>`` falls back to where ``param`` is not given (falsy)."""
    return [
        value.values[1].id
        for target, value in _stores(init)
        if _self_attribute(target) == attr
        and isinstance(value, ast.BoolOp)
        and isinstance(value.op, ast.Or)
        and len(value.values) == 2
        and isinstance(value.values[0], ast.Name)
        and value.values[0].id == param
        and isinstance(value.values[1], ast.Name)
    ]


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
            _self_attribute(n) == attr
            or (isinstance(n, ast.Name) and n.id in names)
            or (isinstance(n, ast.Attribute) and _self_attribute(n) in readers)
            for n in ast.walk(node)
        )

    def holds(value: ast.expr | None, names: set[str]) -> bool:  # the flag itself, not data computed with it
        match value:
            case ast.UnaryOp(op=ast.Not(), operand=inner) | ast.Call(func=ast.Name(id="bool"), args=[inner]):
                return holds(inner, names)
            case ast.Name(id=name):
                return name in names
        return isinstance(value, ast.Attribute) and _self_attribute(value) == attr

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
    return any(_self_attribute(n) == attr for n in ast.walk(function))


def _self_attribute(node: ast.AST) -> str | None:
    """NAME of ``self.NAME`` or of ``getattr(self, "NAME")`` (with a default or not); None for anything else."""
    match node:
        case ast.Attribute(value=ast.Name(id="self"), attr=name):
            return name
        case ast.Call(func=ast.Name(id="getattr"), args=[ast.Name(id="self"), ast.Constant(value=str(name)), *_]):
            return name
    return None


def head_signature(logits_processor_source: str, file: str, name: str = PROCESSOR_CLASS) -> HeadSignature | None:
    """The parameters of ``LogitsProcessor.get_top_tokens`` and of what its call runs (``__call__`` where
    the class defines one, else ``forward``), read off its source in ``file``; None where the class or its
    get_top_tokens is not found."""
    processor = _processor_class(logits_processor_source, name)
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


def outside_vocab_mask(logits_processor_source: str, name: str = PROCESSOR_CLASS) -> int | None:
    """The line where ``LogitsProcessor.get_top_tokens`` (or a method of the class it runs on
    ``self``) sets every column from ``self.org_vocab_size`` on to ``-inf`` (vLLM 0.34's
    ``_mask_outside_vocab``); None where it does not (0.33 masks only the shard padding): there a
    ``get_top_tokens`` can select ids a cut to ``org_vocab_size`` removes."""
    processor = _processor_class(logits_processor_source, name)
    methods = _methods(processor) if processor is not None else {}
    if "get_top_tokens" not in methods:
        return None
    reached = [methods[name] for name in _reached(methods, ("get_top_tokens",)) if name in methods]
    return next((line for method in reached if (line := _org_vocab_mask(method)) is not None), None)


def _processor_class(logits_processor_source: str, name: str = PROCESSOR_CLASS) -> ast.ClassDef | None:
    """The module-level class ``name`` of the source; None where it does not parse or lacks one.
    Its ``bases_here`` are the classes of the same module it derives from, which ``_methods`` reads too."""
    try:
        module = ast.parse(logits_processor_source)
    except SyntaxError:
        return None
    classes = {node.name: node for node in module.body if isinstance(node, ast.ClassDef)}
    processor = classes.get(name)
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
    return [name for node in ast.walk(function) if (name := _self_attribute(node)) is not None]


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
    """Whether the source defines the class ``name`` at module level (where vLLM's processor lives, as
    opposed to a module that imports it from where it is defined)."""
    return f"class {name}" in logits_processor_source and _processor_class(logits_processor_source, name) is not None


def has_local_argmax(logits_processor_source: str, name: str = PROCESSOR_CLASS) -> bool:
    """True when ``LogitsProcessor.get_top_tokens`` exists (vLLM 0.17 and later)."""
    if "def get_top_tokens" not in logits_processor_source:
        return False
    processor = _processor_class(logits_processor_source, name)
    return processor is not None and isinstance(_methods(processor).get("get_top_tokens"), ast.FunctionDef)


def _holds_python(root: Path) -> bool:
    """Whether any ``*.py`` file is under ``root`` (stopping at the first), a folder that cannot be listed on
    the way a usage error naming it."""
    for _, _, names in os.walk(root, onerror=_refuse_folder):
        if any(name.endswith(".py") for name in names):
            return True
    return False


def _refuse_folder(error: OSError) -> None:
    raise UsageError(f"{error.filename}: cannot be read ({error.strerror or error})")


# Folders of a plugin tree that hold no model code: never read.
SKIPPED_FOLDERS = frozenset({"__pycache__", "tests", "test"})


def tree_python_files(root: Path) -> list[Path]:
    """The ``*.py`` files of a plugin tree, sorted, as ``sorted(root.rglob("*.py"))`` finds them (symlinked folders
    not entered), hidden, ``__pycache__`` and test folders and hidden files left out. A folder that cannot be listed
    is a usage error naming it and why: its drafters would otherwise be missed unsaid."""
    found = []
    for folder, folders, names in os.walk(root, onerror=_refuse_folder):
        folders[:] = [f for f in folders if not f.startswith(".") and f not in SKIPPED_FOLDERS]
        found += [Path(folder, name) for name in names if name.endswith(".py") and not name.startswith(".")]
    return sorted(found)


def with_plugins(tree: SourceTree, plugin_paths: list[Path]) -> SourceTree:
    """``tree`` with the plugins installed beside it: in its own directory and, when that
    directory is on ``sys.path`` (the installed vLLM), in the rest of that environment; then in
    ``plugin_paths``. Their directories become extra roots for finding their modules."""
    import sys

    search = [tree.root]
    on_path = [Path(p or ".").resolve() for p in sys.path]
    if tree.root in on_path:
        search += on_path
    for path in plugin_paths:
        if not path.expanduser().is_dir():
            raise UsageError(f"--plugin-path {path}: no such directory")
    given = [p.expanduser().resolve() for p in plugin_paths]
    search += given
    plugins = tuple(discover(list(dict.fromkeys(search))))
    sites = list(dict.fromkeys(p.location for p in plugins))
    installed = [editable_installs(site) for site in sites]
    # sys.path's own order (the tree first only where it is not on it), then the given folders
    import_order = [*(on_path if tree.root in on_path else [tree.root]), *given]
    homes = plugin_homes(plugins, list(dict.fromkeys(import_order)))
    extra = [
        *(home for _, home in homes if home != tree.root),
        *(site for site in sites if site != tree.root),
        *(path for paths, _ in installed for path in paths),
    ]
    mapped = tuple(dict.fromkeys(pair for _, mapping in installed for pair in mapping))
    allowed = os.environ.get("VLLM_PLUGINS")  # vLLM's envs.VLLM_PLUGINS: only these entry points load
    return replace(
        tree,
        extra_roots=tuple(dict.fromkeys(extra)),
        plugins=plugins,
        mapped_packages=mapped,
        plugin_homes=homes,
        allowed_plugins=None if allowed is None else tuple(allowed.split(",")),
    )


def plugin_homes(plugins: tuple[PluginDist, ...], import_order: list[Path]) -> tuple[tuple[str, Path], ...]:
    """Each plugin top-level package (its ``top_level.txt`` names and its entry points' first parts) and
    the first folder in ``import_order`` holding it as ``P/__init__.py`` or ``P.py``, where Python's path
    finder takes it from (a folder without ``__init__.py`` is only a namespace portion: a later regular
    package wins); packages found nowhere so, and ``vllm`` (the tree's), are left to the usual search."""
    named = (value.partition(":")[0].strip().split(".")[0] for p in plugins for _, _, value in p.entry_points)
    packages = sorted({*(top for plugin in plugins for top in plugin.packages), *named})
    homes = []
    for package in packages:
        if not package.isidentifier() or package == "vllm":  # the audited vLLM is the tree's, wherever
            continue
        for folder in import_order:
            if (folder / package / "__init__.py").is_file() or (folder / f"{package}.py").is_file():
                homes.append((package, folder))
                break
    return tuple(homes)


EDITABLE_FINDER = re.compile(r"__editable___.*_finder\.py")


def editable_installs(site: Path) -> tuple[list[Path], list[tuple[str, Path]]]:
    """Where ``pip install -e`` put a site directory's packages, read as ``site`` and setuptools'
    editable finder use it, neither run: the folders the path lines of its ``.pth`` files add to
    ``sys.path`` (an ``import`` line is code, not read), and the ``MAPPING`` literal of each
    ``__editable___*_finder.py`` (top-level package -> its folder or file)."""
    try:
        names = sorted(os.listdir(site))  # site.addsitedir reads them in this order
    except OSError:
        return [], []
    paths: list[Path] = []
    mapping: list[tuple[str, Path]] = []
    for name in names:
        if name.endswith(".pth") and not name.startswith("."):
            paths += _pth_paths(site, site / name)
        elif EDITABLE_FINDER.fullmatch(name):
            mapping += _finder_mapping(site / name)
    return paths, mapping


def _pth_paths(site: Path, pth: Path) -> list[Path]:
    """The existing folders a ``.pth`` file's path lines name, relative to its site directory."""
    try:
        lines = pth.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError:
        return []
    named = (
        site / line.rstrip()
        for line in lines
        if line.strip() and not line.startswith("#") and not line.startswith(("import ", "import\t"))
    )
    return [path.resolve() for path in named if path.is_dir()]


def _finder_mapping(finder: Path) -> list[tuple[str, Path]]:
    """The ``MAPPING = {...}`` literal of setuptools' editable finder module, read with ast (the
    finder is never imported); none if it has no such literal of strings."""
    try:
        module = ast.parse(finder.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return []
    for statement in module.body:
        match statement:
            case (
                ast.Assign(targets=[ast.Name(id="MAPPING")], value=value)
                | ast.AnnAssign(target=ast.Name(id="MAPPING"), value=ast.expr() as value)
            ):
                try:
                    found = ast.literal_eval(value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # not a plain literal
                    return []
                if isinstance(found, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in found.items()):
                    return [(package, Path(folder)) for package, folder in found.items() if package.isidentifier()]
    return []


def runs_with(plugin_tree: SourceTree, vllm: str | None, release=None) -> SourceTree:
    """A plugin directory with the vLLM it runs with: ``vllm`` (a path, or a version number that
    ``release`` turns into a cached release tree), else the installed one, else none."""
    if vllm is None:
        try:
            base = _installed_vllm()
        except UsageError:
            return plugin_tree
    elif Path(vllm).expanduser().exists() or release is None:
        base = locate(Path(vllm))
        if not base.is_vllm:
            raise UsageError(f"--vllm {vllm}: not a vLLM tree (no vllm/{REGISTRY})")
    elif "/" in vllm or not re.match(r"\d", vllm):  # a path that is not there, not a release number
        raise UsageError(f"--vllm {vllm}: no such directory, and not a vLLM version number (e.g. 0.34.0)")
    else:
        base = locate(release(vllm))
    return replace(plugin_tree, vllm_version=base.vllm_version, extra_roots=(base.root,), runs_with=base)


def discover(search_paths: list[Path] | None = None) -> list[PluginDist]:
    """Distributions with vLLM plugin entry points, in ``search_paths`` (default: ``sys.path``), in
    the order ``importlib.metadata`` and so vLLM find them: by search path, then in the order a
    directory lists its entries (not sorted); their entry points in the order of ``entry_points.txt``.

    A name found twice is the first one, as ``importlib.metadata`` sees it (``entry_points`` keeps one
    distribution per name, the first found, whether or not it has entry points)."""
    if search_paths is not None and not any(map(_holds_metadata, search_paths)):
        return []  # a source tree on its own (most scans): no need to import importlib.metadata
    import importlib.metadata

    paths = None if search_paths is None else [str(p) for p in search_paths]
    found: dict[str, PluginDist] = {}
    seen: set[str] = set()
    for dist in importlib.metadata.distributions(**({} if paths is None else {"path": paths})):
        name = dist.metadata["Name"]
        if not name or _normal(name) in seen:
            continue
        seen.add(_normal(name))
        if _normal(name) == "vllm":  # vLLM's own entry points are in-tree
            continue
        points = tuple((ep.group, ep.name, ep.value) for ep in dist.entry_points if ep.group in GROUPS)
        if points:
            location = Path(str(dist.locate_file(""))).resolve()
            packages = tuple((dist.read_text("top_level.txt") or "").split())
            found[_normal(name)] = PluginDist(name, dist.version, location, points, packages)
    return list(found.values())


def _holds_metadata(folder: Path) -> bool:
    """Whether ``importlib.metadata`` may find a distribution in ``folder``: it has a ``.dist-info``,
    ``.egg-info`` or ``.egg`` entry, is an egg itself, or is not a directory it can list (a zip on ``sys.path``)."""
    if folder.name.lower().endswith(".egg"):  # an egg on the path: its EGG-INFO is the metadata
        return True
    try:
        with os.scandir(folder) as entries:
            return any(e.name.lower().endswith((".dist-info", ".egg-info", ".egg")) for e in entries)
    except FileNotFoundError:
        return False
    except OSError:
        return True


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
