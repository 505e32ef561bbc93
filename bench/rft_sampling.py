"""RFT sampling speed: ``ark_trainer.core.generation.generate`` vs a naive per-prompt, per-sample loop.

Both draw ``--samples`` completions of ``--max_new_tokens`` tokens for each of ``--prompts`` demo QC
prompts from the same random-initialised Qwen2, with the KV cache on in both (the naive loop is only naive
about batching). Ours: one ``generate`` call per batch of prompts (``num_return_sequences`` = samples,
prompts longest-first, ``GEN_SEQUENCES`` sequences per call, as RFT uses it). Naive: one ``generate`` call
per prompt and sample. Tokens counted: the completion tokens actually produced (up to EOS), the same way
for both. Repeats alternate the order.

    python bench/rft_sampling.py            # 64 prompts × 4 samples × 48 tokens, hidden 256 × 4: ~15 min on 2 busy cores
    python bench/rft_sampling.py --quick    # 8 prompts × 4 samples × 16 tokens, tiny model: smoke run (~1 min)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import make_assets, median, write_results  # noqa: E402


def count_tokens(tok, samples: list[list[str]]) -> int:
    return sum(len(tok(s, add_special_tokens=False)["input_ids"]) for row in samples for s in row)


def naive(model, tok, prompts: list, n: int, max_new_tokens: int) -> list[list[str]]:
    import torch

    from ark_trainer.core.models.prompts import render_prompt

    out = []
    for p in prompts:
        batch = tok(render_prompt(tok, p), return_tensors="pt", add_special_tokens=False)
        row = []
        for _ in range(n):
            with torch.no_grad():
                ids = model.generate(
                    **batch,
                    max_new_tokens=max_new_tokens,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    pad_token_id=tok.pad_token_id,
                    use_cache=True,
                )
            row.append(tok.decode(ids[0, batch["input_ids"].shape[1] :], skip_special_tokens=True))
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny smoke run: proves the script works")
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--max_new_tokens", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--out", default=None, help="results folder (default: bench/results)")
    s = ap.parse_args()
    n_prompts = s.prompts or (8 if s.quick else 64)
    max_new = s.max_new_tokens or (16 if s.quick else 48)
    repeats = s.repeats or (1 if s.quick else 3)
    hidden, layers = (64, 2) if s.quick else (256, 4)

    import torch
    from transformers import AutoModelForCausalLM

    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.core.generation import GEN_SEQUENCES, generate
    from ark_trainer.core.models.loading import load_tokenizer

    device = "cuda:0" if torch.cuda.is_available() else "cpu"
    runs = []
    with tempfile.TemporaryDirectory(prefix="ark-sampling-") as tmp:
        a = make_assets(Path(tmp), n_train=n_prompts, hidden=hidden, layers=layers)
        model = AutoModelForCausalLM.from_pretrained(str(a["model"])).to(device).eval()
        tok = load_tokenizer(a["model"])
        prompts = [r["prompt"] for r in _loaded(read_jsonl(a["train"]))][:n_prompts]
        for r in range(repeats):
            for side in ("ours", "naive") if r % 2 == 0 else ("naive", "ours"):
                t0 = time.perf_counter()
                if side == "ours":
                    samples = generate(
                        model,
                        tok,
                        prompts,
                        num_samples=s.samples,
                        temperature=1.0,
                        max_new_tokens=max_new,
                        batch_size=max(1, GEN_SEQUENCES // s.samples),
                        seed=r,
                    )
                else:
                    tok.padding_side = "left"
                    samples = naive(model, tok, prompts, s.samples, max_new)
                seconds = time.perf_counter() - t0
                tokens = count_tokens(tok, samples)
                runs.append({"repeat": r, "side": side, "seconds": seconds, "tokens": tokens})
                print(
                    f"repeat {r} {side}: {tokens} tokens in {seconds:.2f}s = {tokens / seconds:.1f} tok/s",
                    flush=True,
                )
    tps = {
        side: median([x["tokens"] / x["seconds"] for x in runs if x["side"] == side])
        for side in ("ours", "naive")
    }
    speedup = tps["ours"] / tps["naive"]
    md = [
        "# RFT sampling: batched generate vs per-prompt, per-sample loop",
        f"Settings: {n_prompts} demo QC prompts × {s.samples} samples × up to {max_new} new tokens, temperature 1, "
        f"KV cache on both sides; random Qwen2 hidden {hidden} × {layers} layers ({a['params'] / 1e6:.2f} M "
        f"parameters) on {device}; {repeats} repeat(s), alternating order.",
        "",
        "| sampler | tokens/s (median) |",
        "| --- | --- |",
        f"| ours (`generation.generate`: N samples per call, prompts batched) | {tps['ours']:.1f} |",
        f"| naive (one `generate` per prompt and sample) | {tps['naive']:.1f} |",
        "",
        f"**Speed-up: {speedup:.2f}×**",
        "",
        "| repeat | side | tokens | seconds |",
        "| --- | --- | --- | --- |",
        *[f"| {x['repeat']} | {x['side']} | {x['tokens']} | {x['seconds']:.2f} |" for x in runs],
    ]
    data = {
        "settings": {
            "prompts": n_prompts,
            "samples": s.samples,
            "max_new_tokens": max_new,
            "hidden": hidden,
            "layers": layers,
            "params": a["params"],
            "device": device,
            "repeats": repeats,
        },
        "tokens_per_second": tps,
        "speedup": speedup,
        "runs": runs,
    }
    write_results("rft_sampling", md, data, s.quick, Path(s.out) if s.out else None)
    return 0


def _loaded(rows: list[dict]) -> list[dict]:
    """Rows with their prompt as a chat list, the way ``ark_trainer.data.loader`` gives them to RFT."""
    return [{**r, "prompt": [{"role": "user", "content": r["question"]}]} for r in rows]


if __name__ == "__main__":
    sys.exit(main())
