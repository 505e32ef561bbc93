"""The options of RLOO (``stages/rloo.py``); its group size, temperature and KL coefficient are GRPO's flags.

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field; :class:`~ark_trainer.core.config.TrainConfig` is made of every stage's
options and the shared run flags (``run_options.py``). ``stages/rloo.py`` names this class as its
``options`` and reads them with ``ctx.cfg.options(RLOOOptions)``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import LEARNING_RATE


@dataclass(frozen=True)
class RLOOOptions:
    """The flags of RLOO: the ``RLOO`` heading of ``train --help``."""

    rloo_learning_rate: float = flag(
        1e-6,
        "RLOO learning rate (group size, temperature, KL: the GRPO flags)",
        group="RLOO",
        range=LEARNING_RATE,
    )
