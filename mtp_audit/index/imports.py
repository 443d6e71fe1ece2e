"""Does importing a module fail on a platform, through everything it imports at top level?

A drafter whose module imports, directly or through a chain of imports, a
package that raises on a platform (``raise NotImplementedError`` in a
per-platform ``__init__``) cannot be imported there: that platform has no
drafter, as when the drafter's own package raises.

Only top-level code runs at import, and an import chain reaches hundreds of
modules, so their import facts are read cheaply. Most modules import at
column 0 only (plus ``if TYPE_CHECKING:`` blocks) and raise
nothing at top level: a line scanner reads their imports. The others are
cut to their imports, raises and top-level blocks (line numbers kept),
parsed with CPython's ``ast`` and run per platform for imports and raises
alone, conditions evaluated as ``platforms.evaluate`` does; if the cut does
not parse (a column-0 line inside a multi-line string), the whole file is.

An import inside a ``try`` raises through it unless one of its handlers may
catch what the import's chain raises, by the built-in exception hierarchy
(``except ImportError`` lets ``NotImplementedError`` through; a handler that
surely re-raises stops nothing; one naming a class the tool cannot place may
stop anything). Conservative where Python's behaviour is not known
statically: an import or raise under a condition that cannot be evaluated, in
a loop, or inside a ``with`` whose manager may swallow anything (any but
``warnings.catch_warnings()``, ``torch.no_grad()`` and the like, and ``contextlib.suppress(E)``, which
runs as a ``try`` with ``except E: pass``) does not count;
nor does a dependency that does not parse (its own error is reported when it
is a drafter's module or package).

``from m import name``, where ``m`` has a module ``__getattr__`` and does not
bind ``name``, also imports the module that ``__getattr__`` imports to serve
it. Only for an ``m`` with a ``__getattr__`` are its full facts read (parsed):
they say whether it binds ``name``, and how its ``__getattr__`` serves it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ..model import PLATFORMS, ChainAnswers
from .ast_tools import absolute_module, assigned_name, dotted, match_as_if, walk, walk_statements
from .interpreter import (
    _raise_reason,
    catches,
    caught_names,
    failed_assert,
    raised_name,
    statement_names,
    suppressed,
    swallowing_try,
)
from .platforms import PLATFORM, evaluate, literal_string

if TYPE_CHECKING:
    from .fact_types import ModuleFacts
    from .modules import ModuleIndex

_STATEMENT = re.compile(r"\n[^ \t\r\n\f#)\]}]")  # a line that starts a top-level statement
# kept by the cut: a statement that imports or raises, and an assignment that may be a platform flag
_SIMPLE_KEPT = re.compile(r"(?:import|from|raise|assert)\b|\w+[ \t]*(?::[^=\n]*)?=(?!=)[^\n]*(?:platform|\.is_\w+\()")
# a call that imports a module named by a string: ``importlib.import_module("m")``, ``__import__("m")``
_DYNAMIC_IMPORT = re.compile(r"\b(?:import_module|__import__)[ \t]*\(")
_BLOCK = re.compile(r"(?:if|try|for|while|with|async|match)\b")
_CONTINUATION = re.compile(r"(?:elif|else|except|finally|case)\b")
_TOP_LEVEL = re.compile(  # a column-0 import with its names, or a column-0 block, raise or assert
    # The lookahead (the first letters of the keywords below) turns away most lines (indented ones)
    # at one character, instead of trying each keyword in turn: 40% of reading an import chain.
    r"\n(?=[fiewtamr])(?:(?:from(?:[ \t]|\\\r?\n)+(?P<origin>\.*[\w.]*)(?:[ \t]|\\\r?\n)+)?import\b[ \t]*"
    r"(?P<names>\((?:[^)#]|#[^\n]*)*\)|(?:[^\n\\]|\\[\s\S])*)"
    r"|(?P<block>(?:if|elif|else|try|except|finally|for|while|with|async|match|raise|assert)\b[^\n]*))"
)
_COMMENT = re.compile(r"#[^\n]*")
# a statement after a semicolon that the line scanners would not see at the start of a line
_AFTER_SEMICOLON = re.compile(r";[ \t]*(?:import|from|raise|assert)\b")
_GETATTR = re.compile(r"^(?:async[ \t]+)?def[ \t]+__getattr__\b", re.MULTILINE)  # a module-level one, at column 0
# a name a column-0 ``def`` or ``class`` binds, or one a column-0 assignment (``name =``, ``name: T``) binds
_BINDS_AT_COLUMN_0 = re.compile(r"^(?:(?:async[ \t]+)?def|class)[ \t]+(\w+)|^(\w+)[ \t]*(?::|=(?!=))", re.MULTILINE)
_DYNAMIC_BINDERS = ("globals()", "vars()", "setattr(", "sys.modules")  # may bind any name
_NOT_RUN = re.compile(r"if[ \t]+TYPE_CHECKING[ \t]*:[ \t]*(?:#.*)?$")  # a block whose imports never run


@dataclass(frozen=True)
class ImportStatement:
    """One top-level import as it runs: ``import a.b`` (``module`` empty, ``names`` the modules)
    imports ``a.b``; ``from m import x, y`` imports ``m`` and, where ``m`` is a package with
    such submodules, ``m.x`` and ``m.y``."""

    module: str
    names: tuple[str, ...]
    line: int
    text: str = ""  # the names as written, when the line scanner read the statement: parsed on demand
    # what the handlers of the ``try`` statements around it catch (each ``except``'s names; ``()`` for a
    # bare one), those that surely re-raise left out: what it raises through its chain may stop there
    caught: tuple[tuple[str, ...], ...] = ()
    # the lines of the imports that run before it in the body of a ``try`` around it (or, for an ``else``
    # block, in that ``try``'s body): where one of them raises, a handler takes over and it never runs
    after: tuple[int, ...] = ()
    # in an ``except`` handler: the lines of the ``try`` body's imports, of which the first that raises must
    # raise what this handler catches (``handlers``: what each handler up to this one catches, in order)
    when: tuple[int, ...] = ()
    handlers: tuple[tuple[str, ...], ...] = ()

    def imported(self) -> tuple[str, ...]:
        """The names after ``import`` (``as`` aliases dropped)."""
        return self.names or _names(self.text)


@dataclass
class ImportFacts:
    """What running a module's top level does, per platform: the imports it runs, in order, and
    why it raises (absent: it does not)."""

    imports: dict[str, list[ImportStatement]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    lazy: bool = False  # a module ``__getattr__`` (PEP 562) may serve what ``from module import name`` asks for
    # other imports or raises on some platforms than on others, and no name bound by ``globals()``, ``vars()``,
    # ``setattr`` or ``sys.modules``: the module may bind names per platform, as its facts tell. Otherwise it is
    # taken to bind the same names on each (``from module import name`` never fails on one platform alone for it;
    # a module whose ``if`` decides by the platform only what it assigns, not what it imports, is missed so)
    platform_names: bool = False
    # where ``platform_names``, the names bound at column 0 (a ``def``, ``class``, assignment or import there):
    # bound on every platform, so ``from module import name`` needs no parse of the module to know it succeeds
    top_names: frozenset[str] = frozenset()


def _statement_starts(source: str) -> list[int]:
    """Offsets of the lines that start top-level statements (by indentation, as a line scanner can)."""
    starts = [m.start() + 1 for m in _STATEMENT.finditer(source)]
    if source[:1] and source[0] not in " \t\r\n\f#)]}":
        starts.insert(0, 0)
    return starts


def top_level_code(source: str) -> str:
    """``source`` with only what can import or raise at top level: imports, ``raise``, ``assert`` and the blocks
    (``if``/``elif``/``else``, ``try``, ...) that contain one; the rest is blanked, line numbers kept."""
    starts = _statement_starts(source)
    if not starts:
        return source
    segments = [source[b:e] for b, e in zip(starts, [*starts[1:], len(source)])]
    dynamic = "import_module" in source or "__import__" in source  # else no segment need be searched for it
    out = [source[: starts[0]]]
    group: list[str] = []  # a block and its continuations

    def flush() -> None:
        keep = any("import" in g or "raise" in g or "assert" in g for g in group)
        out.extend(g if keep else "\n" * g.count("\n") for g in group)
        group.clear()

    for segment in segments:
        if group and _CONTINUATION.match(segment):
            group.append(segment)
            continue
        flush()
        if _BLOCK.match(segment):
            group.append(segment)
        else:
            kept = (
                _SIMPLE_KEPT.match(segment)
                or dynamic
                and _DYNAMIC_IMPORT.search(segment)
                or ";" in segment
                and _AFTER_SEMICOLON.search(segment)
            )
            out.append(segment if kept else "\n" * segment.count("\n"))
    flush()
    return "".join(out)


def extract_imports(source: str, module: str, is_package: bool, top: bool = True) -> ImportFacts | None:
    """The import facts of one module; None when it does not parse. ``top``: the module's first name is a
    top-level package (its root is on ``sys.path``), so a relative import that climbs above it raises."""
    if _column_0_text_in_strings(source):  # the line scanner would read that text as statements
        plain, facts = None, _interpreted_imports(source, module, is_package, top, cut=False)
    else:
        plain = _plain_imports(source, module, is_package)
        facts = (
            ImportFacts({platform: plain for platform in PLATFORMS}, {})
            if plain is not None
            else _interpreted_imports(source, module, is_package, top)
        )
    if facts is not None:
        facts.lazy = "__getattr__" in source and _GETATTR.search(source) is not None  # the literal first: fast
        if facts.platform_names:
            facts.top_names = _top_level_names(source)
    return facts


_QUOTES = ('"' * 3, "'" * 3)  # the delimiters of a string that may span lines
_KEPT_WORD = re.compile(r"\b(?:import|raise|assert)\b")  # what the line scanners read


def _column_0_text_in_strings(source: str) -> bool:
    """Does a triple-quoted string hold a line that reads as a top-level import or block, with an import,
    raise or assert from there on (a docstring's example ``from x import y`` at column 0)? Strings are
    found by their quotes alone (three quotes in a comment or in a one-line string may mislead it, as
    the line scanner is misled without it)."""
    upcoming = {quote: source.find(quote) for quote in _QUOTES}  # each quote's next place, found once
    while True:
        found = [(at, quote) for quote, at in upcoming.items() if at >= 0]
        if not found:
            return False
        start, quote = min(found)
        end = source.find(quote, start + 3)
        if end < 0:
            end = len(source)
        found = _TOP_LEVEL.search(source, start, end)
        if found and _KEPT_WORD.search(source, found.start(), end):  # else the cut blanks it, as Python skips it
            return True
        for other, at in upcoming.items():
            if 0 <= at < end + 3:
                upcoming[other] = source.find(other, end + 3)


def _top_level_names(source: str) -> frozenset[str]:
    """The names statements at column 0 bind (by indentation, as the line scanner reads): ``def``, ``class``,
    ``name =`` / ``name:``, and imports (``as`` aliases, the first part of ``import a.b``)."""
    names = {first or second for first, second in _BINDS_AT_COLUMN_0.findall(source)}
    for match in _TOP_LEVEL.finditer("\n" + source):
        text = match.group("names")
        if text is not None:
            names.update(_bound_names(text))
    return frozenset(names)


def _bound_names(text: str) -> list[str]:
    """The names an import's list binds (``a as b``: ``b``; ``a.b``: ``a``)."""
    return [w[-1] if len(w) == 3 and w[1] == "as" else w[0].split(".")[0] for w in _import_parts(text) if w]


def _import_parts(text: str) -> list[list[str]]:
    """The words of each comma-separated part of an import's list as written (comments, brackets and
    line continuations dropped): what ``_names`` and ``_bound_names`` read."""
    if "#" in text:
        text = _COMMENT.sub("", text)
    return [part.split() for part in text.strip(" \t()").replace("\\", " ").split(",")]


def beyond_top(module: str, is_package: bool, level: int) -> bool:
    """Does ``from {level dots} import ...`` in ``module`` climb above its top-level package (an ImportError)?"""
    return level > module.count(".") + is_package


def _plain_imports(source: str, module: str, is_package: bool) -> list[ImportStatement] | None:
    """The top-level imports, when every one runs on every platform and nothing at top level
    raises; None when a condition, a loop, a ``with`` or a top-level ``raise`` needs the interpreter.

    By indentation: a statement at column 0 is top-level; an indented one belongs to the column-0
    statement above it. So if no column-0 statement is a block other than a definition or ``if
    TYPE_CHECKING:`` (never run), every import that runs is at column 0 and nothing raises (a ``try``
    needs the interpreter: which of its handlers stops what its imports raise).
    """
    if ("import_module" in source or "__import__" in source) and _dynamic_at_top(source):
        return None  # the interpreter reads which module the call imports
    if ";" in source and _AFTER_SEMICOLON.search(source):
        return None  # ``import os; from m import x``: the interpreter reads both
    statements = []
    shift = source[:1] != "\n"  # the scan starts at a newline
    line_number, counted = 1, 0
    for match in _TOP_LEVEL.finditer("\n" + source if shift else source):
        origin, text, block = match.group("origin", "names", "block")
        if block is not None:
            if not _NOT_RUN.match(block):
                return None
            continue
        offset = match.start() + 1 - shift  # the statement's line, in ``source``
        line_number += source.count("\n", counted, offset)
        counted = offset
        if origin is None:
            names = _names(text)
            if names:  # none: prose at column 0 in a docstring
                statements.append(ImportStatement("", names, line_number))
            continue
        dots = len(origin) - len(origin.lstrip("."))
        if beyond_top(module, is_package, dots):
            return None  # it raises: the interpreter's turn
        target = absolute_module(module, is_package, dots, origin[dots:] or None)
        statements.append(ImportStatement(target, (), line_number, text))
    return statements


def _dynamic_at_top(source: str) -> bool:
    """Does a top-level statement (one starting at column 0) call ``import_module`` or ``__import__``?"""
    starts = _statement_starts(source)
    return any(_DYNAMIC_IMPORT.search(source, b, e) for b, e in zip(starts, [*starts[1:], len(source)]))


def _names(text: str) -> tuple[str, ...]:
    """The names of ``import`` as written (a parenthesised list, or a line that may be continued):
    ``as`` aliases, comments and ``*`` dropped; dotted for ``import a.b``."""
    return tuple(
        words[0] for words in _import_parts(text) if words and all(p.isidentifier() for p in words[0].split("."))
    )


def _interpreted_imports(
    source: str, module: str, is_package: bool, top: bool = True, cut: bool = True
) -> ImportFacts | None:
    """The import facts read by running the top level per platform: of ``top_level_code(source)`` when it
    parses (``cut``), else of the whole file."""
    tree = None
    if cut:
        try:
            tree = ast.parse(top_level_code(source))
        except (SyntaxError, ValueError):
            pass
    if tree is None:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            return None
    result = ImportFacts()
    per_platform = any(isinstance(s, (ast.If, ast.Match, ast.Assert)) for s in walk_statements(tree.body))
    flags = _flag_statements(tree.body)
    for platform in PLATFORMS if per_platform else PLATFORMS[:1]:
        imports, error = _TopLevel(module, is_package, platform, top, flags).run(tree.body, guarded=False)
        result.imports[platform] = next((i for i in result.imports.values() if i == imports), imports)
        if error:
            result.errors[platform] = error
    for platform in PLATFORMS[1:] if not per_platform else ():
        result.imports[platform] = result.imports[PLATFORMS[0]]
        if PLATFORMS[0] in result.errors:
            result.errors[platform] = result.errors[PLATFORMS[0]]
    result.platform_names = (
        len({id(i) for i in result.imports.values()}) > 1 or len({result.errors.get(p) for p in PLATFORMS}) > 1
    ) and not any(binder in source for binder in _DYNAMIC_BINDERS)
    return result


class _Lines:
    """Real line numbers for ``facts._raise_reason``: the cut keeps them."""

    @staticmethod
    def line(node: ast.stmt) -> int:
        return node.lineno


def _flag_statements(body: list[ast.stmt]) -> frozenset[int]:
    """The ids of the top-level ``NAME = VALUE`` (or ``NAME: T = VALUE``) statements whose name no other statement
    of the module binds: where VALUE is decided per platform (``_IS_CUDA = current_platform.is_cuda()``), NAME is
    that flag."""
    candidates = [
        statement
        for statement in body
        if assigned_name(statement) and (_asks_the_platform(statement.value) or _names_the_platform(statement.value))  # type: ignore[attr-defined,arg-type]
    ]
    if not candidates:
        return frozenset()
    once = Counter(name for statement in walk_statements(body) for name in statement_names(statement))
    return frozenset(id(s) for s in candidates if once[assigned_name(s)] == 1)


def _names_the_platform(value: ast.expr) -> bool:
    """``cp = current_platform``: an alias of it."""
    return isinstance(value, ast.Name) and value.id == PLATFORM


def _asks_the_platform(value: ast.expr) -> bool:
    """Does the expression read a platform predicate or ``device_type`` (``cp.is_cuda()``)?"""
    return any(
        isinstance(node, ast.Attribute) and (node.attr.startswith("is_") or node.attr == "device_type")
        for node in walk(value)
    )


class _TopLevel:
    """Runs top-level statements on one platform for their imports and raises only."""

    def __init__(
        self, module: str, is_package: bool, platform: str, top: bool = True, flags: frozenset[int] = frozenset()
    ):
        self.module, self.is_package, self.platform, self.top = module, is_package, platform, top
        self.aliases: set[str] = set()  # ``from vllm.platforms import current_platform as cp``
        # the names that call ``importlib.import_module`` or ``__import__`` here
        self.importers: set[str] = {"importlib.import_module", "__import__"}
        self.flag_statements = flags  # see _flag_statements
        self.flags: dict[str, bool] = {}  # ``_IS_CUDA = current_platform.is_cuda()``: its value here

    def lookup(self, name: str) -> bool | str | None:
        """For ``platforms.evaluate``: aliases of current_platform and flags decided per platform (the cut
        keeps no other binding)."""
        return PLATFORM if name in self.aliases else self.flags.get(name)

    def run(
        self, statements: list[ast.stmt], guarded: bool, caught: tuple[tuple[str, ...], ...] = ()
    ) -> tuple[list[ImportStatement], str | None]:
        """The imports that surely run, in order, and why the block raises (None: it does not).
        ``caught``: what the handlers of the ``try`` statements around the block catch."""
        imports: list[ImportStatement] = []
        for node in statements:
            error = None
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.ImportFrom) and node.module == "vllm.platforms":
                    self.aliases.update(a.asname for a in node.names if a.name == PLATFORM and a.asname)
                self.note_importers(node)
                error = None if guarded else self.beyond(node)
                if not guarded and not error:
                    imports.append(self.statement(node, caught))
            elif isinstance(node, ast.If):
                sub, error = self.branch(node, guarded, caught)
                imports.extend(sub)
            elif isinstance(node, ast.Try):
                handlers = tuple(caught_names(h.type) for h in node.handlers if not _reraises(h))
                sub, error = self.run(node.body, guarded, (*caught, *handlers))
                # the body's own imports, which run unless one before them raises (not those of a ``try``
                # nested in it, nor its ``else`` or handlers', which run only as it goes)
                body = tuple(i.line for i in sub if i.caught == (*caught, *handlers) and not (i.after or i.when))
                sub = _in_sequence(sub, body)
                imports.extend(sub)
                if error and any(catches(names, raised_name(error)) is not False for names in handlers):
                    imports.extend(self.handled(node, guarded, caught, (), raised_name(error)))
                    error = None  # a handler may catch it
                elif not error:
                    imports.extend(self.handled(node, guarded, caught, body))
                    for block, skipped_by in ((node.orelse, body), (node.finalbody, ())):
                        sub, error = self.run(block, guarded, caught)
                        imports.extend(replace(i, after=(*i.after, *skipped_by)) for i in sub)
                        if error:
                            break
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                swallowed = suppressed(node.items, {})
                if swallowed:  # ``contextlib.suppress(E)``: a ``try`` with ``except E: pass``
                    sub, error = self.run([swallowing_try(node, swallowed)], guarded, caught)
                else:  # a manager the tool knows lets what it raises by (None), or one that may swallow anything
                    quiet = swallowed is None
                    sub, error = self.run(node.body, guarded or not quiet, caught)
                    error = error if quiet else None
                imports.extend(sub)
            elif isinstance(node, ast.Match):
                sub, error = self.run(match_as_if(node), guarded, caught)
                imports.extend(sub)
            elif isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) and not guarded:
                named = self.dynamic(node.value)
                if named:
                    imports.append(ImportStatement("", (named,), node.lineno, caught=caught))
                elif id(node) in self.flag_statements and _names_the_platform(node.value):  # type: ignore[arg-type]
                    self.aliases.add(assigned_name(node))  # type: ignore[arg-type]
                elif id(node) in self.flag_statements:
                    value = evaluate(node.value, self.platform, lookup=self.lookup)  # type: ignore[arg-type]
                    if value is not None:
                        self.flags[assigned_name(node)] = value  # type: ignore[index]
            elif isinstance(node, ast.Raise) and not guarded:
                error = _raise_reason(node, _Lines())  # type: ignore[arg-type]
            elif (
                isinstance(node, ast.Assert)
                and not guarded
                and evaluate(node.test, self.platform, lookup=self.lookup) is False
            ):
                error = _raise_reason(failed_assert(node), _Lines())  # type: ignore[arg-type]
            if error:
                return imports, error
        return imports, None

    def handled(
        self,
        node: ast.Try,
        guarded: bool,
        caught: tuple[tuple[str, ...], ...],
        body: tuple[int, ...],
        raised: str | None = None,
    ) -> list[ImportStatement]:
        """The imports of the ``try``'s handlers (those that do not surely re-raise). Where the body raises
        ``raised`` itself, those of the first handler that may catch it, which runs; else each handler's, run
        when the first of the body's imports (``body``, lines) that raises raises what it catches and no
        handler before it surely does (``ImportStatement.when``). What a handler itself raises is not followed."""
        kept = [h for h in node.handlers if not _reraises(h)]
        names = tuple(caught_names(h.type) for h in kept)
        found = []
        for position, handler in enumerate(kept):
            if raised is not None and catches(names[position], raised) is False:
                continue
            sub, _ = self.run(handler.body, guarded, caught)
            if raised is not None:
                return sub
            # an import under a condition of its own in the handler (a ``try`` nested there) is not followed
            found += [replace(i, when=body, handlers=names[: position + 1]) for i in sub if body and not i.when]
        return found

    def note_importers(self, node: ast.Import | ast.ImportFrom) -> None:
        """``from importlib import import_module``: then ``import_module(...)`` calls it (an alias is not followed)."""
        if isinstance(node, ast.ImportFrom) and node.module == "importlib" and not node.level:
            self.importers.update(a.name for a in node.names if a.name == "import_module" and not a.asname)

    def dynamic(self, value: ast.expr | None) -> str | None:
        """The module a top-level ``importlib.import_module("a.b")`` or ``__import__("a.b")`` imports, as ``import
        a.b`` does: a literal name, relative ones (``import_module(".x", __package__)``) against this module."""
        if not (isinstance(value, ast.Call) and value.args and dotted(value.func) in self.importers):
            return None
        name = literal_string(value.args[0])
        if name is None or dotted(value.func) == "__import__" and (len(value.args) > 4 or value.keywords):
            return None  # not a literal, or ``__import__`` given a level
        level = len(name) - len(name.lstrip("."))
        if not level:
            return name
        anchor = [*value.args[1:2], *(k.value for k in value.keywords if k.arg == "package")]
        package = literal_string(anchor[0]) if anchor else None
        if package is None:
            package = {
                "__name__": self.module,
                "__package__": self.module if self.is_package else self.module.rpartition(".")[0],
            }.get(dotted(anchor[0]) if anchor else "")
        if package is None or package.count(".") < level - 1:
            return None
        return f"{package.rsplit('.', level - 1)[0]}.{name[level:]}".rstrip(".")

    def beyond(self, node: ast.Import | ast.ImportFrom) -> str | None:
        """Why a relative import above the top-level package raises, as ``_raise_reason`` words a raise."""
        if not (self.top and isinstance(node, ast.ImportFrom) and beyond_top(self.module, self.is_package, node.level)):
            return None
        return f"import raises ImportError (line {node.lineno}): attempted relative import beyond top-level package"

    def branch(
        self, node: ast.If, guarded: bool, caught: tuple[tuple[str, ...], ...]
    ) -> tuple[list[ImportStatement], str | None]:
        truth = evaluate(node.test, self.platform, lookup=self.lookup)
        if truth is not None:
            return self.run(node.body if truth else node.orelse, guarded, caught)
        taken, taken_error = self.run(node.body, guarded, caught)
        skipped, skipped_error = self.run(node.orelse, guarded, caught)
        if taken_error and skipped_error:
            return [], taken_error
        if taken_error or skipped_error:  # undecidable: assume Python takes the branch that does not raise
            return (skipped if taken_error else taken), None
        return [i for i in taken if i in skipped], None  # only what runs either way

    def statement(self, node: ast.Import | ast.ImportFrom, caught: tuple[tuple[str, ...], ...]) -> ImportStatement:
        if isinstance(node, ast.Import):
            return ImportStatement("", tuple(alias.name for alias in node.names), node.lineno, caught=caught)
        origin = absolute_module(self.module, self.is_package, node.level, node.module)
        names = tuple(a.name for a in node.names if a.name != "*")
        return ImportStatement(origin, names, node.lineno, caught=caught)


