"""Reading and ending a file's text the way both rewrites (a mirror, a factored helper) need it.

Shared by ``rewrite`` and ``factoring``: where a class sits and how deep, which
lines a rewrite inserted, whether a new method needs ``import torch``, and the
bytes libcst drops when it writes a module back.
"""

from __future__ import annotations

import ast
import sys

import libcst as cst
import libcst.matchers as m
from libcst.helpers import get_full_name_for_node

from ..index.ast_tools import names_bound, statement_blocks, walk, walk_statements
from ..index.platforms import is_type_checking
from ..index.prefilter import physical_lines
from ..patterns import DOCSTRING

TOP_LEVEL_DEFINITION = m.ClassDef() | m.FunctionDef()
BLANK = m.EmptyLine(comment=None)
BLANK_LINES_AROUND_DEFINITIONS = 2  # ruff format (and PEP 8) around a top-level class or def


def class_depth(source_line: str) -> int:
    """How many levels deep the methods of the class on ``source_line`` sit: ruff formats a new one there."""
    indent = source_line[: len(source_line) - len(source_line.lstrip())]
    return 1 + indent.count("\t") + (len(indent.replace("\t", "")) // 4)


def module_classes(tree: ast.Module) -> list[ast.ClassDef]:
    """Classes at module level, inside module-level if/try blocks too."""
    found, stack = [], list(reversed(tree.body))
    while stack:
        node = stack.pop()
        if isinstance(node, ast.ClassDef):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for block in ("body", "orelse", "finalbody"):
                stack.extend(reversed(getattr(node, block, []) or []))
            for handler in getattr(node, "handlers", []):
                stack.extend(reversed(handler.body))
    return found


def with_final_newline(source: str) -> str:
    """``source`` ending its last line: a method appended after it needs one (the only byte a fix
    adds outside the method, and what ruff's formatting asks for anyway)."""
    if not source or source.endswith(("\n", "\r")):
        return source
    first = physical_lines(source)[0]
    return source + (first[len(first.rstrip("\r\n")) :] or "\n")


def anchor_statement(node: ast.ClassDef) -> ast.stmt:
    """The statement of a class that a new method follows: its ``compute_logits`` (the last ``def`` of
    that name, the one Python keeps), else the last statement."""
    return next(
        (
            s
            for s in reversed(node.body)
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == "compute_logits"
        ),
        node.body[-1],
    )


def anchor_end(lines: list[str], node: ast.ClassDef) -> int:
    """The line a new method follows: the anchor statement's last, or, when the anchor ends the class,
    the last of the comment lines indented into the class body after it (the ast's end leaves them
    out): they trail the anchor, and stay above the method."""
    anchor = anchor_statement(node)
    end = anchor.end_lineno or anchor.lineno
    if anchor is not node.body[-1]:
        return end
    header = lines[node.lineno - 1]
    indent = header[: len(header) - len(header.lstrip(" \t"))]
    for number in range(end, len(lines)):
        text = lines[number].rstrip("\r\n")
        stripped = text.lstrip(" \t")
        if not stripped:
            continue
        if not (stripped.startswith("#") and text.startswith(indent) and len(text) - len(stripped) > len(indent)):
            break
        end = number + 1
    return end


def ended_for(source: str, targets: list[ast.ClassDef]) -> str:
    """``source``, its last line ended only when a new method goes after it (the line the method
    follows is the last): elsewhere the file keeps its bytes, an unended last line too."""
    if not source or source.endswith(("\n", "\r")):  # nothing to end (most files): no need to count lines
        return source
    lines = physical_lines(source)
    if any(anchor_end(lines, node) == len(lines) for node in targets):
        return with_final_newline(source)
    return source


def kept_lines(old: str, new: str) -> list[str]:
    """The lines of ``old`` that ``new`` must hold, in order: an unended last line stays as it is,
    unless ``new`` ends its own last line, which only a method added after it may do."""
    return physical_lines(with_final_newline(old) if new.endswith(("\n", "\r")) else old)


def uses_torch(method: cst.FunctionDef) -> bool:
    """Whether the method names ``torch`` anywhere, annotations included: under ``from __future__ import
    annotations`` one is not evaluated, yet a module that never binds torch leaves it an undefined name
    (ruff's F821, a type checker's error), so the import is added for it too (``torch_unready`` decides
    whether an import below the class is bound in time)."""
    return any(isinstance(n, ast.Name) and n.id == "torch" for n in walk(_function(method)))


def _function(method: cst.FunctionDef) -> ast.FunctionDef:
    tree = ast.parse(cst.Module(body=[method]).code).body[0]
    assert isinstance(tree, ast.FunctionDef)
    return tree


def _postponed(module: ast.Module) -> bool:
    """``from __future__ import annotations``: no annotation is evaluated when a method is defined."""
    return any(
        isinstance(s, ast.ImportFrom) and s.module == "__future__" and any(a.name == "annotations" for a in s.names)
        for s in module.body
    )


def uses_torch_when_defined(method: cst.FunctionDef, module: ast.Module) -> bool:
    """Whether defining the method (its annotations, unless postponed, and its defaults) reads
    ``torch``: that happens when the class body runs, at import, not when the method is called."""
    tree = _function(method)
    arguments = [*tree.args.posonlyargs, *tree.args.args, *tree.args.kwonlyargs, tree.args.vararg, tree.args.kwarg]
    evaluated = [*tree.args.defaults, *(d for d in tree.args.kw_defaults if d is not None)]
    if not _postponed(module):
        evaluated += [a.annotation for a in arguments if a is not None and a.annotation is not None]
        evaluated += [tree.returns] if tree.returns is not None else []
    return any(isinstance(n, ast.Name) and n.id == "torch" for node in evaluated for n in walk(node))


def binds_torch_before(tree: ast.Module, line: int) -> bool:
    """Whether a module-level statement (in a module-level block too) above ``line`` binds ``torch``:
    an import below a class is not bound yet when the class body runs."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        if node.lineno >= line or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (a.asname or a.name.split(".")[0]) == "torch" for a in node.names
        ):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if any(isinstance(t, ast.Name) and t.id == "torch" for t in targets):
            return True
        for block in ("body", "orelse", "finalbody"):
            stack.extend(getattr(node, block, []) or [])
        for handler in getattr(node, "handlers", []):
            stack.extend(handler.body)
    return False


def torch_unready(tree: ast.Module, placed: list[tuple[str, int, cst.FunctionDef]], binds_torch: bool) -> str | None:
    """Why a method cannot go into its class as the file stands: defining it reads ``torch`` (``placed``: class
    name, line, method), which the file binds above the class otherwise than by an import at the top level of the
    module (``torch = None``, an import under an ``if`` or in a ``try``: it may not be the torch module then), or,
    where it binds it at run time (``binds_torch``), imports only below the class. The codemod adds no second
    import of a name the module imports, and moving or changing the file's own is not a fix's to do."""
    for name, line, method in placed:
        if not uses_torch_when_defined(method, tree):
            continue
        own = _class_torch_binding(tree, name, line)
        if own is not None:
            return (
                f"class {name} (line {line}) binds torch itself (line {own}), and the new method's annotations read "
                "torch as the class body runs, where that name is the class's, not the torch module; rename it first"
            )
        other = _other_torch_binding(tree, line)
        if other is not None:
            return (
                f"torch is bound at line {other} otherwise than by an `import torch` at the top of the module, so "
                f"it may not be the torch module when class {name} (line {line}) is defined, and the new method's "
                "annotations read it then; bind torch only by `import torch` first"
            )
        if binds_torch and not binds_torch_before(tree, line):
            return (
                f"torch is imported only below class {name} (line {line}), and the new method's annotations "
                "read it when the class body runs (NameError at import); import torch above the class first"
            )
    return None


def _class_torch_binding(tree: ast.Module, name: str, line: int) -> int | None:
    """The line of a statement of the body of class ``name`` (at ``line``) that binds ``torch`` in the class's
    own scope (``def torch``, ``torch = ...``, an import): the name a method's annotations read there."""
    found = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name and n.lineno == line), None
    )
    if found is None:
        return None
    return next((s.lineno for s in walk_statements(found.body) if "torch" in names_bound(s)), None)


