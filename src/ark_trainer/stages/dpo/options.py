"""The options of DPO (``stages/dpo/stage.py``).

The stage's own flags, as TRL declares ``grpo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field. The stage registry hands this class to the config (the flags are in
``train --help``, ``--config`` and ``run.yaml``), and at run time the stage is handed an instance of it
(``ctx.options``). Without answers of its own in the data it samples them as RFT does: its options declare
``--rft_num_samples`` and ``--rft_temperature`` alike (``stages/rft/options.py``). Nothing here imports the
config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ark_trainer.base.flags import comma_values, flag
from ark_trainer.base.ranges import LEARNING_RATE, NON_NEGATIVE, POSITIVE
from ark_trainer.stages.rft.options import num_samples_flag, temperature_flag

DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired",
    "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)  # fmt: skip  # TRL 1.16 DPOConfig.loss_type


@dataclass(frozen=True)
class DPOOptions:
    """The flags of DPO: the ``DPO`` heading of ``train --help``."""

    # what the demo toy takes from presets/demo.yaml besides the rate, and why (``auto_defaults.toy_settings``;
    # the reference template's 60 steps at batch 8 on the demo's toy)
    toy_reasons: ClassVar[dict[str, str]] = {
        "dpo_loss_type": "at 5e-4 plain sigmoid frays the answer format (task accuracy 27.0% → 23.6%; with the "
        "fine-tuning term 27.0% → 46.1%)",
    }

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
    rft_num_samples: int = num_samples_flag()  # sampled pairs: answers per prompt, as RFT samples them
    rft_temperature: float = temperature_flag()


def dpo_losses(value: str) -> list[str]:
    """``--dpo_loss_type sigmoid,sft`` → ``["sigmoid", "sft"]`` (TRL adds the losses up)."""
    return comma_values(value)
