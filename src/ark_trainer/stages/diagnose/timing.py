"""``generation_time``: how long GRPO spends generating, logged next to TRL's own ``step_time``.

TRL 1.16's GRPOTrainer logs ``step_time`` (the whole training step, generation included) but not the share
spent generating, which is what tells whether vLLM or shorter completions would help. :func:`time_generation`
wraps the trainer's ``_generate`` and adds each call's seconds to the trainer's metrics, which TRL averages
per logging step into ``generation_time`` (one generation per optimizer step by default). Pinned to TRL's
private ``_generate`` and ``_metrics``; on a trainer without them nothing happens.
"""

from __future__ import annotations

import functools
import time
from typing import Any


def time_generation(trainer: Any) -> bool:
    """Log ``generation_time`` for ``trainer``; returns whether it could."""
    original, metrics = getattr(trainer, "_generate", None), getattr(trainer, "_metrics", None)
    if not callable(original) or not isinstance(metrics, dict) or "train" not in metrics:
        return False

    @functools.wraps(original)
    def _generate(*args: Any, **kwargs: Any):
        start = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            if trainer.model.training:  # not the evaluation loop's generations
                trainer._metrics["train"]["generation_time"].append(time.perf_counter() - start)

    trainer._generate = _generate
    return True