def _imports_torch_itself(node: ast.stmt) -> bool:
    """An ``import`` whose every name bound ``torch`` is the torch package: ``import torch``, ``import torch.nn``."""
    return isinstance(node, ast.Import) and all(
        a.name == "torch" or (a.asname is None and a.name.startswith("torch."))
        for a in node.names
        if (a.asname or a.name.split(".")[0]) == "torch"
    )


def _other_torch_binding(tree: ast.Module, line: int) -> int | None:
    """The line of the first module-level statement (in a module-level block too) above ``line`` that binds
    ``torch`` other than an ``import torch`` (``import torch.nn``) at the top level of the module; one under ``if
    TYPE_CHECKING:`` never runs."""
    found = []
    stack = [(statement, True) for statement in tree.body]
    while stack:
        node, top = stack.pop()
        if node.lineno >= line:
            continue
        if "torch" in names_bound(node) and not (top and _imports_torch_itself(node)):
            found.append(node.lineno)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue  # their bodies bind their own names
        blocks = statement_blocks(node)
        if isinstance(node, ast.If) and is_type_checking(node.test):
            blocks = [node.orelse]
        stack += [(statement, False) for block in blocks for statement in block]
    return min(found, default=None)


def with_torch_import(source: str, methods: list[cst.FunctionDef], binds_torch: bool) -> tuple[str, bool]:
    """``source`` (the rewritten file) with ``import torch`` where the module does not bind torch and a new
    method evaluates it, and whether it added one: sorted among the module's opening imports as isort sorts
    them, else where libcst's ``AddImportsVisitor`` puts it; none where the module imports torch already
    (then bound to something else later). Rare in vLLM, so the codemod machinery is imported here."""
    if binds_torch or not any(uses_torch(method) for method in methods):
        return source, False
    module = cst.parse_module(source)
    added = _sorted_among_imports(module)
    if added is None:  # no import to sort it among: the codemod's place, spaced as ruff formats
        from libcst.codemod import CodemodContext
        from libcst.codemod.visitors import AddImportsVisitor

        context = CodemodContext()
        AddImportsVisitor.add_needed_import(context, "torch")
        added = _spaced_as_ruff_formats(module, AddImportsVisitor(context).transform_module(module))
    new_source = added.code + dropped_tail(source, module)
    return new_source, new_source != source


