"""Stage 6b: insert the planned methods into one file, and prove nothing else changed.

The insertion is a libcst ``CSTTransformer``: the file keeps its bytes,
newline style and indentation outside the new method. Before a rewrite is
accepted it must re-parse, its AST must equal the old AST plus exactly the
added methods (and an added ``import torch``), and a line diff must show
insertions only, in the spirit of Black's safety checks.
"""

from __future__ import annotations

import ast

import libcst as cst
from libcst.metadata import PositionProvider

from ..classify.analysis import Insertion
from ..cstnodes import kept_compute_logits, methods_after, nodes_of, parse_method
from ..index.prefilter import physical_lines
from ..synthesize.answers import mirror_text
from ..synthesize.conventions import follow_annotation_style
from ..synthesize.layout import format_methods
from .changes import FileJob, Rewrite, UnsafeRewrite
from .source_text import (
    anchor_end,
    anchor_statement,
    class_depth,
    dropped_tail,
    ended_for,
    inserted_lines,
    kept_lines,
    module_classes,
    torch_unready,
    with_torch_import,
)

# Module-level statement containers: the only nodes the transformer needs to enter.
_CONTAINERS = (cst.Module, cst.If, cst.Else, cst.IndentedBlock, cst.Try, cst.ExceptHandler, cst.Finally, cst.With)


class InsertTopTokens(cst.CSTTransformer):
    """Put each new method right after the class's compute_logits, or at the end of the class.

    It enters module-level statement blocks only: classes are matched there,
    and nothing below them is visited (rebuilding every node of a large
    module costs more than parsing it).
    """

    def __init__(self, methods: dict[int, cst.FunctionDef], footer_ends_class: bool = True):
        super().__init__()
        self.methods = methods  # id(original ClassDef) -> method
        self.footer_ends_class = footer_ends_class  # False: a stand-in class cut before the next statement
        self.inserted: list[str] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, _CONTAINERS)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        method = self.methods.get(id(original_node))
        if method is None:
            return updated_node
        if not isinstance(updated_node.body, cst.IndentedBlock):
            raise UnsafeRewrite(f"class {updated_node.name.value} has a one-line body; add the method by hand")
        body = updated_node.body.body
        kept = kept_compute_logits(body)  # a stand-in class holds the anchor statement alone
        anchor = len(body) - 1 if kept is None else kept
        self.inserted.append(updated_node.name.value)
        return updated_node.with_changes(
            body=methods_after(updated_node.body, anchor, [method], self.footer_ends_class)
        )


def mirror_requests(source: str, insertions: list[Insertion]) -> list[tuple[cst.FunctionDef, int]]:
    """The unformatted mirror of each insertion, with the class nesting depth ruff must format it at."""
    lines = physical_lines(source)
    requests = []
    for insertion in insertions:
        _, method = parse_method(mirror_text(insertion.source.method.text))  # the cached mirror, as a node
        method = follow_annotation_style(method, insertion.source.method.text)
        requests.append((method, class_depth(lines[insertion.target.line - 1])))
    return requests


def rewrite_files(jobs: list[FileJob]) -> list[Rewrite | UnsafeRewrite]:
    """Rewrite each file (a refused one gives its UnsafeRewrite); all of their new methods
    are formatted in one ruff run."""
    requests = [mirror_requests(job.source, job.insertions) for job in jobs]
    formatted = iter(format_methods([request for group in requests for request in group]))
    outcomes: list[Rewrite | UnsafeRewrite] = []
    for job, group in zip(jobs, requests):
        methods = [next(formatted) for _ in group]
        try:
            outcomes.append(rewrite_file(job.path, job.source, job.insertions, job.binds_torch, methods))
        except UnsafeRewrite as error:
            outcomes.append(error)
    return outcomes


