"""Extra ``ark-trainer`` sub-commands, one module each.

Every module here that defines ``register(sub)`` is picked up by ``ark_trainer.cli``. ``register`` adds
its parser(s) to the argparse sub-parsers object and sets ``func`` (a callable taking the parsed
arguments and returning an exit code) with ``parser.set_defaults(func=...)``. Keep heavy imports
(torch, transformers, trl) inside the command functions, so ``--help`` stays fast. An installed package
adds a command with no edit here, from its plug-in's ``register_commands(register)`` hook
(``ark_trainer.base.plugins``).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any


def register_all(sub) -> None:
    """Register every command module of this package, in name order, then installed plug-ins' commands."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    from ark_trainer.base.plugins import call_hook

    call_hook("register_commands", lambda *args, **kwargs: add_plugin_command(sub, *args, **kwargs))


def add_plugin_command(sub, name: str, options: type, func: Callable[[Any], int], **build: Any) -> None:
    """A plug-in's command: ``register(name, OptionsDataclass, func, help=...)``, as
    :func:`~ark_trainer.app.commands.args.add_command` builds ours; a name already taken is refused."""
    from ark_trainer.app.commands.args import add_command

    if name in sub.choices:
        raise ValueError(f"a command named {name!r} already exists; pick another name")
    add_command(sub, name, options, func, **build)
