"""The import graph of the ``cann`` package has no cycles (DESIGN.md: shared helpers live below their
users, the driver on top). Every ``import`` / ``from ... import`` statement counts, including the ones
inside functions: a deferred import hides a cycle, it does not remove it."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "cann"


def _modules() -> dict[str, Path]:
    mods = {}
    for p in sorted(PACKAGE.rglob("*.py")):
        parts = p.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = p
    return mods


def _targets(mods: dict[str, Path], module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The ``cann`` modules a statement imports (``from pkg import name`` is ``pkg.name`` when that
    is a module, else ``pkg``)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module.split(".")
            if mods[module].name != "__init__.py":
                pkg = pkg[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([base] if base else []))
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
    out = []
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> the ``cann`` modules it imports anywhere in its source."""
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(_targets(mods, name, node))
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v):
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (c := visit(w)):
                return c
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (c := visit(v)):
            return c
    return None


def test_import_graph_is_acyclic():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


@pytest.mark.parametrize("graph, cycle", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c", "a"]),
    ({"a": {"b"}, "b": set(), "c": {"a", "b"}}, None),
])
def test_find_cycle(graph, cycle):
    assert find_cycle(graph) == cycle


def test_deferred_imports_count(tmp_path):
    """An import inside a function is an edge too."""
    mods = {"cann.x": tmp_path / "x.py", "cann.y": tmp_path / "y.py"}
    node = ast.parse("def f():\n    from cann.y import g\n").body[0].body[0]
    assert _targets(mods, "cann.x", node) == ["cann.y"]
