"""Dynamic sampling (DAPO): replace GRPO groups that carry no learning signal with freshly sampled ones.

A group whose completions all get the same reward has zero advantage everywhere: it costs a generation
and a backward pass and moves nothing (TRL logs their share as ``frac_reward_zero_std``). DAPO (Yu et al.
2025, "dynamic sampling") keeps sampling until the batch holds only groups whose rewards differ. TRL 1.16's
GRPOTrainer has no such option, so :func:`dynamic_sampling_trainer` adds it to a GRPOTrainer subclass:
after TRL generates and scores a batch, up to ``--dynamic_sampling_rounds`` extra batches of random
training prompts are generated and scored, and their informative groups take the places of the flat
ones. The batch keeps its size (flat groups fill whatever the rounds could not), so the optimizer step,
the loss normalisation and the logging stay TRL's. Single process only (TRL splits a group's completions
across processes; the config refuses the combination).
"""

from __future__ import annotations

import random
from typing import Any

FLAT = 1e-6  # a group whose largest |advantage| is below this carries no signal
LEFT_PADDED = ("prompt_ids", "prompt_mask")  # TRL pads prompts on the left, completions on the right
ROW_KEYS = (
    "prompt_ids",
    "prompt_mask",
    "completion_ids",
    "completion_mask",
    "advantages",
    "old_per_token_logps",
    "ref_per_token_logps",
    "sampling_per_token_logps",
    "importance_sampling_ratio",
    "tool_mask",
)  # per-row tensors this module knows how to select and concatenate (text-only GRPO)


def informative(advantages, group_size: int):
    """Per group: True when its completions' advantages differ from zero (the rewards were not all equal)."""
    return advantages.view(-1, group_size).abs().amax(dim=1) > FLAT


def take_groups(batch: dict[str, Any], groups: list[int], group_size: int) -> dict[str, Any]:
    """The rows of ``groups`` (group indices) from a TRL batch; per-batch values are left as they are."""
    import torch

    rows = torch.tensor([g * group_size + i for g in groups for i in range(group_size)], dtype=torch.long)
    return {k: (v[rows.to(v.device)] if k in ROW_KEYS and v is not None else v) for k, v in batch.items()}


def concat_batches(parts: list[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """Concatenate TRL batches row-wise, padding prompts on the left and completions on the right."""
    import torch
    import torch.nn.functional as F

    out = dict(parts[0])
    for key in ROW_KEYS:
        values: list[Any] = [p[key] for p in parts if p.get(key) is not None]
        if len(values) < len(parts):
            continue
        if values[0].dim() == 1:
            out[key] = torch.cat(values)
            continue
        width = max(v.shape[1] for v in values)
        fill = pad_token_id if key == "prompt_ids" else 0
        left = key in LEFT_PADDED
        padded = [
            F.pad(v, (width - v.shape[1], 0) if left else (0, width - v.shape[1]), value=fill) for v in values
        ]
        out[key] = torch.cat(padded)
    return out


def refill(batch: dict[str, Any], fresh: list[dict[str, Any]], group_size: int, pad_token_id: int):
    """``batch`` with its flat groups replaced by the informative groups of ``fresh`` (same size).

    Returns (new batch, informative groups in it). Informative groups of ``batch`` come first, then those of
    each fresh batch in order, then the flat groups of ``batch`` for any places still empty.
    """
    n_groups = batch["advantages"].numel() // group_size
    keep = informative(batch["advantages"], group_size).tolist()
    parts = [take_groups(batch, [g for g in range(n_groups) if keep[g]], group_size)]
    have = sum(keep)
    for extra in fresh:
        if have >= n_groups:
            break
        good = [g for g, ok in enumerate(informative(extra["advantages"], group_size).tolist()) if ok]
        good = good[: n_groups - have]
        parts.append(take_groups(extra, good, group_size))
        have += len(good)
    filled = have
    if have < n_groups:
        flat = [g for g in range(n_groups) if not keep[g]][: n_groups - have]
        parts.append(take_groups(batch, flat, group_size))
    merged = concat_batches([p for p in parts if p["advantages"].numel()], pad_token_id)
    mask = merged["completion_mask"]
    if merged.get("tool_mask") is not None:
        mask = mask * merged["tool_mask"]
    merged["num_items_in_batch"] = mask.sum()  # the dapo loss normalises by the batch's completion tokens
    return merged, filled


def dynamic_sampling_trainer(base: type, rounds: int, seed: int) -> type:
    """A subclass of TRL's ``GRPOTrainer`` (``base``) with up to ``rounds`` refill rounds per generation."""

    class DynamicSamplingGRPOTrainer(base):  # base is TRL's GRPOTrainer
        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            if not self.model.training or rounds <= 0:
                return batch
            size = self.num_generations
            n_groups = len(inputs) // size
            fresh: list[dict[str, Any]] = []
            rng = random.Random(seed * 1_000_003 + self.state.global_step)
            for _ in range(rounds):
                missing = (
                    n_groups
                    - int(informative(batch["advantages"], size).sum())
                    - sum(int(informative(f["advantages"], size).sum()) for f in fresh)
                )
                if missing <= 0:
                    break
                picks = [rng.randrange(len(self.train_dataset)) for _ in range(n_groups)]
                prompts = [self.train_dataset[i] for i in picks for _ in range(size)]
                fresh.append(super()._generate_and_score_completions(prompts))
            merged, filled = refill(batch, fresh, size, self.processing_class.pad_token_id)
            metrics = self._metrics["train"]
            metrics["dynamic_sampling/rounds"].append(float(len(fresh)))
            metrics["dynamic_sampling/frac_informative"].append(filled / n_groups)
            return merged

    return DynamicSamplingGRPOTrainer
