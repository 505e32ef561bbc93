"""bf16 against fp32 on CPU, on a real checkpoint: what ``--mixed_precision auto`` chooses on a CPU with native bf16.

Measures, each setting in a fresh process (peak RSS is per process):

1. **Training**: TRL ``SFTTrainer`` steps on the QC demo's gold answers (as RFT trains; ``lora_cpu.one``), fp32 against bf16
   autocast over fp32 weights (what ``train`` runs under ``bf16``), gradient checkpointing off as ``train``
   runs them: seconds per step (the first, warm-up, left out), peak RSS and the loss after the same steps.
2. **Generation**: greedy answers to the demo's held-out prompts with our batched ``generate``
   (``generation.py``, as the evaluation decodes), fp32 weights against bf16 weights (what the evaluation
   loads under bf16): completion tokens per second, and how many greedy answers are the same.

    python bench/cpu_precision.py --model_path /work/models/smollm2-hf             # ~6 min on 2 quiet cores
    python bench/cpu_precision.py --model_path /work/models/smollm2-hf --quick     # a smoke run

Whether the CPU computes bf16 natively (``scale.native_cpu_bf16``) is printed with the results: where it
does not, bf16 is emulated and this benchmark shows it slower.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import src_env, write_results  # noqa: E402
from lora_cpu import one as train_steps  # noqa: E402  (SFT steps in this process: s/step, RSS, losses)


def greedy(model_path: str, bf16: bool, prompts: int, new_tokens: int) -> dict:
    """Greedy answers to ``prompts`` held-out prompts; completion tokens per second and the answers."""
    from ark_trainer.app.demo.data import generate_rows
    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy

    model, tok = load_policy(model_path, Runtime("cpu", False, bf16, []))
    rows = generate_rows(prompts, 1, "eval", with_candidates=False)
    chats = [[{"role": "user", "content": r["question"]}] for r in rows]
    t0 = time.perf_counter()
    answers = [
        g[0] for g in generate(model, tok, chats, num_samples=1, temperature=0.0, max_new_tokens=new_tokens)
    ]
    seconds = time.perf_counter() - t0
    tokens = sum(len(tok(a, add_special_tokens=False)["input_ids"]) for a in answers)
    return {
        "bf16": bf16,
        "tokens_per_s": round(tokens / seconds, 2),
        "seconds": round(seconds, 1),
        "answers": answers,
    }


def child(cmd: list[str]) -> dict:
    done = subprocess.run([sys.executable, __file__, *cmd], env=src_env(), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--child", choices=("train", "greedy"), help=argparse.SUPPRESS)
    ap.add_argument("--bf16", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    steps, batch, prompts, new_tokens = (2, 2, 4, 16) if a.quick else (6, 8, 32, 96)
    if a.child == "train":
        print(json.dumps(train_steps(a.model_path, 0, steps, batch, bf16=a.bf16, lr=1e-4)))
        return
    if a.child == "greedy":
        print(json.dumps(greedy(a.model_path, a.bf16, prompts, new_tokens)))
        return
    from ark_trainer.base.scale import native_cpu_bf16

    train = {}
    gen = {}
    for bf16 in (False, True):
        flag = ["--bf16"] if bf16 else []
        train[bf16] = child(
            ["--model_path", a.model_path, *(["--quick"] if a.quick else []), "--child", "train", *flag]
        )
        print("train", train[bf16], flush=True)
        gen[bf16] = child(
            ["--model_path", a.model_path, *(["--quick"] if a.quick else []), "--child", "greedy", *flag]
        )
        print("greedy", {k: v for k, v in gen[bf16].items() if k != "answers"}, flush=True)
    same = sum(x == y for x, y in zip(gen[False]["answers"], gen[True]["answers"], strict=True))
    fp32, bf = train[False], train[True]
    md = [
        "# bf16 against fp32 on CPU (SmolLM2-class model): training steps and greedy generation",
        f"Model `{a.model_path}`; this CPU computes bf16 natively: **{native_cpu_bf16()}**. Training: TRL "
        f"`SFTTrainer`, {steps} steps at batch {batch} on the QC demo's gold answers (the first step left out "
        f"of the mean), learning rate 1e-4, fp32 weights in both (bf16: autocast). Generation: greedy, "
        f"{prompts} held-out QC prompts, up to {new_tokens} new tokens, our batched `generate` (fp32 weights "
        "against bf16 weights, as the evaluation loads them under each precision).",
        "",
        "| | fp32 | bf16 | bf16 ÷ fp32 |",
        "|---|---|---|---|",
        f"| SFT s/step | {fp32['seconds_per_step']} | {bf['seconds_per_step']} | "
        f"{bf['seconds_per_step'] / fp32['seconds_per_step']:.2f} |",
        f"| peak RSS, training (MiB) | {fp32['peak_rss_mib']} | {bf['peak_rss_mib']} | "
        f"{bf['peak_rss_mib'] / fp32['peak_rss_mib']:.2f} |",
        f"| loss after {steps} steps | {fp32['losses'][-1]} | {bf['losses'][-1]} | |",
        f"| greedy completion tokens/s | {gen[False]['tokens_per_s']} | {gen[True]['tokens_per_s']} | "
        f"{gen[True]['tokens_per_s'] / gen[False]['tokens_per_s']:.2f} |",
        "",
        f"Greedy answers identical in both precisions: {same} of {prompts}. Losses per step: fp32 "
        f"{fp32['losses']}, bf16 {bf['losses']}.",
    ]
    data = {"native_cpu_bf16": native_cpu_bf16(), "train": [fp32, bf], "greedy_same": same, "greedy": [
        {k: v for k, v in gen[b].items() if k != "answers"} for b in (False, True)]}  # fmt: skip
    write_results("cpu_precision", md, data, quick=a.quick)


if __name__ == "__main__":
    main()
