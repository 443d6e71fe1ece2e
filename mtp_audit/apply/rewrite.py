"""Stage 6b: insert the planned methods into one file, and prove nothing else changed.

The insertion is a libcst ``CSTTransformer``: the file keeps its bytes,
newline style and indentation outside the new method. Before a rewrite is
accepted it must re-parse, its AST must equal the old AST plus exactly the
added methods (and an added ``import torch``), and a line diff must show
insertions only, in the spirit of Black's safety checks.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor

from ..classify.analysis import Insertion
from ..classify.shapes import parse_method
from ..index.facts import LineNumbers, ModuleFacts, walk_statements
from ..index.prefilter import whole
from ..synthesize.mirror import format_method, mirror_function


class UnsafeRewrite(Exception):
    """The rewritten file is not the old file plus the new methods; nothing is written."""


@dataclass
class Rewrite:
    path: str
    old: str
    new: str
    classes: list[str]  # classes that received get_top_tokens
    added_import: bool


class InsertTopTokens(cst.CSTTransformer):
    """Put each new method right after the class's compute_logits, or at the end of the class."""

    def __init__(self, methods: dict[int, cst.FunctionDef]):
        super().__init__()
        self.methods = methods  # id(original ClassDef) -> method
        self.inserted: list[str] = []

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        method = self.methods.get(id(original_node))
        if method is None:
            return updated_node
        if not isinstance(updated_node.body, cst.IndentedBlock):
            raise UnsafeRewrite(f"class {updated_node.name.value} has a one-line body; add the method by hand")
        body = list(updated_node.body.body)
        anchor = next(
            (i for i, s in enumerate(body) if m.matches(s, m.FunctionDef(name=m.Name("compute_logits")))),
            len(body) - 1,
        )
        body.insert(anchor + 1, method.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
        self.inserted.append(updated_node.name.value)
        return updated_node.with_changes(body=updated_node.body.with_changes(body=body))


def _class_depth(source_line: str) -> int:
    indent = source_line[: len(source_line) - len(source_line.lstrip())]
    return 1 + indent.count("\t") + (len(indent.replace("\t", "")) // 4)


def rewrite_file(path: str, source: str, facts: ModuleFacts, insertions: list[Insertion]) -> Rewrite:
    module = cst.parse_module(source)
    numbers = LineNumbers(module, whole(source))
    lines = source.splitlines()
    methods: dict[int, cst.FunctionDef] = {}
    for node in walk_statements(module.body):
        if not isinstance(node, cst.ClassDef):
            continue
        line = numbers.line(node)
        for insertion in insertions:
            if insertion.target.name == node.name.value and insertion.target.line == line:
                _, compute_logits = parse_method(insertion.source.method.code)
                methods[id(node)] = format_method(mirror_function(compute_logits), _class_depth(lines[line - 1]))
    if len(methods) != len(insertions):
        wanted = ", ".join(f"{i.target.name} (line {i.target.line})" for i in insertions)
        raise UnsafeRewrite(f"{path}: the file no longer has the classes planned for: {wanted}; scan again")
    transformer = InsertTopTokens(methods)
    new_module = module.visit(transformer)
    added_import = not _binds_torch(facts)
    if added_import:
        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, "torch")
        new_module = AddImportsVisitor(context).transform_module(new_module)
    rewrite = Rewrite(path, source, new_module.code, transformer.inserted, added_import)
    check_rewrite(rewrite)
    return rewrite


def _binds_torch(facts: ModuleFacts) -> bool:
    """``torch`` bound at run time on every platform (an import under TYPE_CHECKING is not)."""
    return all(
        any(t.kind == "module" and t.a == "torch" for t in names.get("torch", []))
        for platform, names in facts.bindings.items()
        if platform not in facts.import_errors
    )


def _strip_added(tree: ast.Module, classes: list[str], added_import: bool) -> ast.Module:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in classes:
            node.body = [s for s in node.body if not (isinstance(s, ast.FunctionDef) and s.name == "get_top_tokens")]
    if added_import:
        for index, statement in enumerate(tree.body):
            if isinstance(statement, ast.Import) and [a.name for a in statement.names] == ["torch"]:
                del tree.body[index]
                break
    return tree


def check_rewrite(rewrite: Rewrite) -> None:
    """Raise UnsafeRewrite unless ``new`` is ``old`` plus exactly the added methods."""
    try:
        new_tree = ast.parse(rewrite.new)
        compile(rewrite.new, rewrite.path, "exec")
    except SyntaxError as error:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite does not parse ({error.msg}, line {error.lineno})") from None
    old_tree = ast.parse(rewrite.old)
    for node in ast.walk(old_tree):
        if isinstance(node, ast.ClassDef) and node.name in rewrite.classes and any(
                isinstance(s, ast.FunctionDef) and s.name == "get_top_tokens" for s in node.body):
            raise UnsafeRewrite(f"{rewrite.path}: class {node.name} already defines get_top_tokens")
    stripped = _strip_added(new_tree, rewrite.classes, rewrite.added_import)
    if ast.dump(stripped) != ast.dump(old_tree):
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite changes more than the added methods")
    old_lines = rewrite.old.splitlines(keepends=True)
    new_lines = rewrite.new.splitlines(keepends=True)
    opcodes = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes()
    if any(tag not in ("equal", "insert") for tag, *_ in opcodes):
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite edits existing lines")
    if cst.parse_module(rewrite.new).code != rewrite.new:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite does not round-trip through libcst")
