"""Checkpoints on a time interval too (``--save_minutes``), so a run stopped or killed between two
``--save_steps`` checkpoints resumes from minutes ago, not from the stage's start.

A real model's step on CPU lasts a minute or more: the step interval alone (500 by default) saved nothing
in a half-hour run. The callback asks the Trainer to save at the end of the first step after the interval
has passed since the stage began or since its last save (whichever kind); the save is the Trainer's own,
made crash-safe and rotated like any other (``core/runtime/resume.py``), and ``--resume True`` continues from it.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def save_timer_callback(minutes: float, clock: Callable[[], float] = time.monotonic):
    """A TrainerCallback saving a checkpoint once ``minutes`` have passed since the last save; None when 0."""
    if minutes <= 0:
        return None
    from transformers import TrainerCallback

    interval = minutes * 60.0

    class _SaveTimer(TrainerCallback):
        def __init__(self) -> None:
            self.last = clock()

        def on_train_begin(self, args, state, control, **kwargs):
            self.last = clock()

        def on_step_end(self, args, state, control, **kwargs):
            if clock() - self.last >= interval and state.global_step < state.max_steps:
                control.should_save = True  # the final step is saved as the stage's model anyway
            return control

        def on_save(self, args, state, control, **kwargs):
            self.last = clock()

    return _SaveTimer()
