"""Training stages, registered by name (duplicates refused).

A *stage* trains the model once (RFT, GRPO, ...). A built-in one is a package, ``stages/<name>/``: its
stage (``stage.py``), its options (``options.py``), where it has them its automatic defaults (``auto.py``)
and its report section (``report.py``). A stage implements :class:`Stage`: a ``name`` (its folder
``OUT/<name>/``, its evaluation ``eval/<name>.json`` and its ``stage`` in ``events.jsonl``), a ``label`` for
people, the flags that set its steps and learning rate, the report's plots, and ``run``; its module's plug-in
hook ``register_stages(register)`` registers it (``register`` is :func:`register_stage`), a built-in's as a
plug-in's. A *strategy* is a name mapped to the ordered stages it runs: the strategy table, below the
config, in :mod:`ark_trainer.base.strategies`. The pipeline, the plan, the report and the diagnosis ask this
module; none of them names a stage. The runtime (resume, guards, bad steps) asks nothing: its callers hand it
the stage's name, label and flags. See ``docs/contributing.md`` ("Add a stage").

The config sits below the stages and imports none: :func:`config_class` hands it every registered stage's
options class (built-in and plug-in alike). At run time a stage is handed the shared run flags and an
instance of its own options class (:class:`StageContext`), never the whole config.

Importing this module imports no stage: on first use, :func:`stages` calls the hook of the built-in stage
modules (``ark_trainer.base.plugins.DEFAULT_PLUGINS``), then of installed plug-ins.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ark_trainer.base.strategies import PlanStage, strategy_table

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.core.config import TrainConfig
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.core.runtime.resume import Progress
    from ark_trainer.rewards.composite import CompositeReward


@dataclass(frozen=True)
class Plot:
    """One curve of the report: ``OUT/plots/<filename>`` from the stage's logged ``key`` (± ``band``)."""

    filename: str
    key: str
    title: str
    band: str | None = None  # the key of a ± band around the curve
    limit: float | None = None  # a share in 0..1 with a warning threshold drawn at ``limit``


@dataclass
class StageContext:
    """What one stage of a run is handed, built by the pipeline for it: the shared run flags and its own
    options, as a TRL trainer is handed its ``args``, and the run's parts."""

    run: RunFlags  # the shared run flags (validated: read, never written)
    options: Any  # an instance of the stage's own ``options`` class (None for a stage without one)
    rt: Runtime
    monitor: Monitor
    train: list[dict]
    reward: CompositeReward
    out: Path
    log_dir: Path
    done: Progress | None = None  # under --resume: what earlier attempts finished
    held_out: list[dict] = field(
        default_factory=list
    )  # the dev split: what a stage may choose on as it trains


class Stage(Protocol):
    """The protocol of a training stage (a module-level class handed to :func:`register_stage`)."""

    name: str  # folder, eval name and events' stage: lower case, no spaces
    label: str  # for people: report columns, plan, logs
    steps_flag: str | None  # the flag (of its options) giving its steps (None: a share of --max_train_steps)
    lr_flag: str  # the flag (of its options) giving its learning rate
    plots: tuple[Plot, ...]

    # Optional: ``options`` (a frozen dataclass of :func:`~ark_trainer.base.flags.flag` fields: the stage's own
    # flags, in ``train --help`` and ``run.yaml``; the stage reads them as ``ctx.options``; its optional
    # ``problems(run) -> list[str]`` checks them against the shared flags when the config is validated),
    # ``auto_defaults(run, options, facts) -> dict[str, AutoDefault]`` (the values of its automatic flags
    # the options leave unset, chosen from the model and the data: ``auto_defaults.StageFacts``) with
    # ``auto_flags`` (their names: what a resumed run may leave unset), ``check_data(run, options, rows)``
    # (refuse training rows it cannot use, before anything is written),
    # ``plays_episodes`` (True: it trains whole agent episodes under ``--env``; default False),
    # ``headline_metric`` (str: the report's headline compares it with the base model),
    # ``report_blocks(run) -> list[Block]`` (its report section), ``report_warnings(run) -> list[str]``,
    # ``flat_reward_fix(config) -> str | None`` (one more fix the diagnosis offers when its groups are flat),
    # and its part of the run's estimate (``stages/estimate.py``, which names no stage):
    # ``estimate_parts(run, options, steps, timings, size) -> list[Part]`` (what ``steps`` steps cost; without
    # it, supervised steps), ``follow_steps(run, options, steps, facts) -> dict[str, AutoDefault]`` (its
    # automatic flags that follow its steps, chosen for ``steps``: sized again under ``--time_budget``),
    # ``estimate_notes(run, options, steps, timings, size, automatic) -> list[str]`` (lines said with the
    # estimate) and ``given_answers(rows) -> bool`` (the data carries the answers it would otherwise sample).

    def run(self, ctx: StageContext, plan: PlanStage, model_in: str, final_dir: Path) -> str:
        """Train from ``model_in`` for ``plan.steps`` at ``plan.learning_rate``; save into ``final_dir``.

        Returns the model folder the next stage starts from (``model_in`` when nothing was trained).
        """
        ...


