"""The run's plan, resolved once from the validated config and then frozen.

:func:`resolve_plan` turns the config (plus, under ``--strategy auto``, the probe's choice) into a
:class:`Plan`: the strategy and its ordered stages, each with its steps and learning rate. Nothing writes to
the config afterwards; the pipeline runs the plan, ``OUT/plan.json`` saves it and ``--resume`` reads it back
(:meth:`Plan.from_json`) instead of deriving it again. The step defaults live here and only here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

from ark_trainer.base.strategies import AUTO, DEFAULT_STRATEGY, PlanStage, strategy_table
from ark_trainer.stages.registry import get_stage, stages

LEAD_SHARE = Fraction(1, 3)  # a stage before the last one defaults to this share of --max_train_steps
PENDING = "auto: pending; the base model is probed at the start of the run"


@dataclass(frozen=True)
class ProbeChoice:
    """What ``--strategy auto``'s probe decided (``stages/probe.py``): strategy, why, and its numbers."""

    strategy: str
    reason: str
    record: dict


@dataclass(frozen=True)
class Plan:
    strategy: str  # a name of the strategy table, or "auto" while the probe has not decided
    requested: str
    reason: str
    task_name: str
    stages: tuple[PlanStage, ...]
    probe: dict | None = None

    @property
    def pending(self) -> bool:
        """``--strategy auto`` before the probe: the stages shown are the default strategy's, not run yet."""
        return self.strategy == AUTO

    def steps(self, name: str) -> int:
        return next((s.steps for s in self.stages if s.name == name), 0)

    def to_json(self) -> dict[str, Any]:
        """``plan.json``'s plan: strategy, requested, reason, task_name, stages (and the probe under auto)."""
        out: dict[str, Any] = {"strategy": self.strategy, "requested": self.requested, "reason": self.reason}
        out["task_name"] = self.task_name
        out["stages"] = [asdict(s) for s in self.stages]
        if self.probe is not None:
            out["probe"] = self.probe
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any], cfg: Any) -> Plan:
        """The plan saved in ``plan.json`` (``RunFolder.saved_plan`` checked its fields and their types);
        one whose stages are not its strategy's, in order, with ``last`` where the plan put it, was edited:
        :func:`check_saved_stages` refuses it."""
        strategy = str(data.get("strategy") or cfg.strategy)
        planned = tuple(PlanStage(**s) for s in data["stages"])
        check_saved_stages(strategy, planned)
        return cls(
            strategy,
            str(data.get("requested") or cfg.strategy),
            str(data.get("reason") or ""),
            str(data.get("task_name") or cfg.task_name),
            planned,
            data.get("probe") if isinstance(data.get("probe"), dict) else None,
        )


def check_saved_stages(strategy: str, planned: tuple[PlanStage, ...]) -> None:
    """A resumed plan's stages are the ones its strategy runs, in its order, and ``last`` marks the last
    that trains; else one UserError line (an edited plan.json was a KeyError or TypeError mid-run)."""
    from ark_trainer.base.errors import UserError

    fix = "restore the plan the run wrote, or start a new run (--overwrite_output_dir True)"
    table = strategy_table()
    if strategy != AUTO and strategy not in table:
        raise UserError(f"--resume: plan.json: strategy {strategy!r} is none of {', '.join(table)}; {fix}")
    expected = table[DEFAULT_STRATEGY if strategy == AUTO else strategy].stages
    names = tuple(s.name for s in planned)
    if names != expected:
        raise UserError(
            f"--resume: plan.json: stages {', '.join(names) or '(none)'} are not {strategy}'s "
            f"({', '.join(expected)}); {fix}"
        )
    if planned != _mark_last(list(planned)):
        raise UserError(f"--resume: plan.json: 'last' is not on the last stage that trains; {fix}")


def resolve_plan(cfg: Any, probe: ProbeChoice | None = None) -> Plan:
    """The plan of a validated config; under ``--strategy auto`` pending until ``probe`` is given."""
    requested = cfg.strategy
    if requested == AUTO and probe is None:
        return Plan(AUTO, requested, PENDING, cfg.task_name, stage_plan(cfg, DEFAULT_STRATEGY, auto=True))
    if probe is not None:
        stages = stage_plan(cfg, probe.strategy, auto=True)
        return Plan(probe.strategy, requested, probe.reason, cfg.task_name, stages, probe.record)
    reason = f"requested with --strategy: {strategy_table()[requested].reason}"
    return Plan(requested, requested, reason, cfg.task_name, stage_plan(cfg, requested))


def stage_plan(cfg: Any, strategy: str, auto: bool = False) -> tuple[PlanStage, ...]:
    """Steps and learning rate of each stage of ``strategy``.

    A stage before the last takes its steps flag (``--rft_steps``), or LEAD_SHARE of
    ``--max_train_steps``; the last stage takes what is left. Under auto a steps flag of 0 counts as not
    given: the probe chose this stage, so it must train.
    """
    names = strategy_table()[strategy].stages
    planned: list[PlanStage] = []
    for i, name in enumerate(names):
        if i == len(names) - 1:
            steps = max(cfg.max_train_steps - sum(s.steps for s in planned), 0)
        else:
            steps = lead_steps(cfg, get_stage(name).steps_flag, auto)
        planned.append(PlanStage(name, steps, _lr(cfg, name)))
    return _mark_last(planned)


def lead_steps(cfg: Any, steps_flag: str | None, auto: bool = False) -> int:
    """Steps of a stage that is not the last: its flag when given, else the default share."""
    given = getattr(cfg, steps_flag) if steps_flag else None
    if given is None or (auto and not given):
        return share_of(cfg.max_train_steps)
    return int(given)


def share_of(max_train_steps: int, share: Fraction = LEAD_SHARE) -> int:
    """The steps of a stage before the last that gets ``share`` of the budget (at least 1): the default
    (a third), or a caller's own share (a demo preset's, ``app/demo/run.py``)."""
    return max(int(max_train_steps * share), 1)


def steps_flags(cfg: Any) -> dict[str, int]:
    """Every stage's steps flag as the plan resolves it (0 for a stage the strategy does not run), e.g.
    ``{"rft_steps": 333}`` for RFT+GRPO in 1000 steps: what ``ark-trainer plan`` spells out."""
    plan = resolve_plan(cfg)
    return {s.steps_flag: plan.steps(name) for name, s in stages().items() if s.steps_flag}


def spell_out_steps(cfg: Any) -> Any:
    """The proposed config with every stage's steps flag it leaves unset spelled out as :func:`steps_flags`
    resolves it: ``ark-trainer plan`` shows 333 RFT steps rather than an empty default. A new config;
    ``cfg`` is kept."""
    unset: dict[str, Any] = {k: v for k, v in steps_flags(cfg).items() if getattr(cfg, k) is None}
    return replace(cfg, **unset)


def _lr(cfg: Any, name: str) -> float:
    return float(getattr(cfg, get_stage(name).lr_flag))


def _mark_last(stages: list[PlanStage]) -> tuple[PlanStage, ...]:
    """``last`` on the last stage that trains at all (a stage with 0 steps is skipped)."""
    training = [i for i, s in enumerate(stages) if s.steps > 0]
    final = training[-1] if training else -1
    return tuple(replace(s, last=i == final) for i, s in enumerate(stages))
