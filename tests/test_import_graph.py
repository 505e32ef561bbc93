"""The package's imports form no cycle, and ``core/models/`` (the model code's ground floor) imports nothing
above it.

Every ``ark_trainer`` import counts: at module level, inside functions and under ``TYPE_CHECKING``. A cycle
hidden in a function still means neither module can be read, tested or moved without the other. The graph
is built from the source with ``ast`` (nothing is imported), relative imports resolved, and
``from pkg import mod`` counted as an import of the submodule ``pkg.mod``.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "ark_trainer"

# Cycles known and being taken apart elsewhere: a cycle among modules of one of these sets passes for now.
# Empty when none is left.
ALLOWED_FOR_NOW: list[set[str]] = []

# the ground floor and what it must never import
GROUND_FLOOR = f"{PACKAGE}.core.models"
ABOVE_GROUND = ("rewards", "stages", "services", "app")


@functools.cache
def modules() -> dict[str, Path]:
    """Every module of the package by its dotted name (a package by its ``__init__``)."""
    found = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The module that ``name`` lives in: itself, else its nearest enclosing package or module."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.Import | ast.ImportFrom, package: str, known: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join([*base, *([node.module] if node.module else [])])
        else:
            source = node.module or ""
        # `from pkg import mod` imports the submodule; `from mod import name` imports mod
        names = [f"{source}.{a.name}" if f"{source}.{a.name}" in known else source for a in node.names]
    return {o for n in names if n.split(".")[0] == PACKAGE and (o := _owner(n, known))}


@functools.cache  # parsed once for all the tests here (read only)
def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import | ast.ImportFrom):
                edges |= _imported(node, package, known)
        graph[name] = edges - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _describe(component: list[str], graph: dict[str, set[str]]) -> str:
    inside = set(component)
    edges = [f"{a} -> {b}" for a in component for b in sorted(graph[a] & inside)]
    return f"{len(component)} modules: " + "; ".join(edges)


def test_the_graph_sees_every_kind_of_import():
    # the graph itself must not miss in-function, TYPE_CHECKING, relative or `from pkg import mod` imports
    graph = import_graph()
    assert f"{PACKAGE}.core.models.device" in graph[f"{PACKAGE}.core.models.loading"]
    assert any(graph.values())
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ark_trainer.rewards import composite\n"
        "def f():\n    from .registry import get_reward\n    import ark_trainer.base.fileio\n"
    )
    known = modules()
    seen: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            seen |= _imported(node, f"{PACKAGE}.rewards", known)
    assert seen == {f"{PACKAGE}.rewards.composite", f"{PACKAGE}.rewards.registry", f"{PACKAGE}.base.fileio"}


def test_cycles_are_found_and_named():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": {"e"}}
    assert cycles(graph) == [["a", "b", "c"], ["e", "e2"]]


def test_no_import_cycles():
    graph = import_graph()
    unexpected = [c for c in cycles(graph) if not any(set(c) <= allowed for allowed in ALLOWED_FOR_NOW)]
    assert not unexpected, "import cycles:\n" + "\n".join(_describe(c, graph) for c in unexpected)


def test_the_ground_floor_imports_nothing_above_it():
    graph = import_graph()
    above = tuple(f"{PACKAGE}.{name}" for name in ABOVE_GROUND)
    wrong = [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if module == GROUND_FLOOR or module.startswith(GROUND_FLOOR + ".")
        for target in sorted(targets)
        if any(target == a or target.startswith(a + ".") for a in above)
    ]
    assert not wrong, "the model ground floor imports from above it: " + "; ".join(wrong)


def _reach(graph: dict[str, set[str]], starts: list[str]) -> set[str]:
    """Every module that importing ``starts`` may import, through any number of others."""
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        for target in graph.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


# each floor, and what it must never reach, not even through another module
FLOORS = {
    GROUND_FLOOR: ABOVE_GROUND,
    f"{PACKAGE}.core.runfolder": (*ABOVE_GROUND, "core.models"),
    f"{PACKAGE}.core.metrics": ("rewards.scoring", "stages", "services", "app", "core.models"),
    f"{PACKAGE}.rewards.contract": ("rewards.scoring", "stages", "services", "app", "core.models"),
}


def test_the_floors_reach_nothing_above_them_even_through_other_modules():
    graph = import_graph()
    wrong = []
    for floor, banned in FLOORS.items():
        members = [m for m in graph if m == floor or m.startswith(floor + ".")]
        above = tuple(f"{PACKAGE}.{name}" for name in banned)
        reached = sorted(
            t for t in _reach(graph, members) if any(t == a or t.startswith(a + ".") for a in above)
        )
        wrong += [f"{floor} reaches {target}" for target in reached]
    assert not wrong, "; ".join(wrong)
