"""The run's estimate from its plan and flags (``core/runtime/estimate.py`` has the formulas), and
``--time_budget``: the step counts the run did not set explicitly, scaled down to fit it.

Which step counts are the run's own choice: ``--max_train_steps`` left at its default sizes every stage;
a stage's steps flag (``--rft_steps``) left unset takes its share of it (``stages/plan.py``). Those are scaled,
by one common factor, each stage keeping a step at least; a step count given explicitly is kept as given,
and when the run cannot fit the budget one line says so with the estimate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.runtime.estimate import (
    GRPOWork,
    Part,
    Timings,
    duration,
    eval_parts,
    fit_steps,
    generation_seconds,
    grpo_eval_seconds,
    grpo_evaluations,
    grpo_parts,
    preference_parts,
    rft_parts,
    total_seconds,
)
from ark_trainer.stages.grpo.auto import grpo_accumulation
from ark_trainer.stages.registry import get_stage

log = logging.getLogger("ark_trainer")

GRPO_LIKE = ("grpo", "rloo")
PREFERENCE = ("dpo", "kto")


@dataclass(frozen=True)
class RunSize:
    """The rows a run works on: training prompts, dev and test prompts; whether the data carries the
    answers DPO/KTO would otherwise sample."""

    train: int
    dev: int
    test: int
    given_preferences: bool = False
    eval_tokens: int = 0  # new tokens an evaluation answer may take (plan.json: eval_length); 0: the run's


EvalEvery = Callable[[int], int]  # a GRPO stage's steps → its --grpo_eval_steps (where that is automatic)


def grpo_work(
    cfg: Any, name: str, steps: int, size: RunSize, eval_every: EvalEvery | None = None
) -> GRPOWork:
    """What a GRPO (or RLOO) stage of ``steps`` steps does (``eval_every``: how an automatic
    ``--grpo_eval_steps`` follows the steps; else the config's)."""
    micro, prompts = grpo_accumulation(cfg.batch_size, cfg.num_generations, cfg.grpo_prompts_per_step)
    grpo_tokens = cfg.grpo_max_completion_length or new_tokens(cfg.max_completion_length)
    every = (eval_every(steps) if eval_every else cfg.grpo_eval_steps or 0) if name == "grpo" else 0
    every = every if cfg.eval_auto else 0
    return GRPOWork(steps, prompts, cfg.num_generations, grpo_tokens, micro, every, size.dev, cfg.beta > 0)


def stage_parts(
    cfg: Any, name: str, steps: int, t: Timings, size: RunSize, eval_every: EvalEvery | None = None
) -> list[Part]:
    """The parts of one training stage of ``steps`` steps (``eval_every``: how an automatic
    ``--grpo_eval_steps`` follows the steps; else the config's)."""
    tokens, accumulation = new_tokens(cfg.max_completion_length), cfg.gradient_accumulation_steps
    if name == "rft":
        return rft_parts(t, steps, cfg.batch_size, accumulation, cfg.rft_num_samples, size.train, tokens)
    if name in GRPO_LIKE:
        return grpo_parts(t, name, grpo_work(cfg, name, steps, size, eval_every))
    if name in PREFERENCE:
        sampled = 0 if size.given_preferences else size.train
        return preference_parts(t, name, steps, accumulation, sampled, cfg.rft_num_samples, tokens)
    return preference_parts(t, name, steps, accumulation, 0, 0, tokens)[-1:]  # a plug-in: SFT-like steps


def run_parts(
    cfg: Any,
    plan: Any,
    t: Timings,
    size: RunSize,
    steps: dict[str, int] | None = None,
    eval_every: EvalEvery | None = None,
) -> list[Part]:
    """Every part of the run in order: the probe (``--strategy auto``), the base model's evaluation, then
    each stage and its evaluation. ``steps`` overrides the plan's steps by stage (what :func:`fit` tries)."""
    tokens = new_tokens(cfg.max_completion_length)
    eval_tokens = size.eval_tokens or tokens
    evaluated = cfg.eval_auto
    parts: list[Part] = []
    if plan.pending:
        n = min(size.train, cfg.auto_probe_prompts)
        what = f"{n} prompts × {cfg.auto_probe_samples} samples × {tokens} tokens"
        parts.append(Part("probe", generation_seconds(t, n * cfg.auto_probe_samples, tokens), what))
    if evaluated:
        parts += eval_parts(t, "base", size.dev, size.test, eval_tokens)
    for stage in plan.stages:
        n = (steps or {}).get(stage.name, stage.steps)
        if n > 0:
            parts += stage_parts(cfg, stage.name, n, t, size, eval_every)
            if evaluated:
                parts += eval_parts(t, stage.name, size.dev, size.test, eval_tokens)
    return parts


def scalable_stages(cfg: Any, plan: Any) -> set[str]:
    """The stages whose steps the run did not set explicitly: every stage while ``--max_train_steps`` is at
    its default, except one whose own steps flag was given."""
    from ark_trainer.core.config import TrainConfig

    if cfg.max_train_steps != TrainConfig.max_train_steps:
        return set()
    last = next((s.name for s in plan.stages if s.last), None)
    return {
        s.name
        for s in plan.stages
        if s.steps > 0 and (s.name == last or getattr(cfg, get_stage(s.name).steps_flag or "", None) is None)
    }


@dataclass(frozen=True)
class BudgetFit:
    """What ``--time_budget`` did: the new step counts by stage (empty: nothing changed), the flags to
    set, and the line to show (empty: the run fits)."""

    steps: dict[str, int]
    flags: dict[str, int]
    message: str


def fit(
    cfg: Any, plan: Any, t: Timings, size: RunSize, budget_s: float, eval_every: EvalEvery | None = None
) -> BudgetFit:
    """The plan's step counts sized to ``budget_s`` seconds (see the module's docstring); ``eval_every``:
    an automatic ``--grpo_eval_steps`` chosen again for each step count tried."""
    planned = {s.name: s.steps for s in plan.stages}

    def cost(steps: dict[str, int]) -> float:
        return total_seconds(run_parts(cfg, plan, t, size, steps, eval_every))

    expected = cost(planned)
    if budget_s <= 0 or expected <= budget_s:
        return BudgetFit({}, {}, "")
    scalable = scalable_stages(cfg, plan)
    budget = f"--time_budget {budget_s / 60:g} min"
    if not scalable:
        return BudgetFit({}, {}, _explicit_line(budget, expected, planned))
    new = fit_steps(cost, planned, scalable, budget_s)
    after = cost(new)
    flags = {"max_train_steps": sum(new.values())}
    for s in plan.stages:
        flag = get_stage(s.name).steps_flag
        if flag and not s.last and s.name in scalable:
            flags[flag] = new[s.name]
    changed = ", ".join(
        f"{name} {planned[name]} → {new[name]}" for name in planned if new[name] != planned[name]
    )
    message = (
        f"{budget}: the run was expected to take {duration(expected)} on this machine; the steps it did not "
        f"set explicitly were scaled down to fit ({changed}; --{' --'.join(f'{k} {v}' for k, v in flags.items())}):"
        f" now expected {duration(after)}"
    )
    if after > budget_s:
        message += " — still over the budget (the evaluations and explicit steps alone take longer)"
    return BudgetFit(new, flags, message)


def _explicit_line(budget: str, expected: float, planned: dict[str, int]) -> str:
    steps = ", ".join(f"{name} {n}" for name, n in planned.items() if n > 0)
    return (
        f"{budget}: the run is expected to take {duration(expected)} on this machine, over the budget; its "
        f"step counts were set explicitly ({steps}) and are kept: lower --max_train_steps (or "
        "--max_eval_samples) to fit"
    )


def run_size(train: list[dict], dev: list[dict], test: list[dict], strategy_stages: list[str]) -> RunSize:
    """The run's :class:`RunSize`; whether its data gives DPO/KTO their answers is asked only of a run
    that has such a stage."""
    given = False
    if any(name in PREFERENCE for name in strategy_stages):
        from ark_trainer.stages.preference import has_pair, labelled_answers

        given = any(has_pair(r) or labelled_answers(r) for r in train)
    return RunSize(len(train), len(dev), len(test), given)


def measured(cfg: Any, rt: Any, model_path: str, rows: list[dict]) -> Timings:
    """This machine's timings on the run's model, precision and completion length (``core/runtime/measure.py``),
    on the first prompts of ``rows`` (held-out ones: nothing is learnt from them)."""
    from ark_trainer.core.runtime.measure import MEASURE_PROMPTS, measure

    prompts = [r["prompt"] for r in rows[:MEASURE_PROMPTS] if "prompt" in r]
    return measure(model_path, rt, prompts, new_tokens(cfg.max_completion_length), cfg.batch_size)


def auto_eval_every(cfg: Any, extra: dict, model_dir: str) -> EvalEvery | None:
    """How ``--grpo_eval_steps`` follows the GRPO steps where the run chose it automatically (``extra``:
    plan.json's extra keys, whose ``auto_defaults`` say so; ``model_dir``: the base model's HF folder)."""
    if "grpo_eval_steps" not in (extra.get("auto_defaults") or {}):
        return None
    from ark_trainer.base.run_options import RunOptionsAfterStages
    from ark_trainer.core.auto_defaults import model_facts
    from ark_trainer.stages.grpo.auto import grpo_eval_every

    after, facts = cfg.options(RunOptionsAfterStages), model_facts(model_dir)
    return lambda steps: int(grpo_eval_every(after, steps, facts).value)


def regrown_choices(
    cfg: Any, extra: dict, flags: dict[str, int], eval_every: EvalEvery | None
) -> dict[str, Any]:
    """The flags to settle after :func:`fit`: its step counts, and ``--grpo_eval_steps`` chosen again
    (``eval_every``) for the new GRPO steps where it was automatic; ``extra``'s ``auto_defaults`` record
    (plan.json) says so."""
    from ark_trainer.stages.plan import resolve_plan

    chosen: dict[str, Any] = dict(flags)
    auto = extra.setdefault("auto_defaults", {})
    if eval_every is not None:
        value = eval_every(resolve_plan(replace(cfg, **flags)).steps("grpo"))
        chosen["grpo_eval_steps"] = value
        auto["grpo_eval_steps"] = {
            "value": value,
            "reason": f"{value}: for the GRPO steps sized to --time_budget",
        }
    for name, value in flags.items():
        auto[name] = {"value": value, "reason": f"{value}: sized to --time_budget (plan.json: estimate)"}
    return chosen


def _eval_tokens(extra: dict) -> int:
    """plan.json's ``eval_length`` (``stages/eval_length.py``); 0 where it holds none."""
    from ark_trainer.stages.eval_length import RECORD, EvalLength

    chosen = EvalLength.from_json(extra.get(RECORD))
    return chosen.value if chosen else 0


def grpo_eval_line(cfg: Any, plan: Any, t: Timings, size: RunSize, automatic: bool) -> str:
    """What the GRPO stage's evaluations on dev (``--grpo_eval_steps``) cost, said with how to skip them;
    empty where the stage evaluates nothing."""
    steps = next((s.steps for s in plan.stages if s.name == "grpo"), 0)
    if steps <= 0:
        return ""
    work = grpo_work(cfg, "grpo", steps, size)
    evals = grpo_evaluations(steps, work.eval_every)
    if not evals:
        return ""
    chosen = "chosen automatically" if automatic else "as given"
    return (
        f"evaluation during GRPO (--grpo_eval_steps {work.eval_every}, {chosen}): {evals} evaluations of "
        f"{work.dev} dev prompts × {work.tokens} tokens, about {duration(grpo_eval_seconds(t, work))} of the "
        "grpo stage's time above; --grpo_eval_steps 0 skips them (the stage then ends on its last step, not "
        "its best)"
    )


@dataclass(frozen=True)
class Estimated:
    """A run after its estimate: its config and plan (steps sized to ``--time_budget``), and
    ``plan.json``'s ``estimate``."""

    cfg: Any
    plan: Any
    record: dict


def estimate_run(
    cfg: Any, plan: Any, extra: dict, rt: Any, model_dir: str, splits: tuple[list, list, list]
) -> Estimated | None:
    """Measure what the run's parts cost on this machine, say the expected time of each, size the steps
    left automatic to ``--time_budget`` (``extra``: plan.json's extra keys, whose ``auto_defaults`` it
    updates; ``splits``: train, dev and test rows). None, and nothing measured, for a toy model (its runs
    take minutes) or an agent run (episodes are not estimated), or when the measurement fails."""
    from ark_trainer.core.auto_defaults import model_facts
    from ark_trainer.core.config import settle
    from ark_trainer.core.runtime.estimate import estimate_lines, record
    from ark_trainer.stages.plan import resolve_plan

    if model_facts(model_dir).toy or cfg.env:
        if cfg.time_budget:
            log.warning("--time_budget: not applied to %s", "an agent run" if cfg.env else "a toy model")
        return None
    train, dev, test = splits
    size = replace(run_size(train, dev, test, [s.name for s in plan.stages]), eval_tokens=_eval_tokens(extra))
    log.info("measuring a generation batch and a training step on this machine, for the expected time ...")
    try:
        timings = measured(cfg, rt, model_dir, dev or test or train)
    except Exception as exc:  # noqa: BLE001 - an estimate is advice: the run goes on without it
        log.warning("could not measure this run's expected time: %s: %s", type(exc).__name__, exc)
        return None
    eval_every = auto_eval_every(cfg, extra, model_dir)
    budget = fit(cfg, plan, timings, size, cfg.time_budget * 60, eval_every)
    if budget.flags:
        cfg = settle(cfg, regrown_choices(cfg, extra, budget.flags, eval_every))
        plan = resolve_plan(cfg)
    parts = run_parts(cfg, plan, timings, size)
    for line in estimate_lines(parts, timings):
        log.info("%s", line)
    if said := grpo_eval_line(
        cfg, plan, timings, size, "grpo_eval_steps" in (extra.get("auto_defaults") or {})
    ):
        log.info("%s", said)
    if budget.message:
        (log.info if budget.flags else log.warning)("%s", budget.message)
    return Estimated(
        cfg, plan, record(parts, timings, time_budget_minutes=cfg.time_budget, budget=budget.message)
    )
