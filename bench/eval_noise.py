"""How far the held-out figure moves when a model's weights barely move: GRPO's change against noise.

A short GRPO stage on a real model changes each weight by about its learning rate a step (Adam), e.g.
~1e-6. This measures, for a model and the GRPO model trained from it, greedy task accuracy on a held-out
set (what ``train`` evaluates and ships by):

- the model as it is;
- the model with Gaussian noise of ``--sigma`` added to every weight, ``--noise_seeds`` times (a change
  of the same size as the GRPO update, in no learnt direction);
- the GRPO model;

each in bf16 weights (what ``train`` evaluates in on a CPU with native bf16, and serves in) and in fp32.
Where noise of the update's size moves the figure as far as GRPO did, the GRPO stage's held-out move is
not evidence of learning (or of harm).

    .venv/bin/python bench/eval_noise.py runs/smol80/rft/final runs/smol80/grpo/final \
        --data runs/smol80/data/eval.jsonl --sigma 1.2e-6 --out eval_noise_smollm2
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def accuracy(model, tok, rows: list[dict], reward, max_new: int) -> float:
    """Greedy task accuracy: the share of prompts whose verdict and type are right."""
    from ark_trainer.core.generation import generate
    from ark_trainer.rewards.scoring import score_completions

    prompts = [r["prompt"] for r in rows]
    greedy = generate(
        model, tok, prompts, num_samples=1, temperature=0.0, max_new_tokens=max_new, batch_size=32
    )
    scores = score_completions(reward, rows, greedy)
    return sum(row[0]["scores"]["qc_verdict"] >= 1 - 1e-9 for row in scores) / len(rows)


def measure(base: str, trained: str, rows: list[dict], sigma: float, seeds: int, max_new: int) -> list[dict]:
    """Each model is loaded in fp32 (the noise added there, as a GRPO step changes the fp32 weights), scored,
    then cast to bf16 (how ``train`` evaluates and serves it on a CPU with native bf16) and scored again."""
    import torch

    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy
    from ark_trainer.rewards.builder import build_reward

    reward = build_reward({}, rows, "cpu", guarded=False)
    rt = Runtime("cpu", False, False, [])
    results = []
    cases = [("start", base, 0)] + [
        (f"start + noise (sigma {sigma:g}, seed {s})", base, s) for s in range(1, seeds + 1)
    ]
    for what, path, seed in cases + [("trained", trained, 0)]:
        model, tok = load_policy(path, rt)
        if seed:
            gen = torch.Generator().manual_seed(seed)
            with torch.no_grad():
                for p in model.parameters():
                    p.add_(torch.randn(p.shape, generator=gen) * sigma)
        for precision in ("fp32", "bf16 weights"):
            if precision != "fp32":
                model = model.to(torch.bfloat16)
            started = time.perf_counter()
            row = {"precision": precision, "model": what, "task_accuracy": accuracy(model, tok, rows, reward, max_new),
                   "seconds": round(time.perf_counter() - started, 1)}  # fmt: skip
            print(json.dumps(row), flush=True)
            results.append(row)
        del model
    return results


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("start", help="the model a stage started from (e.g. OUT/rft/final)")
    parser.add_argument("trained", help="the model it ended with (e.g. OUT/grpo/final)")
    parser.add_argument("--data", required=True, type=Path, help="a QC .jsonl (the demo's eval.jsonl)")
    parser.add_argument("--sigma", type=float, default=1.2e-6, help="std of the noise added to every weight")
    parser.add_argument("--noise_seeds", type=int, default=2)
    parser.add_argument("--max_new_tokens", type=int, default=96)
    parser.add_argument("--out", default=None, help="also write bench/results/OUT.json and OUT.md")
    args = parser.parse_args()

    from ark_trainer.data.loader import load_jsonl

    rows = load_jsonl(args.data)
    results = measure(args.start, args.trained, rows, args.sigma, args.noise_seeds, args.max_new_tokens)
    if args.out:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_common import write_results  # type: ignore[import-not-found]

        lines = [f"# Held-out figure against weight noise ({args.out})",
                 f"start: `{args.start}`, trained: `{args.trained}`, {len(rows)} held-out prompts, greedy, "
                 f"{args.max_new_tokens} tokens", "",
                 "| precision | model | task accuracy | seconds |", "|---|---|---|---|"]  # fmt: skip
        lines += [f"| {r['precision']} | {r['model']} | {100 * r['task_accuracy']:.1f}% | {r['seconds']} |"
                  for r in results]  # fmt: skip
        write_results(args.out, lines, {"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                      quick=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
