"""ark-trainer: RFT+GRPO post-training for OpenClaw agents.

The modules live in floor folders (``base``, ``core``, ``data``, ``rewards``, ``stages``, ``services``,
``app``; docs/development.md, "Floors"). A module imported by the path it had before the move
(``ark_trainer.deploy.policy``, a plug-in's ``ark_trainer.commands.args``, an ``--env
ark_trainer.demo.agent_env:make_env`` in an older ``run.yaml``) is the moved module itself, with a
``DeprecationWarning`` naming its new path: :class:`_MovedModules`.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from pathlib import Path
from types import ModuleType

__version__ = "0.1.0"

_FLOORS = ("base", "core", "data", "rewards", "stages", "services", "app")
_HERE = Path(__file__).resolve().parent


def _moved_name(fullname: str) -> str | None:
    """``ark_trainer.deploy.policy`` → ``ark_trainer.services.deploy.policy``: the new path of a module named
    by its path before the floors were folders, or None when ``fullname`` is not such a path."""
    parts = fullname.split(".")
    if len(parts) < 2 or parts[0] != __name__ or parts[1] in _FLOORS or parts[1] in ("cli", "__main__"):
        return None
    for floor in _FLOORS:
        here = _HERE / floor / parts[1]
        if here.with_suffix(".py").is_file() or (here / "__init__.py").is_file():
            return ".".join([parts[0], floor, *parts[1:]])
    return None


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the moved module (one module object under both names)."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        moved = _moved_name(fullname)
        return None if moved is None else importlib.machinery.ModuleSpec(fullname, self, origin=moved)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} has moved to {spec.origin}; import it from there", DeprecationWarning, stacklevel=3
        )
        return importlib.import_module(str(spec.origin))

    def exec_module(self, module: ModuleType) -> None:
        """The moved module ran when it was imported under its new path."""


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())
