"""GRPO's log-probabilities with each prompt run once per group, not once per completion.

TRL's ``GRPOTrainer`` scores a micro-batch by running every row, prompt and completion, through the model:
with ``--num_generations`` 4 the same prompt goes through the forward and backward passes four times. On the
QC task a prompt is ~300 tokens and GRPO samples ~30 (the decision lines), so nine tenths of a GRPO step's
compute is the same prompts again. :func:`shared_prefix_trainer` adds to a ``GRPOTrainer`` subclass:

- the log-probabilities of a micro-batch from one forward pass over its distinct prompts (all but their
  last token, keeping the key/value cache with its gradient) and one over every row's last prompt token and
  completion on top of that cache, repeated per row. Same positions, same attention mask, same tokens as
  TRL's single pass, so the same log-probabilities (to float rounding) and the same gradient: it reaches the
  prompt's activations once per group, summed over the group's rows.
- micro-batches that hold whole groups: TRL shuffles the rows of a generation batch before splitting it into
  the ``--gradient_accumulation_steps`` micro-batches, so each would hold a few rows of most prompts; with one
  policy update per generation batch (``num_iterations`` 1) and a loss whose sum over the micro-batches does
  not depend on which rows share one (:data:`PARTITION_FREE`: normalised over the whole batch, per row, or by
  a constant), the rows are put back in prompt order. ``bnpo`` divides each micro-batch by its own token
  count, so its step gradient depends on TRL's random partition: it keeps TRL's micro-batches (and shares a
  prompt only where TRL's shuffle left two of its rows together).

Anything else (images, gradient checkpointing, which drops the cache; a cache with sliding-window or static
layers; a micro-batch of distinct prompts) takes TRL's own path. ``bench/grpo_shared_prefix.py`` measures the
step time both ways.
"""

from __future__ import annotations

from typing import Any

MULTIMODAL_KEYS = (
    "pixel_values",
    "image_grid_thw",
    "num_images",
    "pixel_attention_mask",
    "spatial_shapes",
    "num_tiles",
    "image_sizes",
    "token_type_ids",
    "mm_token_type_ids",
    "image_position_ids",
)


