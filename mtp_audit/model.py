"""Plain data passed between the pipeline stages; no behaviour lives here."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

PLATFORMS: tuple[str, ...] = ("cpu", "cuda", "rocm", "tpu", "xpu")
# Import-chain answers: (module, platform) -> why importing the module fails there (None: it does not).
ChainAnswers = dict[tuple[str, str], str | None]

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # Python 3.10: the same behaviour, spelled out

    class StrEnum(str, Enum):
        """Members are their values: in f-strings, ``str()``, JSON and comparisons with strings."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return format(str(self.value), spec)


@dataclass(frozen=True)
class ModelCall:
    """A call on the drafter: ``self.model.<method>(<args>)``."""

    method: str
    args: tuple[str, ...]  # source text; keywords as name=value
    keywords: tuple[str, ...]
    positional: int
    file: str
    line: int
    # the argument values (keywords without their name) as the function where a drafting path
    # parts from the other call sees them, through the wrappers between; None: not expressible there
    # (a local of a wrapper), resolve.callers.HIDDEN_BY_STAR: hidden by a ``*``/``**`` argument of a wrapper call
    values: tuple[str | None, ...] | None = None
    through: str | None = None  # the outermost wrapper call they were passed through: `code` (FILE:LINE)
    # (value, constant) for each `value == constant` that the path to the call tests true, as the
    # function where the paths part sees the value
    guards: tuple[tuple[str, str], ...] = ()
    # (name, where it is bound) for each name both calls of a pair read that may hold another value
    # at the get_top_tokens call than at this one (set on the compute_logits calls of a pair)
    rebound: tuple[tuple[str, str], ...] = ()

    @property
    def argument_values(self) -> tuple[str | None, ...]:
        if self.values is not None:
            return self.values
        return tuple(
            a if i < self.positional or a.startswith("**") else a.split("=", 1)[1] for i, a in enumerate(self.args)
        )


@dataclass(frozen=True)
class CallPair:
    """A ``get_top_tokens`` call and the ``compute_logits`` calls on the same path."""

    top_tokens: ModelCall
    logits: tuple[ModelCall, ...]


@dataclass
class Reach:
    """What a speculator's drafting path calls on its drafter."""

    speculator: str
    file: str
    line: int
    pairs: list[CallPair] = field(default_factory=list)
    logits: list[ModelCall] = field(default_factory=list)  # every compute_logits call reached
    other: list[str] = field(default_factory=list)  # other drafter methods it drafts with
    unfollowed: list[str] = field(default_factory=list)  # drafter references not followed: FILE:LINE: `code`
    uncreatable: str = ""  # why its class statement (or a base's) raises TypeError: it is never made

    @property
    def reaches(self) -> bool:
        return bool(self.pairs)


# What each speculator that can hold a drafter calls, by the registry entry and class it was read for
# (``Scanner.contract``): a cached scan's answers, which fix takes instead of reading the speculators again.
ContractAnswers = dict[tuple[str, ...], tuple[Reach, ...]]


@dataclass
class ScanAnswers:
    """What a scan worked out that ``fix``, scanning the same files again, would otherwise work out
    again: the import chains and the call contracts. Kept in the result cache beside the result, and
    used only while every file that scan looked at is unchanged."""

    chains: ChainAnswers
    contracts: ContractAnswers
    # what that scan looked at (``cache.Observed``), which the answers depend on: a scan that takes
    # them depends on it too, though it reads none of it (filled as the cache hands them out)
    observed: dict[str, str] = field(default_factory=dict)
    # what the speculators' selection does not follow and why the model runner's choice is unread
    # (``ScanResult.caller_notes``, ``runner_notes``): fix warns of them as scan does
    caller_notes: list[str] = field(default_factory=list)
    runner_notes: list[str] = field(default_factory=list)


class Status(str, Enum):
    SUPPORTED = "supported"
    MISSING_FIXABLE = "missing_fixable"
    MISSING_MANUAL = "missing_manual"
    NOT_APPLICABLE = "not_applicable"


class Consistency(str, Enum):
    MIRROR = "mirror"
    EQUIVALENT = "equivalent"
    UNPROVEN = "unproven"
    DIVERGENT = "divergent"


@dataclass(frozen=True)
class PluginDist:
    """An installed distribution with ``vllm.general_plugins`` / ``vllm.platform_plugins`` entry
    points, read from its ``entry_points.txt`` (nothing of it is imported)."""

    name: str
    version: str
    location: Path  # the directory holding its packages (the dist-info's parent)
    entry_points: tuple[tuple[str, str, str], ...]  # (group, name, "module:function")
    packages: tuple[str, ...] = ()  # its top-level packages, from top_level.txt where it has one

    @property
    def label(self) -> str:
        return f"{self.name} {self.version}"


