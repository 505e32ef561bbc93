"""The one typed config of a ``train`` run: the shared run flags and every stage's options, each declared once.

Each flag is one field, spelled exactly as the reference tool ``ark-trainer-inner`` spells it, declared
with :func:`~ark_trainer.base.flags.flag` (its default, help, ``--help`` group, and where it has them its valid
range and allowed values) in the options class that owns it: the shared run fields in ``run_options.py``,
each stage's own beside the stage (``options/rft.py``, ``options/grpo.py``, ...), as TRL
declares ``grpo_config.py`` beside its trainer. :class:`TrainConfig` is made of them all; a plug-in stage's
options join it through :func:`config_class`. Everything else is derived from the declarations: the
``train`` parser and its grouped ``--help`` (:func:`train_groups`), ``docs/cli.md``, the range checks
(:func:`range_of`), the choice checks, ``--config run.yaml`` (the same keys; unknown keys are an error) and
``OUT/run.yaml`` (the resolved config, so a run can be repeated with ``ark-trainer train --config
OUT/run.yaml``).

The config is frozen. What needs normalising (the canonical strategy name, precision aliases, the launcher
an accelerate config implies) is normalised while it is built (:meth:`TrainConfig.__post_init__`), so every
way of making one (flags, YAML, ``dataclasses.replace``, a test) gives the same normal form; after that it
is read, never written. See ``docs/contributing.md`` ("Add a flag", "Add a stage").
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.flags import comma_values, finite_number, parse_bool
from ark_trainer.base.options.dpo import DPOOptions
from ark_trainer.base.options.grpo import GRPOOptions
from ark_trainer.base.options.kto import KTOOptions
from ark_trainer.base.options.rft import RFTOptions
from ark_trainer.base.options.rloo import RLOOOptions
from ark_trainer.base.ranges import DEFAULT, LEARNING_RATE, Range, range_problems
from ark_trainer.base.run_options import PRECISION_ALIASES, RunOptions, RunOptionsAfterStages
from ark_trainer.base.strategies import AUTO, canonical_strategy, normalize_strategy, strategy_table

_Options = TypeVar("_Options")
# The stage registry sits above the config (its stages read it): imported by name, as it imports the stages.
_REGISTRY = "ark_trainer.stages.registry"


# A dataclass lists its bases' fields from the last base to the first: these are in reverse ``--help`` order.
@dataclass(frozen=True)
class TrainConfig(
    RunOptionsAfterStages, RLOOOptions, KTOOptions, DPOOptions, GRPOOptions, RFTOptions, RunOptions
):
    """Every setting of a ``train`` run: the shared run flags and each built-in stage's options, flat (field
    names are the flag names, fields in ``--help`` order). A stage reads its own with :meth:`options`."""

    def __post_init__(self) -> None:
        """Normalise while the config is built; it is frozen afterwards, so no one can write it later.

        These are the only writes a config ever sees, made before anyone holds it (``object.__setattr__``
        is how a frozen dataclass sets what it derives); the checks are :func:`validate`'s.
        """
        for name, value in _normal_form(self).items():
            object.__setattr__(self, name, value)

    def options(self, cls: type[_Options]) -> _Options:
        """This run's values of one options class: a stage's (``cfg.options(GRPOOptions).num_generations``) or
        the shared run flags' (``cfg.options(RunOptions)``, ``cfg.options(RunOptionsAfterStages)``)."""
        if not isinstance(self, cls):
            raise TypeError(f"{cls.__name__} is not a registered stage's options")
        return self

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


REQUIRED = ("model_path", "data_path", "output_dir")


def stage_options() -> tuple[type, ...]:
    """The options class of every registered stage (the built-in ones, then the plug-ins'), once each."""
    stages = importlib.import_module(_REGISTRY).stages()
    return tuple(dict.fromkeys(o for s in stages.values() if (o := getattr(s, "options", None)) is not None))


