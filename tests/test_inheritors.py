"""The text index that picks which modules the inheritor search reads."""

from __future__ import annotations

from mtp_audit.apply.inheritors import BaseNames


def test_base_names_reads_every_form_of_base_list(tmp_path):
    package = tmp_path / "vllm"
    package.mkdir()
    (package / "one_line.py").write_text("class A(Base, metaclass=Meta):\n    pass\n")
    (package / "multi_line.py").write_text(
        "import x\n\n\nclass B(\n    x.Other,  # a comment (with parens)\n    Mixin[int],\n):\n    pass\n"
    )
    (package / "nested.py").write_text("def f():\n    class C(Inner):\n        pass\n")
    (package / "prose.py").write_text("# a subclass Fake(Base): is not a class statement\nBase = 1\n")
    (package / "no_bases.py").write_text("class D:\n    base = Base\n")
    names = BaseNames(tmp_path, package)

    assert names.mentioning({"Base"}) == ["vllm.one_line"]
    assert names.mentioning({"Meta"}) == ["vllm.one_line"]  # generous: keywords count too
    assert names.mentioning({"Other", "Mixin"}) == ["vllm.multi_line"]
    assert names.mentioning({"Inner"}) == ["vllm.nested"]
    assert names.mentioning({"Fake", "D", "pass"}) == []
