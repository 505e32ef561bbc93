"""The folders are the floors: every ``ark_trainer`` import runs down the floors or stays on its own floor.

``src/ark_trainer`` holds one folder per floor, ground first as ``FLOORS`` lists them, and, loose at the top,
only ``__init__.py``, ``__main__.py`` and ``cli.py`` (the command line, which stands on the top floor,
``app``) and folders of data with no Python in them (``presets/``). A module's floor is the top-level folder it sits in, read from
the tree: docs/development.md ("Floors") is the table. An import of a module on a higher floor is an upward
import and fails this test unless ``ALLOWED_UPWARD`` names it with its reason. Imports are counted as
``test_import_graph`` counts them, from the source with ``ast``: at module level, inside functions and under
``if TYPE_CHECKING:``, relative imports resolved.
"""

from __future__ import annotations

from tests.test_import_graph import PACKAGE, SRC, import_graph, modules

# the floor folders of src/ark_trainer, ground first: a module may import its own floor and the floors below
FLOORS = ["base", "core", "data", "rewards", "stages", "services", "app"]
# the modules loose at the top: the package itself, and the command line, which stands on the top floor
LOOSE = {"__init__", "__main__", "cli"}

# upward imports kept, "importer -> imported module": a reason each; as short as it can be
ALLOWED_UPWARD: dict[str, str] = {}


def floor(module: str) -> int:
    """The floor ``module`` stands on: the index in ``FLOORS`` of the top-level folder it sits in; the loose
    ``cli`` and ``__main__`` stand on the top floor, the package's own ``__init__`` below every floor."""
    parts = module.split(".")
    if len(parts) == 1:
        return -1
    return FLOORS.index(parts[1]) if parts[1] in FLOORS else len(FLOORS) - 1


def upward_imports() -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for target in targets
        if floor(target) > floor(module)
    )


def test_the_top_of_the_package_is_the_floor_folders():
    top = SRC / PACKAGE
    loose = sorted(p.stem for p in top.glob("*.py") if p.stem not in LOOSE)
    assert not loose, f"modules loose at the top of src/{PACKAGE} (move each into its floor folder): {loose}"
    folders = {p.name for p in top.iterdir() if p.is_dir() and any(p.rglob("*.py"))}
    assert folders == set(FLOORS), (
        f"folders with Python that are no floor: {sorted(folders - set(FLOORS))}; "
        f"floors with no folder: {sorted(set(FLOORS) - folders)}"
    )
    assert all((top / name / "__init__.py").is_file() for name in FLOORS)


def test_every_module_stands_on_one_floor():
    for module in modules():
        parts = module.split(".")
        assert len(parts) == 1 or parts[1] in FLOORS or parts[1] in LOOSE, module


def test_no_import_runs_up_the_floors():
    unexpected = [
        f"{edge} ({FLOORS[floor(edge.split()[0])]} -> {FLOORS[floor(edge.split()[-1])]})"
        for edge in upward_imports()
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
    assert f"{PACKAGE}.stages.registry" in graph[f"{PACKAGE}.stages.plan"]
    assert f"{PACKAGE}.app.commands.args" in graph[f"{PACKAGE}.cli"]
    order = ["core.models.loading", "data.loader", "stages.plan", "services.pipeline", "app.demo.run", "cli"]
    expected = ["core", "data", "stages", "services", "app", "app"]  # the loose cli stands on the top floor
    assert [floor(f"{PACKAGE}.{m}") for m in order] == [FLOORS.index(f) for f in expected]
    assert floor(f"{PACKAGE}.cli") == floor(f"{PACKAGE}.app.commands") == len(FLOORS) - 1
