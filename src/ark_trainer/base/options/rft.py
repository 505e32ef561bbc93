"""The options of RFT (``stages/rft.py``): the supervised step on reward-selected answers.

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field; :class:`~ark_trainer.core.config.TrainConfig` is made of every stage's
options and the shared run flags (``run_options.py``). ``stages/rft.py`` names this class as its
``options`` and reads them with ``ctx.cfg.options(RFTOptions)``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import (
    ANY,
    LEARNING_RATE,
    MAX_SAMPLES,
    POSITIVE,
    ZERO_OK,
    Range,
)


@dataclass(frozen=True)
class RFTOptions:
    """The flags of RFT: the ``RFT`` heading of ``train --help``."""

    rft_steps: int | None = flag(
        None, "RFT steps (default: a third of --max_train_steps)", group="RFT", range=ZERO_OK
    )
    rft_learning_rate: float = flag(2e-5, "RFT (supervised) learning rate", group="RFT", range=LEARNING_RATE)
    rft_num_samples: int = flag(
        4,
        "completions sampled from the model per training prompt for RFT (0: only the data's own answers)",
        group="RFT",
        range=Range(
            0, MAX_SAMPLES, why=f"must be in [0, {MAX_SAMPLES}] (answers sampled per prompt at once)"
        ),
    )
    rft_temperature: float = flag(1.0, "sampling temperature for RFT candidates", group="RFT", range=POSITIVE)
    rft_min_reward: float = flag(
        0.5, "a prompt's best completion is kept for RFT only at or above this reward", group="RFT", range=ANY
    )
