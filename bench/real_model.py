"""Our RFT+GRPO against raw TRL on a real checkpoint (SmolLM2-135M-Instruct), plus generation and LoRA.

In one run, each part in fresh processes (peak RSS is per process, read by ``/usr/bin/time``):

1. **Training**: ``ark-trainer train --strategy RFT+GRPO`` (evaluation off) against
   ``bench/plain_trl_rft_grpo.py`` (TRL's ``SFTTrainer`` on the same selected answers, then ``GRPOTrainer``
   from its result, with the same reward functions, steps, batch and settings). Reported: seconds per
   step of each stage (transformers' ``train_runtime`` ÷ steps) and peak RSS, as ratios ours ÷ plain
   (target ≤ 1.05).
2. **Generation**: completion tokens per second of our batched ``generate`` (``generation.py``) for the
   evaluation (greedy) and RFT sampling (4 samples per prompt, temperature 1), against plain
   ``model.generate`` one prompt (and one sample) at a time.
3. **LoRA vs full fine-tuning**: ``bench/lora_cpu.py``'s SFT steps (rank 16 against all weights).

    python bench/real_model.py --model_path /work/models/smollm2-hf           # ~10 min on 2 quiet cores
    python bench/real_model.py --model_path /work/models/smollm2-hf --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import src_env, write_results  # noqa: E402

HERE = Path(__file__).resolve().parent


def timed(cmd: list[str]) -> tuple[float, int, str]:
    """Run ``cmd`` under ``/usr/bin/time``; (wall seconds, peak RSS in MiB, stdout)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as f:
        t0 = time.time()
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", f.name, *cmd], env=src_env(), capture_output=True, text=True
        )
        wall = time.time() - t0
        if done.returncode:
            raise SystemExit(f"failed: {' '.join(cmd)}\n{done.stderr[-3000:]}")
        rss_kb = int(Path(f.name).read_text().strip().splitlines()[-1])
    return wall, rss_kb // 1024, done.stdout


