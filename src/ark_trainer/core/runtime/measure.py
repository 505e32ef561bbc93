"""The timings a run's estimate is made of (``core/runtime/estimate.py``), measured on this machine in seconds.

Three short passes over the model as the run will compute (its device and precision):

- two greedy generations of the same batch of held-out prompts, one new token and ``DECODE_TOKENS`` more
  (forced: no early stop): the first is the batch's prompt pass, the difference is ``DECODE_TOKENS``
  decoding steps. The batch holds as many prompts as an evaluation batch would (the run's token budget,
  ``generation.token_budget``), at most ``MEASURE_PROMPTS`` (repeated where fewer are given). The run's
  sampling batches are often larger (SmolLM2's QC prompts: about 20 sequences); counted as batches of this
  size, they lean high;
- one forward and backward pass over one sequence of the run's training length (the longest prompt
  measured plus the completion length), under autocast where the run computes in bf16 autocast over fp32
  weights; a micro-batch of ``--batch_size`` sequences is counted as that many times it (on CPU the work
  grows with the tokens; measuring the whole micro-batch cost ``--batch_size`` times as long: 83 s for
  batch 2 on a 2-core machine shared with 8 busy processes).

It is skipped for a toy model (its runs take minutes).
"""

from __future__ import annotations

import time
from contextlib import nullcontext

from ark_trainer.core.runtime.estimate import Timings

DECODE_TOKENS = 8
MEASURE_PROMPTS = 8


def _synced(model) -> None:
    """Wait for a GPU's queued work, so a clock read after it counts it (nothing to wait for on CPU)."""
    import torch

    if model.device.type == "cuda":
        torch.cuda.synchronize(model.device)


def _generation(model, tok, prompts: list, tokens: int) -> tuple[float, float, int, int]:
    """(prompt pass seconds, seconds per decoding step, sequences, longest prompt's tokens) of one batch of
    ``prompts``."""
    import torch

    from ark_trainer.core.generation import token_budget
    from ark_trainer.core.models.prompts import render_prompt

    tok.padding_side = "left"
    texts = [render_prompt(tok, p) for p in prompts]
    longest = max(len(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"])
    size = max(1, min(MEASURE_PROMPTS, token_budget(model) // max(longest + tokens, 1)))
    texts = [texts[i % len(texts)] for i in range(size)]  # fewer held-out prompts: repeated to fill it
    batch = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    common = {"do_sample": False, "pad_token_id": tok.pad_token_id, "use_cache": True}
    common.update(temperature=None, top_p=None, top_k=None)
    seconds = []
    warm_up = (1,) if model.device.type == "cuda" else ()  # a GPU's first call compiles its kernels
    with torch.no_grad():
        for n in warm_up:
            model.generate(**batch, max_new_tokens=n, min_new_tokens=n, **common)
        for n in (1, 1 + DECODE_TOKENS):
            start = time.perf_counter()
            model.generate(**batch, max_new_tokens=n, min_new_tokens=n, **common)
            _synced(model)
            seconds.append(time.perf_counter() - start)
    return seconds[0], max(seconds[1] - seconds[0], 0.0) / DECODE_TOKENS, size, longest


def _micro_step(model, rt, batch_size: int, length: int) -> float:
    """Seconds of one forward and backward pass over ``batch_size`` sequences of ``length`` tokens."""
    import torch

    vocab = int(getattr(model.config, "vocab_size", 1000))
    ids = torch.randint(0, vocab, (batch_size, length), device=model.device)
    autocast = torch.autocast(rt.device.split(":")[0], dtype=torch.bfloat16) if rt.bf16 else nullcontext()
    model.train()
    _synced(model)
    start = time.perf_counter()
    with autocast:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    _synced(model)
    seconds = time.perf_counter() - start
    model.zero_grad(set_to_none=True)
    model.eval()
    return seconds


def measure(model_path: str, rt, prompts: list, tokens: int, batch_size: int) -> Timings:
    """Time a generation batch of ``prompts`` (``tokens``: the run's completion length, for the batch size)
    and a training micro-batch of ``batch_size`` on the model at ``model_path`` (``rt``: the run's runtime)."""
    import gc

    from ark_trainer.core.models.loading import load_policy

    model, tok = load_policy(model_path, rt)  # as evaluation and sampling load it
    try:
        prefill, step, size, longest = _generation(model, tok, prompts, tokens)
        if rt.bf16 and not rt.bf16_weights:  # training keeps fp32 master weights under bf16 autocast
            model = model.float()
        micro = _micro_step(model, rt, 1, longest + tokens) * batch_size
    finally:
        del model
        gc.collect()
    return Timings(prefill, step, size, micro, rt.precision, longest, tokens)
