"""The options of DPO (``stages/dpo.py``).

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field; :class:`~ark_trainer.core.config.TrainConfig` is made of every stage's
options and the shared run flags (``run_options.py``). ``stages/dpo.py`` names this class as its
``options`` and reads them with ``ctx.cfg.options(DPOOptions)``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import LEARNING_RATE, NON_NEGATIVE, POSITIVE

DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired",
    "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)  # fmt: skip  # TRL 1.16 DPOConfig.loss_type


@dataclass(frozen=True)
class DPOOptions:
    """The flags of DPO: the ``DPO`` heading of ``train --help``."""

    dpo_learning_rate: float = flag(
        1e-6, "DPO learning rate (TRL's default; the demo uses 5e-4)", group="DPO", range=LEARNING_RATE
    )
    dpo_beta: float = flag(
        0.1,
        "DPO beta: how far from the reference model the policy may move (lower: further)",
        group="DPO",
        range=POSITIVE,
    )
    dpo_loss_type: str = flag(
        "sigmoid",
        "DPO loss (TRL's loss_type): sigmoid, ipo, hinge, robust, apo_zero, ...; a comma list adds them up, "
        "e.g. sigmoid,sft (DPO plus a fine-tuning term on the chosen answers, which keeps their likelihood up)",
        group="DPO",
        choices=DPO_LOSS_TYPES,
        noun="loss",
        comma_list=True,
    )
    dpo_min_margin: float = flag(
        0.1,
        "sampled DPO pairs: drop a pair whose chosen answer's reward beats the rejected one's by less",
        group="DPO",
        range=NON_NEGATIVE,
    )
