"""``ark-trainer loop --output_dir LOOP --model_path M [train flags]``: the live loop (see docs/loop.md).

Serves M to OpenClaw with every exchange recorded, trains a round in the background when enough new
scored turns have arrived, and promotes the round only when the gate passes (:mod:`ark_trainer.services.loop`).
Every ``train`` flag is accepted and passed to each round's ``train`` (``--strategy``, ``--max_train_steps``,
``--reward_config``, ``--lora_r``, ...). ``--rollback N`` serves round N again; ``--stop`` stops the
supervisor and the server (``ark-trainer deploy LOOP --rollback`` then restores OpenClaw's config).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_dataclass_args, opt
from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import Range
from ark_trainer.core.config import TrainConfig, coerce, parse_bool, train_groups
from ark_trainer.core.metrics import REWARD_MEAN, TASK_ACCURACY
from ark_trainer.services.loop.gate import TRACKED

LOOP_GROUP = "live loop"


@dataclass(frozen=True)
class LoopOwnOptions:
    """The loop's own flags (:func:`loop_options` adds ``train``'s, passed to every round)."""

    min_new_turns: int = opt(
        30,
        "new turns with a training target (a correction, an approved answer) that start a round",
        group=LOOP_GROUP,
    )
    every: float = opt(0.0, "also start a round every this many seconds if any turn is new (0: off)")
    max_regression: float = opt(0.02, "largest drop of any tracked metric a promoted round may have")
    min_improvement: float = opt(0.0, "the main metric must improve by more than this to promote")
    main_metric: str = opt(
        "auto",
        f"the metric that must improve: auto ({TASK_ACCURACY} when the held-out rows are labelled, else "
        f"{REWARD_MEAN}), {', '.join(TRACKED)}",
    )
    eval_newest: int = opt(
        4, "newest scored turns of a round evaluated (not trained on) with the held-out set"
    )
    heldout_size: int = opt(8, "held-out rows frozen at the start when --eval_dataset is not given")
    keep_system_prompt: bool = opt(
        False, "keep the agent's system prompt and internal context in round data (default: dropped)"
    )
    feedback_rules: str | None = opt(None, "YAML of negative/positive/hint patterns for user feedback")
    max_rounds: int = opt(0, "stop after this many decided rounds (0: run until stopped)")
    poll: float = opt(2.0, "seconds between checks for new turns")
    port: int | None = opt(None, "server port on 127.0.0.1 (default: a free one)")
    agent: str | None = opt(None, "OpenClaw agent id (default: every agent)")
    rollback: int | None = opt(None, "serve round N again (0: the starting model), then exit")
    stop: bool = opt(False, "stop the loop's supervisor and model server", switch=True)


LOOP_FIELDS = [f.name for f in dataclasses.fields(LoopOwnOptions)]


@functools.cache
def loop_options() -> type[TrainConfig]:
    """``train``'s flags (the registered stages' config, ``stages/registry.config_class``), then the loop's own."""
    from ark_trainer.stages.registry import config_class

    cls = type("LoopOptions", (LoopOwnOptions, config_class()), {"__module__": __name__})
    return dataclass(frozen=True)(cls)


def register(sub) -> None:
    parser = sub.add_parser(
        "loop", help="serve, record, train rounds in the background, promote only what passes the gate"
    )
    from ark_trainer.stages.registry import config_class

    groups = {**train_groups(config_class()), LOOP_GROUP: tuple(LOOP_FIELDS)}
    add_dataclass_args(parser, loop_options(), groups=groups, given_only=True)
    parser.set_defaults(func=_cmd_loop)


def _loop_values(given: dict) -> dict:
    """The loop's own flags, converted (``given_only`` leaves raw text), defaults for the rest."""
    hints = typing.get_type_hints(LoopOwnOptions)
    out = {}
    for f in dataclasses.fields(LoopOwnOptions):
        if f.name not in given:
            out[f.name] = f.default
            continue
        kind = typing.get_args(hints[f.name])[0] if typing.get_args(hints[f.name]) else hints[f.name]
        value = given[f.name]
        try:
            out[f.name] = parse_bool(value, f"--{f.name}") if kind is bool else kind(value)
        except ValueError:
            raise UserError(f"--{f.name}: expected {kind.__name__}, got {value!r}") from None
    return out


def _bounds() -> dict[str, Range]:
    from ark_trainer.base.ranges import BIG, MAX_SECONDS, MAX_WEIGHT

    return {  # nan fails every range: "--min_improvement nan" once promoted every round
        "min_new_turns": Range(1, BIG), "every": Range(0.0, MAX_SECONDS), "max_regression": Range(0.0, MAX_WEIGHT),
        "min_improvement": Range(0.0, MAX_WEIGHT), "eval_newest": Range(0, BIG), "heldout_size": Range(1, BIG),
        "max_rounds": Range(0, BIG), "poll": Range(0.0, 3600.0, lo_open=True),
    }  # fmt: skip


def check_loop_options(opts: dict) -> None:
    """The loop's own numbers, each in its range (one line naming the flag), before anything runs."""
    for name, rng in _bounds().items():
        value = opts[name]
        if value not in rng:
            kind = "an integer" if isinstance(value, int) else "a number"
            raise UserError(f"--{name}: expected {kind} {rng.text()}, got {value}")
    from ark_trainer.services.loop.gate import check_gain

    check_gain(opts["main_metric"], opts["min_improvement"])  # auto: once the held-out set says what it is
    if opts["port"]:  # 0 or none: a free one
        from ark_trainer.services.deploy.process import check_port_range

        check_port_range(opts["port"])


def _cmd_loop(namespace) -> int:
    given = {k: v for k, v in vars(namespace).items() if k not in ("command", "func")}
    opts = _loop_values(given)
    check_loop_options(opts)
    flags = {k: coerce(loop_options(), k, v, f"--{k}") for k, v in given.items() if k not in LOOP_FIELDS}
    if not flags.get("output_dir"):
        raise UserError("loop: --output_dir is required (the loop's folder, LOOP)")
    folder = Path(flags.pop("output_dir"))
    if opts["stop"]:
        from ark_trainer.services.loop.control import stop_loop

        print(stop_loop(folder))
        return 0
    if opts["rollback"] is not None:
        from ark_trainer.services.loop.control import request_rollback

        request_rollback(folder, opts["rollback"])
        return 0
    from ark_trainer.services.loop.supervisor import Loop, LoopSettings

    settings = LoopSettings(**{k: v for k, v in opts.items() if k not in ("rollback", "stop")})
    loop = Loop(folder, settings, flags)
    loop.start()
    loop.run()
    return 0
