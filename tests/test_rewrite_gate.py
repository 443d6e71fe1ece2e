"""The rewrite gate: a rewrite is accepted only as the old file plus exactly the planned methods.

Bad rewrites are fed to ``check_rewrite`` directly, one kind of damage each,
and ``rewrite_file`` must refuse to produce one.
"""

from __future__ import annotations

import ast
import dataclasses
import re

import libcst as cst
import pytest

from mtp_audit.apply.changes import FileJob, Rewrite, UnsafeRewrite
from mtp_audit.apply.rewrite import check_rewrite, rewrite_file, rewrite_files
from mtp_audit.apply.source_text import _other_torch_binding, uses_torch, with_final_newline
from mtp_audit.classify.analysis import Insertion
from mtp_audit.cstnodes import parse_method
from mtp_audit.index.facts import extract_facts
from mtp_audit.model import ClassKey
from mtp_audit.resolve.mro import MethodHit

OLD = """\
import torch
from torch import nn


class Helper(nn.Module):
    def forward(self, x):
        return x


class Drafter(nn.Module):
    scale = 2

    @torch.no_grad()
    def compute_logits(self, hidden_states):
        hidden_states = self.norm(hidden_states)
        return self.logits_processor(self.lm_head, hidden_states)

    def forward(self, x):
        return x
"""
DRAFTER_LINE = OLD.splitlines().index("class Drafter(nn.Module):") + 1
METHOD = """\
    def get_top_tokens(self, hidden_states) -> torch.Tensor:
        hidden_states = self.norm(hidden_states)
        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)
"""
AFTER_COMPUTE_LOGITS = "        return self.logits_processor(self.lm_head, hidden_states)\n"


def insert_after(text: str, anchor: str, added: str, count: int = 1) -> str:
    assert text.count(anchor) >= count, anchor
    head, _, tail = text.partition(anchor)
    return head + anchor + added + tail


def rewrite(new: str, targets=(("Drafter", DRAFTER_LINE),), added_import: bool = False, old: str = OLD) -> Rewrite:
    return Rewrite("pkg/drafter.py", old, new, [name for name, _ in targets], added_import, list(targets))


GOOD = insert_after(OLD, AFTER_COMPUTE_LOGITS, "\n" + METHOD)


def test_the_old_file_plus_the_method_is_accepted() -> None:
    check_rewrite(rewrite(GOOD))


def test_an_added_import_torch_is_accepted_only_when_planned() -> None:
    old = OLD.replace("import torch\n", "")
    new = "import torch\n" + GOOD.replace("import torch\n", "")
    targets = (("Drafter", DRAFTER_LINE - 1),)
    check_rewrite(rewrite(new, targets, added_import=True, old=old))
    with pytest.raises(UnsafeRewrite, match="inserted outside"):
        check_rewrite(rewrite(new, targets, added_import=False, old=old))
    with pytest.raises(UnsafeRewrite, match="inserted outside"):  # planned: import torch, not another
        check_rewrite(rewrite("import os\n" + GOOD.replace("import torch\n", ""), targets, added_import=True, old=old))


def refused(new: str, match: str, **kwargs) -> None:
    with pytest.raises(UnsafeRewrite, match=match):
        check_rewrite(rewrite(new, **kwargs))


def test_an_edited_existing_line_is_refused() -> None:
    refused(GOOD.replace("scale = 2", "scale = 3"), "edits existing lines")


def test_a_deleted_line_is_refused() -> None:
    refused(GOOD.replace("    scale = 2\n", ""), "edits existing lines")


def test_a_rewrite_that_does_not_parse_is_refused() -> None:
    refused(GOOD.replace("-> torch.Tensor:", "-> torch.Tensor"), "does not parse")


def test_a_method_that_swallows_an_existing_statement_is_refused() -> None:
    """Inserted between two statements of compute_logits, the method's body takes the second one
    (its return): every line of the old file is still there, only the AST says what moved."""
    method = (
        "    def get_top_tokens(self, hidden_states) -> torch.Tensor:\n"
        "        hidden_states = self.norm(hidden_states)\n"
    )
    new = insert_after(OLD, "        hidden_states = self.norm(hidden_states)\n", method)
    refused(new, "changed beyond the added method")


def test_a_method_that_takes_a_decorator_away_is_refused() -> None:
    """Put between ``@torch.no_grad()`` and ``def compute_logits``: the decorator now applies to
    the new method and compute_logits runs with gradients."""
    new = insert_after(OLD, "    @torch.no_grad()\n", METHOD)
    refused(new, "changed beyond the added method")