_STAGES: dict[str, Stage] = {}
_loaded = False


def register_stage(cls: type) -> type:
    """Register one instance of ``cls`` under ``cls.name`` (the ``register`` of the ``register_stages``
    hook); a name already registered is refused."""
    stage = cls()
    if stage.name in stages():
        raise ValueError(f"a stage named {stage.name!r} is already registered; pick another name")
    _check_options(stage)
    _STAGES[stage.name] = stage
    return cls


def _check_options(stage: Stage) -> None:
    """A stage's ``options``: a frozen dataclass whose flags no other stage or shared flag declares."""
    options: Any = getattr(stage, "options", None)
    if options is None:
        return
    params = getattr(options, "__dataclass_params__", None)  # a dataclass's (frozen or not)
    if not isinstance(options, type) or params is None or not params.frozen:
        raise ValueError(f"stage {stage.name!r}: its options must be a frozen dataclass of flag() fields")
    from ark_trainer.base.run_options import RunFlags

    others = [o for s in _STAGES.values() if (o := getattr(s, "options", None)) is not None]
    taken = {f.name: f for cls in (RunFlags, *others) for f in dataclasses.fields(cls)}
    for f in dataclasses.fields(options):
        if f.name in taken and not _same_flag(f, taken[f.name]):
            raise ValueError(f"a flag named --{f.name} is already declared; pick another name")


def _same_flag(a: dataclasses.Field, b: dataclasses.Field) -> bool:
    """Whether two stages declare one flag alike (RLOO reads GRPO's group size): the same default and the
    same declaration (help, group, range, choices); a shared run flag is never a stage's."""
    from ark_trainer.base.run_options import RunFlags

    shared = {f.name for f in dataclasses.fields(RunFlags)}
    return a.name not in shared and a.default == b.default and dict(a.metadata) == dict(b.metadata)


def stages() -> dict[str, Stage]:
    """Every registered stage by name: the built-in ones, then installed plug-ins' (registered on first use)."""
    global _loaded
    if not _loaded:
        _loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_stages", register_stage)
    return _STAGES


def stage_options() -> tuple[type, ...]:
    """The options class of every registered stage (the built-in ones, then the plug-ins'), once each."""
    return tuple(
        dict.fromkeys(o for s in stages().values() if (o := getattr(s, "options", None)) is not None)
    )


def episode_strategies() -> tuple[str, ...]:
    """The strategies whose every stage plays whole agent episodes when ``--env`` is set (``plays_episodes``)."""
    registered = stages()
    return tuple(
        name
        for name, strategy in strategy_table().items()
        if all(getattr(registered.get(s), "plays_episodes", False) for s in strategy.stages)
    )


def config_class() -> type[TrainConfig]:
    """The ``train`` config of the registered stages (``config.config_class``): the built-in stages' options
    between the shared flags, a plug-in stage's after them all (``train --help``, ``--config``, ``run.yaml``)."""
    from ark_trainer.base.plugins import DEFAULT_PLUGINS
    from ark_trainer.core.config import config_class as made_of

    modules = {type(s).__module__: getattr(s, "options", None) for s in stages().values()}
    builtin = tuple(
        o for m in DEFAULT_PLUGINS if (o := modules.get(m)) is not None
    )  # in DEFAULT_PLUGINS' order
    plugins = tuple(o for o in stage_options() if o not in builtin)
    return made_of(builtin, plugins, episode_strategies())


def get_stage(name: str) -> Stage:
    found = stages().get(name)
    if found is None:
        raise KeyError(f"no stage named {name!r}; registered: {', '.join(stages())}")
    return found


def stage_names_in_order() -> list[str]:
    """Stage names in the order strategies run them (the report's columns, resume's checks)."""
    names = [s for strategy in strategy_table().values() for s in strategy.stages]
    return list(dict.fromkeys([*names, *stages()]))


def lr_flags() -> dict[str, str]:
    """Each stage's learning-rate flag (``rft`` → ``--rft_learning_rate``), for fixes that name it."""
    return {name: f"--{stage.lr_flag}" for name, stage in stages().items()}