@dataclass(frozen=True)
class SourceTree:
    """Where the code lives: ``root`` holds the ``vllm`` package (or is a plugin dir)."""

    root: Path
    package_dir: Path | None  # root/vllm for a vLLM tree, None for a plugin directory
    vllm_version: str | None
    # Where else modules are found, after root: installed plugins' directories; for a plugin
    # directory, the root of the vLLM it runs with.
    extra_roots: tuple[Path, ...] = ()
    plugins: tuple[PluginDist, ...] = ()  # installed plugins whose registrations join the registry
    # Top-level packages an editable install maps to their folder (or file): setuptools' finder, which
    # Python asks after every path entry (it is appended to sys.meta_path)
    mapped_packages: tuple[tuple[str, Path], ...] = ()
    # A plugin's top-level package -> the folder Python imports it from: the first on the search path
    # holding it as a module or regular package (a developer's checkout ahead of the installed copy)
    plugin_homes: tuple[tuple[str, Path], ...] = ()
    # The entry-point names vLLM loads, from ``VLLM_PLUGINS`` (split at commas; empty: none); None: every one
    allowed_plugins: tuple[str, ...] | None = None
    runs_with: SourceTree | None = None  # for a plugin directory: the vLLM it runs with
    follow_symlinks: bool = False  # read model files that symlinks lead to outside root

    @property
    def is_vllm(self) -> bool:
        return self.package_dir is not None

    @property
    def plugin_folders(self) -> tuple[Path, ...]:
        """Where the scan reads (and fix writes) beside ``root``: the extra roots and mapped packages."""
        return (*self.extra_roots, *(path for _, path in self.mapped_packages))


@dataclass(frozen=True)
class ClassKey:
    """One class definition: the module that defines it, its name and line."""

    module: str
    name: str
    line: int


@dataclass(frozen=True)
class Location:
    cls: str
    file: str
    line: int

    def to_json(self) -> dict:
        return {"class": self.cls, "file": self.file, "line": self.line}


@dataclass(frozen=True)
class RegistryEntry:
    arch: str | None
    module: str  # absolute module path
    cls: str
    registry: str  # the dict it came from, "register_model", or "heuristic"
    source: str = "vllm"  # "vllm", or the plugin's "<dist-name> <version>"
    replaces: tuple[str, str] | None = None  # the in-tree (module, class) this registration replaces
    # Where it applies: None for every in-tree platform; a plugin's registration lists in-tree
    # platforms and plugin platforms' device names.
    scope: tuple[str, ...] | None = None


@dataclass(frozen=True)
class CallerRecord:
    """How one speculator (or V1 proposer) that can hold a drafter calls it.

    ``line`` is the line of its ``get_top_tokens`` call, None when its drafting
    path never reaches one. The argument lists are the calls' source text, keyword
    arguments as ``name=value`` (``["hidden_states", "spec_step_idx=spec_step_idx"]``);
    None when that method is not called on the path.
    """

    speculator: str
    file: str
    line: int | None
    get_top_tokens_args: tuple[str, ...] | None
    compute_logits_args: tuple[str, ...] | None
    compute_logits_line: int | None = None

    def to_json(self) -> dict:
        return {
            "speculator": self.speculator,
            "file": self.file,
            "line": self.line,
            "get_top_tokens_args": list(self.get_top_tokens_args) if self.get_top_tokens_args is not None else None,
            "compute_logits_args": list(self.compute_logits_args) if self.compute_logits_args is not None else None,
        }


@dataclass(frozen=True)
class Unavailable:
    """A platform where an architecture has no class: its module cannot be imported there, or
    the name does not resolve to a class."""

    platform: str
    reason: str

    def to_json(self) -> dict:
        return {"platform": self.platform, "reason": self.reason}


