"""The options of GRPO (``stages/grpo/stage.py``).

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field. The stage registry hands this class to the config (the flags are in
``train --help``, ``--config`` and ``run.yaml``), and at run time the stage is handed an instance of it
(``ctx.options``). RLOO samples groups as GRPO does: its options declare the group size, the rollout steps,
the temperature and the KL coefficient alike (:func:`group_size_flag`, :func:`rollout_steps_flag`,
:func:`temperature_flag`, :func:`beta_flag`), so each is one flag under the ``GRPO`` heading. Nothing here
imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

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

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags

SCALE_REWARDS = ("group", "batch", "none")  # TRL 1.16 GRPOConfig.scale_rewards
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")  # GRPOConfig.loss_type


def group_size_flag() -> Any:
    """``--num_generations``: the declaration every stage that samples groups as GRPO does shares."""
    return flag(
        4,
        "GRPO group size: completions per prompt",
        group="GRPO",
        range=Range(
            2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: GRPO needs at least 2 completions per prompt"
        ),
    )


def rollout_steps_flag() -> Any:
    """``--rollout_steps``: shared as :func:`group_size_flag` is."""
    return flag(
        None,
        "GRPO: optimizer steps whose rollouts one generate call makes (default 1; on a GPU up to 4)",
        group="GRPO",
        range=Range(1, 64),  # each step's rollouts are held in memory until it runs
    )


def temperature_flag() -> Any:
    """``--temperature``: shared as :func:`group_size_flag` is."""
    return flag(1.0, "GRPO sampling temperature", group="GRPO", range=POSITIVE)


def beta_flag() -> Any:
    """``--beta``: shared as :func:`group_size_flag` is."""
    return flag(
        0.04,
        "GRPO and RLOO KL coefficient (0, TRL's default, disables the reference model; docs/real-models.md "
        "lists where GRPO's defaults differ from TRL's, and why)",
        group="GRPO",
        range=NON_NEGATIVE,
    )


@dataclass(frozen=True)
class GRPOOptions:
    """The flags of GRPO: the ``GRPO`` heading of ``train --help``."""

    # The demo toy's settings that are not the demo preset's (``auto_defaults.toy_settings``): the preset
    # trains GRPO at batch 32 with 8 generations for 300 steps; a run of a few dozen steps at a small batch
    # (the reference template: 40 GRPO steps at batch 8) collapses at its 5e-4 onto one verdict. Measured on
    # the template after RFT (n = 89): 5e-4 61.8% → 33.7% (AMD EPYC), 52.8% → 41.6% (Intel Xeon); these two
    # 61.8% → 62.9% and 52.8% → 59.6%.
    toy_short_run: ClassVar[dict[str, tuple[Any, str]]] = {
        "grpo_learning_rate": (
            5e-5,
            "a tenth of presets/demo.yaml's 5e-4 (that rate suits the demo's 300 steps at batch 32; on the "
            "reference template's 40 steps at batch 8 it collapses GRPO onto one verdict: task accuracy 61.8% → "
            "33.7%, with this rate and the scaling below 61.8% → 62.9%)",
        ),
        "scale_rewards": (
            "none",
            "Dr. GRPO's unscaled advantages: a group whose verdicts all agree gets advantages as small as its "
            "graders' differences, not full-size ones",
        ),
    }

    grpo_learning_rate: float = flag(1e-6, "GRPO learning rate", group="GRPO", range=LEARNING_RATE)
    num_generations: int = group_size_flag()
    rollout_steps: int | None = rollout_steps_flag()
    temperature: float = temperature_flag()
    beta: float = beta_flag()
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

    def problems(self, run: RunFlags) -> list[str]:
        """``--dynamic_sampling_rounds`` where it cannot work: with agent episodes (its refill samples single
        answers) or several training processes (TRL splits a group across them)."""
        problems = []
        if run.env and self.dynamic_sampling_rounds:
            problems.append("--dynamic_sampling_rounds: not with agent episodes (--env) yet; use 0")
        if self.dynamic_sampling_rounds and run.num_processes > 1:
            problems.append(
                "--dynamic_sampling_rounds: works with one training process only (TRL splits a group across "
                "processes); use --num_processes 1 or --dynamic_sampling_rounds 0"
            )
        return problems