def test_a_method_added_to_the_wrong_class_is_refused() -> None:
    new = insert_after(OLD, "    def forward(self, x):\n        return x\n", "\n" + METHOD)  # into Helper
    refused(new, "not exactly one method|outside the new methods")


def test_a_method_added_to_the_wrong_class_besides_the_right_one_is_refused() -> None:
    new = insert_after(GOOD, "    def forward(self, x):\n        return x\n", "\n" + METHOD)
    refused(new, "outside the new methods")


def test_two_methods_for_one_planned_class_are_refused() -> None:
    refused(insert_after(GOOD, AFTER_COMPUTE_LOGITS, "\n" + METHOD), "not exactly one method")


def test_a_method_of_another_name_is_refused() -> None:
    refused(
        insert_after(OLD, AFTER_COMPUTE_LOGITS, "\n" + METHOD.replace("get_top_tokens(", "top_k(", 1)),
        "not exactly one method|outside the new methods|changed beyond",
    )


def test_a_planned_class_left_without_its_method_is_refused() -> None:
    targets = (("Drafter", DRAFTER_LINE), ("Helper", OLD.splitlines().index("class Helper(nn.Module):") + 1))
    refused(GOOD, "not exactly one method", targets=targets)


def test_a_class_that_already_has_the_method_is_refused() -> None:
    refused(insert_after(GOOD, AFTER_COMPUTE_LOGITS, "\n" + METHOD), "already defines get_top_tokens", old=GOOD)


def test_an_added_class_is_refused() -> None:
    refused(GOOD + "\n\nclass Extra:\n    pass\n", "changes the file's classes")


def test_an_added_module_statement_is_refused() -> None:
    refused(GOOD + "\nDEBUG = True\n", "inserted outside")


def test_an_added_statement_in_an_untouched_class_is_refused() -> None:
    refused(insert_after(GOOD, "class Helper(nn.Module):\n", "    debug = True\n"), "inserted outside")


def test_code_on_the_blank_lines_around_the_method_is_refused() -> None:
    """A blank line next to the new method may come from either side; code there may not."""
    refused(insert_after(OLD, AFTER_COMPUTE_LOGITS, "    limit = 1\n" + METHOD), "changed beyond|inserted outside")
    refused(
        insert_after(OLD, AFTER_COMPUTE_LOGITS, "\n" + METHOD + "    limit = 1\n"), "changed beyond|inserted outside"
    )


def test_a_nested_class_counts_as_part_of_its_class() -> None:
    old = OLD.replace("    scale = 2\n", "    scale = 2\n\n    class Config:\n        depth = 1\n")
    line = old.splitlines().index("class Drafter(nn.Module):") + 1
    good = insert_after(old, AFTER_COMPUTE_LOGITS, "\n" + METHOD)
    check_rewrite(rewrite(good, targets=(("Drafter", line),), old=old))
    damaged = insert_after(good, "    class Config:\n", METHOD.replace("    ", "        "))
    with pytest.raises(UnsafeRewrite):
        check_rewrite(rewrite(damaged, targets=(("Drafter", line),), old=old))


def _insertion(source: str, name: str = "Drafter") -> Insertion:
    facts = extract_facts(source, "pkg.drafter", "pkg/drafter.py", False)
    cls = next(c for c in facts.classes if c.name == name)
    key = ClassKey("pkg.drafter", name, cls.line)
    return Insertion(key, MethodHit(key, cls.methods["compute_logits"], 0))


def test_rewrite_file_writes_the_mirror_and_keeps_every_old_line() -> None:
    result = rewrite_file("pkg/drafter.py", OLD, [_insertion(OLD)], binds_torch=True)
    assert result.classes == ["Drafter"]
    assert "self.logits_processor.get_top_tokens(self.lm_head, hidden_states)" in result.new
    check_rewrite(result)


@pytest.mark.parametrize("blank_lines", [1, 2, 3, 5])
def test_a_class_ending_in_compute_logits_before_any_run_of_blank_lines_is_written(blank_lines: int) -> None:
    """The line match may take any blank line of the run after the class for the one inserted before the new
    method: the gate lets each of them be that one (a file not ruff-formatted, three blank lines after a class)."""
    source = (
        "import torch\n\n\nclass Drafter:\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
        + "\n" * blank_lines
        + "class Other:\n    pass\n"
    )
    result = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True)
    check_rewrite(result)
    assert result.new.endswith("\n" * blank_lines + "class Other:\n    pass\n")