@dataclass
class DrafterRecord:
    """One row of the report: an architecture and the class definition it uses."""

    arch: str | None
    cls: str
    module: str
    file: str
    line: int
    platforms: list[str]
    status: Status
    reason: str
    compute_logits: Location | None = None
    get_top_tokens: Location | None = None
    delegates: list[Location] = field(default_factory=list)
    consistency: Consistency | None = None
    registry: str = "_SPECULATIVE_DECODING_MODELS"
    entry_module: str = ""  # the module the registry names (may dispatch elsewhere)
    key: ClassKey | None = None
    callers: list[CallerRecord] = field(default_factory=list)
    uncalled: bool = False  # not_applicable because no speculator that can hold it calls get_top_tokens
    rule: str | None = None  # id of the compute_logits shape rule that decided the status (docs/rules.md)
    source: str = "vllm"
    replaces: tuple[str, str] | None = None  # (module, class) of the in-tree entry replaced
    resolved_on: list[str] = field(default_factory=list)  # in-tree platforms whose analysis this is
    unavailable_on: list[Unavailable] = field(default_factory=list)  # the arch's platforms without a class

    def to_json(self) -> dict:
        return {
            "arch": self.arch,
            "class": self.cls,
            "module": self.module,
            "file": self.file,
            "line": self.line,
            "platforms": self.platforms,
            "status": self.status.value,
            "compute_logits": self.compute_logits.to_json() if self.compute_logits else None,
            "get_top_tokens": self.get_top_tokens.to_json() if self.get_top_tokens else None,
            "delegates": [d.to_json() for d in self.delegates],
            "consistency": self.consistency.value if self.consistency else None,
            "reason": self.reason,
            "rule": self.rule,
            "registry": self.registry,
            "callers": [c.to_json() for c in self.callers],
            "source": self.source,
            "replaces": {"module": self.replaces[0], "class": self.replaces[1]} if self.replaces else None,
            "unavailable_on": [u.to_json() for u in self.unavailable_on],
        }


@dataclass(frozen=True)
class Unresolved:
    """An architecture that could not be followed to a class on some platforms."""

    arch: str | None
    module: str
    cls: str
    platforms: list[str]
    reason: str


@dataclass
class ScanResult:
    tree: SourceTree
    records: list[DrafterRecord]
    unresolved: list[Unresolved]
    parse_errors: list[tuple[str, str]]  # (file, message)
    notes: list[str] = field(default_factory=list)  # about plugins: registrations not read, entry points not called
    registry_notes: list[str] = field(default_factory=list)  # registry content that could not be read
    caller_notes: list[str] = field(default_factory=list)  # speculators constructed that could not be followed
    runner_notes: list[str] = field(default_factory=list)  # the model runner's choice that could not be read
    # why `fix --model NAME` refuses a missing_fixable record, by refusal_key; None: not planned
    # (only the reports that advise that command ask for it: pre-commit and the concise scan)
    fix_refusals: dict[str, str] | None = None
    # the package's Python files (paths, sizes, modification times) when fix_refusals were planned: the blast
    # radius reads every one of them for subclasses, files no scan reads among them (``package_files``)
    fix_refusals_basis: str | None = None

    def refused_by_fix(self, record: DrafterRecord) -> str | None:
        """Why ``fix --model NAME`` refuses this record (``fix_refusals``); None: it does not, or not planned."""
        return (self.fix_refusals or {}).get(refusal_key(record))


def refusal_key(record: DrafterRecord) -> str:
    """A record's key in ``ScanResult.fix_refusals``: one class may be a record per group of platforms (a plugin's
    subclass of a class that vLLM dispatches per platform), each refused for its own reason."""
    return f"{record.file}:{record.line}:{record.arch or record.cls}:{','.join(record.platforms)}"


class ParamKind(StrEnum):
    POSONLY = "posonly"
    POS = "pos"
    STAR = "star"  # *args
    KWONLY = "kwonly"
    STARSTAR = "starstar"  # **kwargs


@dataclass(frozen=True)
class SignatureParam:
    name: str
    kind: ParamKind
    required: bool  # no default


@dataclass(frozen=True)
class HeadSignature:
    """The parameters (``self`` left out) of the scanned tree's ``LogitsProcessor.get_top_tokens`` and of
    what its call runs (``forward``, or ``__call__`` where the class defines one), read off its source: a
    mirror passes the head call's arguments to get_top_tokens as they are, so they must bind there, and to
    the same parameters as in the call. ``where``: file:line of get_top_tokens, None where the signature
    was not read and is assumed (ASSUMED_SIGNATURE); ``call``: None where the class defines neither entry."""

    where: str | None
    top_tokens: tuple[SignatureParam, ...]
    call: tuple[SignatureParam, ...] | None


# vLLM's get_top_tokens since it exists (0.17 to 0.34); assumed where the tree's LogitsProcessor is not
# read (a directory of plugin files without vLLM), and the signature the rule examples run against.
ASSUMED_SIGNATURE = HeadSignature(
    None,
    (
        SignatureParam("lm_head", ParamKind.POS, True),
        SignatureParam("hidden_states", ParamKind.POS, True),
        SignatureParam("embedding_bias", ParamKind.POS, False),
    ),
    None,
)
