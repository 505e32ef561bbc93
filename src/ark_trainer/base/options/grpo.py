"""The options of GRPO (``stages/grpo.py``); RLOO reads its group size, temperature and KL coefficient too.

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field; :class:`~ark_trainer.core.config.TrainConfig` is made of every stage's
options and the shared run flags (``run_options.py``). ``stages/grpo.py`` names this class as its
``options`` and reads them with ``ctx.cfg.options(GRPOOptions)``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import (
    LEARNING_RATE,
    MAX_NEW_TOKENS,
    MAX_SAMPLES,
    NON_NEGATIVE,
    POSITIVE,
    ZERO_OK,
    Range,
)

SCALE_REWARDS = ("group", "batch", "none")  # TRL 1.16 GRPOConfig.scale_rewards
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")  # GRPOConfig.loss_type


@dataclass(frozen=True)
class GRPOOptions:
    """The flags of GRPO: the ``GRPO`` heading of ``train --help``."""

    grpo_learning_rate: float = flag(1e-6, "GRPO learning rate", group="GRPO", range=LEARNING_RATE)
    num_generations: int = flag(
        4,
        "GRPO group size: completions per prompt",
        group="GRPO",
        range=Range(
            2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: GRPO needs at least 2 completions per prompt"
        ),
    )
    rollout_steps: int | None = flag(
        None,
        "GRPO: optimizer steps whose rollouts one generate call makes (default 1; on a GPU up to 4)",
        group="GRPO",
        range=Range(1, 64),  # each step's rollouts are held in memory until it runs
    )
    temperature: float = flag(1.0, "GRPO sampling temperature", group="GRPO", range=POSITIVE)
    beta: float = flag(
        0.04,
        "GRPO and RLOO KL coefficient (0, TRL's default, disables the reference model; docs/real-models.md "
        "lists where GRPO's defaults differ from TRL's, and why)",
        group="GRPO",
        range=NON_NEGATIVE,
    )
    loss_type: str = flag(
        "dapo",
        "GRPO loss (TRL's loss_type): dapo (normalised by the step's completion tokens), grpo (per "
        "completion), dr_grpo (by a constant), bnpo (by each micro-batch's tokens), cispo, sapo, luspo or vespo",
        group="GRPO",
        choices=LOSS_TYPES,
        noun="loss type",
    )
    dynamic_sampling_rounds: int = flag(
        0,
        "GRPO: extra sampling rounds per step that replace zero-reward-variance groups (DAPO; 0 = off)",
        group="GRPO",
        range=Range(0, 64),
    )
    grpo_reward_weights: str | None = flag(
        None,
        "GRPO's own reward weights by name, e.g. 'qc_verdict=1,qc_compliance=0' (other names keep the run's "
        "weights; 'run': the run's weights); default: for a real model on labelled QC data, the task's exact "
        "indicator alone (qc_type=1, the others 0), else the run's (docs/real-models.md)",
        group="GRPO",
    )
    scale_rewards: str = flag(
        "group",
        "GRPO advantage scaling (TRL's scale_rewards): group (divide by each group's reward std), batch, or "
        "none (Dr. GRPO: no scaling)",
        group="GRPO",
        choices=SCALE_REWARDS,
        noun="scaling",
    )
    grpo_max_completion_length: int | None = flag(
        None,
        "GRPO: max new tokens per sampled completion; default: what the GRPO reward reads (the QC decision "
        "lines: their 95th percentile plus a margin), else --max_completion_length; with --env the whole "
        "episode, tool results included (docs/real-models.md)",
        group="GRPO",
        range=Range(1, MAX_NEW_TOKENS),
    )
    grpo_eval_steps: int | None = flag(
        None,
        "GRPO: evaluate the policy on the dev split every N steps and keep the best step (0: off); "
        "default: 4 evaluations a stage for a real model, off for a toy or an agent run",
        group="GRPO",
        range=ZERO_OK,
    )
    grpo_prompts_per_step: int | None = flag(
        None,
        "GRPO: prompts per optimizer step (× --num_generations completions, by gradient accumulation); "
        "default: one per label of the data (4..16) for a real model, --batch_size / --num_generations for a "
        "toy",
        group="GRPO",
        range=Range(1, 1024),
    )
