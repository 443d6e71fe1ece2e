"""docs/schema/scan.schema.json: a valid schema that means something, and documented field by field."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from conftest import FIXTURES, SCAN_SCHEMA, build_tree, check_scan_json
from mtp_audit.locate import locate
from mtp_audit.model import CallerRecord
from mtp_audit.report.json_report import render_json
from mtp_audit.scan import scan

DOCS = Path(__file__).resolve().parents[1] / "docs"


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    tree = build_tree(FIXTURES / "scan" / "delegation", tmp_path_factory.mktemp("tree"))
    result, _, _ = scan(locate(tree))
    result.records[0].callers.append(
        CallerRecord(
            "MTPSpeculator", "vllm/v1/worker/gpu/spec_decode/speculator.py", 580, ("hidden_states",), ("hidden_states",)
        )
    )
    return check_scan_json(render_json(result))


def test_schema_is_valid():
    jsonschema.Draft202012Validator.check_schema(json.loads(SCAN_SCHEMA.read_text()))


def test_fields_other_helpers_add_are_allowed(document):
    doc = copy.deepcopy(document)
    doc["drafters"][0].update(rule="delegation", source="cache", replaces=None)
    check_scan_json(json.dumps(doc))
    doc["drafters"][0]["replaces"] = {"module": "vllm.model_executor.models.old_mtp", "class": "OldMTP"}
    check_scan_json(json.dumps(doc))


@pytest.mark.parametrize(
    "break_it",
    [
        lambda d: d["drafters"][0].update(status="fixable"),
        lambda d: d["drafters"][0].update(platforms=["gpu, cuda"]),
        lambda d: d["drafters"][0].update(consistency="same"),
        lambda d: d["drafters"][0].update(surprise=1),
        lambda d: d["drafters"][0].pop("callers"),
        lambda d: d["drafters"][0]["callers"][0].pop("get_top_tokens_args"),
        lambda d: d["drafters"][0]["callers"][0].update(line="580"),
        lambda d: d["drafters"][0].update(rule=3),
        lambda d: d.pop("vllm_version"),
    ],
    ids=[
        "status",
        "platform",
        "consistency",
        "unknown field",
        "no callers",
        "caller args",
        "caller line",
        "rule type",
        "no version",
    ],
)
def test_schema_rejects_what_the_contract_does_not_allow(document, break_it):
    doc = copy.deepcopy(document)
    break_it(doc)
    with pytest.raises(jsonschema.ValidationError):
        check_scan_json(json.dumps(doc))


def test_every_record_field_is_documented():
    schema = json.loads(SCAN_SCHEMA.read_text())
    text = (DOCS / "json.md").read_text()
    for name in [
        *schema["properties"],
        *schema["$defs"]["drafter"]["properties"],
        *schema["$defs"]["caller"]["properties"],
    ]:
        assert f"`{name}`" in text, name
