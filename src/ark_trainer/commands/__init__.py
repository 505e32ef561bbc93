"""Extra ``ark-trainer`` sub-commands, one module each.

Every module here that defines ``register(sub)`` is picked up by ``ark_trainer.cli``. ``register`` adds
its parser(s) to the argparse sub-parsers object and sets ``func`` (a callable taking the parsed
arguments and returning an exit code) with ``parser.set_defaults(func=...)``. Keep heavy imports
(torch, transformers, trl) inside the command functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import importlib
import pkgutil


def register_all(sub) -> None:
    """Register every command module of this package, in name order."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
