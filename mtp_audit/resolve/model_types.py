"""Hugging Face ``model_type`` -> drafter architectures, read from vLLM's speculative config.

``vllm/config/speculative.py`` rewrites a target's config into its drafter's:
``if hf_config.model_type in ("deepseek_v3", ...): hf_config.model_type =
"deepseek_mtp"``, then ``if hf_config.model_type == "deepseek_mtp": ...
"architectures": ["DeepSeekMTPModel"]``. Statements are read in order; a
renamed type carries the types it came from, and every architecture string
written under a model-type test maps to all of them. Conditions on anything
else (``hf_config.architectures[0] == ...``) are not model types and are
skipped.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import libcst.matchers as m

from ..cstwalk import nodes_of
from ..index.platforms import string_values

SPECULATIVE_CONFIG = Path("config/speculative.py")
MODEL_TYPE = m.Attribute(attr=m.Name("model_type"))
ARCHITECTURES_KEY = m.DictElement(key=m.SimpleString())


def model_type_map(package_dir: Path) -> dict[str, list[str]]:
    path = package_dir / SPECULATIVE_CONFIG
    if not path.is_file():
        return {}
    try:
        module = cst.parse_module(path.read_bytes())
    except cst.ParserSyntaxError:
        return {}
    origins: dict[str, set[str]] = {}
    mapping: dict[str, set[str]] = {}
    for node in nodes_of(module, cst.If):
        tested = _tested_types(node.test)
        if not tested:
            continue
        sources = set(tested)
        for name in tested:
            sources |= origins.get(name, set())
        for assign in nodes_of(node.body, cst.Assign):
            if m.matches(assign.targets[0].target, MODEL_TYPE) and isinstance(assign.value, cst.SimpleString):
                origins.setdefault(assign.value.evaluated_value, set()).update(sources)
        for arch in _architectures(node.body):
            for name in sources:
                mapping.setdefault(name, set()).add(arch)
    return {name: sorted(archs) for name, archs in sorted(mapping.items())}


def _tested_types(test: cst.BaseExpression) -> list[str]:
    if isinstance(test, cst.Comparison) and m.matches(test.left, MODEL_TYPE) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        if isinstance(comparison.operator, (cst.Equal, cst.In)):
            comparator = comparison.comparator
            if isinstance(comparator, cst.SimpleString):
                return [comparator.evaluated_value]
            return string_values(comparator) or []
    return []


def _architectures(body: cst.CSTNode) -> set[str]:
    """Strings in ``"architectures": [...]`` entries and ``x["architectures"] = [...]`` assignments."""
    found: set[str] = set()
    for element in nodes_of(body, cst.DictElement):
        if isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == "architectures":
            found |= {s.evaluated_value for s in nodes_of(element.value, cst.SimpleString)}
    for assign in nodes_of(body, cst.Assign):
        target = assign.targets[0].target
        if isinstance(target, cst.Subscript) and any(
                isinstance(s, cst.SimpleString) and s.evaluated_value == "architectures"
                for s in nodes_of(target.slice[0], cst.SimpleString)):
            found |= {s.evaluated_value for s in nodes_of(assign.value, cst.SimpleString)}
    return {name for name in found if name.isidentifier()}