def config_class() -> type[TrainConfig]:
    """:class:`TrainConfig` with the options of every registered stage: the built-in ones are its bases, a
    plug-in stage's join here, after them (``train --help``, ``--config`` and ``run.yaml`` take its flags)."""
    return _with_options(tuple(o for o in stage_options() if not issubclass(TrainConfig, o)))


@functools.cache
def _with_options(extra: tuple[type, ...]) -> type[TrainConfig]:
    if not extra:
        return TrainConfig
    cls = type("TrainConfig", (*reversed(extra), TrainConfig), {"__module__": __name__})
    return dataclass(frozen=True)(cls)


def config_fields(cls: type | None = None) -> list[dataclasses.Field]:
    """Every flag of ``cls`` (default: :func:`config_class`), in ``--help`` order."""
    return list(fields(cls or config_class()))


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def field_types(cls: type | None = None) -> dict[str, type]:
    """Map each field to its base type (``int | None`` → ``int``)."""
    out = {}
    for name, hint in _hints(cls or config_class()).items():
        if isinstance(hint, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[name] = hint
    return out


def optional_fields(cls: type | None = None) -> set[str]:
    """Fields that may be ``None`` (typed ``X | None``)."""
    hints = _hints(cls or config_class())
    return {
        n for n, h in hints.items() if isinstance(h, types.UnionType) and type(None) in typing.get_args(h)
    }


def coerce(name: str, value: Any, where: str) -> Any:
    """Convert a raw flag or YAML value to the field's type, or raise a one-line UserError."""
    kind = field_types()[name]
    if name == "env" and isinstance(value, dict):  # MCP servers given in the YAML: env: {mcp_servers: ...}
        from ark_trainer.base.external.mcp_config import servers_from_source

        servers_from_source(value, where)  # the shape, checked before anything starts
        return value
    if value is None or (
        isinstance(value, str) and value.strip().lower() in ("none", "null") and kind is not str
    ):
        if name not in optional_fields():
            raise UserError(f"{where}: expected {kind.__name__}, got {value!r}; this setting cannot be empty")
        return None
    try:
        if kind is bool:
            return parse_bool(value, where)
        if kind in (int, float):
            return finite_number(kind, value, where, range_of(name))
    except (TypeError, ValueError):
        raise UserError(f"{where}: expected {kind.__name__}, got {value!r}") from None
    return str(value)


def load_yaml_config(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.exists():
        raise UserError(f"--config: no such file {path!r}")
    from ark_trainer.base.yamlsafe import read_yaml_file

    data = read_yaml_file(p) or {}  # a regular file; size, depth and alias expansion bounded
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    known = {f.name for f in config_fields() if not f.metadata.get("cli_only")}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            *(f"{path}: {k}: unknown key; known keys are the train flags (see --help)" for k in unknown)
        )
    values, problems = {}, []
    for key, value in data.items():  # every bad value at once
        try:
            values[key] = coerce(key, value, f"{path}: {key}")
        except UserError as exc:
            problems += exc.messages
    if problems:
        raise UserError(*problems)
    return values


def resolve_config(flags: dict[str, Any]) -> TrainConfig:
    """Merge ``--config`` YAML (defaults) with explicit flags (override) and validate the result."""
    values: dict[str, Any] = {}
    if flags.get("config"):
        values.update(load_yaml_config(flags["config"]))
    bad: list[str] = []  # every unreadable flag is reported together with every other problem
    for name, raw in flags.items():
        if name != "config":
            try:
                values[name] = coerce(name, raw, f"--{name}")
            except UserError as exc:
                bad += exc.messages
    values["config"] = flags.get("config")
    if values.get("resume") and not flags.get("config"):
        values = {**_previous_run(values.get("output_dir")), **values}
    from ark_trainer.core.auto_defaults import toy_settings  # the demo's toy: the rates it is trained at

    toy = toy_settings(values.get("model_path"))
    values.update({name: value for name, value in toy.items() if name not in values})
    values.update(lora_learning_rates(values))
    cfg = config_class()(**values)
    try:
        validate(cfg)
    except UserError as exc:
        raise UserError(*bad, *exc.messages) from None
    if bad:
        raise UserError(*bad)
    return cfg


def learning_rates(cls: type | None = None) -> tuple[str, ...]:
    """The stages' learning-rate flags: the fields declared with the :data:`~ark_trainer.base.ranges.LEARNING_RATE` range."""
    return tuple(f.name for f in config_fields(cls) if f.metadata.get("range") is LEARNING_RATE)


LEARNING_RATES = learning_rates(TrainConfig)
"""The built-in stages' learning-rate flags (:func:`learning_rates`: with the plug-ins' too)."""
LORA_LR_SCALE = 10


def lora_learning_rates(values: dict[str, Any]) -> dict[str, float]:
    """With LoRA (``lora_r`` > 0), the learning rates neither a flag nor ``--config`` set: 10× their defaults.

    Full fine-tuning defaults barely move a LoRA adapter; LoRA's best learning rate is about 10× full
    fine-tuning's (Thinking Machines, "LoRA Without Regret", 2025), and ms-swift defaults to 1e-4 with LoRA
    against 1e-5 without. The values land in ``run.yaml`` like any other.
    """
    lora_r = values.get("lora_r")
    if not isinstance(lora_r, int) or isinstance(lora_r, bool) or lora_r <= 0:
        return {}
    defaults: dict[str, Any] = {f.name: f.default for f in config_fields()}
    return {name: defaults[name] * LORA_LR_SCALE for name in learning_rates() if name not in values}


def _previous_run(output_dir: str | None) -> dict[str, Any]:
    """``--resume`` needs no other flag: the run's own ``run.yaml`` gives the rest."""
    from ark_trainer.core.runfolder import RunFolder

    path = RunFolder(output_dir or "").config_path
    return load_yaml_config(str(path)) if output_dir and path.is_file() else {}


def validate(cfg: TrainConfig) -> None:
    """Check values (every problem at once); derived values (steps per stage) are the plan's (plan.py)."""
    problems = [f"--{name}: required" for name in REQUIRED if not getattr(cfg, name)]
    normalize_strategy(cfg.strategy)  # an unknown strategy (or PPO) is refused here, in one line
    numeric = [n for n, kind in field_types(type(cfg)).items() if kind in (int, float)]
    out_of_range = range_problems(vars(cfg), {n: range_of(n) for n in numeric})
    problems += out_of_range
    if not out_of_range:  # checks across flags only make sense once each one is in its range
        problems += _cross_problems(cfg)
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


def dpo_losses(value: str) -> list[str]:
    """``--dpo_loss_type sigmoid,sft`` → ``["sigmoid", "sft"]`` (TRL adds the losses up)."""
    return comma_values(value)


def choice_problems(cfg: TrainConfig) -> list[str]:
    """Flags that take one of a few names (TRL's loss names, our modes): refused here, not deep inside a
    trainer an hour later. The names are the fields' ``choices``."""
    problems = []
    for f in fields(cfg):
        if "choices" not in f.metadata:
            continue
        choices, value = f.metadata["choices"], getattr(cfg, f.name)
        values = (comma_values(value) or [""]) if f.metadata["comma_list"] else [value]
        use = " or ".join(choices) if len(choices) == 2 else f"one of {', '.join(choices)}"
        for bad in (v for v in values if v not in choices):
            problems.append(f"--{f.name}: unknown {f.metadata['noun']} {bad!r}; use {use}")
    return problems


def episode_strategies() -> tuple[str, ...]:
    """The strategies whose every stage plays whole agent episodes when ``--env`` is set (``plays_episodes``)."""
    stages = importlib.import_module(_REGISTRY).stages()
    return tuple(
        name
        for name, strategy in strategy_table().items()
        if all(getattr(stages.get(s), "plays_episodes", False) for s in strategy.stages)
    )


def _trains_rft(strategy: str) -> bool:
    """Whether ``strategy`` has an RFT stage (``auto`` may choose one); the others never read ``--rft_steps``, so a
    preset's RFT steps do not block ``--strategy GRPO`` with it."""
    known = strategy_table().get(strategy)
    return known is None or "rft" in known.stages


# stages that never split --num_generations groups by the run's batch: GRPO chooses its own accumulation in
# whole groups (auto_defaults.grpo_accumulation), the others sample no groups
OWN_GROUP_BATCHING = frozenset({"rft", "grpo", "dpo", "kto"})


def _groups_by_run_batch(strategy: str) -> bool:
    """Whether a stage of ``strategy`` batches ``--num_generations`` groups by ``--batch_size`` ×
    ``--gradient_accumulation_steps`` as they are (RLOO, a plug-in's stage): only then must the groups divide
    it. Under GRPO any ``--batch_size`` works, also one changed on resume."""
    known = strategy_table().get(strategy)
    if strategy == AUTO:
        return False  # the probe chooses among GRPO, RFT+GRPO, DPO and KTO
    return known is None or not set(known.stages) <= OWN_GROUP_BATCHING


def _cross_problems(cfg: TrainConfig) -> list[str]:
    """Problems that involve two flags, each already within its own range."""
    problems = []
    if cfg.env and cfg.strategy == AUTO:  # the probe samples single answers, not episodes
        problems.append("--strategy: auto does not probe agent episodes (--env) yet; choose RFT+GRPO or GRPO")
    elif cfg.env and cfg.strategy not in (episodes := episode_strategies()):  # the others: single answers
        problems.append(
            f"--strategy: {cfg.strategy} does not train agent episodes (--env) yet; choose {' or '.join(episodes)}"
        )
    if cfg.env and cfg.dynamic_sampling_rounds:  # its refill samples single answers, not episodes
        problems.append("--dynamic_sampling_rounds: not with agent episodes (--env) yet; use 0")
    if cfg.rft_steps is not None and cfg.rft_steps > cfg.max_train_steps and _trains_rft(cfg.strategy):
        problems.append(f"--rft_steps: must be between 0 and --max_train_steps ({cfg.max_train_steps})")
    if (
        _groups_by_run_batch(cfg.strategy)
        and (cfg.batch_size * cfg.gradient_accumulation_steps) % cfg.num_generations
    ):
        problems.append(
            f"--num_generations: {cfg.num_generations} must divide --batch_size × --gradient_accumulation_steps "
            f"({cfg.batch_size * cfg.gradient_accumulation_steps}); e.g. --num_generations 4 with --batch_size 8"
        )
    if cfg.dynamic_sampling_rounds and cfg.num_processes > 1:
        problems.append(
            "--dynamic_sampling_rounds: works with one training process only (TRL splits a group across "
            "processes); use --num_processes 1 or --dynamic_sampling_rounds 0"
        )
    return problems


def to_yaml(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.flag_items(), allow_unicode=True, sort_keys=False)


def train_groups(cls: type | None = None) -> dict[str, tuple[str, ...]]:
    """The ``train --help`` headings, in order, and the flags under each: the fields' ``group``, in field order."""
    groups: dict[str, list[str]] = {}
    for f in config_fields(cls):
        groups.setdefault(f.metadata["group"], []).append(f.name)
    return {title: tuple(names) for title, names in groups.items()}


TRAIN_GROUPS: dict[str, tuple[str, ...]] = train_groups(TrainConfig)
"""The built-in ``train --help`` headings (:func:`train_groups`: with the plug-in stages' too)."""

RANGES: dict[str, Range] = {f.name: f.metadata["range"] for f in fields(TrainConfig) if "range" in f.metadata}
"""The valid range of each built-in numeric flag that declares one (the others get :data:`~ark_trainer.base.ranges.DEFAULT`)."""


def range_of(name: str) -> Range:
    if name in RANGES:
        return RANGES[name]
    declared = {f.name: f for f in config_fields()}.get(name)  # a plug-in stage's flag
    return declared.metadata.get("range", DEFAULT) if declared else DEFAULT
