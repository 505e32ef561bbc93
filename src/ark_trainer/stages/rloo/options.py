"""The options of RLOO (``stages/rloo/stage.py``).

The stage's own flags, as TRL declares ``rloo_config.py`` for its trainer: each is a
:func:`~ark_trainer.base.flags.flag` field. The stage registry hands this class to the config, and at run time
the stage is handed an instance of it (``ctx.options``). RLOO samples groups as GRPO does: its group size,
rollout steps, temperature and KL coefficient are declared alike in both (``stages/grpo/options.py``), so
each is one flag, under the ``GRPO`` heading of ``train --help``. Nothing here imports the config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import LEARNING_RATE
from ark_trainer.base.strategies import strategy_table
from ark_trainer.stages.grpo.options import beta_flag, group_size_flag, rollout_steps_flag, temperature_flag

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags


@dataclass(frozen=True)
class RLOOOptions:
    """The flags of RLOO: ``--rloo_learning_rate`` (the ``RLOO`` heading of ``train --help``) and the
    sampling flags it shares with GRPO."""

    rloo_learning_rate: float = flag(
        1e-6,
        "RLOO learning rate (group size, temperature, KL: the GRPO flags)",
        group="RLOO",
        range=LEARNING_RATE,
    )
    num_generations: int = group_size_flag()
    rollout_steps: int | None = rollout_steps_flag()
    temperature: float = temperature_flag()
    beta: float = beta_flag()

    def problems(self, run: RunFlags) -> list[str]:
        """RLOO batches its groups by ``--batch_size`` × ``--gradient_accumulation_steps`` as they are (GRPO
        chooses its own accumulation in whole groups): under a strategy with an RLOO stage the groups must
        divide it."""
        known = strategy_table().get(run.strategy)
        batch = run.batch_size * run.gradient_accumulation_steps
        if known is None or "rloo" not in known.stages or batch % self.num_generations == 0:
            return []
        return [
            f"--num_generations: {self.num_generations} must divide --batch_size × --gradient_accumulation_steps "
            f"({batch}); e.g. --num_generations 4 with --batch_size 8"
        ]