def rewrite_file(
    path: str, source: str, insertions: list[Insertion], binds_torch: bool, methods: list[cst.FunctionDef] | None = None
) -> Rewrite:
    """Insert the mirrors, class by class, then check the whole file.

    Each target class is parsed and transformed on its own (its bytes are
    the file's bytes from its first decorator to its last line): parsing
    and regenerating a whole model file for one method costs ten times more.
    A class nested in a block is done through the whole module instead.
    """
    original = source
    old_tree = ast.parse(source)
    classes = {(node.name, node.lineno): node for node in module_classes(old_tree)}
    missing = [i for i in insertions if (i.target.name, i.target.line) not in classes]
    if missing:
        wanted = ", ".join(f"{i.target.name} (line {i.target.line})" for i in missing)
        raise UnsafeRewrite(f"{path}: the file no longer has the classes planned for: {wanted}; scan again")
    source = ended_for(source, [classes[(i.target.name, i.target.line)] for i in insertions])
    lines = physical_lines(source)
    if methods is None:
        methods = format_methods(mirror_requests(source, insertions))
    placed = [(i.target.name, i.target.line, method) for i, method in zip(insertions, methods)]
    late = torch_unready(old_tree, placed, binds_torch)
    if late is not None:
        raise UnsafeRewrite(f"{path}: {late}")
    mirrors = {insertion.target: method for insertion, method in zip(insertions, methods)}
    nested = any(lines[i.target.line - 1][:1].isspace() for i in insertions)
    new_source, inserted = (_through_module if nested else _by_class)(source, lines, classes, insertions, mirrors)
    new_source, added_import = with_torch_import(new_source, methods, binds_torch)
    targets = [(i.target.name, i.target.line) for i in insertions]
    modules = tuple(sorted({i.target.module for i in insertions}))
    rewrite = Rewrite(path, original, new_source, inserted, added_import, targets, modules=modules)
    check_rewrite(rewrite, old_tree)
    return rewrite


