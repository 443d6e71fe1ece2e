"""``index.ast_tools.statements_within`` yields exactly the statements ``ast.walk`` reaches, in its order
(what reads bindings and imports from it must not see another order than before), and ``ast_tools.walk``
exactly the nodes ``ast.walk`` yields, the same objects in the same order, on this project's own code and
on every fixture tree, which between them hold each statement form with a body."""

import ast
from pathlib import Path

import pytest

from mtp_audit.index.ast_tools import parent_map, statements_within, walk

ROOT = Path(__file__).parent.parent
SOURCES = sorted([*(ROOT / "mtp_audit").rglob("*.py"), *(ROOT / "tests" / "fixtures").rglob("*.py")])
FORMS = """
def f(self):
    try:
        import a
    except ValueError:
        self.x = 1
    match self.y:
        case 1 if z:
            self.z: int = 2
        case _:
            pass
    with g() as h:
        for i in h:
            while i:
                class C:
                    def m(self):
                        self.w = 3
            else:
                async def k():
                    async with j:
                        async for q in r:
                            del q
    if a:
        pass
    elif b:
        from c import d
    else:
        try:
            pass
        finally:
            return
"""


def _parsed(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_bytes())
    except SyntaxError:
        pytest.skip("a fixture that is not Python on purpose")


def _walked(node: ast.AST) -> list[ast.stmt]:
    return [n for n in ast.walk(node) if isinstance(n, ast.stmt) and n is not node]


def test_statements_within_follows_every_block_form() -> None:
    module = ast.parse(FORMS)
    assert list(statements_within(module)) == _walked(module)
    assert len(_walked(module)) == 24


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_statements_within_is_ast_walk_restricted_to_statements(path: Path) -> None:
    tree = _parsed(path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            assert list(statements_within(node)) == _walked(node)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_walk_is_ast_walk(path: Path) -> None:
    tree = _parsed(path)
    expected = list(ast.walk(tree))
    found = list(walk(tree))
    assert len(found) == len(expected) and all(a is b for a, b in zip(found, expected))


def test_walk_queues_a_nodes_children_before_handing_it_out() -> None:
    """As ``ast.walk`` does: a child replaced while its parent is handed out is still walked."""
    module = ast.parse("x = f(a)")
    seen = []
    for node in walk(module):
        seen.append(type(node).__name__)
        if isinstance(node, ast.Assign):
            node.value = ast.Constant(1)
    assert "Call" in seen and "Constant" not in seen


@pytest.mark.parametrize("path", SOURCES[::7], ids=lambda p: str(p.relative_to(ROOT)))
def test_parent_map_is_the_map_walk_and_iter_child_nodes_build(path: Path) -> None:
    tree = _parsed(path)
    expected = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = parent_map(tree)
    assert found.keys() == expected.keys() and all(found[k] is expected[k] for k in expected)
