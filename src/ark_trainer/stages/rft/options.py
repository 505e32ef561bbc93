"""The options of RFT (``stages/rft/stage.py``): the supervised step on reward-selected answers.

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field. The stage registry hands this class to the config (the flags are in
``train --help``, ``--config`` and ``run.yaml``), and at run time the stage is handed an instance of it
(``ctx.options``). DPO and KTO sample the answers they need as RFT does: their options declare
``--rft_num_samples`` and ``--rft_temperature`` alike (:func:`num_samples_flag`, :func:`temperature_flag`).
Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import (
    ANY,
    LEARNING_RATE,
    MAX_SAMPLES,
    POSITIVE,
    ZERO_OK,
    Range,
)
from ark_trainer.base.strategies import strategy_table

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags


def num_samples_flag() -> Any:
    """``--rft_num_samples``: the declaration every stage that samples candidates as RFT does shares."""
    return flag(
        4,
        "completions sampled from the model per training prompt for RFT (0: only the data's own answers)",
        group="RFT",
        range=Range(
            0, MAX_SAMPLES, why=f"must be in [0, {MAX_SAMPLES}] (answers sampled per prompt at once)"
        ),
    )


def temperature_flag() -> Any:
    """``--rft_temperature``: shared as :func:`num_samples_flag` is."""
    return flag(1.0, "sampling temperature for RFT candidates", group="RFT", range=POSITIVE)


@dataclass(frozen=True)
class RFTOptions:
    """The flags of RFT: the ``RFT`` heading of ``train --help``."""

    # what the demo toy takes from presets/demo.yaml besides the rate, and why (``auto_defaults.toy_settings``;
    # the reference template's 60 steps at batch 8 on the demo's toy)
    toy_reasons: ClassVar[dict[str, str]] = {
        "rft_min_reward": "RFT keeps only the answers whose verdict and type are right (the reference "
        "template's RFT, n = 89: 43.8% → 61.8% on an AMD EPYC; on an Intel Xeon 62.9% → 52.8%, where seeds 0-2 "
        "gave 62.9%)",
    }

    rft_steps: int | None = flag(
        None, "RFT steps (default: a third of --max_train_steps)", group="RFT", range=ZERO_OK
    )
    rft_learning_rate: float = flag(2e-5, "RFT (supervised) learning rate", group="RFT", range=LEARNING_RATE)
    rft_num_samples: int = num_samples_flag()
    rft_temperature: float = temperature_flag()
    rft_min_reward: float = flag(
        0.5, "a prompt's best completion is kept for RFT only at or above this reward", group="RFT", range=ANY
    )

    def problems(self, run: RunFlags) -> list[str]:
        """``--rft_steps`` beyond ``--max_train_steps``, where the strategy has an RFT stage (``auto`` may choose
        one); the others never read it, so a preset's RFT steps do not block ``--strategy GRPO``."""
        known = strategy_table().get(run.strategy)
        trains_rft = known is None or "rft" in known.stages
        if self.rft_steps is not None and self.rft_steps > run.max_train_steps and trains_rft:
            return [f"--rft_steps: must be between 0 and --max_train_steps ({run.max_train_steps})"]
        return []
