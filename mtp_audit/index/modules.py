"""Stage 2: map module names to files and read their facts on demand.

Only modules that resolution reaches are parsed; facts are memoised for the
run and, when a cache is given, stored by content hash across runs.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from ..cache import (
    ABSENT,
    CHANGED,
    EXISTS,
    KINDS,
    MISSING,
    SOURCE_LIMIT,
    UNREADABLE,
    FactsCache,
    NotRegular,
    ReadableFiles,
    TooLarge,
    digest,
    kind_of,
    list_folder,
    listing_of,
    read_regular,
)
from ..errors import InternalError
from ..model import SourceTree
from .encoding import NotDecodable, decode_as_imported
from .fact_types import ModuleFacts
from .facts import check_syntax, extract_facts
from .imports import ImportChains, ImportFacts, extract_imports


class Unreadable(OSError):
    """A file the scan does not read (a symlink out of the tree, not a regular file, too large): its
    message says why, whole."""


def read_failure(error: OSError) -> str:
    """Why a file the index was asked to read was not read, as the scan's errors name it."""
    return error.strerror if isinstance(error, Unreadable) else f"cannot be read ({error.strerror or error})"


class ModuleIndex:
    def __init__(self, tree: SourceTree, cache: FactsCache | None = None):
        self.tree = tree
        self.cache = cache
        self._facts: dict[str, ModuleFacts | None] = {}
        self.located: dict[str, tuple[Path, bool] | None] = {}  # module -> locate's answer
        self.read_errors: dict[str, str] = {}
        self.observed: dict[str, str] = {}  # what the result depends on (see cache.Observed)
        self.homes = dict(tree.plugin_homes)
        self.readable = ReadableFiles(tree)  # what a scan reads: not through a symlink out of the tree
        self._imports: dict[str, ImportFacts | None] = {}
        self.chains = ImportChains(self)
        # Modules whose whole-file syntax check another process makes (fanout): their facts are
        # read without it, listed in ``unchecked`` and not cached until that check has passed.
        self.checked_elsewhere: frozenset[str] = frozenset()
        self.unchecked: list[str] = []
        # With ``store_later``, facts read are listed in ``unstored`` for another process to cache.
        self.store_later = False
        self.unstored: list[str] = []

    def locate(self, module: str) -> tuple[Path, bool] | None:
        """The file of ``module`` and whether it is a package, or None if not in the tree."""
        if module not in self.located:
            self.located[module] = self._find(module)
        return self.located[module]

    def _find(self, module: str) -> tuple[Path, bool] | None:
        parts = module.split(".")
        if not module or not all(part.isidentifier() for part in parts):
            return None  # not a module name: nothing in the tree (and no path outside it)
        base = "/".join(parts)  # strings, not pathlib: import chains locate thousands of modules
        home = self.homes.get(parts[0])
        if home is not None:  # a plugin's package, where Python imports it from: its submodules too, only there
            for name, is_package in ((f"{base}/__init__.py", True), (f"{base}.py", False)):
                if self._probe(home, name, extra=home != self.tree.root):
                    return home / name, is_package
            return None
        for position, root in enumerate((self.tree.root, *self.tree.extra_roots)):  # in order, as on sys.path
            for name, is_package in ((f"{base}/__init__.py", True), (f"{base}.py", False)):
                if self._probe(root, name, extra=position > 0):
                    return root / name, is_package
        return self._find_mapped(parts)

    def _find_mapped(self, parts: list[str]) -> tuple[Path, bool] | None:
        """``parts`` in a package an editable install maps to its folder (a module file has no submodules)."""
        top, *rest = parts
        for package, path in self.tree.mapped_packages:
            if package != top:
                continue
            if path.suffix == ".py":
                return (path, False) if not rest and self._probe(path.parent, path.name, extra=True) else None
            base = "/".join(rest)
            candidates = [(f"{base}/__init__.py", True), (f"{base}.py", False)] if rest else [("__init__.py", True)]
            for name, is_package in candidates:
                if self._probe(path, name, extra=True):
                    return path / name, is_package
        return None

    def _probe(self, root: Path, name: str, extra: bool) -> bool:
        path = os.path.join(root, name)
        kind = kind_of(path)
        self.observed.setdefault(Path(path).as_posix() if extra else name, kind)
        return kind in (EXISTS, UNREADABLE)  # where a folder cannot be searched, reading says so (not: no module)

    def kind(self, path: Path) -> str:
        """What is at ``path`` (``cache.kind_of``), remembered: the result depends on it."""
        kind = kind_of(path)
        self.observed.setdefault(self.relative(path), kind)
        return kind

    def listing(self, folder: Path) -> list[tuple[str, bool]]:
        """The entries of ``folder`` (``cache.list_folder``; none when it cannot be listed), remembered:
        the result depends on which names are there."""
        entries = list_folder(folder)
        self._observe_content(self.relative(folder).rstrip("/") + "/", listing_of(entries))
        return entries or []

    def python_files(self, folder: Path) -> list[Path]:
        """The ``*.py`` files under ``folder``, sorted, as ``sorted(folder.rglob("*.py"))`` finds them
        (symlinked folders not entered), each folder's listing remembered."""
        found = []
        for name, is_folder in self.listing(folder):
            if is_folder:
                found += self.python_files(folder / name)
            elif name.endswith(".py"):
                found.append(folder / name)
        return sorted(found)

    def read_source(self, path: Path) -> bytes:
        """``read_bytes`` of a source file the scan finds on its own (a module, a caller file, a plugin
        directory's file): only where ``ReadableFiles`` allows, not through a symlink out of the tree
        unless ``--follow-symlinks``."""
        if not self.readable(path):
            raise Unreadable(
                errno.EPERM, f"a symlink to {path.resolve()}, outside the tree; not read (--follow-symlinks reads it)"
            )
        return self.read_bytes(path)

    def read_bytes(self, path: Path) -> bytes:
        """Read a file the result depends on, and remember its content hash (its absence when it is
        not there): only a regular file (opened without waiting, so a FIFO does not hang it), at most
        ``SOURCE_LIMIT`` bytes; ``Unreadable`` says which of those it is not."""
        try:
            data = read_regular(path, SOURCE_LIMIT, follow_symlinks=True)
        except FileNotFoundError:
            self.observed.setdefault(self.relative(path), ABSENT)
            raise
        except NotRegular:
            raise Unreadable(errno.EINVAL, "not a regular file (a FIFO, a device or a folder); not read") from None
        except TooLarge:
            raise Unreadable(errno.EFBIG, f"larger than {SOURCE_LIMIT >> 20} MiB; not read") from None
        if len(data) > SOURCE_LIMIT:
            raise Unreadable(errno.EFBIG, f"larger than {SOURCE_LIMIT >> 20} MiB; not read")
        self._observe_content(self.relative(path), digest(data))
        return data

    def _observe_content(self, relative: str, content: str) -> None:
        """Record the content hash a read saw. The first read's bytes are the ones analysed: a later
        read that sees other bytes (an edit saved during the scan) makes the path CHANGED, which no
        file matches, so neither a cached result nor ``fix`` trusts what was read of it."""
        seen = self.observed.get(relative)
        self.observed[relative] = content if seen in (None, *KINDS, content) else CHANGED

    def is_module(self, module: str) -> bool:
        return self.locate(module) is not None

    def relative(self, path: Path) -> str:
        """Relative to the root; absolute for a file under an extra root (another directory)."""
        text, root = path.as_posix(), self.tree.root.as_posix().rstrip("/") + "/"
        if text.startswith(root):
            return text[len(root) :]
        try:
            return path.relative_to(self.tree.root).as_posix()
        except ValueError:
            return path.as_posix()

    def facts(self, module: str) -> ModuleFacts | None:
        if module in self._facts:
            return self._facts[module]
        found = self.locate(module)
        result = None
        if found is not None:
            path, is_package = found
            result = self._read(module, path, is_package)
        self._facts[module] = result
        return result

    def _unreadable(self, module: str, rel: str, is_package: bool, why: str) -> ModuleFacts:
        """Facts of a file that is named in the errors and otherwise left out."""
        self.read_errors[rel] = why
        facts = ModuleFacts(module=module, path=rel, is_package=is_package)
        facts.parse_error = why
        return facts

    def _read(self, module: str, path: Path, is_package: bool) -> ModuleFacts:
        rel = self.relative(path)
        try:
            data = self.read_source(path)
        except OSError as error:
            return self._unreadable(module, rel, is_package, read_failure(error))
        try:
            source = decode_as_imported(data)
        except NotDecodable as error:
            return self._unreadable(module, rel, is_package, str(error))
        if self.cache is not None:
            cached = self.cache.load(data, module, is_package, ModuleFacts)
            if cached is not MISSING:
                cached.path = rel  # the same content may live at another path
                return cached
        deferred = module in self.checked_elsewhere
        try:
            facts = extract_facts(source, module, rel, is_package, check_whole=not deferred)
        except Exception as error:  # a bug of ours: say which file triggered it
            raise InternalError(rel, error) from error
        if facts.parse_error:
            self.read_errors[rel] = f"syntax error, {facts.parse_error}"
        elif self.cache is not None and (deferred or self.store_later):
            self.unstored.append(module)
        elif self.cache is not None:
            self.cache.store(digest(data), module, is_package, facts)
        if deferred and not facts.parse_error:
            self.unchecked.append(module)
        return facts

    def syntax_errors(self, modules: list[str]) -> dict[str, str]:
        """The whole-file syntax errors of ``modules`` (their ``parse_error``), by module."""
        errors = {}
        for module in modules:
            found = self.locate(module)
            if found is None:
                continue
            try:
                source = decode_as_imported(self.read_bytes(found[0]))
            except (NotDecodable, OSError):  # named where its facts are read
                continue
            error = check_syntax(source, self.relative(found[0]))
            if error is not None:
                errors[module] = error
        return errors

    def store_facts(self, modules: list[str]) -> None:
        """Cache the facts of ``modules`` (listed in ``unstored``; any check they waited for passed), under
        the content hash of the read they came from (``observed``; a read of other bytes since, in any
        process, made it CHANGED: then they are not stored)."""
        if self.cache is None:
            return
        for module in modules:
            found, facts = self.locate(module), self._facts.get(module)
            if found is None or facts is None:
                continue
            content = self.observed.get(self.relative(found[0]))
            if content is not None and content not in KINDS and content != CHANGED:
                self.cache.store(content, module, found[1], facts)

    def loaded(self) -> dict[str, ModuleFacts | None]:
        """Every module looked up so far (None: not in the tree)."""
        return self._facts

    def imports_read(self) -> dict[str, ImportFacts | None]:
        """Every module whose imports were looked up so far (see ``import_facts``)."""
        return self._imports

    def absorb(self, harvest) -> None:
        """Take in what a worker process read (a ``fanout.Harvest``): the same facts this index
        would compute from the same bytes."""
        for module, facts in harvest.facts.items():
            self._facts.setdefault(module, facts)
        for module, found in harvest.located.items():
            self.located.setdefault(module, found)
        for module, imports in harvest.imports.items():
            self._imports.setdefault(module, imports)
        for path, seen in harvest.observed.items():
            if seen in KINDS:
                self.observed.setdefault(path, seen)
            else:  # a content hash says more
                self._observe_content(path, seen)
        self.read_errors.update(harvest.read_errors)
        self.chains.absorb(harvest.chains)

    def import_error(self, module: str, platform: str) -> str | None:
        """Why importing ``module`` fails on ``platform`` (itself or a parent package)."""
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            name = ".".join(parts[:end])
            facts = self.facts(name)
            if facts is None:
                continue
            if facts.parse_error:
                return f"{facts.path}: {facts.parse_error}"
            if platform in facts.import_errors:
                return f"{facts.path}: {facts.import_errors[platform]}"
        return None

    def unparsed(self, module: str) -> str | None:
        """The first of ``module``'s packages, or itself, whose source does not parse (importing it raises)."""
        parts = module.split(".")
        for end in range(1, len(parts) + 1):
            facts = self.facts(".".join(parts[:end]))
            if facts is not None and facts.parse_error:
                return facts.module
        return None

    def import_facts(self, module: str) -> ImportFacts | None:
        """What importing ``module`` runs (see ``imports``); None when it is not in the tree, cannot
        be decoded or does not parse."""
        if module not in self._imports:
            found = self.locate(module)
            result = None
            if found is not None:
                path, is_package = found
                try:
                    source = decode_as_imported(self.read_bytes(path))
                except (NotDecodable, OSError):  # named where its facts are read
                    source = None
                if source is not None:
                    result = extract_imports(source, module, is_package, self._on_sys_path(path))
            self._imports[module] = result
        return self._imports[module]

    def _on_sys_path(self, path: Path) -> bool:
        """Is the root holding ``path`` a directory on ``sys.path`` (a vLLM tree's, or an extra root: an
        installed plugin, the vLLM a plugin runs with)? A plugin directory scanned alone may be a package
        itself, so a relative import may climb above what the tool takes for the top level."""
        return self.tree.is_vllm or self.relative(path) == path.as_posix()  # outside the root: an extra one

    def chain_error(self, module: str, platform: str) -> str | None:
        """Why importing ``module`` fails on ``platform``, through anything it imports at top level."""
        return self.chains.error(module, platform)