def test_rewrite_file_refuses_a_second_get_top_tokens() -> None:
    """Planned from stale facts: the class got its method since."""
    with pytest.raises(UnsafeRewrite, match="already defines get_top_tokens"):
        rewrite_file("pkg/drafter.py", GOOD, [_insertion(GOOD)], binds_torch=True)


def test_rewrite_file_refuses_a_method_that_is_not_the_mirror_it_planned() -> None:
    """Whatever method the formatter hands back is checked before the rewrite is returned."""
    _, wrong = parse_method("def forward_again(self, hidden_states):\n    return hidden_states\n")
    with pytest.raises(UnsafeRewrite):
        rewrite_file("pkg/drafter.py", OLD, [_insertion(OLD)], binds_torch=True, methods=[wrong])


def test_rewrite_file_names_every_class_that_moved() -> None:
    moved = "\n\n" + OLD
    helper = _retarget(_insertion(OLD), "Helper", 5)
    with pytest.raises(
        UnsafeRewrite, match=re.escape(f"planned for: Drafter (line {DRAFTER_LINE}), Helper (line 5); scan again")
    ):
        rewrite_file("pkg/drafter.py", moved, [_insertion(OLD), helper], binds_torch=True)


def test_rewrite_file_refuses_a_class_that_moved() -> None:
    moved = "\n\n" + OLD
    with pytest.raises(
        UnsafeRewrite,
        match=re.escape(
            f"pkg/drafter.py: the file no longer has the classes planned for: Drafter (line {DRAFTER_LINE}); scan again"
        ),
    ):
        rewrite_file("pkg/drafter.py", moved, [_insertion(OLD)], binds_torch=True)


def test_rewrite_files_refuses_the_unsafe_file_and_rewrites_the_others() -> None:
    jobs = [
        FileJob("pkg/stale.py", GOOD, [_insertion(GOOD)], True),
        FileJob("pkg/drafter.py", OLD, [_insertion(OLD)], True),
    ]
    stale, fresh = rewrite_files(jobs)
    assert isinstance(stale, UnsafeRewrite) and "already defines get_top_tokens" in str(stale)
    assert isinstance(fresh, Rewrite) and fresh.new == rewrite_file("pkg/drafter.py", OLD, [_insertion(OLD)], True).new


def test_rewrite_files_adds_import_torch_only_where_torch_is_not_bound() -> None:
    unbound = OLD.replace("import torch\n", "").replace("@torch.no_grad()", "@no_grad()")
    bound, added = rewrite_files(
        [
            FileJob("pkg/bound.py", OLD, [_insertion(OLD)], True),
            FileJob("pkg/unbound.py", unbound, [_insertion(unbound)], False),
        ]
    )
    assert not bound.added_import and bound.new.count("import torch\n") == 1
    assert added.added_import and "import torch" in added.new.splitlines() and "import torch" not in unbound
    # imported, then rebound at the bottom (the facts see torch bound to something else): the codemod
    # adds no second import, and the rewrite does not claim one
    rebound = OLD + "\n\ntorch = None\n"
    (shadowed,) = rewrite_files([FileJob("pkg/rebound.py", rebound, [_insertion(rebound)], False)])
    assert not shadowed.added_import and shadowed.new.count("import torch\n") == 1


NESTED = '''\
import torch
from torch import nn

try:
    import fast_kernels
except ImportError:
    fast_kernels = None

if fast_kernels is None:
    class Drafter(nn.Module):
        """Defined in a block: rewritten through the whole module."""

        def compute_logits(self, hidden_states):
            return self.logits_processor(self.lm_head, hidden_states)

        def forward(self, x):
            return x
else:
    Drafter = fast_kernels.Drafter
'''


def test_a_class_in_a_block_gets_the_method_right_after_compute_logits() -> None:
    result = rewrite_file("pkg/drafter.py", NESTED, [_insertion(NESTED)], binds_torch=True)
    added = [line for line in result.new.splitlines() if line not in NESTED.splitlines()]
    assert added[0] == "        def get_top_tokens(self, hidden_states) -> torch.Tensor:"
    new = result.new.splitlines()
    assert new.index(added[0]) < new.index("        def forward(self, x):")
    assert new.index(added[0]) > new.index("            return self.logits_processor(self.lm_head, hidden_states)")
    assert result.classes == ["Drafter"]


