"""A GPU run: bf16 GRPO on a larger random-initialised model, vLLM rollouts when vllm is installed.

One prepared script, under 10 minutes on one modern GPU: builds a ~0.33 B-parameter Qwen2 (hidden 1024 ×
24 layers, random weights, the demo tokenizer) and the demo QC data, then runs
``ark-trainer-inner train --strategy GRPO --bf16 True [--use_vllm True --vllm_mode colocate]`` (bf16 autocast
over fp32 master weights, the default since the H200 run of November 2026) in this
process and records step time (TRL's ``step_time``), completion tokens per second (TRL's ``num_tokens``
over the timed steps) and peak GPU memory (``torch.cuda.max_memory_allocated``, plus the device's used
memory as the driver reports it, which includes vLLM's reserved KV cache).

Where no GPU is present it writes a results file saying so, with no numbers. If the vLLM run fails it
records the error and measures the transformers-generation run instead (never invented figures).

    python bench/gpu_grpo.py            # 30 steps, batch 16 × 8 generations × 256 tokens: sized for < 10 min (not yet run on a GPU)
    python bench/gpu_grpo.py --quick    # 5 steps, 64 tokens
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import make_assets, median, write_results  # noqa: E402


def _single_process_env() -> None:
    """TRL's colocated vLLM expects a (1-process) torch.distributed environment."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1"}.items():
        os.environ.setdefault(k, v)
    os.environ.setdefault("MASTER_PORT", str(port))


def run_once(a: dict, out: Path, steps: int, max_new: int, use_vllm: bool) -> dict:
    import torch

    from ark_trainer.cli import main

    torch.cuda.reset_peak_memory_stats()
    argv = [
        "train", "--strategy", "GRPO", "--model_path", str(a["model"]), "--data_path", str(a["train"]),
        "--output_dir", str(out), "--max_train_steps", str(steps), "--batch_size", "16", "--num_generations", "8",
        "--max_completion_length", str(max_new), "--bf16", "True", "--eval_auto", "False", "--save_steps", "0",
        "--logging_steps", "1", "--grpo_learning_rate", "1e-6", "--device", "cuda:0",
    ]  # fmt: skip
    if use_vllm:
        _single_process_env()
        argv += ["--use_vllm", "True", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3"]
    t0 = time.time()
    rc = main(argv)
    wall = time.time() - t0
    if rc != 0:
        raise RuntimeError(f"ark-trainer exited with {rc}")
    free, total = torch.cuda.mem_get_info()
    events = [json.loads(x) for x in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    metrics = [e for e in events if e["event"] == "metrics" and e.get("stage") == "grpo" and "step_time" in e]
    timed = metrics[1:] if len(metrics) > 2 else metrics  # the first step pays warm-up (compile, vLLM graphs)
    step_times = [m["step_time"] for m in timed]
    tokens = [m["num_tokens"] for m in metrics]
    per_step_tokens = (tokens[-1] - tokens[0]) / max(1, len(tokens) - 1) if len(tokens) > 1 else None
    step = median(step_times)
    return {
        "use_vllm": use_vllm,
        "steps": steps,
        "wall_s": wall,
        "step_time_median_s": step,
        "step_times_s": step_times,
        "tokens_per_step": per_step_tokens,
        "tokens_per_second": per_step_tokens / step if per_step_tokens and step else None,
        "peak_gpu_allocated_mib": torch.cuda.max_memory_allocated() / 1024**2,
        "gpu_used_at_end_mib": (total - free) / 1024**2,
        "stage_seconds": {e["stage"]: e["seconds"] for e in events if e["event"] == "stage_end"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="5 steps, 64 tokens")
    ap.add_argument(
        "--no_vllm", action="store_true", help="use transformers generation even if vllm is installed"
    )
    ap.add_argument("--out", default=None, help="results folder (default: bench/results)")
    s = ap.parse_args()
    import importlib.util

    import torch

    out_dir = Path(s.out) if s.out else None
    if not torch.cuda.is_available():
        md = [
            "# GPU GRPO run",
            "**No GPU on this machine: nothing was measured.** Run `python bench/gpu_grpo.py` on a machine with a "
            "CUDA GPU (vLLM rollouts are used when the vllm package is installed); it finishes in under 10 minutes "
            "and replaces this file with step time, tokens/s and peak GPU memory.",
        ]
        label = "NO GPU: nothing measured"
        write_results("gpu_grpo", md, {"gpu": False, "measured": False}, s.quick, out_dir, label=label)
        return 0
    steps, max_new = (5, 64) if s.quick else (30, 256)
    want_vllm = importlib.util.find_spec("vllm") is not None and not s.no_vllm
    results, errors = [], []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ark-gpu-grpo-") as tmp:
        root = Path(tmp)
        a = make_assets(root, n_train=256, hidden=1024, layers=24, vocab=2000)
        for use_vllm in ([True] if want_vllm else []) + [False]:
            if use_vllm is False and results and time.time() - started > 300:
                break  # keep the whole script under 10 minutes
            try:
                results.append(run_once(a, root / f"run-vllm{int(use_vllm)}", steps, max_new, use_vllm))
            except Exception as exc:  # recorded, never hidden
                errors.append({"use_vllm": use_vllm, "error": f"{type(exc).__name__}: {exc}"})
                traceback.print_exc()
            finally:
                torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name(0)
    md = [
        "# GPU GRPO run: bf16 autocast, random-initialised Qwen2",
        f"GPU: {gpu}. Model: hidden 1024 × 24 layers, {a['params'] / 1e6:.0f} M parameters, random weights, bf16 autocast over fp32 weights. "
        f"GRPO: {steps} steps, batch 16 completions per step (8 generations × 2 prompts), up to {max_new} new "
        f"tokens (a random model rarely stops early), demo QC prompts. Total wall time {time.time() - started:.0f}s.",
        "",
        "| rollouts | step time (median) | completion tokens/s | peak GPU allocated | GPU used at end | run wall |",
        "| --- | --- | --- | --- | --- | --- |",
        *[
            f"| {'vLLM colocate' if r['use_vllm'] else 'transformers'} | {r['step_time_median_s']:.2f}s | "
            f"{r['tokens_per_second'] or float('nan'):.0f} | {r['peak_gpu_allocated_mib']:.0f} MiB | "
            f"{r['gpu_used_at_end_mib']:.0f} MiB | {r['wall_s']:.0f}s |"
            for r in results
        ],
        "",
        *[f"- {'vLLM' if e['use_vllm'] else 'transformers'} run failed: `{e['error']}`" for e in errors],
    ]
    write_results(
        "gpu_grpo",
        md,
        {"gpu": gpu, "measured": bool(results), "results": results, "errors": errors},
        s.quick,
        out_dir,
    )
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
