"""How much a GRPO stage can still gain from a model: its sampled groups, measured the way GRPO sees them.

For each model folder given, samples ``--n`` answers per prompt at ``--temperature`` (the GRPO group) and
greedy-decodes one (what evaluation scores), then reports per data set:

- greedy task accuracy (the evaluation's figure) and sampled accuracy (pass@1 at the temperature);
- best-of-4 and best-of-N accuracy (pass@k: a prompt counts when any of its first k answers is right), the
  share of prompts a reward-maximising policy could get right by sharpening what it already samples;
- the share of groups whose N answers are all right, all wrong, or mixed (only mixed ones carry a
  learning signal for the verdict), and the share of groups with zero variance of the *total* reward
  (the ``frac_reward_zero_std`` TRL logs under the run's weights) and of the verdict score alone (what
  the GRPO stage is scored by for QC: ``--grpo_reward_weights``).

The model computes in the precision ``train`` picks for it on this machine (bf16 autocast for a real
model on a CPU with native bf16). ``--out NAME`` also writes ``bench/results/NAME.json`` and ``.md``.

    .venv/bin/python bench/grpo_headroom.py --data runs/demo/data/eval.jsonl runs/demo/rft/final runs/demo/model
    .venv/bin/python bench/grpo_headroom.py --data runs/qcdata/eval.jsonl runs/rft80/model \
        --n 8 --max_new_tokens 96 --out grpo_headroom_smollm2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def group_stats(verdicts: list[list[float]], totals: list[list[float]], greedy: list[float]) -> dict:
    """Shares over prompts from each prompt's N sampled verdict scores, total rewards and greedy verdict."""
    n = len(verdicts)
    right = [[v >= 1 - 1e-9 for v in row] for row in verdicts]
    return {
        "n_prompts": n,
        "greedy_accuracy": sum(g >= 1 - 1e-9 for g in greedy) / n,
        "sampled_accuracy": statistics.fmean(sum(r) / len(r) for r in right),
        "best_of_4_accuracy": sum(any(r[:4]) for r in right) / n,
        "best_of_n_accuracy": sum(any(r) for r in right) / n,
        "zero_std_verdict": sum(max(v) - min(v) <= 1e-6 for v in verdicts) / n,
        "zero_std_verdict_of_4": sum(max(v[:4]) - min(v[:4]) <= 1e-6 for v in verdicts) / n,
        "all_right": sum(all(r) for r in right) / n,
        "all_wrong": sum(not any(r) for r in right) / n,
        "mixed": sum(any(r) and not all(r) for r in right) / n,
        "zero_std_total": sum(max(t) - min(t) <= 1e-6 for t in totals) / n,
        "mean_total": statistics.fmean(x for t in totals for x in t),
    }


def measure(model_path: str, rows: list[dict], n: int, temperature: float, max_new: int, seed: int) -> dict:
    from ark_trainer.core.auto_defaults import cpu_precision, model_facts
    from ark_trainer.core.config import TrainConfig
    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.scoring import score_completions

    flags = TrainConfig()  # the default precision flags: --mixed_precision auto
    chosen = cpu_precision(flags.mixed_precision, flags.fp16, flags.bf16, model_facts(model_path), "cpu")
    rt = Runtime("cpu", False, chosen is not None and chosen.value == "bf16", [])
    reward = build_reward({}, rows, "cpu", guarded=False)
    model, tok = load_policy(model_path, rt)
    prompts = [r["prompt"] for r in rows]
    sampled = generate(model, tok, prompts, num_samples=n, temperature=temperature, max_new_tokens=max_new,
                       batch_size=max(1, 128 // n), seed=seed)  # fmt: skip
    greedy = generate(
        model, tok, prompts, num_samples=1, temperature=0.0, max_new_tokens=max_new, batch_size=32
    )
    s_scores = score_completions(reward, rows, sampled)
    g_scores = score_completions(reward, rows, greedy)
    return group_stats(
        [[a["scores"]["qc_verdict"] for a in row] for row in s_scores],
        [[a["total"] for a in row] for row in s_scores],
        [row[0]["scores"]["qc_verdict"] for row in g_scores],
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("models", nargs="+", help="model folders")
    parser.add_argument("--data", required=True, type=Path, help="a QC .jsonl (the demo's eval.jsonl)")
    parser.add_argument("--n", type=int, default=8, help="answers per prompt (GRPO's --num_generations)")
    parser.add_argument("--temperature", type=float, nargs="+", default=[1.0])
    parser.add_argument("--max_new_tokens", type=int, default=40)
    parser.add_argument("--limit", type=int, default=None, help="first N rows only")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="also write bench/results/OUT.json and OUT.md")
    args = parser.parse_args()
    import time

    from ark_trainer.data.loader import load_jsonl

    rows = load_jsonl(args.data)[: args.limit]
    results = []
    for model in args.models:
        for t in args.temperature:
            start = time.perf_counter()
            stats = measure(model, rows, args.n, t, args.max_new_tokens, args.seed)
            stats = {"model": model, "temperature": t, "n": args.n, **stats}
            stats["seconds"] = round(time.perf_counter() - start, 1)
            print(json.dumps(stats), flush=True)
            results.append(stats)
    if args.out:
        write_results(args.out, results, vars(args))
    return 0


def write_results(name: str, results: list[dict], args: dict) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_common import write_results as write  # type: ignore[import-not-found]

    cols = ("greedy_accuracy", "sampled_accuracy", "best_of_4_accuracy", "best_of_n_accuracy", "mixed",
            "zero_std_verdict_of_4", "zero_std_verdict", "zero_std_total")  # fmt: skip
    lines = [f"# GRPO headroom ({name})", "| model | T | N | " + " | ".join(cols) + " | seconds |",
             "|---" * (len(cols) + 4) + "|"]  # fmt: skip
    for r in results:
        cells = " | ".join(f"{100 * r[c]:.1f}%" for c in cols)
        lines.append(f"| {r['model']} | {r['temperature']} | {r['n']} | {cells} | {r['seconds']} |")
    write(name, lines, {"args": {k: str(v) for k, v in args.items()}, "results": results}, quick=False)


if __name__ == "__main__":
    sys.exit(main())
