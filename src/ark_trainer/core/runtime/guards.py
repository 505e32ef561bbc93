"""Guards against silent failure during training.

- **non-finite loss or gradients**: the step is skipped, a streak rolls the stage back to its last
  checkpoint at a lower learning rate, and only repeated rollbacks stop it with :class:`TrainingDiverged`
  (``ark_trainer.core.runtime.bad_steps``).
- **no learning signal** (GRPO): when the share of groups whose completions all got the same reward
  (``metrics.flat_group_share``: of the groups trained on, after dynamic sampling where it ran) stays ≥ 0.9
  for 10 steps, one warning, while the run goes on.

Rewards that raise or hang are guarded by the reward code itself (:mod:`ark_trainer.rewards.guards`).
"""

from __future__ import annotations

from ark_trainer.base.errors import UserError
from ark_trainer.core.metrics import flat_group_share

ZERO_STD_LIMIT, ZERO_STD_STEPS = 0.9, 10


class TrainingDiverged(UserError):
    """Loss or gradients stayed NaN/inf through every rollback; restarting would repeat it (exit 2, one line)."""


def guard_callbacks(monitor, label: str) -> list:
    """The guards' trainer callbacks besides the bad-step guard (``ark_trainer.core.runtime.bad_steps``), for
    the stage its caller names (``label``, as people read it: ``GRPO``).

    The no-signal guard watches the share of flat groups a group-based stage (GRPO) logs; for a stage
    that never logs it (RFT's SFT) it stays silent, so no stage needs naming here.
    """
    from transformers import TrainerCallback

    class _NoSignalGuard(TrainerCallback):
        def __init__(self) -> None:
            self.streak, self.last_step, self.warned = 0, 0, False

        def on_log(self, args, state, control, logs=None, **kwargs):
            share = flat_group_share(logs or {})
            if share is None:
                return
            steps, self.last_step = state.global_step - self.last_step, state.global_step
            self.streak = self.streak + max(steps, 1) if share >= ZERO_STD_LIMIT else 0
            if self.streak >= ZERO_STD_STEPS and not self.warned:
                self.warned = True
                monitor.warn(
                    f"{label} no learning signal: for {self.streak} steps up to step {state.global_step}, "
                    f"≥ {ZERO_STD_LIMIT:.0%} of groups had zero reward variance; raise --num_generations or "
                    "--temperature, or use a finer-grained reward"
                )

    return [_NoSignalGuard()]
