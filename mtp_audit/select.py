"""``--model NAME``: match records by module stem, architecture or class name."""

from __future__ import annotations

import difflib

from .errors import UsageError
from .model import DrafterRecord, Unresolved

DRAFTER_SUFFIXES = ("_mtp", "_eagle3", "_eagle", "_dflash2", "_dflash", "_dspark")
GENERIC_STEMS = {"mtp", "dspark", "dflash", "dflash2", "eagle", "model", "__init__"}


def names_of(record: DrafterRecord) -> set[str]:
    """Every spelling ``--model`` accepts for a record, lower-cased (it matches without case)."""
    return set(spellings(record))


def spellings(record: DrafterRecord) -> dict[str, str]:
    """The names ``--model`` accepts for a record, lower-cased, each as the code writes it."""
    written = [record.cls, record.entry_module.rsplit(".", 1)[-1], record.file.rsplit("/", 1)[-1].removesuffix(".py")]
    return _spelled(written + ([record.arch] if record.arch else []))


def _spelled(written: list[str]) -> dict[str, str]:
    """Each name and its stem without a drafter suffix, lower-cased -> as written; generic stems left out."""
    for name in list(written):
        written += [name[: -len(s)] for s in DRAFTER_SUFFIXES if name.lower().endswith(s) and len(name) > len(s)]
    return {name.lower(): name for name in written if name.lower() not in GENERIC_STEMS}


def select(
    records: list[DrafterRecord],
    wanted: list[str],
    *,
    single_module: bool,
    model_types: dict[str, list[str]] | None = None,
    unresolved: list[Unresolved] | None = None,
) -> list[DrafterRecord]:
    """Records matching any of ``wanted``; a name that matches nothing is a usage error.

    A name of a registered architecture that does not resolve (``unresolved``) is no usage error: ``scan``
    reports it as unresolved (``unresolved_named``); with ``single_module`` (``fix``, ``verify``: a class
    to act on is needed) the error says why it does not resolve, not that no drafter has that name.

    A name that is no drafter's but a Hugging Face ``model_type`` that the
    speculative config maps to drafter architectures (``model_types``) stands
    for those architectures.

    With ``single_module``, one name must not stand for different class
    definitions registered from different modules (a class name shared by
    two model packages, say); one class reached from two registry modules is
    one target.
    """
    chosen: list[DrafterRecord] = []
    for name in wanted:
        key = name.lower()
        matches = [r for r in records if key in names_of(r)]
        if not matches and model_types and key in model_types:
            archs = {a.lower() for a in model_types[key]}
            matches = [r for r in records if r.arch and r.arch.lower() in archs]
        named = [] if matches else unresolved_named(unresolved or [], [name], model_types)
        if named:
            if single_module:
                raise UsageError(f"--model {name}: {_unresolved_line(named)}")
            continue
        if not matches:
            raise UsageError(f"--model {name} matches no drafter; {_suggest(records, key)}")
        keys_by_module: dict[str, set] = {}
        for r in matches:
            keys_by_module.setdefault(r.entry_module, set()).add(r.key)
        distinct = {frozenset(keys) for keys in keys_by_module.values()}
        if single_module and len(distinct) > 1:
            listing = "; ".join(sorted({f"{r.arch or r.cls} ({r.entry_module})" for r in matches}))
            alone = _names_alone(records, keys_by_module)
            advice = f"Give one of: {', '.join(alone)}." if alone else "Give the class or module name of one."
            raise UsageError(f"--model {name} is ambiguous, it names: {listing}. {advice}")
        chosen.extend(r for r in matches if r not in chosen)
    return chosen


def _names_alone(records: list[DrafterRecord], keys_by_module: dict[str, set]) -> list[str]:
    """For each registry module's classes an ambiguous name stands for, a spelling ``--model`` takes that
    selects only those (its architecture, its class, then its module's and file's names), as written; a
    module with no such spelling is left out."""
    out = []
    for module, keys in sorted(keys_by_module.items()):
        record = next(r for r in records if r.entry_module == module and r.key in keys)
        spelled = spellings(record)
        first = [name.lower() for name in (record.arch, record.cls) if name and name.lower() in spelled]
        for key in dict.fromkeys([*first, *spelled]):
            written = spelled[key]
            chosen = [r for r in records if key in names_of(r)]
            if {r.entry_module for r in chosen} == {module} and {r.key for r in chosen} <= keys:
                out.append(written)
                break
    return out


def unresolved_named(
    unresolved: list[Unresolved], wanted: list[str], model_types: dict[str, list[str]] | None = None
) -> list[Unresolved]:
    """The unresolved architectures ``--model`` names (by architecture, class or registry module stem, as
    ``spellings``, or through a ``model_type`` that stands for them): with ``--model``, only they are
    reported and count for the exit code."""
    keys = {name.lower() for name in wanted}
    keys |= {a.lower() for key in list(keys) for a in (model_types or {}).get(key, [])}
    return [u for u in unresolved if keys & _unresolved_spellings(u)]


def _unresolved_spellings(entry: Unresolved) -> set[str]:
    return set(_spelled([entry.cls, entry.module.rsplit(".", 1)[-1], *([entry.arch] if entry.arch else [])]))


def _unresolved_line(entries: list[Unresolved]) -> str:
    return "; ".join(
        f"{u.arch or u.cls} -> {u.module}.{u.cls} does not resolve on {','.join(u.platforms)}: {u.reason}"
        for u in entries
    )


def _suggest(records: list[DrafterRecord], key: str) -> str:
    """Close names as the code writes them (``ErnieMTPModel``), matched without case as ``--model`` is."""
    candidates = {lower: name for r in records for lower, name in spellings(r).items()}
    close = difflib.get_close_matches(key, sorted(candidates), n=6, cutoff=0.5)
    if close:
        return "did you mean: " + ", ".join(candidates[c] for c in close)
    return "known drafters: " + ", ".join(sorted({r.arch or r.cls for r in records}))
