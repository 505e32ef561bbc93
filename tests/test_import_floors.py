"""Packages are floors: every ``ark_trainer`` import runs down the order of floors or stays on its own floor.

The floors and what stands on each are written out in docs/development.md ("Floors"); ``FLOORS`` below is
that order, ground first. Every top-level module or package of ``src/ark_trainer`` (a "room") stands on
exactly one floor. An import of a room on a higher floor is an upward import and fails this test unless
``ALLOWED_UPWARD`` names it with its reason. Imports are counted as ``test_import_graph`` counts them, from
the source with ``ast``: at module level, inside functions and under ``if TYPE_CHECKING:``, relative imports
resolved.
"""

from __future__ import annotations

from tests.test_import_graph import PACKAGE, import_graph, modules

# ground first; a room may import rooms on its own floor and the floors below it
FLOORS: list[tuple[str, set[str]]] = [
    (
        "base",
        {
            "errors",
            "fileio",
            "yamlsafe",
            "ranges",
            "httpclient",
            "plugins",
            "trackers",
            "scale",
            "strategies",
            "chat",
            "flags",
            "run_options",
            "external",
        },
    ),
    (
        "ground",
        {
            "config",
            "auto_defaults",
            "folders",
            "runfolder",
            "metrics",
            "runcheck",
            "stats",
            "models",
            "runtime",
            "export",
            "generation",
            "vllm_rollouts",
            "final_model",
        },
    ),
    ("data", {"data", "inputs"}),
    ("rewards", {"rewards", "scoring"}),
    ("stages", {"stages", "plan", "agent", "evaluate", "diagnose", "report"}),
    ("services", {"pipeline", "deploy", "loop", "openclaw", "nl", "dashboard"}),
    ("top", {"demo", "commands", "cli", "clidoc", "__main__"}),
]

# upward imports kept, "importer -> imported module": a reason each; as short as it can be
ALLOWED_UPWARD: dict[str, str] = {}


def room(module: str) -> str:
    """The top-level module or package of ``src/ark_trainer`` that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def floor_of() -> dict[str, int]:
    return {name: level for level, (_, rooms) in enumerate(FLOORS) for name in rooms}


def upward_imports() -> list[str]:
    graph = import_graph()
    floors = floor_of()
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if room(target) and room(module) and floors[room(target)] > floors[room(module)]
    )


def test_every_room_stands_on_one_floor():
    rooms = {room(m) for m in modules() if room(m)}
    placed = [name for _, names in FLOORS for name in names]
    assert len(placed) == len(set(placed)), "a room on two floors"
    assert rooms == set(placed), (
        f"rooms on no floor: {sorted(rooms - set(placed))}; floors name no room: {sorted(set(placed) - rooms)}"
    )


def test_no_import_runs_up_the_floors():
    floors = floor_of()
    upward = upward_imports()
    unexpected = [
        f"{edge} ({FLOORS[floors[room(edge.split()[0])]][0]} -> {FLOORS[floors[room(edge.split()[-1])]][0]})"
        for edge in upward
        if edge not in ALLOWED_UPWARD
    ]
    assert not unexpected, "imports that run up the floors:\n" + "\n".join(unexpected)


def test_the_allow_list_holds_only_upward_imports_that_are_there():
    stale = sorted(set(ALLOWED_UPWARD) - set(upward_imports()))
    assert not stale, f"allowed upward imports that no longer run up (drop them): {stale}"
    assert all(reason.strip() for reason in ALLOWED_UPWARD.values())


def test_the_floors_see_every_kind_of_import():
    # the graph counts in-function and type-only imports, and resolves relative ones
    graph = import_graph()
    assert f"{PACKAGE}.stages.registry" in graph[f"{PACKAGE}.plan"]
    floors = floor_of()
    assert floors["models"] < floors["data"] < floors["stages"] < floors["pipeline"] < floors["cli"]
