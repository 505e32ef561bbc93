"""Batched generation for RFT sampling and evaluation.

All samples of a prompt come from one ``generate`` call (``num_return_sequences``), prompts are batched
with left padding (longest first, so a batch holds prompts of similar length and little padding; the
answers come back in the callers' order), and the KV cache is on; nothing is generated twice.
``bench/rft_sampling.py`` measures this against a per-prompt, per-sample loop.

A batch is sized by tokens, not only by sequences: its sequences × (longest prompt + ``max_new_tokens``)
stay within a token budget (:func:`token_budget`: ``GEN_TOKENS_GPU`` on a GPU; on CPU ``GEN_TOKENS_CPU``
and no more than ``CPU_TOKEN_PARAMS`` ÷ the model's parameters, so one call's prefill takes seconds, not
minutes: about 4,400 tokens for SmolLM2-135M, 16 of its QC prompts; and never more than the KV cache that
fits in ``KV_CACHE_SHARE`` of the device's memory), so a real model's long prompts neither run out of
memory nor crawl through one huge batch, while a toy model's short prompts still share a big one. Progress moves with every decoding step (``on_tick``: the console bar's
"batch b/B, token t/T" and the heartbeat's ``detail``), not only at the end of each batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ark_trainer.base.scale import VLLMSettings
from ark_trainer.core.models.prompts import render_prompt

GEN_SEQUENCES = 128  # sequences per generate call while sampling (prompts × samples)
GEN_TOKENS_CPU = 16_384  # tokens (prompt + completion) per generate call on CPU
CPU_TOKEN_PARAMS = 6e11  # ... and at most this ÷ parameters (compute per call: ~10 s of prefill on 2 cores)
GEN_TOKENS_GPU = 262_144  # ... on a GPU (decoding there is launch-bound: bigger batches pay)
KV_CACHE_SHARE = 0.25  # share of the device's memory one batch's KV cache may take
CPU_KV_BYTES = 2 * 1024**3  # the "device memory" on CPU for that bound (2 GiB: a 0.25 share is 512 MiB)


def kv_bytes_per_token(model) -> int | None:
    """Bytes of KV cache per token of ``model`` (keys and values of every layer), from its config."""
    import torch

    cfg = getattr(model, "config", None)
    cfg = getattr(cfg, "text_config", None) or cfg
    layers = getattr(cfg, "num_hidden_layers", None)
    heads = getattr(cfg, "num_attention_heads", None)
    hidden = getattr(cfg, "hidden_size", None)
    if not (isinstance(layers, int) and isinstance(heads, int) and isinstance(hidden, int)) or not heads:
        return None
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    dtype = next((p.dtype for p in model.parameters()), torch.float32)
    return 2 * layers * int(kv_heads) * int(head_dim) * torch.empty((), dtype=dtype).element_size()


def token_budget(model) -> int:
    """Tokens one ``generate`` call may hold: the device's default, bounded by the KV cache that fits."""
    import torch

    device = getattr(model, "device", torch.device("cpu"))
    on_gpu = getattr(device, "type", "cpu") == "cuda"
    budget = GEN_TOKENS_GPU if on_gpu else GEN_TOKENS_CPU
    if not on_gpu:
        params = sum(p.numel() for p in model.parameters())
        budget = min(budget, int(CPU_TOKEN_PARAMS // max(params, 1)))
    per_token = kv_bytes_per_token(model)
    if per_token:
        memory = torch.cuda.mem_get_info(device)[0] if on_gpu else CPU_KV_BYTES
        budget = min(budget, int(memory * KV_CACHE_SHARE) // per_token)
    return max(budget, 1)


def plan_batches(
    lengths: list[int], order: list[int], num_samples: int, max_new_tokens: int, batch_size: int, budget: int
) -> list[list[int]]:
    """Split ``order`` (prompt indices, longest first) into batches of at most ``batch_size`` prompts whose
    sequences × (longest prompt + ``max_new_tokens``) stay within ``budget`` tokens (one prompt at least)."""
    batches, start = [], 0
    while start < len(order):
        per_prompt = num_samples * (lengths[order[start]] + max_new_tokens)  # the first is the longest
        size = max(1, min(batch_size, budget // max(per_prompt, 1)))
        batches.append(order[start : start + size])
        start += size
    return batches


def _ticker(on_tick: Callable[[str], None] | None, bar, where: str, max_new_tokens: int):
    """A stopping criterion that never stops: it reports each decoding step (``on_tick`` and the bar), and
    each is a stop point for Ctrl-C (``core/runtime/signals.py``)."""
    import time

    import torch
    from transformers import StoppingCriteria

    from ark_trainer.core.runtime.signals import check_stop

    class _Tick(StoppingCriteria):
        def __init__(self) -> None:
            self.steps, self.last = 0, 0.0

        def __call__(self, input_ids, scores, **kwargs):
            check_stop()
            self.steps += 1
            now = time.monotonic()
            if now - self.last >= 1.0:  # at most once a second: a tick is for people and the watchdog
                self.last = now
                detail = f"{where}, token {self.steps}/{max_new_tokens}"
                bar.set_postfix_str(detail, refresh=True)
                if on_tick:
                    on_tick(detail)
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

    return _Tick()


def generate(
    model,
    tokenizer,
    prompts: list[list[dict[str, str]]],
    *,
    num_samples: int = 1,
    temperature: float = 0.0,
    max_new_tokens: int = 64,
    batch_size: int = 16,
    seed: int = 0,
    on_batch: Callable[[int], None] | None = None,
    desc: str = "generating",
    on_tick: Callable[[str], None] | None = None,
    max_batch_tokens: int | None = None,
) -> list[list[str]]:
    """``num_samples`` completions per prompt; ``temperature`` 0 means greedy decoding.

    At most ``batch_size`` prompts per call, and at most ``max_batch_tokens`` tokens (default
    :func:`token_budget`); ``on_batch(prompts done)`` after each call, ``on_tick(detail)`` during one."""
    import torch
    from tqdm.auto import tqdm  # type: ignore[import-untyped]  # tqdm ships no type information

    tokenizer.padding_side = "left"
    texts = [render_prompt(tokenizer, p) for p in prompts]
    do_sample = temperature > 0
    gen_kwargs = {
        "max_new_tokens": max_new_tokens,
        "do_sample": do_sample,
        "num_return_sequences": num_samples,
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "use_cache": True,
    }
    if do_sample:
        gen_kwargs.update(temperature=temperature, top_p=1.0, top_k=0)
    else:
        gen_kwargs.update(temperature=None, top_p=None, top_k=None)
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]] if texts else []
    order = sorted(range(len(texts)), key=lambda i: -lengths[i])
    budget = max_batch_tokens or token_budget(model)
    batches = plan_batches(lengths, order, num_samples, max_new_tokens, batch_size, budget)
    out: list[list[str]] = []
    bar = tqdm(total=len(texts), desc=desc, unit="prompt", leave=False)
    try:
        for b, indices in enumerate(batches, 1):
            batch = tokenizer(
                [texts[i] for i in indices], return_tensors="pt", padding=True, add_special_tokens=False
            ).to(model.device)
            tick = _ticker(on_tick, bar, f"batch {b}/{len(batches)}", max_new_tokens)
            with torch.no_grad():
                ids = model.generate(**batch, **gen_kwargs, stopping_criteria=[tick])
            new = ids[:, batch["input_ids"].shape[1] :]
            decoded = tokenizer.batch_decode(new, skip_special_tokens=True)
            out += [decoded[i : i + num_samples] for i in range(0, len(decoded), num_samples)]
            bar.update(len(decoded) // num_samples)
            if on_batch:
                on_batch(len(out))
    finally:
        bar.close()
        torch.random.set_rng_state(generator_state)
    restored: list[list[str]] = [[] for _ in texts]
    for i, samples in zip(order, out, strict=True):
        restored[i] = samples
    return restored


@dataclass(frozen=True)
class SamplingSettings:
    """What sampling candidates reads: ``--rft_num_samples`` answers per prompt at ``--rft_temperature``, the
    run's completion length and seed, and the vLLM flags (``--use_vllm`` samples through vLLM)."""

    num_samples: int
    temperature: float
    max_new_tokens: int
    seed: int
    vllm: VLLMSettings


class Sampler:
    """RFT candidates: ``--rft_num_samples`` per prompt, from vLLM (``--use_vllm``) or transformers.

    The model is loaded once and serves every call (RFT samples in rounds, ``scoring.sample_and_select``);
    :meth:`close` frees it. ``--rft_num_samples 0`` samples nothing (the data's own answers are scored alone)
    and loads only the tokenizer.
    """

    def __init__(self, settings: SamplingSettings, rt, model_path: str) -> None:
        from ark_trainer.core.models.loading import load_policy, load_tokenizer

        self.settings, self.model_path, self.model = settings, model_path, None
        if settings.vllm.use_vllm or settings.num_samples == 0:
            self.tok = load_tokenizer(model_path)
        else:
            self.model, self.tok = load_policy(model_path, rt)

    def __call__(
        self, prompts: list, seed: int, on_batch=None, desc: str = "RFT sampling", on_tick=None
    ) -> list[list[str]]:
        settings = self.settings
        if settings.num_samples == 0:
            if on_batch:
                on_batch(len(prompts))
            return [[] for _ in prompts]
        if settings.vllm.use_vllm:
            from ark_trainer.core.vllm_rollouts import vllm_sample

            return vllm_sample(
                settings.vllm,
                self.model_path,
                self.tok,
                prompts,
                seed=seed,
                n=settings.num_samples,
                temperature=settings.temperature,
                max_tokens=settings.max_new_tokens,
            )
        return generate(
            self.model,
            self.tok,
            prompts,
            num_samples=settings.num_samples,
            temperature=settings.temperature,
            max_new_tokens=settings.max_new_tokens,
            batch_size=max(1, GEN_SEQUENCES // settings.num_samples),
            seed=seed,
            on_batch=on_batch,
            desc=desc,
            on_tick=on_tick,
        )

    def close(self) -> None:
        self.model = None


def sample_prompts(
    settings: SamplingSettings,
    rt,
    model_path: str,
    prompts: list,
    seed: int,
    on_batch=None,
    desc: str = "RFT sampling",
) -> tuple[list[list[str]], object]:
    """:class:`Sampler` for one call: (samples per prompt, tokenizer); the model is freed before returning."""
    sampler = Sampler(settings, rt, model_path)
    try:
        return sampler(prompts, seed, on_batch=on_batch, desc=desc), sampler.tok
    finally:
        sampler.close()
