"""Who does what when a run has several processes (started by ``ark_trainer.core.runtime.launch``).

accelerate's ``PartialState`` is the only source of rank information; nothing here talks to
``torch.distributed`` directly. The rules:

- Only the main process (global rank 0) writes the run directory: run.yaml, plan.json, data/, the
  heartbeat, events.jsonl, eval/, the report and the final model (transformers' Trainer already saves
  checkpoints from the main process only). The other processes log to stderr and keep a silent monitor.
- RFT sampling is sharded: each process samples and scores a contiguous slice of the prompts, the slices
  are gathered (``accelerate.utils.gather_object``, in rank order, so the result is the prompt order), and
  every process runs the same deterministic selection on the same gathered list, so all ranks fine-tune on
  identical data without any file round-trip.
- Evaluation runs on the main process while the others wait at a barrier (collective timeout: 4 hours).
- After each stage every process hashes its weights; the main process records the digests as a
  ``replicas`` event and warns when they differ (DDP keeps them identical; sharded ZeRO-3/FSDP is skipped).

A single-process run gets the same object with ``num_processes == 1``, so callers never branch on it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from typing import Any

log = logging.getLogger("ark_trainer")


BARRIER_TIMEOUT_S = 4 * 3600


class Ranks:
    """The processes of this run as the pipeline sees them."""

    def __init__(self, state=None) -> None:
        self.state = state
        self.monitor: Any = None  # set by the pipeline on every rank; used to record the replica check

    @property
    def num_processes(self) -> int:
        return self.state.num_processes if self.state else 1

    @property
    def index(self) -> int:
        return self.state.process_index if self.state else 0

    @property
    def is_main(self) -> bool:
        return self.index == 0

    def wait(self) -> None:
        if self.num_processes > 1:
            self.state.wait_for_everyone()

    def shard(self, items: list) -> list:
        """This process's contiguous slice of ``items`` (the whole list in a single-process run)."""
        n, k = len(items), self.num_processes
        start, stop = n * self.index // k, n * (self.index + 1) // k
        return items[start:stop]

    def gather(self, items: list) -> list:
        """Every process's ``items`` concatenated in rank order (inverse of :meth:`shard`)."""
        if self.num_processes == 1:
            return items
        from accelerate.utils import gather_object

        return gather_object(items)


_RANKS = Ranks()


def ranks() -> Ranks:
    return _RANKS


def init_ranks(use_cpu: bool) -> Ranks:
    """Join the process group when started by ``accelerate launch``; single process otherwise.

    ``PartialState(cpu=True)`` is what selects gloo on CPU; it must come before the Trainer creates its own
    (shared) state, so the pipeline calls this first.
    """
    global _RANKS
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        from datetime import timedelta

        from accelerate import PartialState

        # A generous collective timeout: the others wait at a barrier while the main process evaluates.
        _RANKS = Ranks(PartialState(cpu=use_cpu, timeout=timedelta(seconds=BARRIER_TIMEOUT_S)))
    else:
        _RANKS = Ranks()
    return _RANKS


def run_device(device: str) -> str:
    """The device a process generates and evaluates on: its own GPU (LOCAL_RANK) in a multi-GPU run."""
    if device.startswith("cuda") and _RANKS.num_processes > 1:
        return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}"
    return device


def weights_digest(model) -> str:
    """sha256 over every parameter and buffer (name, dtype, shape, bytes), in name order."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().to("cpu").contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def check_replicas(trainer, stage: str) -> dict[str, Any] | None:
    """Compare every process's weights after a stage; recorded by the main process. None when not checked."""
    r = _RANKS
    if r.num_processes == 1:
        return None
    from accelerate.utils import DistributedType

    if trainer.accelerator.distributed_type not in (DistributedType.MULTI_CPU, DistributedType.MULTI_GPU):
        return None  # ZeRO-3 / FSDP hold shards, not replicas
    digest = weights_digest(trainer.accelerator.unwrap_model(trainer.model))
    digests = r.gather([digest])
    result = {
        "stage": stage,
        "processes": r.num_processes,
        "identical": len(set(digests)) == 1,
        "digests": digests,
    }
    if r.is_main and r.monitor is not None:
        r.monitor.event("replicas", **result)
        if not result["identical"]:
            r.monitor.warn(f"{stage}: the {r.num_processes} processes ended with different weights")
    return result


class QuietMonitor:
    """The monitor of a non-main process: same interface as ``monitor.Monitor``, writes nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str):
        if name == "stage":
            return _quiet_stage
        return _noop

    def warn(self, message: str) -> None:
        log.warning(message)


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


class _QuietStage:
    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        return None


def _quiet_stage(*args: Any, **kwargs: Any) -> _QuietStage:
    return _QuietStage()
