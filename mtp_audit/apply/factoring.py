"""``fix --factor-pre-head``: rewrite a file with the pre-head block shared through a helper.

Unlike the default insertion, this changes ``compute_logits``, so it has its
own gate (``check_factored``): with each helper call inlined and the added
methods removed, the new module's AST is the old module's, and every old
line outside the changed ``compute_logits`` bodies is still there, in order.
A class whose pre-head block is short, or not a plain chain, gets the plain
mirror, under the same gate.
"""

from __future__ import annotations

import ast
import builtins
import copy
import symtable
from collections.abc import Mapping

import libcst as cst
from libcst.metadata import CodeRange, PositionProvider

from ..classify.analysis import Insertion
from ..cstnodes import kept_compute_logits, methods_after, nodes_of, parse_method
from ..index.ast_tools import walk
from ..index.prefilter import physical_lines
from ..model import ClassKey
from ..synthesize.answers import mirror_text
from ..synthesize.conventions import follow_annotation_style
from ..synthesize.factor import HELPER, factor_pre_head
from ..synthesize.layout import format_methods
from ..synthesize.mirror import mirror_function
from .changes import Rewrite, UnsafeRewrite
from .source_text import (
    class_depth,
    dropped_tail,
    ended_for,
    inserted_lines,
    kept_lines,
    module_classes,
    torch_unready,
    with_torch_import,
)


def factors(insertion: Insertion) -> bool:
    """Whether the class's own compute_logits has a pre-head block the helper would take (the class's
    other method names are checked when its file is rewritten)."""
    if insertion.source.owner != insertion.target:
        return False
    _, compute_logits = parse_method(insertion.source.method.code)
    return factor_pre_head(compute_logits, set()) is not None


def _class_nodes(
    module: cst.Module, positions: Mapping[cst.CSTNode, CodeRange], insertions: list[Insertion]
) -> dict[tuple[str, int], cst.ClassDef]:
    """(name, line) of each planned class -> its node (a class is known by the line of its name)."""
    wanted = {(i.target.name, i.target.line) for i in insertions}
    return {
        key: node
        for node in nodes_of(module, cst.ClassDef)
        if (key := (node.name.value, positions[node.name].start.line)) in wanted
    }


def _own_compute_logits(
    node: cst.ClassDef, insertion: Insertion, positions: Mapping[cst.CSTNode, CodeRange]
) -> cst.FunctionDef | None:
    """The class's compute_logits to factor: the one Python keeps, only when it is the method the
    mirror is made from (a later binding of the name, or one under a condition, is not factored)."""
    where = kept_compute_logits(node.body.body)
    if where is None or insertion.source.owner != insertion.target:
        return None
    found = node.body.body[where]
    assert isinstance(found, cst.FunctionDef)
    return found if positions[found.name].start.line == insertion.source.method.line else None


class _Replace(cst.CSTTransformer):
    """Swap each planned class's compute_logits and add the new methods right after it."""

    def __init__(self, plans: dict[int, tuple[cst.FunctionDef | None, list[cst.FunctionDef]]]):
        super().__init__()
        self.plans = plans  # id(original ClassDef) -> (new compute_logits or None, methods to add)

    def leave_ClassDef(self, original_node: cst.ClassDef, updated_node: cst.ClassDef) -> cst.ClassDef:
        plan = self.plans.get(id(original_node))
        if plan is None:
            return updated_node
        replacement, added = plan
        if not isinstance(updated_node.body, cst.IndentedBlock):
            raise UnsafeRewrite(f"class {updated_node.name.value} has a one-line body; add the method by hand")
        body = list(updated_node.body.body)
        kept = kept_compute_logits(body)
        anchor = len(body) - 1 if kept is None else kept
        if replacement is not None:
            body[anchor] = replacement.with_changes(leading_lines=body[anchor].leading_lines)
        return updated_node.with_changes(body=methods_after(updated_node.body.with_changes(body=body), anchor, added))


