"""Dynamic sampling (DAPO): replace GRPO groups that carry no learning signal with freshly sampled ones.

A group whose completions all get the same reward has zero advantage everywhere: it costs a generation
and a backward pass and moves nothing (TRL logs their share as ``frac_reward_zero_std``). DAPO (Yu et al.
2025, "dynamic sampling") keeps sampling until the batch holds only groups whose rewards differ. TRL 1.16's
GRPOTrainer has no such option, so :func:`dynamic_sampling_trainer` adds it to a GRPOTrainer subclass:
after TRL generates and scores a batch, up to ``--dynamic_sampling_rounds`` extra batches of random
training prompts are generated and scored, and their informative groups take the places of the flat
ones. The batch keeps its size (flat groups fill whatever the rounds could not), so the optimizer step,
the loss normalisation and the logging stay TRL's. A flat group's place goes to a fresh prompt of its own
label (its ``label`` column; unlabelled rows are one more kind), so the step keeps the label balance that
GRPO's order gave it: a label the policy already answers right is not traded for one it gets wrong.
Single process only (TRL splits a group's completions across processes; the config refuses the
combination).
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


def label_key(row: dict[str, Any]) -> str | None:
    """The kind of prompt a row is, for the label balance: its label, or None when it has none."""
    label = row.get("label")
    return label.strip() or None if isinstance(label, str) else None


def refill(
    batch: dict[str, Any],
    fresh: list[dict[str, Any]],
    group_size: int,
    pad_token_id: int,
    labels: tuple[list, list[list]] | None = None,
):
    """``batch`` with its flat groups replaced by the informative groups of ``fresh`` (same size).

    ``labels``: the kind (:func:`label_key`) of each group of ``batch`` and of each fresh batch; a flat
    group's place goes only to a fresh group of its kind (None: any group takes any place). Returns (new
    batch, informative groups in it). Informative groups of ``batch`` come first, then those taken from each
    fresh batch in order, then the flat groups of ``batch`` for any places still empty."""
    n_groups = batch["advantages"].numel() // group_size
    own = labels[0] if labels else [None] * n_groups
    keep = informative(batch["advantages"], group_size).tolist()
    open_places = [own[g] for g in range(n_groups) if not keep[g]]  # the kinds of the flat groups' places
    parts = [take_groups(batch, [g for g in range(n_groups) if keep[g]], group_size)]
    for j, extra in enumerate(fresh):
        kinds = labels[1][j] if labels else [None] * (extra["advantages"].numel() // group_size)
        good = []
        for g, ok in enumerate(informative(extra["advantages"], group_size).tolist()):
            if ok and kinds[g] in open_places:
                open_places.remove(kinds[g])
                good.append(g)
        parts.append(take_groups(extra, good, group_size))
    filled = n_groups - len(open_places)
    flat = []
    for g in range(n_groups):  # the flat groups that keep their places
        if not keep[g] and own[g] in open_places:
            open_places.remove(own[g])
            flat.append(g)
    parts.append(take_groups(batch, flat, group_size))
    merged = concat_batches([p for p in parts if p["advantages"].numel()], pad_token_id)
    mask = merged["completion_mask"]
    if merged.get("tool_mask") is not None:
        mask = mask * merged["tool_mask"]
    merged["num_items_in_batch"] = mask.sum()  # the dapo loss normalises by the batch's completion tokens
    return merged, filled


def open_kinds(own: list, batch_advantages, fresh: list[tuple[list, Any]], group_size: int) -> list:
    """The kinds of the flat places that no informative fresh group (``fresh``: kinds, advantages) fills."""
    places = [
        k for k, ok in zip(own, informative(batch_advantages, group_size).tolist(), strict=True) if not ok
    ]
    for kinds, advantages in fresh:
        for kind, ok in zip(kinds, informative(advantages, group_size).tolist(), strict=True):
            if ok and kind in places:
                places.remove(kind)
    return places


def label_pools(dataset) -> dict[str | None, list[int]]:
    """The dataset's row indices by kind (:func:`label_key`)."""
    column = dataset["label"] if "label" in (dataset.column_names or []) else [None] * len(dataset)
    pools: dict[str | None, list[int]] = {}
    for i, label in enumerate(column):
        pools.setdefault(label_key({"label": label}), []).append(i)
    return pools


def draws(rng: random.Random, pools: dict, places: list, n: int) -> list[int]:
    """``n`` dataset rows to sample, drawn in turn for each open place from the rows of its kind."""
    return [rng.choice(pools[places[i % len(places)]]) for i in range(n)]


def dynamic_sampling_trainer(base: type, rounds: int, seed: int) -> type:
    """A subclass of TRL's ``GRPOTrainer`` (``base``) with up to ``rounds`` refill rounds per generation."""

    class DynamicSamplingGRPOTrainer(base):  # base is TRL's GRPOTrainer
        def _generate_and_score_completions(self, inputs):
            batch = super()._generate_and_score_completions(inputs)
            if not self.model.training or rounds <= 0:
                return batch
            size = self.num_generations
            n_groups = len(inputs) // size
            own = [label_key(inputs[g * size]) for g in range(n_groups)]
            if getattr(self, "_label_pools", None) is None:
                self._label_pools = label_pools(self.train_dataset)
            pools = self._label_pools
            fresh: list[dict[str, Any]] = []
            kinds: list[list] = []
            rng = random.Random(seed * 1_000_003 + self.state.global_step)
            for _ in range(rounds):
                places = open_kinds(
                    own,
                    batch["advantages"],
                    [(k, f["advantages"]) for k, f in zip(kinds, fresh, strict=True)],
                    size,
                )
                if not places:
                    break
                rows = [self.train_dataset[i] for i in draws(rng, pools, places, n_groups)]
                kinds.append([label_key(row) for row in rows])
                fresh.append(super()._generate_and_score_completions([r for r in rows for _ in range(size)]))
            merged, filled = refill(
                batch, fresh, size, self.processing_class.pad_token_id, labels=(own, kinds)
            )
            metrics = self._metrics["train"]
            metrics["dynamic_sampling/rounds"].append(float(len(fresh)))
            metrics["dynamic_sampling/frac_informative"].append(filled / n_groups)
            return merged

    return DynamicSamplingGRPOTrainer