PARTITION_FREE = ("grpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
# TRL 1.16's loss types whose step loss is the same however the rows are split into equal micro-batches:
# dapo, cispo and vespo divide by the generation batch's token count; grpo, sapo and luspo average per-row
# losses, dr_grpo divides by rows x a constant. Not bnpo (each micro-batch's own token count).


def distinct_prompts(prompt_ids, prompt_mask):
    """(index of one row per distinct prompt, each row's distinct prompt as an index into those rows)."""
    import torch

    keys = torch.cat([prompt_ids, prompt_mask.to(prompt_ids.dtype)], dim=1)
    _, inverse = torch.unique(keys, dim=0, return_inverse=True)
    first = torch.full((int(inverse.max()) + 1,), keys.size(0), dtype=torch.long)
    first = first.scatter_reduce(0, inverse, torch.arange(keys.size(0)), reduce="amin")
    return first, inverse


def prompt_order(prompt_ids, prompt_mask) -> list[int]:
    """The rows sorted so that a prompt's rows are together (a stable sort by each prompt's first row)."""
    first, inverse = distinct_prompts(prompt_ids, prompt_mask)
    rank = first[inverse]
    return sorted(range(len(rank)), key=lambda i: (int(rank[i]), i))


def shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep: int, compute_entropy: bool):
    """Per-token log-probabilities (and entropies) of the last ``logits_to_keep`` tokens of each row, the
    prompts run once each; None where this path does not apply (the caller then takes TRL's)."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    split = input_ids.size(1) - logits_to_keep  # the prompt's length (left-padded)
    if split < 2 or getattr(model, "is_activation_checkpointing", False):
        return None
    first, inverse = distinct_prompts(input_ids[:, :split], attention_mask[:, :split])
    if first.numel() == input_ids.size(0):
        return None  # no prompt repeats: nothing to share
    prefix = model(
        input_ids=input_ids[first, : split - 1],
        attention_mask=attention_mask[first, : split - 1],
        use_cache=True,
        logits_to_keep=1,
    )
    cache = getattr(prefix, "cache", None) or getattr(prefix, "past_key_values", None)
    if not isinstance(cache, DynamicCache) or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    cache.batch_select_indices(inverse)  # each row gets its prompt's keys and values (an index: grads flow)
    suffix = input_ids[:, split - 1 :]
    labels = suffix.masked_fill(attention_mask[:, split - 1 :] == 0, -100)
    labels[:, 0] = -100  # the last prompt token is input, not scored
    outputs = model(
        input_ids=suffix, attention_mask=attention_mask, cache=cache, labels=labels, fused_lm_head=True
    )
    logps = outputs.log_probs[:, -logits_to_keep:]
    entropies = outputs.entropy[:, -logits_to_keep:] if compute_entropy else None
    return logps, entropies


def chunked(model, input_ids, attention_mask, logits_to_keep: int, compute_entropy: bool, batch_size=None):
    """:func:`shared_prefix_logps` over chunks of ``batch_size`` rows (TRL's bound on a pass's memory); None
    where it does not apply to every chunk."""
    import torch

    size = batch_size or input_ids.size(0)
    parts = []
    for start in range(0, input_ids.size(0), size):
        part = shared_prefix_logps(
            model, input_ids[start : start + size], attention_mask[start : start + size], logits_to_keep,
            compute_entropy,
        )  # fmt: skip
        if part is None:
            return None
        parts.append(part)
    logps = torch.cat([p[0] for p in parts], dim=0)
    return logps, torch.cat([p[1] for p in parts], dim=0) if compute_entropy else None


def regrouped(batches: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``batches`` (TRL's micro-batches of one generation batch, split from it as ``split_tensor_dict`` does:
    per-row tensors and lists cut in equal parts, 0-d tensors and None kept whole) re-split with each prompt's
    rows together; ``batches`` itself where their rows cannot be put back together."""
    import torch

    rows = sum(int(b["prompt_ids"].size(0)) for b in batches)
    size = int(batches[0]["prompt_ids"].size(0))
    if any(int(b["prompt_ids"].size(0)) != size for b in batches):
        return batches
    merged: dict[str, Any] = {}
    for key, value in batches[0].items():
        parts = [b[key] for b in batches]
        if value is None or (isinstance(value, torch.Tensor) and value.dim() == 0):
            merged[key] = value
        elif isinstance(value, torch.Tensor) and len({p.shape[1:] for p in parts}) == 1:
            merged[key] = torch.cat(parts, dim=0)
        elif isinstance(value, list):
            merged[key] = [x for p in parts for x in p]
        else:
            return batches
    order = torch.tensor(prompt_order(merged["prompt_ids"], merged["prompt_mask"]))

    def part(value: Any, index: torch.Tensor) -> Any:
        if value is None or (isinstance(value, torch.Tensor) and value.dim() == 0):
            return value
        if isinstance(value, torch.Tensor):
            return value[index]
        return [value[int(i)] for i in index]

    return [
        {key: part(value, order[start : start + size]) for key, value in merged.items()}
        for start in range(0, rows, size)
    ]


def regroupable(trainer) -> bool:
    """Whether putting a generation batch's rows in prompt order leaves ``trainer``'s step gradient as TRL's:
    one policy update per generation batch, a loss in :data:`PARTITION_FREE`, and no per-micro-batch entropy
    quantile (``top_entropy_quantile`` below 1 masks by each micro-batch's own entropies)."""
    return (
        trainer.num_iterations == 1
        and trainer.args.steps_per_generation == trainer.args.gradient_accumulation_steps
        and trainer.loss_type in PARTITION_FREE
        and getattr(trainer, "top_entropy_quantile", 1.0) >= 1.0
    )


def shared_prefix_trainer(base: type) -> type:
    """A subclass of TRL's ``GRPOTrainer`` (``base``) that runs each prompt once per group (module doc)."""

    class SharedPrefixGRPOTrainer(base):  # base is TRL's GRPOTrainer (or a subclass of it)
        def _prepare_inputs(self, generation_batch):
            before = getattr(self, "_buffered_inputs", None)  # TRL's: the micro-batches of a generation batch
            inputs = super()._prepare_inputs(generation_batch)
            buffered = getattr(self, "_buffered_inputs", None)
            if self.model.training and buffered is not before and buffered and regroupable(self):
                self._buffered_inputs = regrouped(buffered)
                inputs = self._buffered_inputs[self._step % self.args.steps_per_generation]
            return inputs

        def _get_per_token_logps_and_entropies(
            self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, compute_entropy=False,
            compute_aux_loss=False, **extra,
        ):  # fmt: skip
            shared = None
            if not compute_aux_loss and all(extra.get(k) is None for k in MULTIMODAL_KEYS):
                with self.accelerator.autocast():
                    shared = chunked(
                        model, input_ids, attention_mask, logits_to_keep, compute_entropy, batch_size
                    )
            if shared is None:
                return super()._get_per_token_logps_and_entropies(
                    model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy,
                    compute_aux_loss, **extra,
                )  # fmt: skip
            return shared[0], shared[1], None

    return SharedPrefixGRPOTrainer