def _surely_unbound(facts: ModuleFacts, name: str, platform: str) -> bool:
    """Does the module surely not bind ``name`` on ``platform``? A name it may get some other way (a ``def``,
    a star import, ``__getattr__``, a statement the tool does not follow) counts as bound."""
    if facts.parse_error or facts.getattr_line is not None or name in facts.bound_otherwise.get(platform, ()):
        return False
    if platform in facts.import_errors or platform in facts.unlisted:
        return False
    bindings = facts.bindings.get(platform, {})
    return name not in bindings and not any(key.startswith("*") for key in bindings)


def _reraises(handler: ast.ExceptHandler) -> bool:
    """Does the handler surely raise (a ``raise`` among its top-level statements: at module level
    nothing before it can leave the handler but by raising)? Then it stops nothing. What it raises
    instead is not followed: an outer handler is matched against the first exception, not the new one."""
    return any(isinstance(statement, ast.Raise) for statement in handler.body)


def _imported_by(lines: tuple[int, ...], imported_at: dict[int, list[str]]) -> tuple[str, ...]:
    """The modules the imports at ``lines`` import, in order, once each (most statements name no line)."""
    if not lines:
        return ()
    return tuple(dict.fromkeys(module for line in lines for module in imported_at.get(line, ())))


def _in_sequence(body: list[ImportStatement], own: tuple[int, ...]) -> list[ImportStatement]:
    """The imports of a ``try`` body, each told which of the body's own imports (``own``, lines: those that
    surely run) come before it: one of those that raises goes to a handler, and the rest of the body does
    not run."""
    earlier: list[int] = []
    ordered = []
    for statement in body:
        ordered.append(replace(statement, after=(*statement.after, *earlier)) if earlier else statement)
        if statement.line in own and not (statement.after or statement.when):
            earlier.append(statement.line)
    return ordered


