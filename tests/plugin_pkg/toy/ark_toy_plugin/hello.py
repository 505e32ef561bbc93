"""Command ``ark-trainer hello``: flags from an options dataclass, as ark-trainer's own commands."""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.app.commands.args import opt


@dataclass
class HelloOptions:
    name: str = opt("world", "who to greet (default: world)")


def hello(args: HelloOptions) -> int:
    print(f"hello, {args.name}, from the toy plug-in")
    return 0
