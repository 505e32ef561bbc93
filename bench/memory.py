"""Peak memory of a GRPO run: full fine-tuning vs LoRA (vs LoRA + gradient checkpointing).

Each variant is ``ark-trainer-inner train --strategy GRPO --eval_auto False`` on the same random Qwen2 and
demo QC data, run in a fresh process that reports its own peak resident memory (``ru_maxrss``) and, on a
GPU, ``torch.cuda.max_memory_allocated``. Variants run in alternating order over the repeats.

    python bench/memory.py            # hidden 512 × 8 layers, 10 steps, 2 repeats: ~4 min on 2 CPU cores
    python bench/memory.py --quick    # tiny model, 2 steps: smoke run (~2 min)
    python bench/memory.py --gpu      # on cuda:0: the ~0.3 B model (hidden 1024 × 24), peak GPU memory of
                                      # full vs LoRA and of each precision mode; writes memory_gpu.md
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

from bench_common import make_assets, median, src_env, write_results  # noqa: E402

VARIANTS = {
    "full": [],
    "lora_r16": ["--lora_r", "16"],
    "lora_r16_gradckpt": ["--lora_r", "16", "--gradient_checkpointing", "True"],
}
GPU_VARIANTS = {  # --mixed_precision auto = bf16 autocast over fp32 weights on a bf16 GPU
    "full": [],
    "lora_r16": ["--lora_r", "16"],
    "full_bf16_weights": ["--mixed_precision", "bf16_weights"],
    "full_fp32": ["--mixed_precision", "no"],
}
NOT_MEASURED = "not measured: no GPU in this session"


def child(argv: list[str]) -> int:
    """Run one training in this process and print its peaks as one JSON line."""
    import resource

    import torch

    from ark_trainer.cli import main

    t0 = time.time()
    rc = main(argv)
    seconds = time.time() - t0  # the whole pipeline in this process: model load, GRPO, save
    peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    gpu = torch.cuda.max_memory_allocated() / 1024**2 if torch.cuda.is_available() else None
    result = {"rc": rc, "peak_rss_mib": peak_rss_mib, "peak_gpu_mib": gpu, "train_s": seconds}
    print("MEMORY " + json.dumps(result), flush=True)
    return rc


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny smoke run: proves the script works")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--out", default=None, help="results folder (default: bench/results)")
    ap.add_argument("--gpu", action="store_true", help="on cuda:0, the ~0.3 B model; writes memory_gpu.md")
    s = ap.parse_args()
    if s.gpu:
        return _gpu_or_not(s)
    return run(s, VARIANTS, (64, 2, 2) if s.quick else (512, 8, 10), "memory", [])


def _gpu_or_not(s) -> int:
    import torch

    if torch.cuda.is_available():
        return run(s, GPU_VARIANTS, (1024, 24, 3), "memory_gpu", ["--device", "cuda:0"])
    md = ["# Peak GPU memory: GRPO full fine-tuning vs LoRA, per precision", f"**{NOT_MEASURED}.**"]
    write_results("memory_gpu", md, {"gpu": False, "measured": False}, False, Path(s.out) if s.out else None,
                  label=NOT_MEASURED)  # fmt: skip
    return 0


def run(s, variants: dict, size: tuple[int, int, int], name_out: str, device: list[str]) -> int:
    """Each variant in a fresh process, alternating order over the repeats; writes ``<name_out>.md``."""
    repeats = s.repeats or (1 if s.quick or device else 2)
    hidden, layers, steps = size
    runs = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ark-memory-") as tmp:
        root = Path(tmp)
        a = make_assets(root, n_train=32, hidden=hidden, layers=layers)
        names = list(variants)
        for r in range(repeats):
            for name in names if r % 2 == 0 else names[::-1]:
                argv = [
                    "train", "--strategy", "GRPO", "--model_path", str(a["model"]), "--data_path", str(a["train"]),
                    "--output_dir", str(root / f"{name}-{r}"), "--max_train_steps", str(steps), "--batch_size", "8",
                    "--num_generations", "4", "--max_completion_length", "32", "--eval_auto", "False",
                    "--save_steps", "0", *device, *variants[name],
                ]  # fmt: skip
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", *argv],
                    env=src_env(),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                line = next((x for x in proc.stdout.splitlines() if x.startswith("MEMORY ")), None)
                if proc.returncode or line is None:
                    raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
                res = json.loads(line.split(" ", 1)[1])
                runs.append({"repeat": r, "variant": name, **res})
                print(
                    f"{name}: peak RSS {res['peak_rss_mib']:.0f} MiB, GPU {res['peak_gpu_mib']}", flush=True
                )
    peaks = {
        n: {
            "peak_rss_mib": median([x["peak_rss_mib"] for x in runs if x["variant"] == n]),
            "peak_gpu_mib": median([x["peak_gpu_mib"] for x in runs if x["variant"] == n])
            if runs[0]["peak_gpu_mib"] is not None
            else None,
            "train_s": median([x["train_s"] for x in runs if x["variant"] == n]),
        }
        for n in variants
    }
    gpu_note = (
        "GPU: none on this machine, so only RSS" if peaks["full"]["peak_gpu_mib"] is None else "GPU: yes"
    )

    def cell(v):
        return "n/a" if v is None else f"{v:.0f}"

    md = [
        "# Peak memory: GRPO full fine-tuning vs LoRA",
        f"Settings: `--strategy GRPO`, {steps} steps, batch 8, 4 generations, 32 new tokens; random Qwen2 hidden "
        f"{hidden} × {layers} layers ({a['params'] / 1e6:.2f} M parameters); {repeats} repeat(s), alternating "
        f"order; one fresh process per run. {gpu_note}. Total wall time {time.time() - started:.0f}s.",
        "",
        "| variant | flags | peak RSS MiB (median) | vs full | peak GPU MiB (median) | vs full | train run s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *[
            f"| {n} | `{' '.join(variants[n]) or '(defaults)'}` | {cell(p['peak_rss_mib'])} | "
            f"{p['peak_rss_mib'] / peaks['full']['peak_rss_mib']:.2f}× | {cell(p['peak_gpu_mib'])} | "
            f"{_ratio(p['peak_gpu_mib'], peaks['full']['peak_gpu_mib'])} | {p['train_s']:.1f} |"
            for n, p in peaks.items()
        ],
        "",
        "RSS includes the Python interpreter and the libraries (several hundred MiB before any model), so on a "
        "small model the LoRA saving (no gradients or Adam states for the frozen weights) is a small share of it.",
    ]
    data = {
        "settings": {
            "steps": steps,
            "hidden": hidden,
            "layers": layers,
            "params": a["params"],
            "repeats": repeats,
        },
        "peaks": peaks,
        "runs": runs,
    }
    write_results(name_out, md, data, s.quick, Path(s.out) if s.out else None)
    return 0


def _ratio(value: float | None, full: float | None) -> str:
    return f"{value / full:.2f}×" if value is not None and full else "n/a"


if __name__ == "__main__":
    sys.exit(main())
