"""Stage 3c: the registry dicts, and drafter-looking classes where there is no registry."""

from __future__ import annotations

import ast
import re

from ..errors import UsageError
from ..index.modules import ModuleIndex
from ..index.platforms import literal_string
from ..locate import REGISTRY
from ..model import RegistryEntry

MODELS_PACKAGE = "vllm.model_executor.models"
SPECULATIVE = "_SPECULATIVE_DECODING_MODELS"
# Other registry dicts hold a few drafters too (the Transformers-backend MTP entries).
DRAFTER_NAME = re.compile(r"(MTP|Eagle|DFlash|DSpark|Draft|Medusa|MLPSpeculator)", re.IGNORECASE)
# Outside _SPECULATIVE_DECODING_MODELS "Eagle" also names target models (Eagle2.5-VL).
OTHER_DICT_DRAFTER = re.compile(r"(MTP|DFlash|DSpark|DraftModel|Medusa|MLPSpeculator)")
DRAFTER_FILE = re.compile(r"(_mtp|eagle|dflash|dspark|draft|medusa)", re.IGNORECASE)
# What a plugin scan looks for, in the words the CLI reports it with.
PLUGIN_HEURISTIC = (
    "drafter-named classes (MTP, Eagle, DFlash, DSpark, Draft, Medusa, MLPSpeculator) with "
    "compute_logits or get_top_tokens, in drafter-named files (*_mtp*, *eagle*, *dflash*, "
    "*dspark*, *draft*, *medusa*)"
)


def read_registry(index: ModuleIndex) -> list[RegistryEntry]:
    assert index.tree.package_dir is not None
    path = index.tree.package_dir / REGISTRY
    rel = index.relative(path)
    try:
        module = ast.parse(index.read_bytes(path))
    except OSError as error:
        raise UsageError(f"{rel}: cannot be read ({error.strerror or error}); cannot read the registry") from None
    except (SyntaxError, ValueError) as error:
        # a null byte: a SyntaxError without a line, or a ValueError on older Pythons
        where = f"syntax error at line {error.lineno}" if getattr(error, "lineno", None) else str(error)
        raise UsageError(f"{rel}: {where}; cannot read the registry") from None
    dicts: dict[str, ast.expr] = {}
    for statement in module.body:
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            dicts[statement.targets[0].id] = statement.value
        elif (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and statement.value is not None
        ):
            dicts[statement.target.id] = statement.value
    if SPECULATIVE not in dicts:
        raise UsageError(f"{rel}: no {SPECULATIVE} dict; is this a vLLM tree?")
    entries = [
        RegistryEntry(arch, mod, cls, SPECULATIVE) for arch, mod, cls in _entries(dicts[SPECULATIVE], rel, SPECULATIVE)
    ]
    for name, value in dicts.items():
        if name == SPECULATIVE or not isinstance(value, ast.Dict):
            continue
        for arch, mod, cls in _entries(value, rel, name, strict=False):
            if OTHER_DICT_DRAFTER.search(arch) or OTHER_DICT_DRAFTER.search(cls):
                entries.append(RegistryEntry(arch, mod, cls, name))
    return entries


def _entries(value: ast.expr, rel: str, name: str, strict: bool = True):
    if not isinstance(value, ast.Dict):
        if strict:
            raise UsageError(f"{rel}: {name} is not a dict literal; mtp-audit reads it statically")
        return
    for key, item in zip(value.keys, value.values):
        if key is None:  # **other: entries we cannot see
            continue
        pair = [literal_string(e) for e in item.elts] if isinstance(item, ast.Tuple) else []
        arch = literal_string(key)
        if arch is None or len(pair) != 2 or None in pair:
            if strict:
                raise UsageError(f"{rel}: an entry of {name} is not a (module, class) string pair")
            continue
        module_name, cls = pair
        if not all(part.isidentifier() for part in module_name.split(".")):
            # "..x", "." or "/etc/x" would name files outside the package (or nothing at all)
            raise UsageError(
                f"{rel}: {name}[{arch!r}] names module {module_name!r}, which is not a dotted "
                "module name; mtp-audit reads only modules inside the tree"
            )
        full = module_name if "." in module_name else f"{MODELS_PACKAGE}.{module_name}"
        yield arch, full, cls


def heuristic_entries(index: ModuleIndex) -> list[RegistryEntry]:
    """Drafters in a plugin tree: classes named like drafters in drafter-named files.

    Heuristic: a file whose name contains _mtp, eagle, dflash, dspark, draft or
    medusa, and a top-level class whose name contains MTP, Eagle, DFlash,
    DSpark, Draft, Medusa or MLPSpeculator. Whether it has ``compute_logits``
    is decided later, through its MRO.
    """
    root = index.tree.root
    entries = []
    try:
        paths = sorted(root.rglob("*.py"))
    except OSError as error:
        raise UsageError(f"{error.filename or root}: cannot be read ({error.strerror or error})") from None
    for path in paths:
        rel = path.relative_to(root)
        if any(part.startswith(".") or part in {"__pycache__", "tests", "test"} for part in rel.parts):
            continue
        if not DRAFTER_FILE.search(path.stem):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        facts = index.facts(module)
        if facts is None or facts.parse_error:
            continue
        for cls in facts.classes:
            if DRAFTER_NAME.search(cls.name) and not cls.name.startswith("_"):
                entries.append(RegistryEntry(None, module, cls.name, "heuristic"))
    return entries
