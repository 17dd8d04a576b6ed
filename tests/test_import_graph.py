"""One way through the house (issue 20): kvplan's modules import each other without a circle, and the floors
below the planner (``kvplan/sources``, ``kvplan/engines``, ``kvplan/logs``) never go back up through the
package front door (``import kvplan`` then ``kvplan.max_batch``).

The graph is read from the source with ``ast``, every import counted: at module level, inside functions and
under ``TYPE_CHECKING``. ``from kvplan.pkg import name`` is an import of the submodule ``kvplan.pkg.name``
where one exists, else of ``kvplan.pkg``; ``import kvplan`` and ``from kvplan import <lazy name>`` import the
front door, ``kvplan/__init__.py``. Imports made by ``importlib`` (the engine registry, the front door's lazy
names) are not followed: what they load is looked up by name as the program runs, never tied at import.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from conftest import REPO

PACKAGE = REPO / "kvplan"
FRONT_DOOR = "kvplan"
BELOW_THE_PLANNER = ("kvplan.engines", "kvplan.logs", "kvplan.sources")


def _modules() -> dict[str, Path]:
    """Dotted module name -> its file (a package is its ``__init__.py``)."""
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, int]]:
    """(the kvplan module imported, line) for every import in one file."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, int]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x, from ..pkg import y
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.append((submodule if submodule in modules else source, node.lineno))
    out = []
    for target, line in found:
        while target and target not in modules:  # `import kvplan.x.y` of a name that is no module: its module
            target = target.rpartition(".")[0]
        if target and target != name:
            out.append((target, line))
    return out


def import_graph() -> dict[str, dict[str, int]]:
    """module -> {module it imports: the first line that does}."""
    modules = _modules()
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in _imports(name, path, modules):
            edges.setdefault(target, line)
        graph[name] = edges
    return graph


def circles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Each strongly connected group of more than one module, as one loop through it (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
    return [_loop(graph, set(group)) for group in groups]


def _loop(graph: dict[str, dict[str, int]], group: set[str]) -> list[str]:
    """The shortest way from the group's first module back to itself, inside the group."""
    start = min(group)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in group:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no loop through {sorted(group)}")  # pragma: no cover - Tarjan found one


def _shown(graph: dict[str, dict[str, int]], loop: list[str]) -> str:
    modules = _modules()
    steps = [f"  {modules[a].relative_to(REPO)}:{graph[a][b]} imports {b}" for a, b in zip(loop, loop[1:])]
    return "\n".join([" -> ".join(loop), *steps])


def test_the_graph_reads_every_kind_of_import():
    graph = import_graph()
    assert "kvplan.plan" in graph["kvplan.cli.max_batch"]  # inside a function
    assert "kvplan.spec" in graph["kvplan.engines.protocol"]  # at module level
    assert "kvplan.budgets.base" in graph["kvplan.engines.protocol"]  # under TYPE_CHECKING
    assert "kvplan.engines" in graph["kvplan.engines.serve"]  # from kvplan import engines: the package
    assert "kvplan.plan" in graph[FRONT_DOOR]  # the front door's names, as type checkers see them


def test_no_module_imports_another_that_imports_it_back():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n" + "\n".join(_shown(graph, loop) for loop in found)


def test_the_floors_below_the_planner_never_use_the_front_door():
    # `import kvplan` then `kvplan.max_batch(...)`, or `from kvplan import max_batch`: the planner reached from
    # below, through the top of the house (issue 20). A floor that needs the planner takes it as a callable.
    graph = import_graph()
    modules = _modules()
    offenders = [f"{modules[name].relative_to(REPO)}:{edges[FRONT_DOOR]}" for name, edges in sorted(graph.items())
                 if name.startswith(tuple(f"{p}." for p in BELOW_THE_PLANNER)) or name in BELOW_THE_PLANNER
                 if FRONT_DOOR in edges]
    assert offenders == []


if __name__ == "__main__":  # python tests/test_import_graph.py: the circles, and what each module imports
    g = import_graph()
    for loop in circles(g):
        print(_shown(g, loop))
    if sys.argv[1:] == ["--edges"]:
        for module, edges in sorted(g.items()):
            for target in sorted(edges):
                print(module, "->", target)