_FUTURE, _STANDARD, _THIRD_PARTY, _FIRST_PARTY, _LOCAL = range(5)  # isort's sections, in order
_TORCH = (_THIRD_PARTY, 0, "torch", "")
_IMPORTS_TORCH = m.SimpleStatementLine(
    body=[
        m.ZeroOrMore(),
        m.Import(names=[m.ZeroOrMore(), m.ImportAlias(name=m.Name("torch"), asname=None), m.ZeroOrMore()]),
        m.ZeroOrMore(),
    ]
)


def _import_key(statement: cst.BaseStatement) -> tuple[int, int, str, str] | None:
    """Where isort (ruff's defaults) sorts a one-import line: its section, ``import x`` (0) before
    ``from x import`` (1), then the module, then the name it is bound to (``import torch`` before
    ``import torch as th``); None for any other statement."""
    if not m.matches(statement, m.SimpleStatementLine(body=[m.Import() | m.ImportFrom()])):
        return None
    node = statement.body[0]  # type: ignore[attr-defined]
    if isinstance(node, cst.ImportFrom) and node.relative:
        return (_LOCAL, 1, "", "")
    alias = node.names[0] if isinstance(node, cst.Import) else None
    bound = get_full_name_for_node(alias.asname.name) if alias is not None and alias.asname is not None else ""
    name = get_full_name_for_node(node.module if isinstance(node, cst.ImportFrom) else node.names[0].name)
    top = (name or "").split(".")[0]
    section = (
        _FUTURE
        if top == "__future__"
        else _STANDARD
        if top in sys.stdlib_module_names
        else _FIRST_PARTY
        if top == "vllm"
        else _THIRD_PARTY
    )
    return (section, int(isinstance(node, cst.ImportFrom)), (name or "").lower(), (bound or "").lower())