def rewrite_factored(
    path: str, source: str, insertions: list[Insertion], binds_torch: bool, clashes: dict[ClassKey, str] | None = None
) -> Rewrite:
    """The file with each planned class's mirror, and its pre-head block in a helper where it is long.

    ``clashes``: planned class -> where it, a subclass or a class in their MRO binds the helper's name, and
    what the helper would do there (``name_clashes``); such a class is refused the helper.
    """
    clashes = clashes or {}
    planned = {(i.target.name, i.target.line) for i in insertions}
    old_tree = ast.parse(source)
    ended = ended_for(source, [c for c in module_classes(old_tree) if (c.name, c.lineno) in planned])
    module = cst.parse_module(ended)
    wrapper = cst.MetadataWrapper(module)
    positions = wrapper.resolve(PositionProvider)
    nodes = _class_nodes(wrapper.module, positions, insertions)
    missing = [i for i in insertions if (i.target.name, i.target.line) not in nodes]
    if missing:
        raise UnsafeRewrite(
            f"{path}: the file no longer has the classes planned for: "
            f"{', '.join(i.target.name for i in missing)}; scan again"
        )
    lines = physical_lines(source)
    requests: list[tuple[cst.FunctionDef, int]] = []
    shapes: list[tuple[cst.ClassDef, bool]] = []
    for insertion in insertions:
        node = nodes[(insertion.target.name, insertion.target.line)]
        depth = class_depth(lines[insertion.target.line - 1])
        own = _own_compute_logits(node, insertion, positions)
        taken = {s.name.value for s in node.body.body if isinstance(s, cst.FunctionDef)}
        factored = factor_pre_head(own, taken) if own is not None else None
        if factored is not None and insertion.target in clashes:
            name = insertion.target.name
            raise UnsafeRewrite(
                f"{path}: no {HELPER} helper in {name}: {clashes[insertion.target]}; "
                "fix without --factor-pre-head writes the plain mirror"
            )
        if factored is None:
            _, mirror = parse_method(mirror_text(insertion.source.method.text))
            requests.append((follow_annotation_style(mirror, insertion.source.method.text), depth))
        else:
            mirror = follow_annotation_style(mirror_function(factored.compute_logits), insertion.source.method.text)
            requests += [(factored.compute_logits, depth), (mirror, depth), (factored.helper, depth)]
        shapes.append((node, factored is not None))
    formatted = iter(format_methods(requests))
    plans, helpers, methods, placed = {}, [], [], []
    for insertion, (node, is_factored) in zip(insertions, shapes):
        if is_factored:
            new_cl, mirror, helper = next(formatted), next(formatted), next(formatted)
            plans[id(node)] = (new_cl, [mirror, helper])
            helpers.append(node.name.value)
            methods += [mirror, helper]
            placed += [(insertion.target.name, insertion.target.line, m) for m in (new_cl, mirror, helper)]
        else:
            mirror = next(formatted)
            plans[id(node)] = (None, [mirror])
            methods.append(mirror)
            placed.append((insertion.target.name, insertion.target.line, mirror))
    late = torch_unready(old_tree, placed, binds_torch)
    if late is not None:
        raise UnsafeRewrite(f"{path}: {late}")
    transformer = _Replace(plans)
    new_source = wrapper.module.visit(transformer).code + dropped_tail(ended, module)
    new_source, added_import = with_torch_import(new_source, methods, binds_torch)
    targets = [(i.target.name, i.target.line) for i in insertions]
    modules = tuple(sorted({i.target.module for i in insertions}))
    rewrite = Rewrite(
        path,
        source,
        new_source,
        [i.target.name for i in insertions],
        added_import,
        targets,
        factored=helpers,
        modules=modules,
    )
    check_factored(rewrite, set(helpers), old_tree)
    return rewrite


