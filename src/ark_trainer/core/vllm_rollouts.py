"""RFT sampling through vLLM (``--use_vllm True``), the same two modes TRL's GRPOTrainer offers.

- ``colocate``: a ``vllm.LLM`` engine in this process, on this process's GPU, taking at most
  ``--vllm_gpu_memory_utilization`` of its memory, set up the way TRL's colocate mode sets its own
  (``external_launcher``); freed before RFT training starts. Not run in CI (no GPU there).
- ``server``: requests to a running ``trl vllm-serve --model M`` at ``--vllm_server_host:--vllm_server_port``
  through TRL's ``VLLMClient`` (the server must serve the same ``--model_path``).

Either way every prompt's ``--rft_num_samples`` completions come from one request (``n=N``) and all the
prompts of a process go in one call; vLLM batches and caches them itself. ``scale.check_hardware`` has
already refused the run when vllm or a GPU is missing.
"""

from __future__ import annotations

import gc

from ark_trainer.base.scale import VLLMSettings
from ark_trainer.core.models.prompts import render_prompt


def vllm_sample(
    vllm: VLLMSettings,
    model_path: str,
    tokenizer,
    prompts: list,
    seed: int,
    *,
    n: int,
    temperature: float,
    max_tokens: int,
) -> list[list[str]]:
    """``n`` completions per prompt, as texts."""
    texts = [render_prompt(tokenizer, p) for p in prompts]
    if not texts:
        return []
    if vllm.mode == "server":
        from trl.generation.vllm_client import VLLMClient

        client = VLLMClient(host=vllm.server_host, server_port=vllm.server_port, connection_timeout=60)
        out = client.generate(
            texts,
            n=n,
            temperature=temperature,
            max_tokens=max_tokens,
            logprobs=None,
            generation_kwargs={"seed": seed},
        )
        ids = out["completion_ids"]
        decoded = tokenizer.batch_decode(ids, skip_special_tokens=True)
        return [decoded[i : i + n] for i in range(0, len(decoded), n)]
    import os

    import torch
    from trl.trainer.utils import ensure_master_addr_port
    from vllm import LLM, SamplingParams

    # As TRL's colocate mode does: one engine per training process, on the process's own GPU, joined
    # through the launcher's environment ("external_launcher"). Each process samples its own prompts, so
    # the engines stay independent (tensor parallel only in a single-process run).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    for key, default in (("RANK", "0"), ("LOCAL_RANK", "0"), ("WORLD_SIZE", "1")):
        os.environ.setdefault(key, default)
    ensure_master_addr_port()
    llm = LLM(
        model=model_path,
        gpu_memory_utilization=vllm.gpu_memory_utilization,
        tensor_parallel_size=vllm.tensor_parallel_size if world == 1 else 1,
        distributed_executor_backend="external_launcher",
        seed=seed,
        max_num_batched_tokens=4096,
    )
    params = SamplingParams(n=n, temperature=temperature, max_tokens=max_tokens, seed=seed)
    results = llm.generate(texts, params)
    samples = [[c.text for c in r.outputs] for r in results]
    del llm
    gc.collect()
    torch.cuda.empty_cache()
    return samples