def _sorted_among_imports(module: cst.Module) -> cst.Module | None:
    """``module`` with ``import torch`` where isort puts it among the imports that open the module (in
    the third-party section: before ``from torch import ...``; a section of its own between the
    standard library's and vLLM's when there is none); None when the module opens with no import."""
    body = list(module.body)
    if any(m.matches(statement, _IMPORTS_TORCH) for statement in body):
        return module  # imported, then bound to something else: not imported twice (as the codemod does)
    start = 1 if body and m.matches(body[0], DOCSTRING) else 0
    region: list[tuple[int, tuple[int, int, str, str]]] = []
    for index in range(start, len(body)):
        key = _import_key(body[index])
        if key is None:
            break
        region.append((index, key))
    if not region:
        return None
    line = cst.SimpleStatementLine(body=[cst.Import(names=[cst.ImportAlias(name=cst.Name("torch"))])])
    third = [(i, key) for i, key in region if key[0] == _THIRD_PARTY]
    before = next((i for i, key in third if key > _TORCH), None) if third else None
    if third and before is None:  # last of its section
        body.insert(third[-1][0] + 1, line)
    elif before is not None or not any(key[0] < _THIRD_PARTY for _, key in region):
        at = before if before is not None else region[0][0]  # it opens the section, or the imports
        displaced = body[at]
        body[at] = displaced.with_changes(leading_lines=[] if before is not None else [cst.EmptyLine()])
        body.insert(at, line.with_changes(leading_lines=displaced.leading_lines))
    else:  # a section of its own, after the standard library's
        after = max(i for i, key in region if key[0] < _THIRD_PARTY)
        body.insert(after + 1, line.with_changes(leading_lines=[cst.EmptyLine()]))
        following = body[after + 2] if after + 2 < len(body) else None
        if following is not None and _import_key(following) is not None and not following.leading_lines:
            body[after + 2] = following.with_changes(leading_lines=[cst.EmptyLine()])
    return module.with_changes(body=body)


def _spaced_as_ruff_formats(old: cst.Module, new: cst.Module) -> cst.Module:
    """``new`` (``old`` with at most one top-level import added) with the blank lines ruff format wants around the
    import: AddImportsVisitor puts it right under a module docstring, and leaves one blank line before a
    class or def that follows it, so a ruff-clean file was no longer clean."""
    body = list(new.body)
    at = next((i for i, line in enumerate(body) if i == len(old.body) or not line.deep_equals(old.body[i])), None)
    if at is None:  # none added: the module imports torch already, somewhere
        return new
    if at > 0 and m.matches(body[at - 1], DOCSTRING) and not body[at].leading_lines:
        body[at] = body[at].with_changes(leading_lines=[cst.EmptyLine()])
    if at + 1 < len(body) and m.matches(body[at + 1], TOP_LEVEL_DEFINITION):
        following = body[at + 1]
        blank = next((i for i, line in enumerate(following.leading_lines) if not m.matches(line, BLANK)), None)
        missing = BLANK_LINES_AROUND_DEFINITIONS - (len(following.leading_lines) if blank is None else blank)
        if missing > 0:
            body[at + 1] = following.with_changes(
                leading_lines=[*[cst.EmptyLine()] * missing, *following.leading_lines]
            )
    return new.with_changes(body=body)


def dropped_tail(text: str, module: cst.Module) -> str:
    """What libcst leaves out when it writes ``text`` back: the last newline of a file whose lines
    end in a bare CR (libcst 1.9 reads ``"x\\r\\r"`` and writes ``"x\\r"``), else nothing."""
    if not text.endswith("\r"):  # the only case: no need to write a whole module back to find out
        return ""
    return text[len(module.code) :]


def inserted_lines(old: list[str], new: list[str]) -> list[int] | None:
    """1-based numbers of the lines of ``new`` that are not ``old``'s, if ``old`` is all there, in order."""
    inserted, position = [], 0
    for number, line in enumerate(new, 1):
        if position < len(old) and line == old[position]:
            position += 1
        else:
            inserted.append(number)
    return inserted if position == len(old) else None
