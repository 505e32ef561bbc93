"""LoRA against full fine-tuning on CPU: seconds per SFT step and peak memory, on a real checkpoint.

Measures what the automatic ``--lora_r`` (``ark_trainer/core/auto_defaults.py``) is weighed against: a few TRL ``SFTTrainer``
steps on the QC demo's gold answers, full fine-tuning and then LoRA (rank 16, all linear layers), each in a
fresh process (peak RSS is per process), gradient checkpointing off as ``train`` runs them, plus the token lengths of the answers in this tokenizer.

    python bench/lora_cpu.py --model_path /work/models/smollm2-hf [--steps 4] [--batch_size 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import demo_sft_rows, src_env, step_figures, step_timer, write_results  # noqa: E402


def one(model_path: str, lora_r: int, steps: int, batch: int, bf16: bool = False, lr: float = 1e-5) -> dict:
    """Train ``steps`` SFT steps in this process (``bf16``: autocast over fp32 weights, as ``train`` runs it
    under bf16); returns seconds per step, peak RSS and the losses."""
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from trl import SFTConfig, SFTTrainer

    torch.set_num_threads(max(1, torch.get_num_threads()))
    data = demo_sft_rows(batch * (steps + 1))
    times: list[float] = []

    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=batch, learning_rate=lr,
            logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
            completion_only_loss=True, max_length=None, gradient_checkpointing=False, bf16=bf16, seed=0,
            model_init_kwargs={"dtype": torch.float32},  # fp32 master weights, as train loads them
        )  # fmt: skip
        peft = LoraConfig(r=lora_r, lora_alpha=2 * lora_r, target_modules="all-linear") if lora_r else None
        trainer = SFTTrainer(
            model=model_path, args=args, train_dataset=Dataset.from_list(data), peft_config=peft,
            callbacks=[step_timer(times)],
        )  # fmt: skip
        trainer.train()
        losses = [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h]
        trainable = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        total = sum(p.numel() for p in trainer.model.parameters())
    return {
        "lora_r": lora_r,
        **step_figures(times),
        "trainable_params": trainable,
        "params": total,
        "bf16": bf16,
        "losses": losses,
    }


def answer_lengths(model_path: str) -> dict:
    from transformers import AutoTokenizer

    from ark_trainer.app.demo.data import generate_rows, gold_answer

    tok = AutoTokenizer.from_pretrained(model_path)
    rows = generate_rows(200, 0, "train", with_candidates=True)
    gold = sorted(len(tok(gold_answer(r))["input_ids"]) for r in rows)
    cands = sorted(len(tok(c)["input_ids"]) for r in rows for c in r.get("candidates", []))
    prompts = sorted(len(tok(r["question"])["input_ids"]) for r in rows)

    def q(v: list[int], p: float) -> int:
        return v[min(len(v) - 1, int(p * len(v)))]

    return {
        name: {"p50": q(v, 0.5), "p95": q(v, 0.95), "max": v[-1]}
        for name, v in (("gold_answer", gold), ("candidates", cands), ("prompt", prompts))
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--lora_r", type=int, default=16)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast over fp32 weights in both settings")
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)  # child: one setting
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.model_path, a.one, a.steps, a.batch_size, bf16=a.bf16)))
        return
    runs = []
    for r in (0, a.lora_r):
        cmd = [sys.executable, __file__, "--model_path", a.model_path, "--steps", str(a.steps)]
        cmd += ["--batch_size", str(a.batch_size), "--one", str(r), *(["--bf16"] if a.bf16 else [])]
        done = subprocess.run(cmd, env=src_env(), capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    lengths = answer_lengths(a.model_path)
    full, lora = runs
    md = [
        "# LoRA against full fine-tuning on CPU (SFT steps on the QC demo's answers)",
        f"Model: `{a.model_path}` ({full['params'] / 1e6:.1f}M parameters); batch {a.batch_size}, "
        f"{a.steps} steps each (the first one, warm-up, left out of the mean); "
        f"{'bf16 autocast over fp32 weights' if a.bf16 else 'fp32'}.",
        "",
        "| training | trainable params | s/step | peak RSS (MiB) |",
        "|---|---|---|---|",
        *(
            f"| {'full' if r['lora_r'] == 0 else 'LoRA r=' + str(r['lora_r'])} | {r['trainable_params']:,} | "
            f"{r['seconds_per_step']} | {r['peak_rss_mib']} |"
            for r in runs
        ),
        "",
        f"LoRA / full: time {lora['seconds_per_step'] / full['seconds_per_step']:.2f}×, "
        f"memory {lora['peak_rss_mib'] / full['peak_rss_mib']:.2f}×.",
        "",
        "Token lengths in this tokenizer (200 demo training rows): "
        + "; ".join(f"{k}: p50 {v['p50']}, p95 {v['p95']}, max {v['max']}" for k, v in lengths.items()),
    ]
    write_results("lora_cpu", md, {"runs": runs, "lengths": lengths}, quick=a.steps < 3)


if __name__ == "__main__":
    main()
