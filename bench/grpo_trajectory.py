"""Held-out task accuracy along a GRPO stage, in fp32: the starting model and each saved checkpoint.

``train`` evaluates in bf16 weights on a CPU with native bf16, where rounding alone moves a 100-prompt
figure by several points (``bench/results/eval_noise_smollm2.md``). This scores each model given, greedy,
in fp32, on a QC held-out set, and compares each with the first (the model the stage started from) prompt
by prompt: right → wrong and wrong → right counts and an exact two-sided sign test (McNemar) on them, so a
move is told from noise.

    .venv/bin/python bench/grpo_trajectory.py runs/rft/rft/final runs/grpo/grpo/checkpoint-10 ... \
        --data runs/smol80/data/eval.jsonl --out grpo_trajectory_smollm2
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path


def verdicts(path: str, rows: list[dict], reward, max_new: int) -> list[bool]:
    """Whether each held-out prompt's greedy answer has the right verdict and type, the model in fp32."""
    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy
    from ark_trainer.rewards.scoring import score_completions

    model, tok = load_policy(path, Runtime("cpu", False, False, []))
    greedy = generate(model, tok, [r["prompt"] for r in rows], num_samples=1, temperature=0.0,
                      max_new_tokens=max_new, batch_size=32)  # fmt: skip
    scores = score_completions(reward, rows, greedy)
    return [row[0]["scores"]["qc_verdict"] >= 1 - 1e-9 for row in scores]


def sign_test_p(gained: int, lost: int) -> float:
    """Exact two-sided sign test: the chance of a split at least this uneven of ``gained + lost`` changed
    prompts if each change were a coin toss (McNemar's exact test)."""
    n, k = gained + lost, min(gained, lost)
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="+", help="the starting model, then the checkpoints in order")
    parser.add_argument("--data", required=True, type=Path, help="a QC .jsonl (the demo's eval.jsonl)")
    parser.add_argument("--max_new_tokens", type=int, default=96)
    parser.add_argument("--out", default=None, help="also write bench/results/OUT.json and OUT.md")
    args = parser.parse_args()

    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward

    rows = load_jsonl(args.data)
    reward = build_reward({}, rows, "cpu", guarded=False)  # the QC graders, built once for every model
    results, first = [], None
    for path in args.models:
        started = time.perf_counter()
        right = verdicts(path, rows, reward, args.max_new_tokens)
        first = first or right
        gained = sum(b and not a for a, b in zip(first, right, strict=True))
        lost = sum(a and not b for a, b in zip(first, right, strict=True))
        by_label: dict[str, list[int]] = {}
        for row, ok in zip(rows, right, strict=True):
            by_label.setdefault(str(row.get("label")), [0, 0])[ok] += 1
        results.append({"model": path, "task_accuracy": sum(right) / len(rows), "gained": gained, "lost": lost,
                        "p": sign_test_p(gained, lost), "right_by_label": {k: v[1] for k, v in by_label.items()},
                        "seconds": round(time.perf_counter() - started, 1)})  # fmt: skip
        print(json.dumps(results[-1], ensure_ascii=False), flush=True)
    if args.out:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from bench_common import write_results  # type: ignore[import-not-found]

        labels = sorted(results[0]["right_by_label"])
        counts = {k: sum(str(r.get("label")) == k for r in rows) for k in labels}
        lines = [f"# Held-out task accuracy along a GRPO stage, fp32 ({args.out})", "",
                 f"{len(rows)} held-out prompts, greedy, {args.max_new_tokens} tokens, weights in fp32. "
                 "gained / lost: prompts right / wrong that the first model got wrong / right; p: exact sign test.",
                 "", "| model | task accuracy | gained | lost | p | " + " | ".join(f"{k} (/{counts[k]})" for k in labels)
                 + " | seconds |", "|---" * (6 + len(labels)) + "|"]  # fmt: skip
        lines += [f"| `{r['model']}` | {100 * r['task_accuracy']:.0f}% | {r['gained']} | {r['lost']} | {r['p']:.2f} | "
                  + " | ".join(str(r["right_by_label"].get(k, 0)) for k in labels) + f" | {r['seconds']} |"
                  for r in results]  # fmt: skip
        write_results(args.out, lines, {"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                      quick=False)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