@pytest.mark.parametrize(
    "statement",
    ["compute_logits = Base.compute_logits\n", "compute_logits = (\n    Base.compute_logits\n)\n"],
    ids=["one-line", "continued"],
)
def test_a_one_line_class_body_is_refused(statement: str) -> None:
    source = (
        "import torch\nfrom torch import nn\n\n\nclass Base(nn.Module):\n"
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n\n"
        "class Drafter(Base): " + statement
    )
    with pytest.raises(UnsafeRewrite, match="one-line body"):
        rewrite_file("pkg/drafter.py", source, [_retarget(_insertion(source, "Base"), "Drafter", 10)], binds_torch=True)


def _retarget(insertion: Insertion, name: str, line: int) -> Insertion:
    return Insertion(ClassKey(insertion.target.module, name, line), insertion.source)


@pytest.mark.parametrize("indent", ["    ", "\t"], ids=["spaces", "tabs"])
@pytest.mark.parametrize(
    "parameter, attribute, body",
    [
        # 90 columns on one line at this depth: wrapped (88 is ruff's limit)
        (
            "hidden_states",
            "b",
            [
                "            return self.logits_processor.get_top_tokens(",
                "                self.lm_head, hidden_states, self.b",
                "            )",
            ],
        ),
        # 86 columns: one line here, wrapped one level deeper
        ("h", "b" * 8, ["            return self.logits_processor.get_top_tokens(self.lm_head, h, self.bbbbbbbb)"]),
    ],
    ids=["wrapped", "one-line"],
)
def test_a_method_in_a_nested_class_is_laid_out_for_its_depth(
    indent: str, parameter: str, attribute: str, body: list[str]
) -> None:
    """The mirror is formatted for the column it lands at, whether the file indents with tabs or spaces."""
    source = (
        "import torch\nfrom torch import nn\n\nif FLAG:\n\n"
        f"{indent}class Drafter(nn.Module):\n{indent * 2}def compute_logits(self, {parameter}):\n"
        f"{indent * 3}return self.logits_processor(self.lm_head, {parameter}, self.{attribute})\n"
    )
    new = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True).new
    added = [line.replace("\t", "    ") for line in new.splitlines() if line not in source.splitlines()]
    assert added == [f"        def get_top_tokens(self, {parameter}) -> torch.Tensor:", *body]


@pytest.mark.parametrize(
    "after",
    [
        "    @torch.inference_mode()\n    @staticmethod\n    def forward(x):\n        return x\n",
        "    limit = 4\n",
        "    # a comment that stays where it is\n    def forward(self, x):\n        return x\n",
    ],
    ids=["decorated-method", "assignment", "comment"],
)
def test_the_method_goes_right_after_compute_logits_whatever_follows(after: str) -> None:
    source = (
        "import torch\nfrom torch import nn\n\n\nclass Drafter(nn.Module):\n"
        "    @torch.no_grad()\n    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n" + after
    )
    new = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True).new
    expected_method = (
        "\n    def get_top_tokens(self, hidden_states) -> torch.Tensor:\n"
        "        return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    )
    assert new == insert_after(
        source, "        return self.logits_processor(self.lm_head, hidden_states)\n", expected_method
    )


def test_compute_logits_at_the_end_of_a_file_without_a_newline() -> None:
    """The last line gains its newline (the one byte a fix may add outside the method)."""
    source = (
        "import torch\nfrom torch import nn\n\n\nclass Drafter(nn.Module):\n"
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)"
    )
    result = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True)
    assert result.new.startswith(source)
    assert "return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)" in result.new
    assert result.new.endswith("hidden_states)\n")


@pytest.mark.parametrize("source", [OLD, NESTED, OLD + "# the end"], ids=["class", "nested", "comment"])
def test_a_method_inserted_before_the_end_leaves_an_unended_last_line_unended(source: str) -> None:
    """The rest of the file is untouched, byte for byte: a last line without a newline keeps going
    without one when the new method goes before it (it needs one only where the method follows it)."""
    unended = source.removesuffix("\n")
    expected = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True).new
    result = rewrite_file("pkg/drafter.py", unended, [_insertion(unended)], binds_torch=True)
    assert result.new == expected.removesuffix("\n") and not result.new.endswith("\n")


def test_a_final_newline_with_nothing_after_it_is_refused() -> None:
    """The gate lets the old last line gain its newline only where new lines follow it."""
    check_rewrite(rewrite(GOOD.removesuffix("\n"), old=OLD.removesuffix("\n")))
    with pytest.raises(UnsafeRewrite, match="ends the file's last line"):
        check_rewrite(rewrite(GOOD, old=OLD.removesuffix("\n")))


