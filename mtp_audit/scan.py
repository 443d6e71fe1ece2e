"""The scan pipeline: locate -> index -> resolve -> classify, returning plain records.

Classification asks the mirror rule (``synthesize.answers``) whether an existing
get_top_tokens is what a fix would write; the work can be spread over processes by a
``Resolve`` hook the caller hands in (``fanout.forked``).
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from .cache import ABSENT, FactsCache
from .classify import memo
from .classify.analysis import Analysis, Analyzer
from .classify.calls import Contract
from .classify.shape_types import ASSUMED_SIGNATURE
from .errors import UsageError
from .index.modules import ModuleIndex, read_failure
from .index.processor import (
    VLLM_LOGITS_PROCESSOR,
    defines_processor,
    has_local_argmax,
    head_signature,
    outside_vocab_mask,
    processor_paths,
    processor_reading,
)
from .locate import LOGITS_PROCESSOR
from .model import (
    PLATFORMS,
    ClassKey,
    ContractAnswers,
    DrafterRecord,
    Location,
    RegistryEntry,
    ScanAnswers,
    ScanResult,
    SourceTree,
    Unavailable,
    Unresolved,
)
from .resolve.callers import CallerIndex, declared_config
from .resolve.mro import Hierarchy
from .resolve.names import Missing, deciding_ifs, resolve_name
from .resolve.plugins import effective_registry, plugin_tree_entries, plugin_warnings, read_plugins
from .resolve.registry import heuristic_entries, registry_reading
from .synthesize.answers import MIRROR_RULE


class PreLocalArgmaxRelease(UsageError):
    """vLLM 0.16 and earlier: LogitsProcessor.get_top_tokens does not exist."""


def _require_local_argmax(processor_source: str, name: str, line: int | None, vllm: str) -> None:
    """Stop where ``vllm`` (named so in the message) has no LogitsProcessor.get_top_tokens (the class
    ``name`` of ``processor_source``): a drafter has nothing to opt into there, and a mirror would call
    what it lacks."""
    if not has_local_argmax(processor_source, name, line):
        raise PreLocalArgmaxRelease(
            f"{vllm} has no LogitsProcessor.get_top_tokens, so there is nothing for drafters to opt into "
            "(it first shipped in vLLM 0.17)"
        )


@dataclass
class Resolution:
    """One (architecture, class definition): the platforms using it and the analysis on each."""

    entry: RegistryEntry
    key: ClassKey
    analyses: dict[str, Analysis] = field(default_factory=dict)
    contract: Contract = field(default_factory=lambda: Contract(()))
    labels: tuple[str, ...] = ()  # plugin platforms (device names) where it applies too
    proxy: bool = False  # only on plugin platforms: analysed on every in-tree one, none of them listed
    unavailable: dict[str, str] = field(default_factory=dict)  # platform -> why the arch has no class there
    # platform -> the undecided ``if`` statements choosing this class among others there (``file:line: if ...:``)
    chosen_by: dict[str, tuple[str, ...]] = field(default_factory=dict)


class Scanner:
    def __init__(self, tree: SourceTree, cache: FactsCache | None = None):
        self.tree = tree
        self.index = ModuleIndex(tree, cache)
        self.hierarchies = {p: Hierarchy(self.index, p) for p in PLATFORMS}
        self.analyzers = {p: Analyzer(h, MIRROR_RULE) for p, h in self.hierarchies.items()}
        self.head_signature = ASSUMED_SIGNATURE  # the tree's get_top_tokens and LogitsProcessor call, once read
        # platform -> (module, name) of the class vLLM's processor is there, where the module imports it
        self.processor_keys: dict[str, tuple[str, str]] = {}
        self.plugin_notes: list[str] = []  # plugin code that could not be read, entry points vLLM never calls
        self.registry_notes: list[str] = []  # parts of the speculative dict that could not be read
        self._callers: CallerIndex | None = None
        self._earlier_contracts: ContractAnswers = {}  # a scan's of the same files (``seed``)
        self._caller_notes: list[str] | None = None
        self._runner_notes: list[str] | None = None
        self._config_text: dict[str, str | None] = {}  # file -> its text if it names a speculator config

    @property
    def vllm(self) -> SourceTree | None:
        """The vLLM whose speculators call the drafters: the tree, or the one a plugin directory runs with."""
        return self.tree if self.tree.is_vllm else self.tree.runs_with

    @property
    def callers(self) -> CallerIndex:
        """The speculators and proposers of that vLLM, read on first use (see ``prepare_callers``)."""
        if self._callers is None:
            self._callers = CallerIndex(self.index, self.vllm)
        return self._callers

    def prepare_callers(self) -> None:
        """Read the callers and follow their drafting paths now (e.g. while a worker indexes), so
        forked workers inherit them."""
        if self.vllm is not None:
            self.callers.prepare()

    def caller_notes(self) -> list[str]:
        """What the callers' selection constructs or names that the scan does not follow (read once:
        ``fanout`` has it read while workers classify, off the scan's serial path)."""
        if self._caller_notes is None:
            self._caller_notes = self.callers.unfollowed() if self.vllm is not None else []
        return self._caller_notes

    def runner_notes(self) -> list[str]:
        """Why the V1 proposers count for every drafter: the code that picks the model runner is unread."""
        if self._runner_notes is None:
            self._runner_notes = self.callers.runner_notes() if self.vllm is not None else []
        return self._runner_notes

    def adopt_callers(self, callers: CallerIndex) -> None:
        """Take the callers another process read and prepared from the same files (``fanout``)."""
        callers.index = self.index
        self._callers = callers

    def seed(self, earlier: ScanAnswers) -> None:
        """Take the answers a scan of the same files gave (``ResultCache.answers``): what they answer
        is not worked out again (the speculators are not read for a contract they hold)."""
        self.index.chains.seed(earlier.chains)
        self._earlier_contracts = earlier.contracts
        self._caller_notes, self._runner_notes = earlier.caller_notes, earlier.runner_notes

    def answers(self, resolutions: list[Resolution]) -> ScanAnswers:
        """What this scan worked out that a scan of the same files may ``seed`` with."""
        contracts = {_contract_key(r.entry, r.key): r.contract.reaches for r in resolutions}
        return ScanAnswers(
            self.index.chains.answers(), contracts, caller_notes=self.caller_notes(), runner_notes=self.runner_notes()
        )

    def contract(self, entry: RegistryEntry, key: ClassKey, platform: str) -> Contract:
        """The speculators that can hold this drafter, with what their drafting paths call. Asked once
        per drafter and class, on the first platform where the class resolves: the same one for a
        scan of the same files, which ``seed`` hands the answer of."""
        earlier = self._earlier_contracts.get(_contract_key(entry, key))
        if earlier is not None:
            return Contract(earlier)
        if self.vllm is None or not self.callers.present:
            return Contract(())
        declared = None
        for item in self.hierarchies[platform].mro(key).classes:
            if not isinstance(item, ClassKey):
                continue
            source = self._naming_config(self.hierarchies[platform].file_of(item))
            if source is None:
                continue
            name = declared_config(source, item.name, item.line)
            if name is None:
                continue
            found = [
                k
                for k in resolve_name(self.index, item.module, name.split(".")[0], platform)
                if isinstance(k, ClassKey)
            ]
            declared = f"{found[0].module}.{found[0].name}" if found else name
            break
        drafter = self.callers.drafter(entry.arch, key.name, declared)
        return Contract(tuple(self.callers.reach(q) for q, _ in self.callers.candidates(drafter)))

    def _naming_config(self, file: str) -> str | None:
        """The text of ``file`` when it names ``speculator_config_class`` (read once: the classes
        of most drafters' MROs live in a few shared files)."""
        if file not in self._config_text:
            try:
                source = self.index.read_bytes(self.tree.root / file)
            except OSError:  # named where its facts were read; nothing declared that can be seen
                source = b""
            self._config_text[file] = (
                source.decode("utf-8", "replace") if b"speculator_config_class" in source else None
            )
        return self._config_text[file]

    def _note_processor(self, path: Path, source: str, key: tuple[str, str], line: int | None = None) -> None:
        """Where this vLLM's own LogitsProcessor.get_top_tokens masks the columns past
        ``org_vocab_size`` (a cut compute_logits makes is then made by both methods), and which of its
        methods its call and its get_top_tokens run (a subclass overriding one may make them differ), and
        what its get_top_tokens and its call take (a head call's arguments must bind to both alike);
        ``key``: the (module, name) it is defined as (on ``line``, where the module defines several), ``source``
        that module's text in ``path``."""
        file, name = str(self.index.relative(path)), key[1]
        mask = outside_vocab_mask(source, name, line)
        paths = processor_paths(source, file, name, line)
        self.head_signature = head_signature(source, file, name, line) or ASSUMED_SIGNATURE
        for platform, analyzer in self.analyzers.items():
            analyzer.processor_mask = f"{file}:{mask}" if mask is not None else None
            analyzer.processor_paths = paths
            analyzer.head_signature = self.head_signature
            analyzer.processor_key = self.processor_keys.get(platform, key)

    def _processor_source(self, index: ModuleIndex) -> tuple[Path, str, tuple[str, str], int | None]:
        """The file, text, (module, name) and line of the class ``vllm.model_executor.layers.logits_processor``'s
        ``LogitsProcessor`` is in ``index``'s tree, as Python finds it on every platform: that module's own
        class (a package before a same-named module, as Python imports), else the one it binds (a package
        re-exporting it from a submodule, a class moved to another module, one picked per platform where every
        pick reads alike); the module's own file and text (perhaps "") where no class is found. Read through
        this scan's index, so a cached result is read again when any of them changes; an ``OSError`` (its
        ``filename`` the file) is the caller's to report; classes that differ by platform are a usage error."""
        module, name = VLLM_LOGITS_PROCESSOR
        located = index.locate(module)
        assert index.tree.package_dir is not None
        path = located[0] if located is not None else index.tree.package_dir / LOGITS_PROCESSOR
        source = self._read_text(path) if located is not None else ""
        if defines_processor(source, name):
            return path, source, VLLM_LOGITS_PROCESSOR, None
        on_platform = {  # the first class each platform's binding resolves to
            p: next((k for k in resolve_name(index, module, name, p) if isinstance(k, ClassKey)), None)
            for p in PLATFORMS
        }
        self.processor_keys = {p: (k.module, k.name) for p, k in on_platform.items() if k is not None}
        found = list(dict.fromkeys(k for k in on_platform.values() if k is not None))
        readings = []
        for key in found:
            defined = index.locate(key.module)
            if defined is not None:
                text = self._read_text(defined[0])
                reading = processor_reading(text, key.name, key.line)
                readings.append((defined[0], text, (key.module, key.name), key.line, reading))
        if not readings:
            return path, source, VLLM_LOGITS_PROCESSOR, None
        if any(reading[4] != readings[0][4] for reading in readings[1:]):
            named = ", ".join(f"{self.index.relative(r[0])}:{r[3]}" for r in readings)
            raise UsageError(
                f"{module}.{name} is another class on some platforms ({named}), and they differ in what their call "
                "and their get_top_tokens run: the scan reads one LogitsProcessor for every platform"
            )
        return readings[0][:4]

    def _read_text(self, path: Path) -> str:
        try:
            return self.index.read_bytes(path).decode("utf-8", "replace")
        except OSError as error:
            error.filename = error.filename or str(path)
            raise

    def entries(self) -> list[RegistryEntry]:
        if self.tree.is_vllm:
            assert self.tree.package_dir is not None
            try:
                path, source, key, line = self._processor_source(self.index)
            except OSError as error:
                failed = Path(error.filename) if error.filename else self.tree.package_dir / LOGITS_PROCESSOR
                raise UsageError(f"{self.index.relative(failed)}: {read_failure(error)}") from None
            vllm = f"vLLM {self.tree.vllm_version}" if self.tree.vllm_version else "this vLLM"
            _require_local_argmax(source, key[1], line, vllm)
            self._note_processor(path, source, key, line)
            entries, self.registry_notes = registry_reading(self.index)
            if self.tree.plugins:
                readings = read_plugins(self.index, self.tree.plugins, self.tree.allowed_plugins)
                self.plugin_notes = plugin_warnings(readings)
                entries = effective_registry(entries, readings)
            return entries
        runs_with = self.tree.runs_with
        in_tree, self.registry_notes = registry_reading(ModuleIndex(runs_with)) if runs_with else ([], [])
        entries, self.plugin_notes = plugin_tree_entries(self.index, in_tree, heuristic_entries(self.index))
        if runs_with is not None and runs_with.package_dir is not None:
            self._read_plugin_processor(runs_with, runs_with.package_dir / LOGITS_PROCESSOR)
        return entries

    def _read_plugin_processor(self, runs_with: SourceTree, path: Path) -> None:
        """The processor a plugin's drafters get, from the vLLM it runs with (one without
        ``LogitsProcessor.get_top_tokens`` leaves nothing to opt into, as for its own tree); one that
        cannot be read is said (its mask is then unknown) and recorded absent, so a cached result is read
        again once it appears."""
        try:
            index = ModuleIndex(runs_with)
            if index.locate(VLLM_LOGITS_PROCESSOR[0]) is None:  # no such module: said as a file that cannot be read
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
            found, source, key, line = self._processor_source(index)
            version = f"vLLM {runs_with.vllm_version}" if runs_with.vllm_version else "the vLLM"
            _require_local_argmax(source, key[1], line, f"{version}, which this plugin runs with,")
            self._note_processor(found, source, key, line)
        except OSError as error:
            self.index.observed.setdefault(self.index.relative(path), ABSENT)
            self.plugin_notes.append(
                f"{path} cannot be read ({error.strerror or error}): a cut to org_vocab_size is judged "
                "without the mask that vLLM's LogitsProcessor.get_top_tokens may apply, and a processor "
                "subclass's override of any method it may run as making its call and get_top_tokens differ"
            )

    def walk_import_chains(self, entries: list[RegistryEntry]) -> None:
        """Find, in registry order, whether each registry module imports on each of its platforms.

        Done before resolution, in one process, at any job count: a failing chain is
        described by the walk that found it first, so the walks run in the same order
        whether a worker does them (beside the facts worker) or the scan does.
        """
        for entry in entries:
            for platform in self.platforms_of(entry):
                self.index.chain_error(entry.module, platform)

    def resolve_here(self, entries: list[RegistryEntry]) -> tuple[list[Resolution], list[Unresolved]]:
        """The whole resolution in this process: import chains first, then ``resolve``."""
        self.walk_import_chains(entries)
        return self.resolve(entries)

    @staticmethod
    def platforms_of(entry: RegistryEntry) -> list[str]:
        """The in-tree platforms an entry resolves on: its scope's, or (on a plugin's platform
        alone, where current_platform checks cannot be decided) every one, as alternatives."""
        scope = entry.scope or PLATFORMS
        return [p for p in PLATFORMS if p in scope] or list(PLATFORMS)

    def resolve(self, entries: list[RegistryEntry]) -> tuple[list[Resolution], list[Unresolved]]:
        resolutions: dict[tuple, Resolution] = {}
        unresolved: list[Unresolved] = []
        for entry in entries:
            missing: dict[str, list[str]] = {}
            undecided: set[str] = set()  # reasons the tool could not follow: unresolved, never unavailable
            scope = entry.scope or PLATFORMS
            in_tree = [p for p in PLATFORMS if p in scope]
            labels = tuple(sorted(p for p in scope if p not in PLATFORMS))
            for platform in self.platforms_of(entry):
                found = resolve_name(self.index, entry.module, entry.cls, platform)
                keys = [f for f in found if isinstance(f, ClassKey)]
                failures = [self.import_failure(entry, key, platform) for key in keys]
                if not keys:
                    why = "; ".join(f.reason for f in found if isinstance(f, Missing)) or "not a class"
                    missing.setdefault(why, []).append(platform)
                    if any(isinstance(f, Missing) and f.undecided for f in found):
                        undecided.add(why)
                elif all(failures):
                    missing.setdefault(str(failures[0]), []).append(platform)
                for key, failure in zip(keys, failures):
                    if failure is not None:
                        continue
                    res = resolutions.get((entry, key))
                    if res is None:
                        res = resolutions[(entry, key)] = Resolution(
                            entry, key, labels=labels, proxy=not in_tree, contract=self.contract(entry, key, platform)
                        )
                    res.analyses[platform] = self.analyzers[platform].analyze(key, contract=res.contract)
                    if len(keys) > 1:
                        res.chosen_by[platform] = tuple(deciding_ifs(self.index, entry.module, entry.cls, platform))
            mine = [r for r in resolutions.values() if r.entry == entry]
            unavailable = {p: why for why, platforms in missing.items() if why not in undecided for p in platforms}
            for res in mine:  # a record of plugin platforms alone lists no in-tree ones
                res.unavailable = {} if res.proxy else unavailable
            for why, platforms in missing.items():  # what raises is unavailable beside a record; the rest unresolved
                if why in undecided or not mine:
                    unresolved.append(Unresolved(entry.arch, entry.module, entry.cls, platforms, why))
        out = list(resolutions.values())
        if not self.tree.is_vllm:  # heuristic finds: keep those with a logits method somewhere
            out = [
                r
                for r in out
                if r.entry.registry != "heuristic"
                or any(a.compute_logits or a.get_top_tokens for a in r.analyses.values())
            ]
        return out, unresolved

    def import_failure(self, entry: RegistryEntry, key: ClassKey, platform: str) -> str | None:
        """Why the registry's module or the class's module fails to import on ``platform``, through
        anything it imports; None when both import."""
        return (
            self.index.chain_error(entry.module, platform)
            or self.index.chain_error(key.module, platform)
            or self.base_failure(key, platform)
        )

    def base_failure(self, key: ClassKey, platform: str) -> str | None:
        """Where the class's MRO stops at a module that does not parse, or takes in a class statement for
        which no C3 order exists (TypeError; the class's own included), and the class's module imports that
        module at top level (itself or through others): importing it raises, so the class is never defined.
        Import chains do not parse every module they pass; the bases' modules are parsed."""
        mro = self.hierarchies[platform].mro(key)
        for module, own in (
            *((module, self._syntax_error(module)) for module in mro.unparsed),
            *((cls.module, self.hierarchies[platform].uncreatable_reason(cls)) for cls in mro.uncreatable),
        ):
            chain = self.index.chains.path_to(key.module, module, platform)
            if chain is not None:
                return self.index.chains.describe_chain(key.module, chain, own)
        return None

    def _syntax_error(self, module: str) -> str:
        facts = self.index.facts(module)
        assert facts is not None
        return f"{facts.path}: syntax error, {facts.parse_error}"

    def record(self, res: Resolution, resolved_on: list[str], analysis: Analysis) -> DrafterRecord:
        h = self.hierarchies[resolved_on[0]]
        platforms = sorted(set(res.labels) | (set() if res.proxy else set(resolved_on)))

        def location(key: ClassKey, line: int) -> Location:
            return Location(key.name, h.file_of(key), line)

        return DrafterRecord(
            arch=res.entry.arch,
            cls=res.key.name,
            module=res.key.module,
            file=h.file_of(res.key),
            line=res.key.line,
            platforms=platforms,
            status=analysis.status,
            reason=_one_alternative(res, resolved_on[0], analysis.reason),
            compute_logits=location(analysis.compute_logits.owner, analysis.compute_logits.method.line)
            if analysis.compute_logits
            else None,
            get_top_tokens=location(analysis.get_top_tokens.owner, analysis.get_top_tokens.method.line)
            if analysis.get_top_tokens
            else None,
            delegates=[location(d, d.line) for d in analysis.delegates],
            consistency=analysis.consistency,
            rule=analysis.rule,
            registry=res.entry.registry,
            entry_module=res.entry.module,
            key=res.key,
            callers=analysis.callers if analysis.callers is not None else res.contract.records(),
            uncalled=analysis.uncalled,
            source=res.entry.source,
            replaces=res.entry.replaces,
            resolved_on=resolved_on,
            unavailable_on=[Unavailable(p, why) for p, why in sorted(res.unavailable.items())],
        )

    def records(self, resolutions: list[Resolution]) -> list[DrafterRecord]:
        records = []
        for res in resolutions:
            groups: dict[tuple, list[str]] = {}
            first: dict[tuple, Analysis] = {}
            for platform, analysis in res.analyses.items():
                reason = _one_alternative(res, platform, analysis.reason)
                signature = (analysis.status, reason, analysis.consistency, analysis.rule)
                groups.setdefault(signature, []).append(platform)
                first.setdefault(signature, analysis)
            for signature, platforms in groups.items():
                records.append(self.record(res, sorted(platforms), first[signature]))
        records.sort(key=lambda r: (r.arch or "", r.file, r.cls, r.platforms, r.source))
        return records


