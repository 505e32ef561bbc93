"""What the GRPO stage costs, from its own options (the stage's estimate hooks; ``stages/estimate.py``
asks them and names no stage): each step's groups and loss passes, its evaluations on dev, and the
interval of those evaluations chosen again where it follows the stage's steps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ark_trainer.core.auto_defaults import AutoDefault, ModelFacts, new_tokens
from ark_trainer.core.runtime.estimate import (
    GRPOWork,
    Part,
    RunSize,
    Timings,
    duration,
    grpo_eval_seconds,
    grpo_evaluations,
    grpo_parts,
)
from ark_trainer.stages.grpo.auto import grpo_accumulation, grpo_eval_every

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.stages.grpo.options import GRPOOptions


def grpo_work(run: RunFlags, grpo: GRPOOptions, steps: int, size: RunSize) -> GRPOWork:
    """What a GRPO stage of ``steps`` steps does each step, and how often it evaluates itself on dev."""
    micro, prompts = grpo_accumulation(run.batch_size, grpo.num_generations, grpo.grpo_prompts_per_step)
    tokens = grpo.grpo_max_completion_length or new_tokens(run.max_completion_length)
    every = (grpo.grpo_eval_steps or 0) if run.eval_auto else 0
    return GRPOWork(steps, prompts, grpo.num_generations, tokens, micro, every, size.dev, grpo.beta > 0)


def parts(run: RunFlags, grpo: GRPOOptions, steps: int, t: Timings, size: RunSize) -> list[Part]:
    """The stage's part of the estimate: ``steps`` steps and its evaluations on dev."""
    return grpo_parts(t, "grpo", grpo_work(run, grpo, steps, size))


def follow_steps(run: RunFlags, steps: int, facts: ModelFacts) -> dict[str, AutoDefault]:
    """The stage's automatic flags that follow its steps, chosen for ``steps``: ``--grpo_eval_steps``."""
    return {"grpo_eval_steps": grpo_eval_every(run, steps, facts)}


def eval_note(
    run: RunFlags, grpo: GRPOOptions, steps: int, t: Timings, size: RunSize, automatic: bool
) -> str:
    """What the stage's evaluations on dev (``--grpo_eval_steps``) cost, said with how to skip them;
    empty where the stage evaluates nothing."""
    if steps <= 0:
        return ""
    work = grpo_work(run, grpo, steps, size)
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
