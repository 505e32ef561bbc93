"""The package has no import cycles: at import time, through a module imported first in a fresh interpreter,
or through the RFT stage even inside functions; scoring lives outside the RFT stage, which only the stage
registry imports. (The import floors are ``test_import_floors.py``, on ``test_import_graph.py``'s graph.)
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "ark_trainer"
RFT_STAGE = PACKAGE / "stages" / "rft" / "stage.py"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _top_level_imports(path: Path, name: str, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports while it is imported: not in functions, not under TYPE_CHECKING."""
    is_pkg = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_pkg else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _top_level_imports(path, name, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (cycle := walk(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := walk(node)):
            return cycle
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_the_package_import_graph_is_acyclic():
    graph = import_graph()
    assert "ark_trainer.rewards.scoring" in graph and len(graph) > 50
    assert find_cycle(graph) is None, " → ".join(find_cycle(graph) or [])


def test_no_module_reaches_into_the_rft_stage_for_scoring():
    """Scoring lives in ``ark_trainer.rewards.scoring``; only the stage registry (which loads the built-in stages)
    imports the RFT stage."""
    users = sorted(
        path.relative_to(SRC).as_posix()
        for path in PACKAGE.rglob("*.py")
        if "ark_trainer.stages.rft.stage" in path.read_text(encoding="utf-8") and path != RFT_STAGE
    )
    assert users == ["ark_trainer/stages/registry.py"], users
    for banned in (
        "ark_trainer.stages.evaluate",
        "ark_trainer.stages.grpo.stage",
        "def score_completions",
        "def select(",
    ):
        assert banned not in RFT_STAGE.read_text(encoding="utf-8")


@pytest.mark.slow  # ~200 interpreters, 10-17 s: the fast tier has the static graph checks above
def test_every_module_imports_alone_in_a_fresh_interpreter():
    """A cycle hidden behind import order shows up when a module is the first one imported."""
    names = [n for n in _modules() if not n.endswith("__main__")]
    code = (
        "import subprocess, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    r = subprocess.run([sys.executable, '-c', f'import {name}'], capture_output=True, text=True)\n"
        "    if r.returncode:\n"
        "        bad.append(name + ': ' + (r.stderr.strip().splitlines() or ['?'])[-1])\n"
        "print('\\n'.join(bad))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(SRC)}  # this checkout's package, not an installed one
    result = subprocess.run(
        [sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=900, env=env
    )
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_no_import_cycle_runs_through_the_rft_stage_even_inside_functions():
    """``stages/rft ↔ resume`` and ``stages/rft ↔ generation`` were cycles hidden in function bodies."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found |= {f"{node.module}.{a.name}" for a in node.names} | {node.module}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    rft = "ark_trainer.stages.rft.stage"
    reach, todo = set(), list(graph[rft])
    while todo:
        node = todo.pop()
        if node not in reach:
            reach.add(node)
            todo += graph[node]
    assert rft not in reach, sorted(m for m in reach if rft in graph[m])
