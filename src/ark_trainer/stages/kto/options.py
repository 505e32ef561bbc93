"""The options of KTO (``stages/kto/stage.py``).

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field. The stage registry hands this class to the config (the flags are in
``train --help``, ``--config`` and ``run.yaml``), and at run time the stage is handed an instance of it
(``ctx.options``). Without answers of its own in the data it samples them as RFT does: its options declare
``--rft_num_samples`` and ``--rft_temperature`` alike (``stages/rft/options.py``). Nothing here imports the
config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import ANY, LEARNING_RATE, POSITIVE
from ark_trainer.stages.rft.options import num_samples_flag, temperature_flag

KTO_LOSS_TYPES = ("kto", "apo_zero_unpaired")  # TRL 1.16 KTOConfig.loss_type


@dataclass(frozen=True)
class KTOOptions:
    """The flags of KTO: the ``KTO`` heading of ``train --help``."""

    kto_learning_rate: float = flag(
        1e-6, "KTO learning rate (TRL's default; the demo uses 5e-4)", group="KTO", range=LEARNING_RATE
    )
    kto_beta: float = flag(
        0.1, "KTO beta: how far from the reference model the policy may move", group="KTO", range=POSITIVE
    )
    kto_loss_type: str = flag(
        "kto",
        "KTO loss (TRL's loss_type): kto or apo_zero_unpaired",
        group="KTO",
        choices=KTO_LOSS_TYPES,
        noun="loss",
    )
    kto_threshold: float | None = flag(
        None,
        "sampled KTO answers: desirable at or above this reward, undesirable below (default: --pass_threshold)",
        group="KTO",
        range=ANY,
    )
    rft_num_samples: int = num_samples_flag()  # sampled answers per prompt, as RFT samples them
    rft_temperature: float = temperature_flag()