def _first_line(node: ast.stmt) -> int:
    """0-based index of a statement's first line, decorators included."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))]) - 1


def _anchor_piece(lines: list[str], node: ast.ClassDef) -> tuple[int, int, str, bool]:
    """The lines the transformer needs, the header that makes them a class of their own, and
    whether they end the class.

    The new method goes right after ``compute_logits`` (else after the last statement), so only
    that statement is parsed, inside a stand-in class, through to where the next statement
    begins: libcst re-emits those lines byte for byte, and a large class is not parsed and
    regenerated whole. A one-line class body is given whole, for the transformer to refuse.
    """
    body = node.body
    if body[0].lineno == node.lineno:
        return _first_line(node), node.end_lineno or node.lineno, "", True
    anchor = body.index(anchor_statement(node))
    first = _first_line(body[anchor])
    last = anchor + 1 == len(body)
    end = anchor_end(lines, node) if last else _first_line(body[anchor + 1])
    newline = lines[first][len(lines[first].rstrip("\r\n")) :] or "\n"
    return first, end, "class _:" + newline, last


def _by_class(
    source: str, lines: list[str], classes: dict, insertions: list[Insertion], mirrors: dict
) -> tuple[str, list[str]]:
    out: list[str] = []
    position = 0
    inserted: list[str] = []
    for insertion in sorted(insertions, key=lambda i: i.target.line):
        first, end, header, ends = _anchor_piece(lines, classes[(insertion.target.name, insertion.target.line)])
        text = header + "".join(lines[first:end])
        piece = cst.parse_module(text)
        transformer = InsertTopTokens({id(piece.body[-1]): mirrors[insertion.target]}, ends)
        new_piece = piece.visit(transformer).code + dropped_tail(text, piece)
        assert new_piece.startswith(header)
        out.append("".join(lines[position:first]))
        out.append(new_piece[len(header) :])
        inserted.extend(insertion.target.name for _ in transformer.inserted)  # the stand-in is named _
        position = end
    out.append("".join(lines[position:]))
    return "".join(out), inserted


def _through_module(
    source: str, lines: list[str], classes: dict, insertions: list[Insertion], mirrors: dict
) -> tuple[str, list[str]]:
    module = cst.parse_module(source)
    wrapper = cst.MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    wanted = {(i.target.name, i.target.line): mirrors[i.target] for i in insertions}
    methods = {  # a class is known by its name and the line of that name, as ast reports it
        id(node): wanted[key]
        for node in nodes_of(wrapper.module, cst.ClassDef)
        if (key := (node.name.value, positions[node.name].start.line)) in wanted
    }
    transformer = InsertTopTokens(methods)
    return wrapper.module.visit(transformer).code + dropped_tail(source, module), transformer.inserted


def _blank_runs_around(lines: list[str], first: int, last: int) -> set[int]:
    """The numbers of the blank lines next to lines ``first``-``last`` (1-based), on both sides, up to the first line
    that is not blank: the line match may take any of a run's blank lines for the inserted one (three blank lines
    after a class, one more before the new method)."""
    found: set[int] = set()
    for start, step in ((first - 1, -1), (last + 1, 1)):
        number = start
        while 1 <= number <= len(lines) and not lines[number - 1].strip():
            found.add(number)
            number += step
    return found


def check_rewrite(rewrite: Rewrite, old_tree: ast.Module | None = None) -> None:
    """Raise UnsafeRewrite unless ``new`` is ``old`` plus exactly the added methods.

    Three facts together: the new file parses; every old line is still there,
    in order (so the change is insertions only); every inserted line lies in
    an added ``get_top_tokens`` (or is the added ``import torch``), and each
    touched class is AST-equal to its old self once that method is removed.
    ``old_tree``: ``ast.parse(rewrite.old)``, when the caller has it already.
    """
    try:
        new_tree = compile(rewrite.new, rewrite.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite does not parse ({error.msg}, line {error.lineno})") from None
    new_lines = physical_lines(rewrite.new)
    inserted = inserted_lines(kept_lines(rewrite.old, rewrite.new), new_lines)
    if inserted is None:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite edits existing lines")
    if kept_lines(rewrite.old, rewrite.new)[-1:] != physical_lines(rewrite.old)[-1:] and (
        not inserted or inserted[-1] != len(new_lines)
    ):
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite ends the file's last line, and adds nothing after it")
    old_all, new_all = module_classes(old_tree or ast.parse(rewrite.old)), module_classes(new_tree)
    if [c.name for c in old_all] != [c.name for c in new_all]:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite changes the file's classes")
    planned = set(rewrite.targets)
    touched = [(old, new) for old, new in zip(old_all, new_all) if (old.name, old.lineno) in planned]
    allowed: set[int] = set()
    blank_ok: set[int] = set()  # a blank line may be matched on either side of a new method
    if rewrite.added_import:  # the import, and the blank lines ruff format wants around it
        imports = {
            s.lineno for s in new_tree.body if isinstance(s, ast.Import) and [a.name for a in s.names] == ["torch"]
        }
        allowed |= imports
        blank_ok |= {n + offset for n in imports for offset in (-1, 1, 2)}
    added = 0
    for old, new in touched:
        methods = [s for s in new.body if isinstance(s, ast.FunctionDef) and s.name == "get_top_tokens"]
        if any(isinstance(s, ast.FunctionDef) and s.name == "get_top_tokens" for s in old.body):
            raise UnsafeRewrite(f"{rewrite.path}: class {old.name} already defines get_top_tokens")
        for method in methods:
            allowed |= set(range(method.lineno, (method.end_lineno or method.lineno) + 1))
            blank_ok |= _blank_runs_around(new_lines, method.lineno, method.end_lineno or method.lineno)
        added += len(methods)
        new.body = [s for s in new.body if s not in methods]
        if ast.dump(new) != ast.dump(old):
            raise UnsafeRewrite(f"{rewrite.path}: class {old.name} changed beyond the added method")
    if len(touched) != len(planned) or added != len(planned):
        raise UnsafeRewrite(f"{rewrite.path}: not exactly one method added per planned class")
    stray = [n for n in inserted if n not in allowed and not (n in blank_ok and not new_lines[n - 1].strip())]
    if stray:
        raise UnsafeRewrite(f"{rewrite.path}: line {stray[0]} was inserted outside the new methods")
