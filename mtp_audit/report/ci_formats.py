"""Machine formats for CI: GitHub workflow annotations and SARIF 2.1.0.

A finding's rule is the compute_logits shape rule that decided it (MTP1xx,
docs/rules.md) when one did, else the rule of its level (MTPA00x). Everything
else that makes a scan fail shows too: an architecture that does not resolve is
a result of its own rule (MTPA005), a file that could not be read or parsed an
error (in SARIF a tool execution notification of a run that was not
successful, as SARIF 2.1.0 reports a tool's failure on one of its inputs).
"""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from urllib.parse import quote

from .. import __version__
from ..classify.contract_rules import CONTRACT_RULES
from ..classify.memo import shape_rules
from ..model import DrafterRecord, ScanResult, Unresolved
from .severity import level_of

RULES = {
    "missing_fixable": ("MTPA001", "get_top_tokens missing; a safe mirror of compute_logits can be written", "warning"),
    "missing_manual": ("MTPA002", "get_top_tokens missing; no mechanical mirror is safe", "warning"),
    "divergent": ("MTPA003", "get_top_tokens selects different tokens from compute_logits", "error"),
    "unproven": ("MTPA004", "get_top_tokens cannot be proven equal to compute_logits statically", "note"),
    "unresolved": ("MTPA005", "a registered architecture does not resolve to a class on some platforms", "warning"),
}
GITHUB_LEVEL = {"error": "error", "warning": "warning", "note": "notice"}


def _location(file: str) -> dict:
    """A record's file as a SARIF artifact location: a percent-encoded URI relative to SRCROOT (which is
    encoded too), or for one outside the tree (an installed plugin's) a ``file:`` URI and no base."""
    path = PurePosixPath(file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": quote(file), "uriBaseId": "SRCROOT"}


def _message(record: DrafterRecord) -> str:
    where = ",".join(record.platforms)
    return f"{record.arch or record.cls} ({record.cls}, {where}): {record.reason}"


def _escape(text: str) -> str:
    """A workflow command's message, escaped as GitHub's toolkit escapes it (``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: object) -> str:
    """A workflow command's property value (``escapeProperty``): a ``,`` or ``:`` in a path would
    otherwise end the value, and GitHub would place the annotation on a file that does not exist."""
    return _escape(str(text)).replace(":", "%3A").replace(",", "%2C")


def _unresolved_message(unresolved: Unresolved) -> str:
    return (
        f"{unresolved.arch or unresolved.cls} -> {unresolved.module}.{unresolved.cls} does not resolve on "
        f"{','.join(unresolved.platforms)}: {unresolved.reason}"
    )


def _parse_error_message(file: str, message: str) -> str:
    return f"{file}: {message}; this file was skipped"


def _findings(result: ScanResult):
    """(record, level, rule id, severity) of every record that is a finding."""
    for record in result.records:
        level = level_of(record)
        if level is not None:
            rule, _, severity = RULES[level]
            yield record, level, record.rule or rule, severity


def render_github(result: ScanResult) -> str:
    """``::warning file=...,line=...::message`` lines, one per finding, unresolved architecture
    (no file: the class was never found) and file skipped (``::error``)."""
    lines = [
        f"::{GITHUB_LEVEL[severity]} file={_property(record.file)},line={record.line},"
        f"title={_property(f'{rule} {level}')}::{_escape(_message(record))}"
        for record, level, rule, severity in _findings(result)
    ]
    rule, _, severity = RULES["unresolved"]
    lines += [
        f"::{GITHUB_LEVEL[severity]} title={_property(f'{rule} unresolved')}::{_escape(_unresolved_message(u))}"
        for u in result.unresolved
    ]
    lines += [
        f"::error file={_property(file)},title=file skipped::{_escape(_parse_error_message(file, message))}"
        for file, message in result.parse_errors
    ]
    return "\n".join(lines) + ("\n" if lines else "")


def _unresolved_results(result: ScanResult) -> list[dict]:
    """SARIF results of the architectures that do not resolve, located by the class they name."""
    rule, _, severity = RULES["unresolved"]
    return [
        {
            "ruleId": rule,
            "level": severity,
            "message": {"text": _unresolved_message(u)},
            "locations": [{"logicalLocations": [{"fullyQualifiedName": f"{u.module}.{u.cls}", "kind": "type"}]}],
        }
        for u in result.unresolved
    ]


def _invocation(result: ScanResult) -> dict:
    """The run's invocation: not successful when a file was skipped, each one a notification."""
    return {
        "executionSuccessful": not result.parse_errors,
        "toolExecutionNotifications": [
            {
                "level": "error",
                "message": {"text": _parse_error_message(file, message)},
                "locations": [{"physicalLocation": {"artifactLocation": _location(file)}}],
            }
            for file, message in result.parse_errors
        ],
    }


def render_sarif(result: ScanResult) -> str:
    results = [
        {
            "ruleId": rule,
            "level": severity,
            "message": {"text": _message(record)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": _location(record.file),
                        "region": {"startLine": record.line},
                    }
                }
            ],
        }
        for record, _, rule, severity in _findings(result)
    ] + _unresolved_results(result)
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
                "invocations": [_invocation(result)],
                "results": results,
            }
        ],
    }
    return json.dumps(document, indent=2) + "\n"
