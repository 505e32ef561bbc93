"""Generation speed on a GPU, side by side: which way of decoding rollouts is fastest.

RFT sampling, GRPO rollouts and evaluation decode with transformers' ``generate``, which is launch-bound
on a GPU at small batches (869 completion tokens/s at batch 16 on an H200, measured in November 2026). This measures, on
one random-initialised ~0.3 B Qwen2 (hidden 1024 × 24 layers, bf16), 128 demo QC prompts × 128 new
tokens, sampling at temperature 1 (EOS ignored, so every method decodes the same number of tokens):

- ``generate`` at batch 16 (GRPO's default: one optimizer step's rollouts), 64 (what ark-trainer now
  asks TRL for on a GPU: ``steps_per_generation`` 4, ``scale.rollout_kwargs``) and 128;
- ``generate`` at batch 16 over fp32 weights under bf16 autocast: how rollouts run under the default
  ``--mixed_precision auto`` (fp32 master weights), against bf16 weights (``bf16_weights``);
- ``generate`` with a static KV cache and ``torch.compile``d decoding (batch 128; compile time apart);
- transformers continuous batching (``generate_batch``, what TRL 1.16's
  ``use_transformers_continuous_batching`` calls), default and tuned configuration;
- vLLM, when the package is importable.

Each method gets one warm-up pass (reported apart: compilation, CUDA graphs), then one timed pass.
Writes ``bench/results/gpu_generation.md`` / ``.json``; without a GPU it says "not measured" and nothing else.

    python bench/gpu_generation.py                  # on a GPU: ~2-3 min on an H200 (not measured yet)
    python bench/gpu_generation.py --smoke --out D  # CPU, tiny model, plain generate only: the script works
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import make_assets, write_results  # noqa: E402

NOT_MEASURED = "not measured: no GPU in this session"


def _prompts(a: dict, n: int) -> list[str]:
    from ark_trainer.core.models.loading import load_tokenizer
    from ark_trainer.core.models.prompts import render_prompt
    from ark_trainer.data.loader import load_jsonl

    tok = load_tokenizer(a["model"])
    rows = load_jsonl(str(a["train"]), "--data_path")  # the prompts exactly as a training run builds them
    return [render_prompt(tok, r["prompt"]) for r in (rows * (n // len(rows) + 1))[:n]]


def _sync() -> None:
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def plain(model, tok, prompts: list[str], new: int, batch: int, static: bool = False) -> int:
    """``generate`` in batches of ``batch`` (left padding); returns the number of new tokens decoded."""
    import torch

    tok.padding_side = "left"
    extra = {"cache_implementation": "static"} if static else {}
    total = 0
    for start in range(0, len(prompts), batch):
        enc = tok(prompts[start : start + batch], return_tensors="pt", padding=True).to(model.device)
        with torch.no_grad():
            ids = model.generate(
                **enc, max_new_tokens=new, min_new_tokens=new, do_sample=True, temperature=1.0, top_k=0,
                top_p=1.0, pad_token_id=tok.pad_token_id, **extra,
            )  # fmt: skip
        total += (ids.shape[1] - enc["input_ids"].shape[1]) * ids.shape[0]
    return total


def autocast_fp32(model_dir: Path, tok, prompts: list[str], new: int, batch: int) -> int:
    """``generate`` as GRPO rollouts run under ``--mixed_precision auto``: fp32 weights, bf16 autocast."""
    import torch
    from transformers import AutoModelForCausalLM

    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: the --smoke run
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).to(device).eval()
    try:
        with torch.autocast(device, dtype=torch.bfloat16):
            return plain(model, tok, prompts, new, batch)
    finally:
        del model


def continuous(model, tok, prompts: list[str], new: int, tuned: bool) -> int:
    """transformers' continuous batching (``generate_batch``); ``tuned``: CUDA graphs, compiled decode."""
    from transformers import GenerationConfig
    from transformers.generation import ContinuousBatchingConfig

    gen = GenerationConfig(
        max_new_tokens=new, min_new_tokens=new, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
        eos_token_id=-1, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    options = {"max_memory_percent": 0.5}
    if tuned:
        options.update(
            max_requests_per_batch=len(prompts), use_cuda_graph=True, default_compile_level=1,
            allow_block_sharing=False,
        )  # fmt: skip
    inputs = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    out = model.generate_batch(
        inputs=inputs, generation_config=gen, continuous_batching_config=ContinuousBatchingConfig(**options)
    )
    return sum(len(o.generated_tokens) for o in out.values())


def vllm_run(model_dir: Path, prompts: list[str], new: int) -> int:
    from vllm import LLM, SamplingParams

    llm = LLM(model=str(model_dir), dtype="bfloat16", gpu_memory_utilization=0.3, enforce_eager=False)
    params = SamplingParams(max_tokens=new, min_tokens=new, ignore_eos=True, temperature=1.0, seed=0)
    outs = llm.generate(prompts, params, use_tqdm=False)
    return sum(len(o.outputs[0].token_ids) for o in outs)


def methods(a: dict, smoke: bool) -> dict:
    """name → (description, function(model, tok, prompts, new) → tokens)."""
    found = {  # in order of interest: a method past the time budget is recorded as not run
        "generate_b16": ("plain generate, batch 16 (GRPO default)", lambda m, t, p, n: plain(m, t, p, n, 16)),
        "generate_b128": ("plain generate, batch 128", lambda m, t, p, n: plain(m, t, p, n, 128)),
        "generate_b64": ("plain generate, batch 64 (ark-trainer on a GPU)", lambda m, t, p, n: plain(m, t, p, n, 64)),
    }  # fmt: skip
    found["autocast_fp32_b16"] = (
        "plain generate, batch 16, fp32 weights + bf16 autocast (the default's rollouts)",
        lambda m, t, p, n: autocast_fp32(a["model"], t, p, n, 16),
    )
    if smoke:
        return found
    import importlib.util

    found["cb_tuned"] = (
        "continuous batching, CUDA graphs + compile",
        lambda m, t, p, n: continuous(m, t, p, n, True),
    )
    found["cb_default"] = (
        "continuous batching, default config",
        lambda m, t, p, n: continuous(m, t, p, n, False),
    )
    found["static_compile_b128"] = (
        "generate, static KV cache + torch.compile, batch 128",
        lambda m, t, p, n: plain(m, t, p, n, 128, static=True),
    )
    if importlib.util.find_spec("vllm") is not None:
        found["vllm"] = ("vLLM (bf16, 30% of GPU memory)", lambda m, t, p, n: vllm_run(a["model"], p, n))
    return found


def measure(a: dict, smoke: bool, n_prompts: int, new: int, budget_s: float) -> tuple[list[dict], list[dict]]:
    import torch
    from transformers import AutoModelForCausalLM

    from ark_trainer.core.models.loading import load_tokenizer

    device = "cpu" if smoke else "cuda:0"
    dtype = torch.float32 if smoke else torch.bfloat16
    model = AutoModelForCausalLM.from_pretrained(str(a["model"]), dtype=dtype).to(device).eval()
    tok = load_tokenizer(a["model"])
    prompts = _prompts(a, n_prompts)
    results, errors = [], []
    started = time.time()
    for name, (what, fn) in methods(a, smoke).items():
        if time.time() - started > budget_s:  # keep scripts/gpu_check.sh within its time
            errors.append({"method": name, "error": f"not run: the {budget_s:.0f}s budget was spent"})
            continue
        try:
            torch.manual_seed(0)
            t0 = time.time()
            fn(model, tok, prompts, new)  # warm-up: compilation, CUDA graphs, allocator
            _sync()
            warm = time.time() - t0
            t0 = time.time()
            tokens = fn(model, tok, prompts, new)
            _sync()
            seconds = time.time() - t0
            results.append({"method": name, "what": what, "tokens": tokens, "seconds": seconds,
                            "tokens_per_second": tokens / seconds, "warmup_s": warm})  # fmt: skip
            print(
                f"{name}: {tokens / seconds:.0f} tokens/s ({tokens} in {seconds:.1f}s; warm-up {warm:.1f}s)"
            )
        except Exception as exc:  # recorded, never hidden
            errors.append({"method": name, "error": f"{type(exc).__name__}: {exc}"[:500]})
            traceback.print_exc()
        finally:
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return results, errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="CPU, tiny model, plain generate: the script works")
    ap.add_argument("--out", default=None, help="results folder (default: bench/results)")
    ap.add_argument("--budget_s", type=float, default=240, help="start no method after this many seconds")
    s = ap.parse_args()
    import torch

    out_dir = Path(s.out) if s.out else None
    if not torch.cuda.is_available() and not s.smoke:
        md = ["# Generation speed on a GPU", f"**{NOT_MEASURED}.** Run `python bench/gpu_generation.py` on a "
              "CUDA machine (or `bash scripts/gpu_check.sh`); it replaces this file with tokens/s per method."]  # fmt: skip
        write_results(
            "gpu_generation", md, {"gpu": False, "measured": False}, False, out_dir, label=NOT_MEASURED
        )
        return 0
    hidden, layers, n_prompts, new = (64, 2, 8, 8) if s.smoke else (1024, 24, 128, 128)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ark-gpu-gen-") as tmp:
        a = make_assets(Path(tmp), n_train=64, hidden=hidden, layers=layers, vocab=2000)
        results, errors = measure(a, s.smoke, n_prompts, new, s.budget_s)
    base = next((r["tokens_per_second"] for r in results if r["method"] == "generate_b16"), None)
    md = [
        "# Generation speed on a GPU",
        f"Model: random Qwen2 hidden {hidden} × {layers} layers ({a['params'] / 1e6:.0f} M parameters), "
        f"{'fp32 on CPU' if s.smoke else 'bf16'}; {n_prompts} demo QC prompts × {new} new tokens, sampling "
        f"(temperature 1, EOS ignored). One warm-up pass per method, then one timed pass. "
        f"Total wall time {time.time() - started:.0f}s.",
        "",
        "| method | completion tokens/s | vs batch 16 | timed pass | warm-up pass |",
        "| --- | --- | --- | --- | --- |",
        *[
            f"| {r['what']} | {r['tokens_per_second']:.0f} | "
            f"{r['tokens_per_second'] / base if base else float('nan'):.1f}× | {r['seconds']:.1f}s | {r['warmup_s']:.1f}s |"
            for r in results
        ],
        "",
        *[f"- {e['method']} failed: `{e['error']}`" for e in errors],
    ]
    data = {"gpu": torch.cuda.is_available(), "measured": bool(results), "results": results, "errors": errors}
    write_results("gpu_generation", md, data, s.smoke, out_dir)
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
