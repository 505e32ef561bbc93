"""TRL's fused LM head on CPU: every position (TRL as it ships) against the labelled ones only (what every
``train`` stage does, ``ark_trainer/stages/fused_head.py``), in seconds per SFT step on a real checkpoint.

The same TRL ``SFTTrainer`` steps as an RFT stage runs them (completion-only loss, bf16 autocast over fp32
weights, batch 8) on the QC demo's prompts and gold answers, once as TRL ships and once with the patch, each in
a fresh process; the losses of the two runs must agree (the patch changes which rows go through the head, not
what they compute).

    python bench/fused_head_cpu.py --model_path /work/runs/smol-demo/base_model [--steps 5] [--batch_size 8]
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


def one(model_path: str, compact: bool, steps: int, batch: int) -> dict:
    """``steps`` SFT steps in this process; ``compact``: with ark-trainer's patch."""
    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from ark_trainer.stages.fused_head import score_labelled_positions_on_cpu

    if compact:
        assert score_labelled_positions_on_cpu()
    data = demo_sft_rows(batch * (steps + 1))
    times: list[float] = []

    with tempfile.TemporaryDirectory() as out:
        args = SFTConfig(
            output_dir=out, max_steps=steps, per_device_train_batch_size=batch, learning_rate=1e-5,
            logging_steps=1, save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True,
            completion_only_loss=True, max_length=None, gradient_checkpointing=False, bf16=True, seed=0,
            model_init_kwargs={"dtype": torch.float32},
        )  # fmt: skip
        trainer = SFTTrainer(
            model=model_path, args=args, train_dataset=Dataset.from_list(data), callbacks=[step_timer(times)]
        )
        trainer.train()
        losses = [round(h["loss"], 4) for h in trainer.state.log_history if "loss" in h]
    return {
        "compact": compact,
        **step_figures(times),
        "losses": losses,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batch_size", type=int, default=8)
    ap.add_argument("--one", choices=("trl", "compact"), default=None, help=argparse.SUPPRESS)  # child
    a = ap.parse_args()
    if a.one is not None:
        print(json.dumps(one(a.model_path, a.one == "compact", a.steps, a.batch_size)))
        return
    runs = []
    for setting in ("trl", "compact"):
        cmd = [sys.executable, __file__, "--model_path", a.model_path, "--steps", str(a.steps)]
        cmd += ["--batch_size", str(a.batch_size), "--one", setting]
        done = subprocess.run(cmd, env=src_env(), capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(runs[-1], flush=True)
    trl_run, compact = runs
    md = [
        "# TRL's fused LM head on CPU: every position against the labelled ones (SFT steps, as RFT runs them)",
        f"Model: `{a.model_path}`; batch {a.batch_size}, {a.steps} steps each (the first one, warm-up, left out "
        "of the mean), completion-only loss on the QC demo's gold answers, bf16 autocast over fp32 weights, each "
        "setting in a fresh process.",
        "",
        "| LM head scores | s/step | first step (s) | peak RSS (MiB) | losses |",
        "|---|---|---|---|---|",
        *(
            f"| {'labelled positions (ark-trainer)' if r['compact'] else 'every position (TRL 1.16 on CPU)'} | "
            f"{r['seconds_per_step']} | {r['first_step_s']} | {r['peak_rss_mib']} | {r['losses']} |"
            for r in runs
        ),
        "",
        f"TRL / ark-trainer: {trl_run['seconds_per_step'] / compact['seconds_per_step']:.2f}× the time a step; "
        f"losses {'identical' if trl_run['losses'] == compact['losses'] else 'DIFFER'}.",
    ]
    write_results("fused_head_cpu", md, {"runs": runs}, quick=a.steps < 3)


if __name__ == "__main__":
    main()
