"""List the functions outside the config/plan code that take the whole ``train`` config.

The config/plan code turns the command line or a YAML file into the resolved run (docs/development.md,
"Who reads the whole config"): :data:`CONFIG_PLAN` names its modules, and the one function of another module
that belongs to it. Every other function is handed what it reads: the shared run flags (``RunFlags``), a
stage's own options, or plain values.

A function *takes the whole config* when one of its parameters

- is annotated with the config class (``TrainConfig``; ``type[TrainConfig]``, the class itself, is not a
  config), or with a class that carries one (a class with a field annotated ``TrainConfig``, e.g. a
  prepared run holding ``cfg``), or
- is named ``cfg`` (this code base's name for the config; one annotated as a ``dict`` is a model's
  ``config.json`` and does not count),

or when it is a method of a class that carries the config. Read from the source with ``ast``: a function
handed the config under another name and no annotation is not seen; the names above are the ones the code
uses. Run ``python scripts/count_config_takers.py`` (``-q``: the count alone; ``--all``: the config/plan
code's own too).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ark_trainer"
CONFIG = "TrainConfig"
# the config/plan code: module (relative to src/ark_trainer) → None (all of it) or the functions that belong to it
CONFIG_PLAN: dict[str, set[str] | None] = {
    "core/config.py": None,  # the config: flags, YAML, validation
    "core/auto_defaults.py": None,  # the automatic values the config leaves unset
    "stages/plan.py": None,  # the plan: strategy, stages, steps, learning rates
    "services/planning.py": None,  # the run planned once: config in, resolved run out
    "services/train.py": None,  # train's entry: the config planned, then run
    "services/nl/plan.py": None,  # a request in words → the config (the command line's other front end)
    "stages/registry.py": {"config_class"},  # the config class made of the registered stages' options
}


def _annotation(arg: ast.arg) -> str:
    return ast.unparse(arg.annotation) if arg.annotation is not None else ""


def _trees() -> dict[str, ast.Module]:
    return {str(p.relative_to(SRC)): ast.parse(p.read_text(), str(p)) for p in sorted(SRC.rglob("*.py"))}


def carriers(trees: dict[str, ast.Module]) -> set[str]:
    """The classes with a field annotated with the config class (they carry the whole config)."""
    found = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.AnnAssign) and _names_config(ast.unparse(item.annotation), set()):
                        found.add(node.name)
    return found


def _names_config(annotation: str, carried_by: set[str]) -> bool:
    annotation = re.sub(r"\btype\[[^\]]*\]", "", annotation)  # the class itself is no config
    names = {CONFIG, *carried_by}
    return any(re.search(rf"\b{re.escape(n)}\b", annotation) for n in names)


def _takes_config(fn: ast.FunctionDef | ast.AsyncFunctionDef, carried_by: set[str]) -> bool:
    args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
    for arg in args:
        annotation = _annotation(arg)
        if _names_config(annotation, carried_by):
            return True
        if arg.arg == "cfg" and not re.search(r"\b(dict|Mapping)\b", annotation):
            return True
    return False


def config_takers(include_config_plan: bool = False) -> list[str]:
    """``module:line function`` of every function that takes the whole config, outside the config/plan code
    (with ``include_config_plan``: everywhere)."""
    trees = _trees()
    carried_by = carriers(trees)
    found: list[tuple[str, int, str]] = []
    for module, tree in trees.items():
        allowed = CONFIG_PLAN.get(module, set())
        for node in ast.walk(tree):
            methods: set[ast.AST] = set()
            if isinstance(node, ast.ClassDef) and node.name in carried_by:
                methods = {n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
            for fn in [
                n
                for n in ast.iter_child_nodes(node)
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            ]:
                if not (fn in methods or _takes_config(fn, carried_by)):
                    continue
                if not include_config_plan and (allowed is None or fn.name in allowed):
                    continue
                found.append((module, fn.lineno, fn.name))
    return [f"{module}:{line} {name}" for module, line, name in sorted(found)]


def main(argv: list[str]) -> int:
    everywhere = "--all" in argv
    takers = config_takers(everywhere)
    if "-q" not in argv:
        for taker in takers:
            print(taker)
    where = "in all the code" if everywhere else "outside the config/plan code"
    print(f"{len(takers)} functions {where} take the whole config")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
