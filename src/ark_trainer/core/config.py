"""The one typed config of a ``train`` run: the shared run flags and every registered stage's options, each
declared once.

Each flag is one field, spelled exactly as the reference tool ``ark-trainer-inner`` spells it, declared
with :func:`~ark_trainer.base.flags.flag` (its default, help, ``--help`` group, and where it has them its valid
range and allowed values) in the options class that owns it: the shared run fields in ``base/run_options.py``,
each stage's own in its package (``stages/rft/options.py``, ``stages/grpo/options.py``, ...), as TRL
declares ``grpo_config.py`` beside its trainer. :class:`TrainConfig` holds the shared run flags; the class a
run is parsed into is made by :func:`config_class` of them and the options classes the stage registry hands
in (``stages/registry.config_class``: the config imports no stage). Everything else is derived from the
declarations of that class: the ``train`` parser and its grouped ``--help`` (:func:`train_groups`),
``docs/cli.md``, the range checks (:func:`range_of`), the choice checks, each stage's checks across its
flags (its options' ``problems``), ``--config run.yaml`` (the same keys; unknown keys are an error) and
``OUT/run.yaml`` (the resolved config, so a run can be repeated with ``ark-trainer train --config
OUT/run.yaml``). A stage is handed its own options (:meth:`TrainConfig.options`) and the shared flags
(:meth:`TrainConfig.run_flags`), never the whole config.

The config is frozen. What needs normalising (the canonical strategy name, precision aliases, the launcher
an accelerate config implies) is normalised while it is built (:meth:`TrainConfig.__post_init__`), so every
way of making one (flags, YAML, ``dataclasses.replace``, a test) gives the same normal form; after that it
is read, never written. See ``docs/contributing.md`` ("Add a flag", "Add a stage").
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.flags import choices_of, comma_values, finite_number, parse_bool
from ark_trainer.base.ranges import DEFAULT, LEARNING_RATE, Range, range_problems
from ark_trainer.base.run_options import PRECISION_ALIASES, RunFlags, RunOptions, RunOptionsAfterStages
from ark_trainer.base.strategies import AUTO, canonical_strategy, normalize_strategy

_Options = TypeVar("_Options")


@dataclass(frozen=True)
class TrainConfig(RunFlags):
    """Every setting of a ``train`` run, flat (field names are the flag names, fields in ``--help`` order):
    the shared run flags here, and in a class :func:`config_class` makes, each registered stage's options.
    A stage reads its own through :meth:`options`, the shared ones through :meth:`run_flags`."""

    stage_options: ClassVar[tuple[type, ...]] = ()  # the registered stages' options classes it is made of
    episode_strategies: ClassVar[tuple[str, ...]] = ()  # the strategies whose every stage plays episodes

    def __post_init__(self) -> None:
        """Normalise while the config is built; it is frozen afterwards, so no one can write it later.

        These are the only writes a config ever sees, made before anyone holds it (``object.__setattr__``
        is how a frozen dataclass sets what it derives); the checks are :func:`validate`'s.
        """
        for name, value in _normal_form(self).items():
            object.__setattr__(self, name, value)

    def options(self, cls: type[_Options]) -> _Options:
        """This run's values of one options class, as a new instance of it: a registered stage's
        (``cfg.options(GRPOOptions).num_generations``) or the shared flags' (``cfg.options(RunOptions)``)."""
        if cls not in (*type(self).stage_options, RunFlags, RunOptions, RunOptionsAfterStages):
            raise TypeError(f"{cls.__name__} is not a registered stage's options")
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})  # type: ignore[arg-type]

    def run_flags(self) -> RunFlags:
        """The shared run flags alone (:class:`~ark_trainer.base.run_options.RunFlags`): what every stage reads."""
        return self.options(RunFlags)

    def flag_items(self) -> dict[str, Any]:
        """The config as a flat dict, without CLI-only keys (what run.yaml holds)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.metadata.get("cli_only")}


def _normal_form(cfg: TrainConfig) -> dict[str, Any]:
    """The fields whose accepted spellings have one canonical value: the strategy table's name for an alias
    (``only grpo`` → ``GRPO``), ``no`` for the fp32 aliases of ``--mixed_precision``, and ``accelerate`` as
    the launcher of a run given an ``--accelerate_config`` (a config file only makes sense through it).
    Unknown values stay as given, for :func:`validate` to name."""
    precision = str(cfg.mixed_precision).strip().lower()
    launcher = "accelerate" if cfg.accelerate_config and cfg.launcher == "auto" else cfg.launcher
    normal = {
        "strategy": canonical_strategy(cfg.strategy),
        "mixed_precision": PRECISION_ALIASES.get(precision, precision),
        "launcher": launcher,
    }
    return {k: v for k, v in normal.items() if v != getattr(cfg, k)}


def config_class(
    options: tuple[type, ...] = (), after: tuple[type, ...] = (), episode_strategies: tuple[str, ...] = ()
) -> type[TrainConfig]:
    """The ``train`` config made of the shared run flags and the stages' ``options`` classes, each flag once,
    in ``--help`` order: ``options`` (the built-in stages') between :class:`RunOptions` and
    :class:`RunOptionsAfterStages`, ``after`` (the plug-in stages') after them all; ``episode_strategies``
    are the strategies whose every stage plays whole episodes under ``--env``. The stage registry hands
    them in (``stages/registry.config_class``); the same arguments give the same class."""
    return _made_of(tuple(options), tuple(after), tuple(episode_strategies))


@functools.cache
def _made_of(
    options: tuple[type, ...], after: tuple[type, ...], episodes: tuple[str, ...]
) -> type[TrainConfig]:
    if not (options or after or episodes):
        return TrainConfig
    # a dataclass lists its bases' fields from the last base of its MRO to the first: these bases put the
    # run flags first, then the built-in stages' options, the flags after them, and the plug-ins' last
    bases = (*reversed(after), TrainConfig, RunOptionsAfterStages, *reversed(options), RunOptions)
    namespace = {
        "__module__": __name__,
        "__doc__": TrainConfig.__doc__,
        "stage_options": (*options, *after),
        "episode_strategies": episodes,
    }
    return dataclass(frozen=True)(type("TrainConfig", bases, namespace))


REQUIRED = ("model_path", "data_path", "output_dir")


def config_fields(cls: type) -> list[dataclasses.Field]:
    """Every flag of the config class ``cls`` (:func:`config_class`), in ``--help`` order."""
    return list(fields(cls))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in fields(cls)}  # the flags, not the class's ClassVars


def field_types(cls: type) -> dict[str, type]:
    """Map each field of ``cls`` to its base type (``int | None`` → ``int``)."""
    out = {}
    for name, hint in _hints(cls).items():
        if isinstance(hint, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[name] = hint
    return out


def optional_fields(cls: type) -> set[str]:
    """Fields of ``cls`` that may be ``None`` (typed ``X | None``)."""
    hints = _hints(cls)
    return {
        n for n, h in hints.items() if isinstance(h, types.UnionType) and type(None) in typing.get_args(h)
    }


def coerce(cls: type, name: str, value: Any, where: str) -> Any:
    """Convert a raw flag or YAML value to the type of ``cls``'s field, or raise a one-line UserError."""
    kind = field_types(cls)[name]
    if name == "env" and isinstance(value, dict):  # MCP servers given in the YAML: env: {mcp_servers: ...}
        from ark_trainer.base.external.mcp_config import servers_from_source

        servers_from_source(value, where)  # the shape, checked before anything starts
        return value
    if value is None or (
        isinstance(value, str) and value.strip().lower() in ("none", "null") and kind is not str
    ):
        if name not in optional_fields(cls):
            raise UserError(f"{where}: expected {kind.__name__}, got {value!r}; this setting cannot be empty")
        return None
    try:
        if kind is bool:
            return parse_bool(value, where)
        if kind in (int, float):
            return finite_number(kind, value, where, range_of(cls, name))
    except (TypeError, ValueError):
        raise UserError(f"{where}: expected {kind.__name__}, got {value!r}") from None
    return str(value)


def load_yaml_config(cls: type, path: str) -> dict[str, Any]:
    """The keys of a ``--config`` file (or a run's ``run.yaml``) as flags of ``cls``, each value checked."""
    p = Path(path)
    if not p.exists():
        raise UserError(f"--config: no such file {path!r}")
    from ark_trainer.base.yamlsafe import read_yaml_file

    data = read_yaml_file(p) or {}  # a regular file; size, depth and alias expansion bounded
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    known = {f.name for f in config_fields(cls) if not f.metadata.get("cli_only")}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            *(f"{path}: {k}: unknown key; known keys are the train flags (see --help)" for k in unknown)
        )
    values, problems = {}, []
    for key, value in data.items():  # every bad value at once
        try:
            values[key] = coerce(cls, key, value, f"{path}: {key}")
        except UserError as exc:
            problems += exc.messages
    if problems:
        raise UserError(*problems)
    return values


def resolve_config(cls: type[TrainConfig], flags: dict[str, Any]) -> TrainConfig:
    """Merge ``--config`` YAML (defaults) with explicit flags (override) into ``cls`` (:func:`config_class`)
    and validate the result."""
    values: dict[str, Any] = {}
    if flags.get("config"):
        values.update(load_yaml_config(cls, flags["config"]))
    bad: list[str] = []  # every unreadable flag is reported together with every other problem
    for name, raw in flags.items():
        if name != "config":
            try:
                values[name] = coerce(cls, name, raw, f"--{name}")
            except UserError as exc:
                bad += exc.messages
    values["config"] = flags.get("config")
    if values.get("resume") and not flags.get("config"):
        values = {**_previous_run(cls, values.get("output_dir")), **values}
    from ark_trainer.core.auto_defaults import toy_settings  # the demo's toy: the rates it is trained at

    toy = toy_settings(values.get("model_path"), cls.stage_options)
    values.update({name: value for name, value in toy.items() if name not in values})
    values.update(lora_learning_rates(cls, values))
    cfg = cls(**values)
    try:
        validate(cfg)
    except UserError as exc:
        raise UserError(*bad, *exc.messages) from None
    if bad:
        raise UserError(*bad)
    return cfg


def learning_rates(cls: type) -> tuple[str, ...]:
    """The stages' learning-rate flags of ``cls``: the fields declared with the
    :data:`~ark_trainer.base.ranges.LEARNING_RATE` range."""
    return tuple(f.name for f in config_fields(cls) if f.metadata.get("range") is LEARNING_RATE)


LORA_LR_SCALE = 10


def lora_learning_rates(cls: type, values: dict[str, Any]) -> dict[str, float]:
    """With LoRA (``lora_r`` > 0), the learning rates neither a flag nor ``--config`` set: 10× their defaults.

    Full fine-tuning defaults barely move a LoRA adapter; LoRA's best learning rate is about 10× full
    fine-tuning's (Thinking Machines, "LoRA Without Regret", 2025), and ms-swift defaults to 1e-4 with LoRA
    against 1e-5 without. The values land in ``run.yaml`` like any other.
    """
    lora_r = values.get("lora_r")
    if not isinstance(lora_r, int) or isinstance(lora_r, bool) or lora_r <= 0:
        return {}
    defaults: dict[str, Any] = {f.name: f.default for f in config_fields(cls)}
    return {name: defaults[name] * LORA_LR_SCALE for name in learning_rates(cls) if name not in values}


def _previous_run(cls: type, output_dir: str | None) -> dict[str, Any]:
    """``--resume`` needs no other flag: the run's own ``run.yaml`` gives the rest."""
    from ark_trainer.core.runfolder import RunFolder

    path = RunFolder(output_dir or "").config_path
    return load_yaml_config(cls, str(path)) if output_dir and path.is_file() else {}


def validate(cfg: TrainConfig) -> None:
    """Check values (every problem at once); derived values (steps per stage) are the plan's (plan.py)."""
    problems = [f"--{name}: required" for name in REQUIRED if not getattr(cfg, name)]
    normalize_strategy(cfg.strategy)  # an unknown strategy (or PPO) is refused here, in one line
    numeric = [n for n, kind in field_types(type(cfg)).items() if kind in (int, float)]
    out_of_range = range_problems(vars(cfg), {n: range_of(type(cfg), n) for n in numeric})
    problems += out_of_range
    if not out_of_range:  # checks across flags only make sense once each one is in its range
        problems += _cross_problems(cfg)
        problems += stage_problems(cfg)
    if cfg.fp16 and cfg.bf16:
        problems.append("--fp16/--bf16: choose one")
    from ark_trainer.base.scale import validate_scale
    from ark_trainer.base.trackers import report_to_problems

    problems += validate_scale(cfg.load_in_4bit, cfg.save_adapter_only, cfg.lora_r)
    problems += report_to_problems(cfg.report_to)
    problems += choice_problems(cfg)
    if problems:
        raise UserError(*problems)


def settle(cfg: TrainConfig, chosen: dict[str, Any]) -> TrainConfig:
    """The run's config, built once from the given one and what ``train`` chose for it (the automatic
    settings, ``--resume``), then validated: a chosen value is checked as a given one is."""
    if not chosen:
        return cfg
    settled = dataclasses.replace(cfg, **chosen)
    try:
        validate(settled)
    except UserError as exc:
        why = ", ".join(f"--{name} {value}" for name, value in chosen.items())
        raise UserError(*exc.messages, f"(the settings chosen for this run: {why})") from None
    return settled


def choice_problems(cfg: TrainConfig) -> list[str]:
    """Flags that take one of a few names (TRL's loss names, our modes): refused here, not deep inside a
    trainer an hour later. The names are the fields' ``choices``."""
    problems = []
    for f in fields(cfg):
        if "choices" not in f.metadata:
            continue
        choices, value = choices_of(f) or (), getattr(cfg, f.name)
        values = (comma_values(value) or [""]) if f.metadata["comma_list"] else [value]
        use = " or ".join(choices) if len(choices) <= 2 else f"one of {', '.join(choices)}"
        for bad in (v for v in values if v not in choices):
            problems.append(f"--{f.name}: unknown {f.metadata['noun']} {bad!r}; use {use}")
    return problems


def stage_problems(cfg: TrainConfig) -> list[str]:
    """Each registered stage's checks across its own flags and the shared ones: the ``problems(run)`` method
    of its options class, where it has one (``stages/grpo/options.py``: ``--dynamic_sampling_rounds`` with
    ``--env``)."""
    run = cfg.run_flags()
    problems: list[str] = []
    for cls in type(cfg).stage_options:
        if callable(getattr(cls, "problems", None)):
            problems += cfg.options(cls).problems(run)
    return problems


def _cross_problems(cfg: TrainConfig) -> list[str]:
    """Problems that involve two shared flags, each already within its own range."""
    problems = []
    if cfg.env and cfg.strategy == AUTO:  # the probe samples single answers, not episodes
        problems.append("--strategy: auto does not probe agent episodes (--env) yet; choose RFT+GRPO or GRPO")
    elif cfg.env and cfg.strategy not in (episodes := type(cfg).episode_strategies):  # single answers
        problems.append(
            f"--strategy: {cfg.strategy} does not train agent episodes (--env) yet; choose {' or '.join(episodes)}"
        )
    return problems


def to_yaml(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.flag_items(), allow_unicode=True, sort_keys=False)


def train_groups(cls: type) -> dict[str, tuple[str, ...]]:
    """The ``train --help`` headings of ``cls``, in order, and the flags under each: the fields' ``group``,
    in field order."""
    groups: dict[str, list[str]] = {}
    for f in config_fields(cls):
        groups.setdefault(f.metadata["group"], []).append(f.name)
    return {title: tuple(names) for title, names in groups.items()}


RANGES: dict[str, Range] = {f.name: f.metadata["range"] for f in fields(RunFlags) if "range" in f.metadata}
"""The valid range of each shared numeric flag that declares one (a stage's: :func:`range_of`; the others
get :data:`~ark_trainer.base.ranges.DEFAULT`)."""


def range_of(cls: type, name: str) -> Range:
    """The valid range of ``cls``'s flag ``name`` (:data:`~ark_trainer.base.ranges.DEFAULT` where it declares none)."""
    if name in RANGES:
        return RANGES[name]
    declared = {f.name: f for f in config_fields(cls)}.get(name)  # a stage's flag
    return declared.metadata.get("range", DEFAULT) if declared else DEFAULT
