"""Bad steps: a non-finite loss or gradient norm skips that optimizer step instead of ending the run.

One NaN/inf in a long run must not throw away hours of training, nor reach the weights. So, for every
precision (what fp16's loss scaler already does for overflowing gradients):

1. **skip**: before each optimizer step the loss of every micro-batch and the total gradient norm (the one
   the Trainer computes for clipping and its logs) are checked. A non-finite one skips that step: neither
   the weights nor Adam's moments change, and the LR scheduler does not advance (accelerate's
   ``step_was_skipped``, as for an fp16 overflow), so the schedule counts applied updates. The step is a
   ``bad_step`` event in ``events.jsonl`` and counted in the report. Under fp16 the loss scaler itself
   skips overflowing gradients (routine while it finds its scale); only a non-finite loss counts there.
2. **roll back**: after ``--max_bad_steps`` bad steps in a row the stage goes back to its last complete
   checkpoint (or its start when it has none) with half the learning rate, at most ``--max_rollbacks``
   times; each a ``rollback`` event and a line in the report.
3. **stop**: only then the stage stops with :class:`~ark_trainer.core.runtime.guards.TrainingDiverged` (exit 2, one
   line naming the precision in use and the flags to change); the report is still written.
"""

from __future__ import annotations

import logging
import math
from typing import Any

log = logging.getLogger("ark_trainer")

ROLLBACK_LR_FACTOR = 0.5


class BadStreak(Exception):
    """``--max_bad_steps`` bad steps in a row (internal: :func:`ark_trainer.core.runtime.resume.run_trainer` rolls back)."""

    def __init__(self, step: int, what: str, streak: int) -> None:
        super().__init__(f"step {step}: {what} is NaN/inf, {streak} steps in a row")
        self.step, self.what, self.streak = step, what, streak


def _finite(value: Any) -> bool:
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError):
        return True


def precision_of(args, model) -> str:
    """The precision a trainer actually computes in, e.g. ``bf16 autocast, fp32 weights``."""
    dtype = next((str(p.dtype) for p in model.parameters() if p.is_floating_point()), "") if model else ""
    weights = {"torch.float32": "fp32", "torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(dtype, "fp32")
    if getattr(args, "fp16", False):
        return f"fp16 autocast, {weights} weights"
    if getattr(args, "bf16", False):
        return f"bf16 autocast, {weights} weights" if weights != "bf16" else "bf16 weights"
    return weights


def precision_fix(precision: str) -> str:
    """The precision flag most likely to help a run that keeps producing NaN/inf in ``precision``."""
    if precision == "bf16 weights":
        return ", try --mixed_precision bf16 (bf16 autocast over fp32 master weights)"
    if "autocast" in precision:
        return ", try --mixed_precision no (fp32)"
    return ""


def _grad_norm(model) -> Any:
    """The total norm of ``model``'s gradients (one fused pass), or None when it has none."""
    import torch

    grads = [p.grad for p in model.parameters() if p.grad is not None] if model is not None else []
    return torch.nn.utils.get_total_norm(grads) if grads else None


def _losses_finite(losses: list) -> bool:
    import torch

    if not losses:
        return True
    values = [torch.as_tensor(x).detach().float().reshape(-1) for x in losses]
    return bool(torch.isfinite(torch.cat([v.to(values[0].device) for v in values])).all())


def _skip_next_step(optimizer) -> bool:
    """Make ``optimizer``'s next ``step()`` a no-op that reports itself skipped (as fp16's scaler does)."""
    if optimizer is None or not hasattr(optimizer, "_is_overflow"):
        return False

    def _skipped(closure: Any = None) -> None:
        del optimizer.step  # back to the class's own step for the next one
        optimizer._is_overflow = True  # accelerate: step_was_skipped → the LR scheduler does not step

    optimizer.step = _skipped
    return True


def step_guard(monitor, stage: str, max_bad_steps: int):  # noqa: C901
    """The bad-step guard of a stage: one per stage, attached to each trainer the stage builds."""
    from transformers import TrainerCallback

    class StepGuard(TrainerCallback):
        def __init__(self) -> None:
            self.streak = self.total = 0
            self.norm: Any = None  # this step's total gradient norm, captured from the trainer
            self.losses: list = []  # this step's micro-batch losses
            self.skipping = False

        def attach(self, trainer) -> None:
            """Read the trainer's own loss and gradient norm (free: the Trainer computes both anyway)."""
            for name, keep in (("_get_grad_norm", "norm"), ("training_step", "losses")):
                original = getattr(trainer, name, None)
                if callable(original):
                    setattr(trainer, name, self._capture(original, keep))
            trainer.add_callback(self)

        def _capture(self, original, keep: str):
            def wrapper(*args: Any, **kwargs: Any):
                value = original(*args, **kwargs)
                if keep == "norm":
                    self.norm = value
                else:
                    self.losses.append(value)
                return value

            return wrapper

        def on_pre_optimizer_step(self, args, state, control, model=None, optimizer=None, **kwargs):
            norm, losses, self.norm, self.losses = self.norm, self.losses, None, []
            what = self._bad(args, norm, losses, model)
            if what is None:
                self.streak = 0
                return
            self.streak, self.total = self.streak + 1, self.total + 1
            step, precision = state.global_step + 1, precision_of(args, model)
            monitor.event(
                "bad_step", stage=stage, step=step, what=what, streak=self.streak, total=self.total,
                precision=precision,
            )  # fmt: skip
            log.warning("%s step %d: %s is NaN/inf (%s); step skipped", stage, step, what, precision)
            if self.streak >= max_bad_steps:
                self.streak = 0
                raise BadStreak(step, what, max_bad_steps)
            if not getattr(args, "fp16", False):  # under fp16 the loss scaler skips it by itself
                self.skipping = _skip_next_step(optimizer)
                if not self.skipping and model is not None:  # no accelerate wrapper to skip through:
                    model.zero_grad(set_to_none=True)  # torch optimizers leave grad-less parameters alone

        def on_step_end(self, args, state, control, optimizer=None, **kwargs):
            if self.skipping and optimizer is not None:
                optimizer._is_overflow = False  # the next step is a normal one again
            self.skipping = False

        @staticmethod
        def _bad(args, norm: Any, losses: list, model) -> str | None:
            if not _losses_finite(losses):
                return "the loss"
            if getattr(args, "fp16", False):
                return None  # overflowing fp16 gradients are routine: the loss scaler skips and rescales
            norm = _grad_norm(model) if norm is None else norm
            return None if norm is None or _finite(norm) else f"the gradient norm ({float(norm)})"

    return StepGuard()


def lower_lr_callback(base_lr: float, factor: float):
    """A callback setting the learning rate to ``base_lr × factor`` once the optimizer and scheduler exist.

    Resuming from a checkpoint restores the scheduler's own base learning rates, so lowering the rate in
    the trainer's arguments alone would not hold; this sets it after the restore (absolute, so a
    checkpoint saved after an earlier rollback is not lowered twice).
    """
    from transformers import TrainerCallback

    class LowerLR(TrainerCallback):
        def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
            scheduler = getattr(lr_scheduler, "scheduler", lr_scheduler)
            bases = getattr(scheduler, "base_lrs", None)
            if not bases or optimizer is None:
                return
            ratio = base_lr * factor / bases[0]
            scheduler.base_lrs = [b * ratio for b in bases]
            for group in optimizer.param_groups:
                group["lr"] *= ratio
                if "initial_lr" in group:
                    group["initial_lr"] *= ratio

    return LowerLR()
