"""TRL's fused LM head scoring only the labelled positions on CPU too.

Every TRL trainer the stages use (SFT for RFT, GRPO, DPO, KTO, RLOO) computes its log-probabilities through
``trl.trainer.utils.add_fused_lm_head``: the backbone's hidden states go through the LM head in tiles, without
the ``(batch, length, vocab)`` logits. On a device with Triton it projects only the positions whose label is
not ``-100``; elsewhere it projects every position and zeroes the unlabelled ones afterwards, because on
devices that compile per tile shape (Neuron) a varying number of positions would recompile every batch. A CPU
compiles nothing, and there the full projection is most of a step: an RFT batch of the QC demo is ~150 prompt
tokens and ~65 answer tokens a row, and SmolLM2's head has 49,152 outputs, so scoring the prompts and the
padding too made the forward and backward passes 1.8x as slow (``bench/fused_head_cpu.py``).

:func:`score_labelled_positions_on_cpu` makes TRL take its own compact path (the one it takes on CUDA) for
CPU tensors as well. The loss, the per-token log-probabilities, entropies and the gradients are the same
(the same computation over fewer rows; ``tests/stages/test_fused_head.py`` checks them equal in fp32); under
bf16 autocast the tiles round slightly differently, as any change of batch shape does.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("ark_trainer")

_MARK = "_ark_compact_on_cpu"


def score_labelled_positions_on_cpu() -> bool:
    """Patch TRL once per process so its fused LM head projects only labelled positions of CPU tensors.

    Returns whether the patch is in place. A TRL without the ``_use_triton`` switch this relies on is left
    alone (logged once): training is then just as correct, only slower on CPU."""
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:  # pragma: no cover - TRL is a dependency
        return False
    current = getattr(trl_utils, "_use_triton", None)
    if current is None or not callable(current):
        log.info(
            "TRL %s has no fused-head switch to patch; its LM head scores every position on CPU", _version()
        )
        return False
    if getattr(current, _MARK, False):
        return True

    def compact_here(device: Any) -> bool:
        return getattr(device, "type", None) == "cpu" or bool(current(device))

    setattr(compact_here, _MARK, True)
    trl_utils._use_triton = compact_here
    return True


def _version() -> str:
    try:
        import trl

        return str(trl.__version__)
    except Exception:  # pragma: no cover
        return "?"