def _inline_helper(method: ast.FunctionDef, helper: ast.FunctionDef) -> None:
    """Replace ``x = self._pre_head(a, b)`` in ``method`` by the helper's body, its return as ``x = ...``."""
    params = [a.arg for a in helper.args.args[1:]]
    for index, statement in enumerate(method.body):
        value = statement.value if isinstance(statement, ast.Assign) else None
        if (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Attribute)
            and value.func.attr == HELPER
            and isinstance(value.func.value, ast.Name)
            and value.func.value.id == "self"
        ):
            if [a.id if isinstance(a, ast.Name) else None for a in value.args] != params or value.keywords:
                raise UnsafeRewrite(f"{HELPER} is not called with its own parameter names")
            body = copy.deepcopy(helper.body)
            if not isinstance(body[-1], ast.Return) or body[-1].value is None:
                raise UnsafeRewrite(f"{HELPER} does not end in a return")
            body[-1] = ast.Assign(targets=statement.targets, value=body[-1].value, type_comment=None, lineno=0)
            method.body[index : index + 1] = body
            return
    raise UnsafeRewrite(f"compute_logits does not call {HELPER}")


def check_factored(rewrite: Rewrite, factored: set[str], old_tree: ast.Module | None = None) -> None:
    """Raise UnsafeRewrite unless ``new`` is ``old`` once each helper is inlined and the new methods removed.

    ``factored``: the classes whose compute_logits now calls the helper; ``old_tree``: ``ast.parse(rewrite.old)``,
    when the caller has it already.
    """
    try:
        new_tree = compile(rewrite.new, rewrite.path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite does not parse ({error.msg}, line {error.lineno})") from None
    old_tree = old_tree or ast.parse(rewrite.old)
    scopes = _Scopes(rewrite, new_tree)
    planned = set(rewrite.targets)
    spans_old, spans_new = [], []
    for old, new in zip(module_classes(old_tree), module_classes(new_tree)):
        if (old.name, old.lineno) not in planned:
            continue
        if any(isinstance(s, ast.FunctionDef) and s.name in ("get_top_tokens", HELPER) for s in old.body):
            raise UnsafeRewrite(f"{rewrite.path}: class {old.name} already defines get_top_tokens or {HELPER}")
        added = [s for s in new.body if isinstance(s, ast.FunctionDef) and s.name in ("get_top_tokens", HELPER)]
        helper = next((s for s in added if s.name == HELPER), None)
        if (helper is not None) != (old.name in factored):
            raise UnsafeRewrite(f"{rewrite.path}: class {old.name} has a {HELPER} the plan did not make")
        new.body = [s for s in new.body if s not in added]
        compute_logits = [s for s in new.body if isinstance(s, ast.FunctionDef) and s.name == "compute_logits"]
        if helper is not None:
            spans_old += [_span(s) for s in old.body if isinstance(s, ast.FunctionDef) and s.name == "compute_logits"]
            spans_new += [_span(s) for s in compute_logits]
            scopes.check_helper_reads(old, new)
            _inline_helper(compute_logits[-1], helper)  # the one Python keeps, which the plan factored
        spans_new += [_span(s) for s in added]
    if rewrite.added_import:
        new_tree.body = [
            s for s in new_tree.body if not (isinstance(s, ast.Import) and [a.name for a in s.names] == ["torch"])
        ]
    if ast.dump(new_tree) != ast.dump(old_tree):
        raise UnsafeRewrite(f"{rewrite.path}: with {HELPER} inlined, the file is not the old one plus the new methods")
    old_kept = _outside(kept_lines(rewrite.old, rewrite.new), spans_old)  # as check_rewrite reads it
    new_kept = _outside(physical_lines(rewrite.new), spans_new)
    extra = inserted_lines(old_kept, new_kept)
    if extra is None or any(new_kept[n - 1].strip() and new_kept[n - 1].strip() != "import torch" for n in extra):
        raise UnsafeRewrite(f"{rewrite.path}: the rewrite changes lines outside compute_logits and the new methods")


# names a module has without binding them (``__file__`` is set by the import system, not builtins)
_MODULE_IMPLICIT = frozenset(dir(builtins)) | {"__file__", "__cached__", "__builtins__", "__path__"}


class _Scopes:
    """The symbol tables of the old and the new file: the inlining check compares ASTs, which are
    blind to scope; a name the helper reads that compute_logits read as its own local reads
    something else (or nothing) in the helper, unless it is passed."""

    def __init__(self, rewrite: Rewrite, new_tree: ast.Module):
        self.path = rewrite.path
        try:
            self.old = symtable.symtable(rewrite.old, rewrite.path, "exec")
            self.new = symtable.symtable(rewrite.new, rewrite.path, "exec")
        except SyntaxError as error:
            raise UnsafeRewrite(f"{rewrite.path}: the rewrite's scopes cannot be read ({error.msg})") from None
        self.module_names = {s.get_name() for s in self.new.get_symbols() if s.is_assigned() or s.is_imported()}
        self.star_import = any(isinstance(n, ast.ImportFrom) and n.names[0].name == "*" for n in walk(new_tree))

    def check_helper_reads(self, old: ast.ClassDef, new: ast.ClassDef) -> None:
        """Raise UnsafeRewrite when the new class's helper reads a name from outside itself that is a local
        of the old compute_logits, or that neither the module nor builtins bind."""
        helpers = _functions(self._class(self.new, new), HELPER)
        if len(helpers) != 1:
            raise UnsafeRewrite(f"{self.path}: class {new.name} defines {HELPER} {len(helpers)} times")
        old_locals = {
            s.get_name()
            for f in _functions(self._class(self.old, old), "compute_logits")
            for s in f.get_symbols()
            if s.is_local()
        }
        old_functions = _functions(self._class(self.old, old), "compute_logits")
        captured = old_locals & {name for f in old_functions for name in _captured(f)}
        rebound = {s.get_name() for s in helpers[0].get_symbols() if s.is_assigned()}
        for name in sorted(captured & rebound):
            raise UnsafeRewrite(
                f"{self.path}: {HELPER} in {new.name} rebinds {name}, which a closure in compute_logits reads"
            )
        for name in sorted(_outer_reads(helpers[0])):
            if name in old_locals:
                raise UnsafeRewrite(
                    f"{self.path}: {HELPER} in {new.name} reads {name}, a local of compute_logits it is not passed"
                )
            if name not in self.module_names and name not in _MODULE_IMPLICIT and not self.star_import:
                raise UnsafeRewrite(
                    f"{self.path}: {HELPER} in {new.name} reads {name}, neither its parameter nor the module's name"
                )

    def _class(self, module: symtable.SymbolTable, node: ast.ClassDef) -> symtable.SymbolTable:
        found = [
            t
            for t in module.get_children()
            if t.get_type() == "class" and (t.get_name(), t.get_lineno()) == (node.name, node.lineno)
        ]
        if len(found) != 1:
            raise UnsafeRewrite(
                f"{self.path}: the scope of class {node.name} (line {node.lineno}) cannot be told apart"
            )
        return found[0]


def _functions(cls: symtable.SymbolTable, name: str) -> list[symtable.SymbolTable]:
    return [t for t in cls.get_children() if t.get_type() == "function" and t.get_name() == name]


def _outer_reads(function: symtable.SymbolTable) -> set[str]:
    """Names ``function`` (or a lambda or comprehension in it) takes from outside itself."""
    symbols = function.get_symbols()
    found = {s.get_name() for s in symbols if (s.is_global() or s.is_free()) and s.get_name() != "__class__"}
    own = {s.get_name() for s in symbols if s.is_local()}
    for child in function.get_children():
        found |= _outer_reads(child) - own
    return found


_EAGER = ("listcomp", "setcomp", "dictcomp")  # comprehension scopes (before 3.12) that run where they stand


def _captured(table: symtable.SymbolTable) -> set[str]:
    """Names that scopes nested in ``table`` and able to run later (a lambda, ``def``, class or generator,
    also under a comprehension) take from outside it."""
    found: set[str] = set()
    for child in table.get_children():
        if child.get_name() in _EAGER:
            found |= _captured(child) - {s.get_name() for s in child.get_symbols() if s.is_local()}
        else:
            found |= _outer_reads(child)
    return found


def _span(node: ast.FunctionDef) -> tuple[int, int]:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    return first, node.end_lineno or node.lineno


def _outside(lines: list[str], spans: list[tuple[int, int]]) -> list[str]:
    return [line for number, line in enumerate(lines, 1) if not any(a <= number <= b for a, b in spans)]