class Resolve(Protocol):
    """``scanner.resolve_here(entries)``, computed some other way (``fanout.forked``: in worker processes)."""

    def __call__(self, scanner: Scanner, entries: list[RegistryEntry]) -> tuple[list[Resolution], list[Unresolved]]: ...


def scan(
    tree: SourceTree,
    cache: FactsCache | None = None,
    resolve: Resolve | None = None,
    earlier: ScanAnswers | None = None,
    notes: bool = True,
) -> tuple[ScanResult, Scanner, list[Resolution]]:
    """Run the pipeline; ``scanner.index.observed`` then says what the result depends on.

    ``resolve``, when given, does the resolving and classifying (see fanout.forked);
    ``earlier``, the import-chain and call-contract answers of an earlier scan of the same files;
    ``notes``: read what the speculators' selection does not follow (a tenth of a scan) and whether
    the model runner's choice can be read, which only ``scan`` reports (``fix`` does not, and does not
    store its result).
    """
    memo.use_cache(cache)
    scanner = Scanner(tree, cache)
    if earlier is not None:
        scanner.seed(earlier)
    entries = scanner.entries()
    if resolve is not None:
        resolutions, unresolved = resolve(scanner, entries)
    else:
        resolutions, unresolved = scanner.resolve_here(entries)
    result = ScanResult(
        tree=tree,
        records=scanner.records(resolutions),
        unresolved=unresolved,
        parse_errors=sorted(scanner.index.read_errors.items()),
        notes=scanner.plugin_notes,
        registry_notes=scanner.registry_notes,
        caller_notes=scanner.caller_notes() if notes else [],
        runner_notes=scanner.runner_notes() if notes else [],
    )
    return result, scanner, resolutions


def _contract_key(entry: RegistryEntry, key: ClassKey) -> tuple[str, ...]:
    scope = ",".join(entry.scope) if entry.scope is not None else "*"
    return (
        entry.arch or "",
        entry.module,
        entry.cls,
        entry.registry,
        entry.source,
        scope,
        key.module,
        key.name,
        str(key.line),
    )


def _one_alternative(res: Resolution, platform: str, reason: str) -> str:
    """The reason, saying which undecided ``if`` makes the class one of several the architecture may be."""
    chosen_by = res.chosen_by.get(platform)
    if not chosen_by:
        return reason
    where = ", ".join(f"`{choice}`" for choice in chosen_by)
    return f"{reason}; one of the classes {res.entry.arch or res.entry.cls} may be: which one depends on {where}"
