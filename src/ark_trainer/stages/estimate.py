"""The run's estimate from its plan, its shared flags and each stage's own options
(``core/runtime/estimate.py`` has the formulas), and ``--time_budget``: the step counts the run did not set
explicitly, scaled down to fit it.

Each stage estimates itself through its hooks (``stages/registry.py``): ``estimate_parts`` (what its steps
cost, from its own options; a stage without one is counted as supervised steps), ``follow_steps`` (its
automatic flags that follow its steps, chosen again for the steps tried), ``estimate_notes`` (lines said
with the estimate) and ``given_answers`` (whether the data carries the answers it would otherwise sample).
This module names no stage.

Which step counts are the run's own choice: ``--max_train_steps`` left at its default sizes every stage;
a stage's steps flag (``--rft_steps``) left unset takes its share of it (``stages/plan.py``). Those are scaled,
by one common factor, each stage keeping a step at least; a step count given explicitly is kept as given,
and when the run cannot fit the budget one line says so with the estimate.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from ark_trainer.base.run_options import RunFlags
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.runtime.estimate import (
    Part,
    RunSize,
    Timings,
    duration,
    eval_parts,
    fit_steps,
    generation_seconds,
    preference_parts,
    total_seconds,
)
from ark_trainer.stages.registry import get_stage

log = logging.getLogger("ark_trainer")

Options = Mapping[str, Any]  # each stage's own options instance, by stage name
Follow = Callable[[str, Any, int], dict[str, Any]]
"""(stage, its options, steps) → the values of its automatic flags that follow its steps, chosen for those
steps (empty where none does): an automatic ``--grpo_eval_steps`` is chosen again for each step count tried."""
Settle = Callable[[dict[str, Any]], tuple[RunFlags, Options, Any]]
"""The run's chosen settings (the steps sized to ``--time_budget``) → its settled flags, options and plan
(``services/planning.settle_chosen``)."""


def stage_parts(
    run: RunFlags,
    options: Options,
    name: str,
    steps: int,
    t: Timings,
    size: RunSize,
    follow: Follow | None = None,
) -> list[Part]:
    """The parts of one training stage of ``steps`` steps: its ``estimate_parts`` hook, with its own options
    (``follow``: its automatic flags that follow the steps, chosen again); supervised steps where it has none."""
    own = options.get(name)
    if follow is not None and own is not None and (chosen := follow(name, own, steps)):
        own = replace(own, **chosen)
    hook = getattr(get_stage(name), "estimate_parts", None)
    if hook is None:  # a plug-in that says nothing of its cost: supervised steps
        tokens = new_tokens(run.max_completion_length)
        return preference_parts(t, name, steps, run.gradient_accumulation_steps, 0, 0, tokens)[-1:]
    return hook(run, own, steps, t, size)


def run_parts(
    run: RunFlags,
    options: Options,
    plan: Any,
    t: Timings,
    size: RunSize,
    steps: dict[str, int] | None = None,
    follow: Follow | None = None,
) -> list[Part]:
    """Every part of the run in order: the probe (``--strategy auto``), the base model's evaluation, then
    each stage and its evaluation. ``steps`` overrides the plan's steps by stage (what :func:`fit` tries)."""
    tokens = new_tokens(run.max_completion_length)
    eval_tokens = size.eval_tokens or tokens
    evaluated = run.eval_auto
    parts: list[Part] = []
    if plan.pending:
        n = min(size.train, run.auto_probe_prompts)
        what = f"{n} prompts × {run.auto_probe_samples} samples × {tokens} tokens"
        parts.append(Part("probe", generation_seconds(t, n * run.auto_probe_samples, tokens), what))
    if evaluated:
        parts += eval_parts(t, "base", size.dev, size.test, eval_tokens)
    for stage in plan.stages:
        n = (steps or {}).get(stage.name, stage.steps)
        if n > 0:
            parts += stage_parts(run, options, stage.name, n, t, size, follow)
            if evaluated:
                parts += eval_parts(t, stage.name, size.dev, size.test, eval_tokens)
    return parts


def scalable_stages(run: RunFlags, options: Options, plan: Any) -> set[str]:
    """The stages whose steps the run did not set explicitly: every stage while ``--max_train_steps`` is at
    its default, except one whose own steps flag (in its options) was given."""
    if run.max_train_steps != RunFlags.max_train_steps:
        return set()
    last = next((s.name for s in plan.stages if s.last), None)

    def given(name: str) -> bool:
        return getattr(options.get(name), get_stage(name).steps_flag or "", None) is not None

    return {s.name for s in plan.stages if s.steps > 0 and (s.name == last or not given(s.name))}


@dataclass(frozen=True)
class BudgetFit:
    """What ``--time_budget`` did: the new step counts by stage (empty: nothing changed), the flags to
    set, and the line to show (empty: the run fits)."""

    steps: dict[str, int]
    flags: dict[str, int]
    message: str


def fit(
    run: RunFlags,
    options: Options,
    plan: Any,
    t: Timings,
    size: RunSize,
    budget_s: float,
    follow: Follow | None = None,
) -> BudgetFit:
    """The plan's step counts sized to ``budget_s`` seconds (see the module's docstring); ``follow``: the
    automatic flags that follow a stage's steps, chosen again for each step count tried."""
    planned = {s.name: s.steps for s in plan.stages}

    def cost(steps: dict[str, int]) -> float:
        return total_seconds(run_parts(run, options, plan, t, size, steps, follow))

    expected = cost(planned)
    if budget_s <= 0 or expected <= budget_s:
        return BudgetFit({}, {}, "")
    scalable = scalable_stages(run, options, plan)
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
    """The run's :class:`RunSize`; whether its data gives a stage the answers it would otherwise sample
    (its ``given_answers`` hook) is asked only of a run that has such a stage."""
    hooks = [h for name in strategy_stages if (h := getattr(get_stage(name), "given_answers", None))]
    given = any(hook(train) for hook in hooks)
    return RunSize(len(train), len(dev), len(test), given)


