"""Machine formats for CI: GitHub workflow annotations and SARIF 2.1.0.

A finding's rule is the compute_logits shape rule that decided it (MTP1xx,
docs/rules.md) when one did, else the rule of its level (MTPA00x).
"""

from __future__ import annotations

import json

from .. import __version__
from ..classify.contract_rules import CONTRACT_RULES
from ..classify.memo import shape_rules
from ..model import DrafterRecord, ScanResult
from .severity import level_of

RULES = {
    "missing_fixable": ("MTPA001", "get_top_tokens missing; a safe mirror of compute_logits can be written", "warning"),
    "missing_manual": ("MTPA002", "get_top_tokens missing; no mechanical mirror is safe", "warning"),
    "divergent": ("MTPA003", "get_top_tokens selects different tokens from compute_logits", "error"),
    "unproven": ("MTPA004", "get_top_tokens cannot be proven equal to compute_logits statically", "note"),
}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def _message(record: DrafterRecord) -> str:
    where = ",".join(record.platforms)
    return f"{record.arch or record.cls} ({record.cls}, {where}): {record.reason}"


def _escape(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _findings(result: ScanResult):
    """(record, level, rule id, severity) of every record that is a finding."""
    for record in result.records:
        level = level_of(record)
        if level is not None:
            rule, _, severity = RULES[level]
            yield record, level, record.rule or rule, severity


def render_github(result: ScanResult) -> str:
    """``::warning file=...,line=...::message`` lines, one per finding."""
    lines = [
        f"::{GITHUB_LEVEL[severity]} file={record.file},line={record.line},"
        f"title={rule} {level}::{_escape(_message(record))}"
        for record, level, rule, severity in _findings(result)
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def render_sarif(result: ScanResult) -> str:
    results = [
        {
            "ruleId": rule,
            "level": severity,
            "message": {"text": _message(record)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": record.file, "uriBaseId": "SRCROOT"},
                        "region": {"startLine": record.line},
                    }
                }
            ],
        }
        for record, _, rule, severity in _findings(result)
    ]
    used = {r["ruleId"] for r in results}
    shapes = [
        {
            "id": rule.id,
            "name": rule.name,
            "shortDescription": {"text": rule.message},
            "fullDescription": {"text": " ".join(rule.__doc__.split())},
        }
        for rule in (*(shape_rules() if used - {rid for rid, _, _ in RULES.values()} else ()), *CONTRACT_RULES)
        if rule.id in used
    ]
    document = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "mtp-audit",
                        "version": __version__,
                        "informationUri": "https://github.com/vllm-project/vllm",
                        "rules": [
                            {
                                "id": rid,
                                "name": name,
                                "shortDescription": {"text": text},
                                "defaultConfiguration": {"level": severity},
                            }
                            for name, (rid, text, severity) in RULES.items()
                        ]
                        + shapes,
                    }
                },
                "originalUriBaseIds": {"SRCROOT": {"uri": result.tree.root.as_uri() + "/"}},
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