def runtime(folder: Path) -> float:
    """transformers' ``train_runtime`` from a stage's TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return float(acc.Scalars("train/train_runtime")[-1].value)


def training(a: argparse.Namespace, data: Path, work: Path) -> dict:
    common = [
        "--model_path", a.model_path, "--data_path", str(data), "--batch_size", str(a.batch_size),
        "--num_generations", "4", "--max_completion_length", str(a.max_completion_length),
        "--rft_learning_rate", "1e-4", "--grpo_learning_rate", "1e-6", "--rft_min_reward", "0.9", "--seed", "0",
    ]  # fmt: skip
    ours = work / "ours"
    cmd = [sys.executable, "-m", "ark_trainer", "train", "--strategy", "RFT+GRPO", "--output_dir", str(ours)]
    cmd += [*common, "--rft_steps", str(a.rft_steps), "--max_train_steps", str(a.rft_steps + a.grpo_steps)]
    cmd += ["--rft_num_samples", "0", "--eval_auto", "False", "--save_steps", "0", "--lora_r", "0"]
    cmd += ["--beta", "0.0", "--report_to", "tensorboard", "--logging_steps", "1"]
    wall_ours, rss_ours, _ = timed(cmd)
    plain = work / "plain"
    cmd = [sys.executable, str(HERE / "plain_trl_rft_grpo.py"), "--output_dir", str(plain), *common]
    cmd += ["--bf16"] if a.bf16 else []  # the same precision on both sides
    cmd += ["--rft_steps", str(a.rft_steps), "--grpo_steps", str(a.grpo_steps)]
    wall_plain, rss_plain, out = timed(cmd)
    plain_times = json.loads(out.strip().splitlines()[-1])
    logs = ours / "logs" / "tensorboard"
    result = {
        "ours": {
            "rft_s_per_step": runtime(logs / "rft") / a.rft_steps,
            "grpo_s_per_step": runtime(logs / "grpo") / a.grpo_steps,
            "peak_rss_mib": rss_ours,
            "wall_s": wall_ours,
        },
        "plain": {
            "rft_s_per_step": plain_times["rft_runtime"] / a.rft_steps,
            "grpo_s_per_step": plain_times["grpo_runtime"] / a.grpo_steps,
            "peak_rss_mib": rss_plain,
            "wall_s": wall_plain,
        },
    }
    for key in ("rft_s_per_step", "grpo_s_per_step", "peak_rss_mib"):
        result[f"ratio_{key}"] = result["ours"][key] / result["plain"][key]
    return result


def generation(a: argparse.Namespace, rows: list[dict]) -> dict:
    """Completion tokens/s: our batched generate against plain generate one prompt at a time."""
    import torch

    from ark_trainer.core.generation import generate
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.models.loading import load_policy
    from ark_trainer.core.models.prompts import render_prompt

    model, tok = load_policy(a.model_path, Runtime("cpu", False, a.bf16, []))  # the weights eval loads
    prompts = [[{"role": "user", "content": r["question"]}] for r in rows[: a.gen_prompts]]

    def count(texts: list[str]) -> int:
        return sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)

    out = {}
    for name, samples, temperature in (("eval", 1, 0.0), ("rft_sampling", 4, 1.0)):
        t0 = time.perf_counter()
        answers = generate(
            model, tok, prompts, num_samples=samples, temperature=temperature,
            max_new_tokens=a.max_completion_length, batch_size=max(1, 128 // samples) if samples > 1 else 32,
        )  # fmt: skip
        ours = count([t for group in answers for t in group]) / (time.perf_counter() - t0)
        t0, plain_texts = time.perf_counter(), []
        torch.manual_seed(0)
        for p in prompts:
            ids = tok(render_prompt(tok, p), return_tensors="pt", add_special_tokens=False)
            for _ in range(samples):
                kw = (
                    {"do_sample": True, "temperature": 1.0, "top_k": 0}
                    if temperature
                    else {"do_sample": False}
                )
                new = model.generate(
                    **ids, max_new_tokens=a.max_completion_length, pad_token_id=tok.pad_token_id, **kw
                )
                plain_texts.append(tok.decode(new[0, ids["input_ids"].shape[1] :], skip_special_tokens=True))
        plain = count(plain_texts) / (time.perf_counter() - t0)
        out[name] = {"ours_tokens_per_s": ours, "plain_batch1_tokens_per_s": plain, "speedup": ours / plain}
    return out


def lora(a: argparse.Namespace) -> dict:
    cmd = [
        sys.executable,
        str(HERE / "lora_cpu.py"),
        "--model_path",
        a.model_path,
        "--steps",
        str(a.lora_steps),
        *(["--bf16"] if a.bf16 else []),
    ]
    subprocess.run(cmd, env=src_env(), check=True, capture_output=True)
    return json.loads((HERE / "results" / "lora_cpu.json").read_text(encoding="utf-8"))["runs"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model_path", required=True)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    from ark_trainer.base.scale import native_cpu_bf16

    a.bf16 = native_cpu_bf16()  # what train's --mixed_precision auto picks for a real model on this CPU
    a.batch_size, a.max_completion_length = 8, 96
    a.rft_steps, a.grpo_steps, a.gen_prompts, a.lora_steps = (2, 1, 2, 2) if a.quick else (8, 3, 8, 4)
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.base.fileio import read_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        train, eval_ = write_demo_data(work / "data", n_train=400, n_eval=a.gen_prompts)
        t = training(a, train, work)
        g = generation(a, read_jsonl(eval_))
    runs = lora(a)
    md = [
        "# Our RFT+GRPO against raw TRL, generation and LoRA, on SmolLM2-135M-Instruct",
        f"Model `{a.model_path}`, {'bf16 autocast over fp32 weights' if a.bf16 else 'fp32'} on CPU (what "
        "`--mixed_precision auto` picks here, on both sides; generation with the weights evaluation loads), "
        f"batch {a.batch_size}, completions up to {a.max_completion_length} "
        f"tokens, RFT {a.rft_steps} steps then GRPO {a.grpo_steps} steps (4 generations), gradient "
        "checkpointing off on both sides; the demo's QC data (400 training dialogues).",
        "",
        "| | ours | raw TRL | ours ÷ TRL |",
        "|---|---|---|---|",
        *(
            f"| {label} | {t['ours'][k]:.2f} | {t['plain'][k]:.2f} | {t['ratio_' + k]:.3f} |"
            for label, k in (
                ("RFT s/step", "rft_s_per_step"),
                ("GRPO s/step", "grpo_s_per_step"),
                ("peak RSS (MiB)", "peak_rss_mib"),
            )
        ),  # fmt: skip
        "",
        "| generation | ours (tokens/s) | plain generate, batch 1 | speed-up |",
        "|---|---|---|---|",
        *(
            f"| {k} | {v['ours_tokens_per_s']:.1f} | {v['plain_batch1_tokens_per_s']:.1f} | {v['speedup']:.2f}× |"
            for k, v in g.items()
        ),
        "",
        "| LoRA vs full (SFT steps) | s/step | peak RSS (MiB) |",
        "|---|---|---|",
        *(
            f"| {'full' if r['lora_r'] == 0 else 'LoRA r=16'} | {r['seconds_per_step']} | {r['peak_rss_mib']} |"
            for r in runs
        ),
    ]
    write_results("real_model", md, {"training": t, "generation": g, "lora": runs}, quick=a.quick)


if __name__ == "__main__":
    main()