@dataclass(frozen=True)
class Step:
    """One edge of an import chain: ``module`` imports ``target`` at ``line`` (None: ``target`` is
    the package that holds ``module``, imported first)."""

    module: str
    target: str
    line: int | None
    # how ``module`` comes to import ``target``, when not by naming it (``X from m, whose __getattr__
    # imports t``); a step whose ``lazy`` is set stands for ``from m import X`` asking ``m.__getattr__``
    via: str = ""
    lazy: bool = False
    caught: tuple[tuple[str, ...], ...] = ()  # the handlers around the import (``ImportStatement.caught``)
    # the modules imported before it in a ``try`` body (``ImportStatement.after``): if one raises, it never runs
    unless: tuple[str, ...] = ()
    # in a handler: the ``try`` body's modules and the handlers up to this one (``ImportStatement.when``)
    when: tuple[str, ...] = ()
    handlers: tuple[tuple[str, ...], ...] = ()


class ImportChains:
    """Per platform, the first raising module each module's import reaches, memoised.

    A depth-first walk in import order (parent packages first, then the
    top-level imports as they run). Every module a walk visits without finding
    a raise is importable, whatever the walk started from; a raise found is
    remembered, with the chain to it, for each module on that chain.
    """

    def __init__(self, index: ModuleIndex):
        self.index = index
        self.importable: dict[str, set[str]] = {p: set() for p in PLATFORMS}
        self.failing: dict[str, dict[str, tuple[Step, ...]]] = {p: {} for p in PLATFORMS}
        self.described: ChainAnswers = {}
        self._edges_of: dict[tuple[str, int], tuple[list[ImportStatement], list[Step]]] = {}
        self._first_raise: dict[tuple[str, str], str | None] = {}
        self._missing_names: dict[tuple[str, str], str | None] = {}  # see _missing_name
        self._per_platform_names: dict[int, tuple[list[ImportStatement], list[tuple[ImportStatement, str]]]] = {}
        self._walking: set[tuple[str, str]] = set()  # (module, platform) walks under way
        self._tree_names: dict[str, bool] = {}  # see _in_tree
        self._cuts = 0  # handled imports of a module whose walk was under way, taken not to raise (see _escaping)

    def error(self, module: str, platform: str) -> str | None:
        """Why importing ``module`` on ``platform`` raises, itself or through what it imports; None
        when it does not."""
        key = (module, platform)
        if key not in self.described:
            chain = self._walk(module, platform)
            self.described[key] = None if chain is None else self._describe(module, chain, platform)
        return self.described[key]

    def first_raise(self, module: str, platform: str) -> str | None:
        """Why importing ``module`` on ``platform`` raises (the raising module and its reason), walked
        afresh: which exception a ``try`` meets must not depend on what earlier walks memoised, and
        this walk records nothing here, so the chains' descriptions stay what they would be without it."""
        key = (module, platform)
        if key not in self._first_raise:
            walker = ImportChains(self.index)
            walker._edges_of = self._edges_of  # the edges are the same whoever walks them
            walker._missing_names = self._missing_names  # and so are the names modules lack
            walker._per_platform_names = self._per_platform_names
            walker._tree_names = self._tree_names
            chain = walker._walk(module, platform) if walker._in_tree(module) else None
            if chain is None:
                self._first_raise[key] = None
            else:
                raiser = chain[-1].target if chain else module
                self._first_raise[key] = f"{self._path(raiser)}: {self._own_error(raiser, platform)}"
        return self._first_raise[key]

    def path_to(self, start: str, target: str, platform: str) -> tuple[Step, ...] | None:
        """The first chain of top-level imports, in the order they run, by which importing ``start`` imports
        ``target`` (empty: ``start`` is ``target``); None when it does not. Walked afresh, recording nothing."""
        if start == target:
            return ()
        for path, step in self._depth_first(start, platform, set(), frozenset()):
            if step.target == target:
                return (*path, step)
        return None

    def describe_chain(self, start: str, chain: tuple[Step, ...], own: str) -> str:
        """``own`` (why the chain's last module fails), after the chain from ``start`` to it."""
        return self._describe(start, chain, "", own)

    def answers(self) -> ChainAnswers:
        """Every answer given so far, by (module, platform)."""
        return dict(self.described)

    def seed(self, answers: ChainAnswers) -> None:
        """Take the answers a scan of the same files gave (``ResultCache.answers``): asked
        again, they are not walked again."""
        self.described.update(answers)

    def absorb(self, other: ImportChains) -> None:
        """Take in what another process's walks found, from the same files."""
        for platform in PLATFORMS:
            self.importable[platform] |= other.importable[platform]
            for module, chain in other.failing[platform].items():
                self.failing[platform].setdefault(module, chain)
        for key, reason in other.described.items():
            self.described.setdefault(key, reason)

    def __getstate__(self) -> dict:
        local = (
            "index",
            "_edges_of",
            "_first_raise",
            "_missing_names",
            "_per_platform_names",
            "_walking",
            "_cuts",
            "_tree_names",
        )
        return {k: v for k, v in self.__dict__.items() if k not in local}  # handed between processes

    def _edges(self, module: str, platform: str) -> list[Step]:
        facts = self.index.import_facts(module)
        statements = facts.imports.get(platform, []) if facts else []
        key = (module, id(statements))  # platforms that run the same imports share one list
        if key not in self._edges_of:
            self._edges_of[key] = (statements, self._steps(module, statements))
        steps = self._edges_of[key][1]
        if not any(step.lazy for step in steps):
            return steps
        return [served for step in steps for served in self._served(step, platform)]

    def _served(self, step: Step, platform: str) -> list[Step]:
        """``step``, or for ``from m import name`` where ``m`` does not bind ``name`` and its ``__getattr__``
        serves it from a module it imports (read from ``m``'s facts, parsed only here), the import of that
        module, which runs then too (a name of it, or the module itself: ``importlib.import_module``). A
        ``__getattr__`` the tool cannot run for that name adds nothing."""
        if not step.lazy:
            return [step]
        origin, name = step.target.rsplit(".", 1)
        facts = self.index.facts(origin)
        if facts is None or name not in facts.served.get(platform, ()):
            return []
        where = f"{self._path(origin)}:{facts.getattr_line}"
        return [
            Step(
                step.module,
                target.a,
                step.line,
                f"{name} from {origin}, whose __getattr__ ({where}) imports {target.a}",
                caught=step.caught,
                unless=step.unless,
                when=step.when,
                handlers=step.handlers,
            )
            for target in facts.bindings.get(platform, {}).get(name, [])
            if target.kind in ("import", "module") and not target.when and self._in_tree(target.a)
        ]

    def _steps(self, module: str, statements: list[ImportStatement]) -> list[Step]:
        steps = []
        if "." in module:
            steps.append(Step(module, module.rsplit(".", 1)[0], None))
        imported_at: dict[int, list[str]] = {}  # line -> the modules its imports import (see ``Step.unless``)
        for statement in statements:
            line, caught = statement.line, statement.caught
            unless, when = (_imported_by(lines, imported_at) for lines in (statement.after, statement.when))
            known = {"caught": caught, "unless": unless, "when": when, "handlers": statement.handlers}
            first = len(steps)
            if not statement.module:  # import a, b.c
                steps.extend(Step(module, name, line, **known) for name in statement.names)
            else:
                steps.append(Step(module, statement.module, line, **known))
                found = self.index.locate(statement.module)
                lazy = found is not None and self._has_getattr(statement.module)
                if found is not None and (found[1] or lazy):  # ``from pkg import sub`` imports pkg.sub
                    for name in statement.imported():
                        target = f"{statement.module}.{name}"
                        if self.index.is_module(target):
                            steps.append(Step(module, target, line, **known))
                        elif lazy:  # which module ``__getattr__`` imports for it may differ by platform
                            steps.append(Step(module, target, line, lazy=True, **known))
            imported_at.setdefault(line, []).extend(step.target for step in steps[first:])
        return steps

    def _skipped(self, step: Step, platform: str) -> bool:
        """Does ``step`` not run on ``platform``: an import before it in its ``try`` body raises (through its
        chain), so that a handler takes over; or, in a handler, the first of the body's imports that raises
        does not raise what it catches, or an earlier handler surely catches that, or none raises. A module
        whose import is under way raises nothing yet."""
        if any(self._raised(module, platform) for module in step.unless):
            return True
        if not step.when:
            return False
        first = next((r for r in (self._raised(m, platform) for m in step.when) if r), None)
        if first is None:
            return True
        raised = first[0]
        *earlier, own = step.handlers
        return any(catches(names, raised) is True for names in earlier) or catches(own, raised) is False

    def _raised(self, module: str, platform: str) -> tuple[str | None] | None:
        """What importing ``module`` on ``platform`` raises, by name (``raised_name``: None where it cannot
        tell), in a tuple; None when it does not raise."""
        if not self._in_tree(module):
            return None
        if (module, platform) in self._walking:  # found partly run, as by ``_escaping``: a walk cut short
            self._cuts += 1
            return None
        chain = self._walk(module, platform)
        if chain is None:
            return None
        return (raised_name(self._own_error(chain[-1].target if chain else module, platform) or ""),)

    def _has_getattr(self, module: str) -> bool:
        facts = self.index.import_facts(module)
        return facts is not None and facts.lazy

    def _in_tree(self, module: str) -> bool:
        """Is ``module`` in the scanned tree? (``torch.nn`` is not: ``torch`` is not, and is not probed
        further.) Asked some 35,000 times in a scan of vLLM 0.34.0, for 2,000 names: remembered."""
        known = self._tree_names.get(module)
        if known is None:
            head = module.split(".", 1)[0]
            known = self._tree_names[module] = self.index.is_module(head) and (
                head == module or self.index.is_module(module)
            )
        return known

    def _raises(self, module: str, platform: str) -> bool:
        return self._own_error(module, platform) is not None

    def _own_error(self, module: str, platform: str) -> str | None:
        """Why running ``module``'s own top level raises on ``platform`` (its ``raise``, or a ``from m import
        name`` that ``m`` does not bind there); None when it does not."""
        facts = self.index.import_facts(module)
        if facts is None:
            return None
        if platform in facts.errors:
            return facts.errors[platform]
        key = (module, platform)
        if key not in self._missing_names:
            self._missing_names[key] = self._missing_name(facts.imports.get(platform, []), platform)
        return self._missing_names[key]

    def _missing_name(self, statements: list[ImportStatement], platform: str) -> str | None:
        """Why the first ``from m import name`` of ``statements`` that raises ImportError on ``platform`` does:
        ``m`` binds ``name`` on other platforms, not this one (a per-platform ``if`` with no branch for it);
        None when none does."""
        key = id(statements)  # platforms that run the same imports share one list
        if key not in self._per_platform_names:
            self._per_platform_names[key] = (statements, self._names_per_platform(statements))
        for statement, name in self._per_platform_names[key][1]:
            origin = self.index.import_facts(statement.module)
            if origin is None or platform in origin.errors:
                continue
            facts = self.index.facts(statement.module)
            if facts is None or not _surely_unbound(facts, name, platform):
                continue
            others = [
                p for p in PLATFORMS if name in facts.bindings.get(p, {}) or name in facts.bound_otherwise.get(p, ())
            ]
            if others:
                where = facts.unbound.get(platform, {}).get(name)
                return (
                    f"import raises ImportError (line {statement.line}): cannot import name {name} from "
                    f"{statement.module}, which binds it only on {', '.join(others)}"
                    + (f" ({facts.path}:{where})" if where else "")
                )
        return None

    def _names_per_platform(self, statements: list[ImportStatement]) -> list[tuple[ImportStatement, str]]:
        """The ``from m import name`` of ``statements`` whose ``m`` may bind ``name`` on some platforms only:
        ``m`` may bind names per platform (``ImportFacts.platform_names``), has no ``__getattr__``, and binds
        ``name`` at no column-0 statement (one Python runs everywhere); not caught by a handler that may catch
        ImportError, nor in a handler (which runs only where the ``try`` body raises: the walk decides that).
        Only for these are ``m``'s facts (a parse) read."""
        found = []
        for statement in statements:
            if statement.when or not statement.module:
                continue
            if any(catches(names, "ImportError") is not False for names in statement.caught):
                continue
            origin = self.index.import_facts(statement.module) if self._in_tree(statement.module) else None
            if origin is None or not origin.platform_names or origin.lazy:
                continue
            found.extend(
                (statement, name)
                for name in statement.imported()
                if name not in origin.top_names and not self.index.is_module(f"{statement.module}.{name}")
            )
        return found

    def _depth_first(
        self, start: str, platform: str, visited: set[str], skipped: set[str] | frozenset[str]
    ) -> Iterator[tuple[tuple[Step, ...], Step]]:
        """Each top-level import step from ``start`` on, depth first in the order the imports run, with the
        steps before it: once per module of the tree (``visited`` fills with them, ``start`` first), none
        into ``skipped``. The caller stops where it finds what it looks for; a step is entered after it,
        unless a ``try`` handles what it raises (``caught``): ``_walk`` walks those itself, ``path_to``
        does not enter them (a chain it names runs through imports no handler stands around)."""
        visited.add(start)
        path: list[Step] = []  # the steps to the module whose edges are on top of ``stack``
        stack = [iter(self._edges(start, platform))]
        while stack:
            step = next(stack[-1], None)
            if step is None:
                stack.pop()
                if path:
                    path.pop()
                continue
            target = step.target
            if target in visited or target in skipped or not self._in_tree(target):
                continue
            if (step.unless or step.when) and self._skipped(step, platform):
                continue
            if step.caught:
                yield tuple(path), step
                continue
            visited.add(target)
            yield tuple(path), step
            path.append(step)
            stack.append(iter(self._edges(target, platform)))

    def _walk(self, start: str, platform: str) -> tuple[Step, ...] | None:
        """The chain from ``start`` to the first module that raises (empty: ``start`` raises)."""
        importable, failing = self.importable[platform], self.failing[platform]
        if start in importable:
            return None
        if start in failing:
            return failing[start]
        if self._raises(start, platform):
            return ()
        visited: set[str] = set()
        chain: tuple[Step, ...] | None = None
        cuts = self._cuts
        self._walking.add((start, platform))
        try:
            for path, step in self._depth_first(start, platform, visited, importable):
                if step.caught:
                    escaping = self._escaping(step, platform)
                    if escaping is not None:
                        chain = (*path, step, *escaping)
                        break
                    continue
                if step.target in failing:
                    chain = (*path, step, *failing[step.target])
                    break
                if self._raises(step.target, platform):
                    chain = (*path, step)
                    break
        finally:
            self._walking.discard((start, platform))
        if chain is None:
            if self._cuts == cuts:  # nothing any of them imports raises (a walk cut short says nothing of them)
                importable.update(visited)
            return None
        for position, step in enumerate(chain):  # every module on the chain reaches the same raise
            failing.setdefault(step.module, chain[position:])
        return chain

    def _escaping(self, step: Step, platform: str) -> tuple[Step, ...] | None:
        """The chain by which an import inside a ``try`` raises what none of its handlers may catch (by the
        built-in exception hierarchy: ``except ImportError`` does not stop ``NotImplementedError``); None
        when it does not raise, or a handler may catch it. A module whose import is under way when its
        import comes round again is found partly run, as Python finds it: that import does not raise."""
        if (step.target, platform) in self._walking:
            self._cuts += 1
            return None
        chain = self._walk(step.target, platform)
        if chain is None:
            return None
        raised = raised_name(self._own_error(chain[-1].target if chain else step.target, platform) or "")
        return None if any(catches(names, raised) is not False for names in step.caught) else chain

    def _describe(self, start: str, chain: tuple[Step, ...], platform: str, own: str = "") -> str:
        if not own:
            raiser = chain[-1].target if chain else start
            own = f"{self._path(raiser)}: {self._own_error(raiser, platform)}"
        if not chain:
            return own
        parts = []
        position = 0
        while position < len(chain):
            step = chain[position]
            if step.line is not None:
                parts.append(f"{self._path(step.module)}:{step.line} imports {step.via or step.target}")
                position += 1
                continue
            end = position  # a run of parent packages: name the outermost
            while end + 1 < len(chain) and chain[end + 1].line is None:
                end += 1
            parts.append(f"{step.module} is in package {chain[end].target}")
            position = end + 1
        return f"import chain: {'; '.join(parts)}; {own}"

    def _path(self, module: str) -> str:
        found = self.index.locate(module)
        assert found is not None
        return self.index.relative(found[0])
