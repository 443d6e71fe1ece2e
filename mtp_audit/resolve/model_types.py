"""Hugging Face ``model_type`` -> drafter architectures, read from vLLM's speculative config.

``vllm/config/speculative.py`` rewrites a target's config into its drafter's:
``if hf_config.model_type in ("deepseek_v3", ...): hf_config.model_type =
"deepseek_mtp"``, then ``if hf_config.model_type == "deepseek_mtp": ...
"architectures": ["DeepSeekMTPModel"]``. Statements are read in order; a
renamed type carries the types it came from, and every architecture string
written under a model-type test maps to all of them (a test's ``and``/``or``
sides that are not model-type tests are taken to hold). Conditions on anything
else alone (``hf_config.architectures[0] == ...``) are not model types and are
skipped.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from ..index.platforms import literal_string, string_values

SPECULATIVE_CONFIG = Path("config/speculative.py")


def _preorder(node: ast.AST, types: type | tuple[type, ...]) -> Iterator:
    """Nodes of ``types`` under ``node`` in source order (``ast.walk`` is breadth-first),
    never inside f-strings (their literal pieces are not names)."""
    if isinstance(node, types):
        yield node
    if isinstance(node, ast.JoinedStr):
        return
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child, types)


def _is_model_type(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "model_type"


def model_type_map(package_dir: Path) -> dict[str, list[str]]:
    path = package_dir / SPECULATIVE_CONFIG
    if not path.is_file():
        return {}
    try:
        module = ast.parse(path.read_bytes())
    except (SyntaxError, ValueError):
        return {}
    return model_types_in(module)


def model_types_in(module: ast.Module) -> dict[str, list[str]]:
    """``model_type_map`` of the speculative config already parsed (the caller index parses it too)."""
    origins: dict[str, set[str]] = {}
    mapping: dict[str, set[str]] = {}
    for node in _preorder(module, ast.If):
        tested = tested_types(node.test)
        if not tested:
            continue
        sources = set(tested)
        for name in tested:
            sources |= origins.get(name, set())
        for statement in node.body:
            for assign in _preorder(statement, ast.Assign):
                renamed = literal_string(assign.value)
                if _is_model_type(assign.targets[0]) and renamed is not None:
                    origins.setdefault(renamed, set()).update(sources)
        for arch in _architectures(node.body):
            for name in sources:
                mapping.setdefault(name, set()).add(arch)
    return {name: sorted(archs) for name, archs in sorted(mapping.items())}


def tested_types(test: ast.expr) -> list[str]:
    """The model types a test picks: ``hf_config.model_type == "t"``, ``in`` a tuple, list or set of them (or a
    string: ``t`` itself is in it), ``"t" in hf_config.model_type`` (``t`` has itself in it), and those of each
    side of an ``and`` or ``or`` (``model_type in (...) and config.num_nextn_predict_layers > 0``: the other
    side is a property of the checkpoint, taken to hold)."""
    if isinstance(test, ast.BoolOp):
        found: list[str] = []
        for value in test.values:
            found += [t for t in tested_types(value) if t not in found]
        return found
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if _is_model_type(test.left) and isinstance(test.ops[0], (ast.Eq, ast.In)):
            return string_values(test.comparators[0]) or []
        if isinstance(test.ops[0], ast.In) and _is_model_type(test.comparators[0]):
            return string_values(test.left) or []
    return []


def _strings_in(node: ast.AST) -> set[str]:
    return {value for n in _preorder(node, ast.Constant) if (value := literal_string(n)) is not None}


def _results(value: ast.expr) -> set[str]:
    """The strings an expression may evaluate to: a literal, either side of a conditional or of ``or``/``and``
    (not the strings a comparison inside it tests)."""
    if isinstance(value, ast.IfExp):
        return _results(value.body) | _results(value.orelse)
    if isinstance(value, ast.BoolOp):
        return {s for operand in value.values for s in _results(operand)}
    found = literal_string(value)
    return {found} if found is not None else set()


def _architectures(body: list[ast.stmt]) -> set[str]:
    """Strings in ``"architectures": [...]`` entries and ``x["architectures"] = [...]`` assignments, a name
    there standing for the strings assigned to it in the block (``architecture = "A" if moe else "B"``)."""
    assigned: dict[str, set[str]] = {}
    for statement in body:
        for assign in _preorder(statement, ast.Assign):
            for target in assign.targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, set()).update(_results(assign.value))
    found: set[str] = set()

    def strings(value: ast.AST) -> set[str]:
        return _strings_in(value) | {s for name in _preorder(value, ast.Name) for s in assigned.get(name.id, ())}

    for statement in body:
        for literal in _preorder(statement, ast.Dict):
            for key, value in zip(literal.keys, literal.values):
                if literal_string(key) == "architectures":
                    found |= strings(value)
        for assign in _preorder(statement, ast.Assign):
            target = assign.targets[0]
            if isinstance(target, ast.Subscript) and "architectures" in _strings_in(target.slice):
                found |= strings(assign.value)
    return {name for name in found if name.isidentifier()}