def measured(run: RunFlags, rt: Any, model_path: str, rows: list[dict]) -> Timings:
    """This machine's timings on the run's model, precision and completion length (``core/runtime/measure.py``),
    on the first prompts of ``rows`` (held-out ones: nothing is learnt from them)."""
    from ark_trainer.core.runtime.measure import MEASURE_PROMPTS, measure

    prompts = [r["prompt"] for r in rows[:MEASURE_PROMPTS] if "prompt" in r]
    return measure(model_path, rt, prompts, new_tokens(run.max_completion_length), run.batch_size)


def follower(run: RunFlags, extra: dict, model_dir: str) -> Follow | None:
    """How the automatic flags that follow a stage's steps (its ``follow_steps`` hook) are chosen again for
    other steps, where the run chose them automatically (``extra``: plan.json's extra keys, whose
    ``auto_defaults`` say so; ``model_dir``: the base model's HF folder); None where it chose none."""
    automatic = set(extra.get("auto_defaults") or {})
    if not automatic:
        return None
    from ark_trainer.core.auto_defaults import model_facts

    facts = model_facts(model_dir)

    def follow(name: str, options: Any, steps: int) -> dict[str, Any]:
        hook = getattr(get_stage(name), "follow_steps", None)
        if hook is None:
            return {}
        return {
            flag: chosen.value
            for flag, chosen in hook(run, options, steps, facts).items()
            if flag in automatic
        }

    return follow


def regrown_choices(
    options: Options, extra: dict, flags: dict[str, int], steps: dict[str, int], follow: Follow | None
) -> dict[str, Any]:
    """The flags to settle after :func:`fit`: its step counts (``flags``; ``steps``: the new steps by stage),
    and the automatic flags that follow a stage's steps chosen again (``follow``) for its new steps;
    ``extra``'s ``auto_defaults`` record (plan.json) says so."""
    chosen: dict[str, Any] = dict(flags)
    auto = extra.setdefault("auto_defaults", {})
    for name, n in steps.items():
        if follow is None or (own := options.get(name)) is None:
            continue
        for flag, value in follow(name, own, n).items():
            chosen[flag] = value
            label = get_stage(name).label
            auto[flag] = {"value": value, "reason": f"{value}: for the {label} steps sized to --time_budget"}
    for name, value in flags.items():
        auto[name] = {"value": value, "reason": f"{value}: sized to --time_budget (plan.json: estimate)"}
    return chosen


def _eval_tokens(extra: dict) -> int:
    """plan.json's ``eval_length`` (``stages/eval_length.py``); 0 where it holds none."""
    from ark_trainer.stages.eval_length import RECORD, EvalLength

    chosen = EvalLength.from_json(extra.get(RECORD))
    return chosen.value if chosen else 0


def stage_notes(
    run: RunFlags, options: Options, plan: Any, t: Timings, size: RunSize, automatic: Collection[str]
) -> list[str]:
    """What each stage of the plan says with the estimate (its ``estimate_notes`` hook: GRPO's evaluations
    on dev, with how to skip them); ``automatic``: the flags the run chose automatically."""
    lines: list[str] = []
    for s in plan.stages:
        hook = getattr(get_stage(s.name), "estimate_notes", None)
        if hook is not None and (own := options.get(s.name)) is not None:
            lines += hook(run, own, s.steps, t, size, automatic)
    return lines


def estimate_run(
    run: RunFlags,
    options: Options,
    plan: Any,
    extra: dict,
    rt: Any,
    model_dir: str,
    splits: tuple[list, list, list],
    settle: Settle,
) -> dict | None:
    """Measure what the run's parts cost on this machine, say the expected time of each, size the steps
    left automatic to ``--time_budget`` (``settle``: the run with them settled; ``extra``: plan.json's extra
    keys, whose ``auto_defaults`` it updates; ``splits``: train, dev and test rows); returns plan.json's
    ``estimate``. None, and nothing measured, for a toy model (its runs take minutes) or an agent run
    (episodes are not estimated), or when the measurement fails."""
    from ark_trainer.core.auto_defaults import model_facts
    from ark_trainer.core.runtime.estimate import estimate_lines, record

    if model_facts(model_dir).toy or run.env:
        if run.time_budget:
            log.warning("--time_budget: not applied to %s", "an agent run" if run.env else "a toy model")
        return None
    train, dev, test = splits
    size = replace(run_size(train, dev, test, [s.name for s in plan.stages]), eval_tokens=_eval_tokens(extra))
    log.info("measuring a generation batch and a training step on this machine, for the expected time ...")
    try:
        timings = measured(run, rt, model_dir, dev or test or train)
    except Exception as exc:  # noqa: BLE001 - an estimate is advice: the run goes on without it
        log.warning("could not measure this run's expected time: %s: %s", type(exc).__name__, exc)
        return None
    follow = follower(run, extra, model_dir)
    budget = fit(run, options, plan, timings, size, run.time_budget * 60, follow)
    if budget.flags:
        run, options, plan = settle(regrown_choices(options, extra, budget.flags, budget.steps, follow))
    parts = run_parts(run, options, plan, timings, size)
    for line in estimate_lines(parts, timings):
        log.info("%s", line)
    for said in stage_notes(run, options, plan, timings, size, set(extra.get("auto_defaults") or {})):
        log.info("%s", said)
    if budget.message:
        (log.info if budget.flags else log.warning)("%s", budget.message)
    return record(parts, timings, time_budget_minutes=run.time_budget, budget=budget.message)