@pytest.mark.parametrize("where", ["top", "three-before", "three-after", "other-class"])
def test_a_blank_line_not_next_to_the_new_method_is_refused(where: str) -> None:
    """Blank lines are accepted right next to the new method only (either side may own them)."""
    old = OLD + "\n\nclass Tail(nn.Module):\n    x = 1\n    y = 2\n"
    new = insert_after(old, AFTER_COMPUTE_LOGITS, "\n" + METHOD).splitlines(keepends=True)
    start = new.index(METHOD.splitlines(keepends=True)[0])
    end = start + len(METHOD.splitlines())
    position = {"top": 0, "three-before": start - 2, "three-after": end + 2, "other-class": new.index("    y = 2\n")}[
        where
    ]
    damaged = "".join(new[:position] + ["\n"] + new[position:])
    with pytest.raises(UnsafeRewrite, match="inserted outside"):
        check_rewrite(rewrite(damaged, old=old))


def test_a_statement_right_after_a_method_that_ends_its_class_is_refused() -> None:
    old = (
        "import torch\nfrom torch import nn\n\n\nclass Drafter(nn.Module):\n"
        "    def compute_logits(self, hidden_states):\n        hidden_states = self.norm(hidden_states)\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    good = old + "\n" + METHOD
    check_rewrite(rewrite(good, targets=(("Drafter", 5),), old=old))
    with pytest.raises(UnsafeRewrite, match="inserted outside"):
        check_rewrite(rewrite(good + "DEBUG = True\n", targets=(("Drafter", 5),), old=old))


@pytest.mark.parametrize("block", ["try", "except", "else", "finally"])
def test_a_class_in_any_block_of_a_try_is_found_and_rewritten(block: str) -> None:
    body = "    class Drafter(nn.Module):\n" + "".join(
        "    " + line + "\n"
        for line in (
            "    def compute_logits(self, hidden_states):",
            "        return self.logits_processor(self.lm_head, hidden_states)",
        )
    )
    other = "    pass\n"
    parts = {name: (body if name == block else other) for name in ("try", "except", "else", "finally")}
    source = (
        "import torch\nfrom torch import nn\n\ntry:\n"
        + parts["try"]
        + "except ImportError:\n"
        + parts["except"]
        + "else:\n"
        + parts["else"]
        + "finally:\n"
        + parts["finally"]
    )
    result = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True)
    assert result.classes == ["Drafter"] and "get_top_tokens(self.lm_head, hidden_states)" in result.new


def test_a_class_in_a_block_without_compute_logits_gets_the_method_at_its_end() -> None:
    source = (
        "import torch\nfrom torch import nn\n\n\nclass Base(nn.Module):\n"
        "    def compute_logits(self, hidden_states):\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n\n\n"
        "if FLAG:\n\n    class Child(Base):\n        def forward(self, x):\n            return x\n\n"
        "        def reset(self):\n            pass\n"
    )
    result = rewrite_file(
        "pkg/drafter.py", source, [_retarget(_insertion(source, "Base"), "Child", 12)], binds_torch=True
    )
    assert result.new == source + (
        "\n        def get_top_tokens(self, hidden_states) -> torch.Tensor:\n"
        "            return self.logits_processor.get_top_tokens(self.lm_head, hidden_states)\n"
    )
    assert result.classes == ["Child"]


def test_a_class_in_a_block_with_two_statements_gets_the_method_after_compute_logits() -> None:
    source = NESTED.replace('''        """Defined in a block: rewritten through the whole module."""\n\n''', "")
    new = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=True).new.splitlines()
    assert new.index("        def get_top_tokens(self, hidden_states) -> torch.Tensor:") < new.index(
        "        def forward(self, x):"
    )


