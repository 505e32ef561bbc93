"""``ark-trainer``'s sub-commands, one module each, and the ``register`` their plug-in hook is handed.

Every command comes in through the plug-in hook ``register_commands(register)`` (``ark_trainer.base.plugins``):
``ark_trainer.cli``'s (``train``, ``demo``, ``report``, ``status``) and each module of this package, listed in
``ark_trainer.base.plugins.DEFAULT_PLUGINS`` in the order ``--help`` shows them, then installed plug-ins'. A
module's hook calls ``register(name, OptionsDataclass, func, help=...)`` once a command
(:class:`CommandRegistry`). Keep heavy imports (torch, transformers, trl) inside the command functions, so
``--help`` stays fast.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def register_all(sub: argparse._SubParsersAction) -> None:
    """Add every command to ``sub``: the ``register_commands`` hooks of ark-trainer's own modules, then of
    installed plug-ins (a plug-in's name that is taken is refused in one line)."""
    from ark_trainer.base.plugins import call_hook

    call_hook("register_commands", CommandRegistry(sub))


class CommandRegistry:
    """The ``register`` of the ``register_commands`` hook, one per parser::

        register("score", ScoreOptions, score, help="...")            # ark-trainer score
        register("rm", None, None, help="reward models")               # a command that holds sub-commands
        register("rm train", RMTrainOptions, train_rm, help="...")     # ark-trainer rm train

    ``func`` is called with an instance of the options dataclass, whose fields are the command's flags
    (:func:`~ark_trainer.app.commands.args.add_command`; its other keywords, ``description``, ``groups``,
    ``show_defaults``, pass through). With ``given_only=True`` it is called with the dict of the flags given,
    as raw text, for a command that checks its flags itself (``train``, ``loop``). A name already taken is
    refused with a ``ValueError`` (a plug-in's, in one line on stderr).
    """

    def __init__(self, sub: argparse._SubParsersAction) -> None:
        self.sub = sub
        self.groups: dict[str, argparse._SubParsersAction] = {}  # a command that holds sub-commands → them

    def __call__(
        self, name: str, options: type | None, func: Callable[[Any], int] | None, **build: Any
    ) -> None:
        from ark_trainer.app.commands.args import add_command, add_command_group

        *parent, last = name.split()
        if len(parent) > 1 or (parent and parent[0] not in self.groups):
            raise ValueError(
                f"a command named {name!r} needs its group {' '.join(parent)!r} registered first"
            )
        sub = self.groups[parent[0]] if parent else self.sub
        if last in sub.choices:
            raise ValueError(f"a command named {name!r} already exists; pick another name")
        if options is None:  # a group: ``ark-trainer NAME`` alone prints its help
            self.groups[name] = add_command_group(sub, name, **build)
            return
        if func is None:
            raise ValueError(f"command {name!r}: no function to run")
        add_command(sub, last, options, func, **build)
