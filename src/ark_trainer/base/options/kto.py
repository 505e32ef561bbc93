"""The options of KTO (``stages/kto.py``).

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field; :class:`~ark_trainer.core.config.TrainConfig` is made of every stage's
options and the shared run flags (``run_options.py``). ``stages/kto.py`` names this class as its
``options`` and reads them with ``ctx.cfg.options(KTOOptions)``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import ANY, LEARNING_RATE, POSITIVE

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