@pytest.mark.parametrize(
    "method, names_torch",
    [
        ("def m(self, x: torch.Tensor) -> int:\n    return x\n", True),  # an annotation
        ("def m(self, x) -> torch.Tensor:\n    return x\n", True),
        ("def m(self, x, *rest: torch.Tensor, key: torch.Tensor, **more: torch.Tensor):\n    return x\n", True),
        ("def m(self, x: 'torch.Tensor') -> 'torch.Tensor':\n    return x\n", False),  # quoted: a string
        ("def m(self, x):\n    return torch.argmax(x)\n", True),  # the body
        ("def m(self, x):\n    return x\n", False),
    ],
)
def test_import_torch_is_added_for_a_method_that_names_torch(method, names_torch) -> None:
    """A file that does not bind ``torch`` gets ``import torch`` when the written method names it, when
    run or when defined, under ``from __future__ import annotations`` too (an annotation it does not
    evaluate is still an undefined name to ruff and type checkers); a quoted annotation is the
    method's own string, copied as compute_logits has it."""
    _, node = parse_method(method)
    assert uses_torch(node) is names_torch


def test_import_torch_in_a_file_without_imports_comes_with_two_blank_lines() -> None:
    """An import added to a file without imports is followed by the two blank lines ruff format puts
    before a class: the gate accepts those lines, and no other."""
    source = (
        "class Drafter:\n"
        "    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:\n"
        "        return self.logits_processor(self.lm_head, hidden_states)\n"
    )
    result = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch=False)
    assert result.added_import and result.new.startswith("import torch\n\n\nclass Drafter:\n")
    with pytest.raises(UnsafeRewrite, match="line 4 was inserted outside"):
        check_rewrite(dataclasses.replace(result, new=result.new.replace("import torch\n\n", "import torch\n\n\n")))


UNBOUND = OLD.replace("import torch\n", "").replace("@torch.no_grad()", "@no_grad()")


@pytest.mark.parametrize("ending", ["final", "no-final"])
@pytest.mark.parametrize("newline", ["\r\n", "\r"], ids=["crlf", "cr"])
@pytest.mark.parametrize(
    "source, binds_torch", [(OLD, True), (NESTED, True), (UNBOUND, False)], ids=["class", "nested", "import"]
)
def test_every_newline_style_gets_the_same_rewrite(source: str, binds_torch: bool, newline: str, ending: str) -> None:
    """A file whose lines end in CRLF or a bare CR (Python reads both) gets the bytes an LF file
    gets, in its own newline: the method laid out alike, every old line kept, and a last line
    without a newline left so (the method goes before it)."""
    expected = rewrite_file("pkg/drafter.py", source, [_insertion(source)], binds_torch).new.replace("\n", newline)
    styled = source.replace("\n", newline)
    styled = styled if ending == "final" else styled.removesuffix(newline)
    expected = expected if ending == "final" else expected.removesuffix(newline)
    result = rewrite_file("pkg/drafter.py", styled, [_insertion(styled)], binds_torch)
    assert result.new == expected and result.old == styled


@pytest.mark.parametrize(
    "source, ended",
    [
        ("x = 1", "x = 1\n"),
        ("x = 1\r\ny = 2", "x = 1\r\ny = 2\r\n"),
        ("x = 1\ry = 2", "x = 1\ry = 2\r"),
        ("x = 1\r\ny = 2\nz = 3", "x = 1\r\ny = 2\nz = 3\r\n"),  # mixed: the first line's, as libcst writes
        ("x = 1\r", "x = 1\r"),
        ("x = 1\r\n", "x = 1\r\n"),
        ("", ""),
    ],
)
def test_a_last_line_is_ended_with_the_newline_libcst_writes_the_method_in(source: str, ended: str) -> None:
    """The one byte a fix may add outside the method: the same newline libcst gives the new lines."""
    assert with_final_newline(source) == ended
    if not source.endswith(("\n", "\r")) and source:
        assert ended == source + cst.parse_module(source).default_newline


@pytest.mark.parametrize(
    ("header", "line"),
    [
        ("import torch\n", None),
        ("import torch.nn\nimport torch.nn as nn\n", None),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n", None),
        ("import torch\n\ndef torch_like():\n    import torch as t\n", None),
        ("if flag:\n    import torch\n", 2),
        ("try:\n    import torch\nexcept ImportError:\n    torch = None\n", 2),
        ("import torch\ntorch = None\n", 2),
        ("import numpy as torch\n", 1),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    pass\nelse:\n    import torch\n", 5),
    ],
)
def test_torch_bound_otherwise_above_the_class_is_named(header: str, line: int | None) -> None:
    """The new method's annotations read ``torch`` as the class body runs: any binding of it above the class but a
    top-level ``import torch`` (or ``import torch.X``) may leave it something else then."""
    source = header + "\n\nclass Drafter:\n    pass\n\n\ntorch = None\n"
    tree = ast.parse(source)
    assert _other_torch_binding(tree, tree.body[-2].lineno) == line
