"""``--model NAME``: match records by module stem, architecture or class name."""

from __future__ import annotations

import difflib

from .errors import UsageError
from .model import DrafterRecord

DRAFTER_SUFFIXES = ("_mtp", "_eagle3", "_eagle", "_dflash2", "_dflash", "_dspark")
GENERIC_STEMS = {"mtp", "dspark", "dflash", "dflash2", "eagle", "model", "__init__"}


def names_of(record: DrafterRecord) -> set[str]:
    """Every spelling ``--model`` accepts for a record, lower-cased."""
    names = {record.cls.lower(), record.entry_module.rsplit(".", 1)[-1].lower()}
    if record.arch:
        names.add(record.arch.lower())
    stem = record.file.rsplit("/", 1)[-1].removesuffix(".py").lower()
    names.add(stem)
    for name in list(names):
        for suffix in DRAFTER_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                names.add(name.removesuffix(suffix))
    return names - GENERIC_STEMS


def select(
    records: list[DrafterRecord],
    wanted: list[str],
    *,
    single_module: bool,
    model_types: dict[str, list[str]] | None = None,
) -> list[DrafterRecord]:
    """Records matching any of ``wanted``; a name that matches nothing is a usage error.

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
        if not matches:
            raise UsageError(f"--model {name} matches no drafter; {_suggest(records, key)}")
        keys_by_module: dict[str, set] = {}
        for r in matches:
            keys_by_module.setdefault(r.entry_module, set()).add(r.key)
        distinct = {frozenset(keys) for keys in keys_by_module.values()}
        if single_module and len(distinct) > 1:
            listing = "; ".join(sorted({f"{r.arch or r.cls} ({r.entry_module})" for r in matches}))
            raise UsageError(f"--model {name} is ambiguous, it names: {listing}. Give an architecture name.")
        chosen.extend(r for r in matches if r not in chosen)
    return chosen


def _suggest(records: list[DrafterRecord], key: str) -> str:
    candidates = sorted({n for r in records for n in names_of(r)})
    close = difflib.get_close_matches(key, candidates, n=6, cutoff=0.5)
    if close:
        return "did you mean: " + ", ".join(close)
    return "known drafters: " + ", ".join(sorted({r.arch or r.cls for r in records}))
