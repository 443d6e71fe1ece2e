"""Property-based checks of the mirror rule over generated compute_logits bodies.

CI runs a fast profile; ``benchmarks/fuzz_shapes.py`` runs the same
properties over 10,000+ cases.
"""

from __future__ import annotations

import ast
import os

from hypothesis import HealthCheck, event, given, settings

from mtp_audit.apply.rewrite import rewrite_file
from mtp_audit.classify.analysis import Insertion, fingerprint
from mtp_audit.classify.shapes import analyze_compute_logits
from mtp_audit.index.fact_types import MethodFacts
from mtp_audit.index.facts import extract_facts
from mtp_audit.model import ClassKey
from mtp_audit.resolve.mro import MethodHit
from mtp_audit.synthesize.answers import mirror_fingerprint
from shape_strategies import Case, compute_logits_cases

EXAMPLES = int(os.environ.get("MTP_AUDIT_FUZZ_EXAMPLES", "150"))
PROFILE = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

MODULE = (
    "import torch\nfrom torch import nn\n\n\nclass Drafter(nn.Module):\n{method}\n"
    "    def forward(self, x):\n        return x\n"
)


def _module(case: Case) -> str:
    method = "".join(f"    {line}\n" if line else "\n" for line in case.code.splitlines())
    return MODULE.format(method=method)


@PROFILE
@given(compute_logits_cases())
def test_classification_follows_the_mirror_rule(case: Case):
    shape = analyze_compute_logits(case.code, 1)
    event(f"classified {shape.kind}")
    if case.must_be_manual:
        assert shape.kind == "manual", (case.code, shape)
        assert shape.reason
    else:
        assert shape.kind == ("head" if case.head_kind == "processor" else "delegate"), (case.code, shape)


@PROFILE
@given(compute_logits_cases())
def test_fix_output_is_old_plus_method_and_idempotent(case: Case):
    shape = analyze_compute_logits(case.code, 1)
    if shape.kind not in ("head", "delegate"):
        return
    source = _module(case)
    facts = extract_facts(source, "pkg.drafter", "pkg/drafter.py", False)
    [cls] = facts.classes
    method = cls.methods["compute_logits"]
    key = ClassKey("pkg.drafter", "Drafter", cls.line)
    rewrite = rewrite_file("pkg/drafter.py", source, [Insertion(key, MethodHit(key, method, 0))], binds_torch=True)
    ast.parse(rewrite.new)  # check_rewrite already proved old + exactly the method
    new_facts = extract_facts(rewrite.new, "pkg.drafter", "pkg/drafter.py", False)
    [new_cls] = new_facts.classes
    assert new_cls.methods["compute_logits"].code == method.code
    added: MethodFacts = new_cls.methods["get_top_tokens"]
    assert fingerprint(added.code) == mirror_fingerprint(method.code)
    assert "logits_processor(" not in added.code.replace("logits_processor.get_top_tokens(", "")
    # a second fix has nothing to do: the class now defines get_top_tokens
    assert list(new_cls.methods) == ["compute_logits", "get_top_tokens"]
