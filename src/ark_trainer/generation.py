"""Batched generation for RFT sampling and evaluation.

All samples of a prompt come from one ``generate`` call (``num_return_sequences``), prompts are batched
with left padding (longest first, so a batch holds prompts of similar length and little padding; the
answers come back in the callers' order), and the KV cache is on; nothing is generated twice.
``bench/rft_sampling.py`` measures this against a per-prompt, per-sample loop.
"""

from __future__ import annotations

from collections.abc import Callable

from ark_trainer.models.prompts import render_prompt

GEN_SEQUENCES = 128  # sequences per generate call while sampling (prompts × samples)


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
) -> list[list[str]]:
    """``num_samples`` completions per prompt; ``temperature`` 0 means greedy decoding."""
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
    out: list[list[str]] = []
    bar = tqdm(total=len(texts), desc=desc, unit="prompt", leave=False)
    try:
        for start in range(0, len(texts), batch_size):
            batch = tokenizer(
                [texts[i] for i in order[start : start + batch_size]],
                return_tensors="pt",
                padding=True,
                add_special_tokens=False,
            ).to(model.device)
            with torch.no_grad():
                ids = model.generate(**batch, **gen_kwargs)
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


def sample_prompts(
    cfg, rt, model_path: str, prompts: list, seed: int, on_batch=None, desc: str = "RFT sampling"
) -> tuple[list[list[str]], object]:
    """RFT candidates: ``--rft_num_samples`` per prompt, from vLLM (``--use_vllm``) or transformers.

    Returns (samples per prompt, tokenizer); the model is freed before returning.
    """
    from ark_trainer.models.loading import load_policy, load_tokenizer

    if cfg.use_vllm:
        from ark_trainer.vllm_rollouts import vllm_sample

        tok = load_tokenizer(model_path)
        return vllm_sample(cfg, model_path, tok, prompts, seed=seed), tok
    model, tok = load_policy(model_path, rt)
    samples = generate(
        model,
        tok,
        prompts,
        num_samples=cfg.rft_num_samples,
        temperature=cfg.rft_temperature,
        max_new_tokens=cfg.max_completion_length,
        batch_size=max(1, GEN_SEQUENCES // cfg.rft_num_samples),
        seed=seed,
        on_batch=on_batch,
        desc=desc,
    )
    del model
    return samples, tok
