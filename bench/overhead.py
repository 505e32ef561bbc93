"""Overhead of our layer: ``ark-trainer-inner train --strategy GRPO`` vs a plain TRL GRPOTrainer script.

Same model (random-initialised Qwen2), same data (the demo's QC dialogues), same reward functions and
weights, same GRPOConfig settings (``bench/plain_trl_grpo.py`` spells them out), fp32 on both sides. Each
repeat runs both as fresh processes, in alternating order (ours first on even repeats, plain first on odd
ones), so drift in machine load hits both alike.

Two ratios are reported, and which is which is said in the results:
- **training loop** (the compared figure): ``train_runtime``, transformers' own timer around the
  training loop, the same code on both sides (ours read from its TensorBoard events, plain from
  ``trainer.train()``'s metrics); also shown, the stage span (trainer construction + ``train()`` + save);
- **whole process** (context): process start to exit, which adds our checks, data split, run files,
  heartbeat and report (evaluation is off: ``--eval_auto False``, as plain TRL has none); where that extra
  time goes is broken down from the event timestamps.

Inside the loop, one more run of ours under ``bench/hook_profile.py`` times what our layer adds there (its
callbacks and the reward guard's hand-off) directly, free of the machine's run-to-run noise.

    python bench/overhead.py            # 5 repeats × 40 steps, hidden 256 × 4 layers: ~5 min on 2 CPU cores
    python bench/overhead.py --quick    # 2 repeats × 3 steps, tiny model: a smoke run (~3 min)
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

HERE = Path(__file__).resolve().parent


def run_ours(a: dict, out: Path, s: argparse.Namespace, profile: Path | None = None) -> dict:
    """One ``ark-trainer-inner train`` process; with ``profile``, under ``bench/hook_profile.py``'s timers."""
    runner = (
        ["-m", "ark_trainer"]
        if profile is None
        else [str(HERE / "hook_profile.py"), "--profile_out", str(profile)]
    )
    cmd = [
        sys.executable, *runner, "train", "--strategy", "GRPO",
        "--model_path", str(a["model"]), "--data_path", str(a["train"]), "--output_dir", str(out),
        "--max_train_steps", str(s.steps), "--batch_size", str(s.batch_size),
        "--num_generations", str(s.num_generations), "--max_completion_length", str(s.max_completion_length),
        "--grpo_learning_rate", "1e-6", "--eval_auto", "False", "--save_steps", "0", "--logging_steps", "5",
        "--mixed_precision", "no", "--seed", "42",
    ]  # fmt: skip
    _, t0, t1, cpu = _timed(cmd, "ark-trainer")
    events = [json.loads(x) for x in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    start = next(e for e in events if e["event"] == "run_start")["ts"]
    grpo_start = next(e for e in events if e["event"] == "stage_start" and e["stage"] == "grpo")["ts"]
    grpo_end = next(e for e in events if e["event"] == "stage_end" and e["stage"] == "grpo")
    return {
        "loop_s": tensorboard_scalar(out / "logs" / "tensorboard" / "grpo", "train/train_runtime"),
        "train_s": grpo_end["seconds"],
        "cpu_s": cpu,
        "total_s": t1 - t0,
        "before_run_start_s": start - t0,  # interpreter, imports, checks, data split, run files
        "run_start_to_grpo_s": grpo_start - start,  # warnings, openclaw check, logging setup
        "after_grpo_s": t1 - grpo_end["ts"],  # finish, heartbeat stop, report, exit
    }


def _timed(cmd: list[str], what: str) -> tuple[subprocess.CompletedProcess, float, float, float]:
    """Run one side as a fresh process: (the process, start, end, its CPU seconds); stops on a failure."""
    t0, cpu0 = time.time(), _children_cpu()
    proc = subprocess.run(cmd, env=src_env(), capture_output=True, text=True, check=False)
    t1, cpu = time.time(), _children_cpu() - cpu0
    if proc.returncode:
        raise SystemExit(f"{what} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc, t0, t1, cpu


def _children_cpu() -> float:
    """User + system CPU seconds of the finished child processes (less sensitive to a busy machine)."""
    import resource

    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def tensorboard_scalar(folder: Path, tag: str) -> float:
    """The last value of ``tag`` in the TensorBoard events under ``folder`` (what TRL logged)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder), size_guidance={"scalars": 0})
    acc.Reload()
    return float(acc.Scalars(tag)[-1].value)


def run_plain(a: dict, out: Path, s: argparse.Namespace) -> dict:
    cmd = [
        sys.executable, str(HERE / "plain_trl_grpo.py"),
        "--model_path", str(a["model"]), "--data_path", str(a["train"]), "--output_dir", str(out),
        "--max_steps", str(s.steps), "--batch_size", str(s.batch_size), "--num_generations", str(s.num_generations),
        "--max_completion_length", str(s.max_completion_length), "--learning_rate", "1e-6", "--seed", "42",
    ]  # fmt: skip
    proc, t0, t1, cpu = _timed(cmd, "plain TRL")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("PLAIN_TIMINGS "))
    timings = json.loads(line.split(" ", 1)[1])
    return {
        "loop_s": timings["train_runtime"],
        "train_s": timings["train_s"],
        "cpu_s": cpu,
        "total_s": t1 - t0,
        **{f"plain_{k}": v for k, v in timings.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny smoke run: proves the script works")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--out", default=None, help="results folder (default: bench/results)")
    s = ap.parse_args()
    s.repeats = s.repeats or (2 if s.quick else 5)
    s.steps = s.steps or (3 if s.quick else 40)
    s.batch_size, s.num_generations = 8, 4
    s.max_completion_length = 16 if s.quick else 48
    hidden, layers = (64, 2) if s.quick else (256, 4)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="ark-overhead-") as tmp:
        root = Path(tmp)
        a = make_assets(root, n_train=64, hidden=hidden, layers=layers)
        runs = []
        for r in range(s.repeats):
            order = ("ours", "plain") if r % 2 == 0 else ("plain", "ours")
            for side in order:
                out = root / f"{side}-{r}"
                res = run_ours(a, out, s) if side == "ours" else run_plain(a, out, s)
                runs.append({"repeat": r, "side": side, **res})
                print(
                    f"repeat {r} {side}: loop {res['loop_s']:.2f}s, process {res['total_s']:.2f}s", flush=True
                )
        # one more run of ours, instrumented: what our callbacks and reward guard cost inside the loop
        prof_path = root / "hooks.json"
        prof_run = run_ours(a, root / "ours-profiled", s, profile=prof_path)
        prof = json.loads(prof_path.read_text(encoding="utf-8"))
    ours = [x for x in runs if x["side"] == "ours"]
    plain = [x for x in runs if x["side"] == "plain"]
    in_loop = prof["callbacks_ours_s"] + prof["reward_guard_handoff_s"]

    def ratio(key: str) -> float:
        return median([x[key] for x in ours]) / median([x[key] for x in plain])

    loop_ratio, span_ratio, total_ratio = ratio("loop_s"), ratio("train_s"), ratio("total_s")
    cpu_ratio = ratio("cpu_s")
    # the fastest repeat of each side: robust to bursts of other work on a shared machine
    best_ratio = min(x["loop_s"] for x in ours) / min(x["loop_s"] for x in plain)
    per_repeat = [o["loop_s"] / p["loop_s"] for o, p in zip(ours, plain, strict=True)]  # paired by repeat
    extra = {
        k: median([x[k] for x in ours]) for k in ("before_run_start_s", "run_start_to_grpo_s", "after_grpo_s")
    }
    plain_outside = median([x["total_s"] - x["train_s"] for x in plain])
    verdict = "meets" if loop_ratio <= 1.05 else "misses"
    verdict_line = (
        "Target ≤ 1.05: no verdict from a --quick smoke run."
        if s.quick
        else f"Target ≤ 1.05: this run **{verdict}** it."
    )

    def row(label: str, key: str, r: float) -> str:
        return f"| {label} | {median([x[key] for x in ours]):.2f}s | {median([x[key] for x in plain]):.2f}s | {r:.3f} |"

    md = [
        "# Overhead: ark-trainer-inner train --strategy GRPO vs plain TRL GRPOTrainer",
        f"Settings: {s.repeats} repeats, interleaved; {s.steps} GRPO steps, batch {s.batch_size}, "
        f"{s.num_generations} generations, {s.max_completion_length} new tokens; random Qwen2 "
        f"hidden {hidden} × {layers} layers ({a['params'] / 1e6:.2f} M parameters), fp32; 64 demo QC prompts; "
        "the same reward functions and GRPOConfig on both sides. Total wall time "
        f"{time.time() - started:.0f}s.",
        "",
        "## Result",
        "",
        "| figure | ark-trainer (median) | plain TRL (median) | ratio |",
        "| --- | --- | --- | --- |",
        row(
            "**training loop** (`train_runtime`, transformers' own timer; the compared figure)",
            "loop_s",
            loop_ratio,
        ),
        row("stage span (trainer build + train() + save)", "train_s", span_ratio),
        f"| training loop, median of the per-repeat (paired) ratios | | | {median(per_repeat):.3f} |",
        f"| training loop, fastest repeat of each side | {min(x['loop_s'] for x in ours):.2f}s "
        f"| {min(x['loop_s'] for x in plain):.2f}s | {best_ratio:.3f} |",
        row("whole process (start to exit)", "total_s", total_ratio),
        row("whole process CPU time (user + system)", "cpu_s", cpu_ratio),
        "",
        f"Training-loop ratio per repeat: {', '.join(f'{x:.3f}' for x in per_repeat)}. {verdict_line}",
        "",
        "The stage span is not a clean comparison: the libraries import lazily, and the plain script pays "
        "transformers/TRL's lazy imports inside its span while ark-trainer has already paid them during its "
        "checks; `train_runtime` times the same loop code on both sides.",
        "",
        "## Where ark-trainer's extra time goes (medians)",
        "",
        f"- before `run_start` (interpreter, imports, all checks, data load and split, run.yaml/plan.json/data/): "
        f"{extra['before_run_start_s']:.2f}s",
        f"- `run_start` → GRPO stage (logging, TRL import, warnings, OpenClaw check when asked): "
        f"{extra['run_start_to_grpo_s']:.2f}s",
        f"- after the GRPO stage (finish events, stop heartbeat, report.md/html and plots, exit): "
        f"{extra['after_grpo_s']:.2f}s",
        f"- plain TRL outside its span (interpreter, imports, data): {plain_outside:.2f}s",
        "",
        "## Inside the training loop (one more run of ours, instrumented by `bench/hook_profile.py`)",
        "",
        f"What ark-trainer adds to the loop, timed directly: **{in_loop:.3f}s, "
        f"{in_loop / prof_run['loop_s']:.2%} of that run's {prof_run['loop_s']:.2f}s loop**.",
        "",
        f"- our trainer callbacks: {prof['callbacks_ours_s']:.3f}s ("
        + ", ".join(
            f"{k} {v * 1000:.0f} ms"
            for k, v in prof["callbacks_s"].items()
            if k not in prof["default_callbacks"]
        )
        + "); transformers' default callbacks (flow control and the progress bar, which ours keeps but "
        "with a one-line log instead of the log dict), which plain TRL runs too: "
        f"{prof['callbacks_defaults_s'] * 1000:.0f} ms",
        f"- the reward guard (`--reward_timeout`): {prof['reward_guard_handoff_s'] * 1000:.0f} ms of hand-off to its "
        f"worker thread over {prof['reward_guard_calls']} calls; the reward functions themselves ran "
        f"{prof['reward_functions_s'] * 1000:.0f} ms (the same functions plain TRL calls)",
        "- everything else in the loop is the same TRL/transformers code on both sides (the same GRPOConfig: "
        "`bench/plain_trl_grpo.py`); both sides save the model and tokenizer.",
        "",
        "## Runs",
        "",
        "| repeat | side | loop s | span s | process s | process CPU s |",
        "| --- | --- | --- | --- | --- | --- |",
        *[
            f"| {x['repeat']} | {x['side']} | {x['loop_s']:.2f} | {x['train_s']:.2f} | {x['total_s']:.2f} "
            f"| {x['cpu_s']:.2f} |"
            for x in runs
        ],
    ]
    data = {
        "settings": {
            "repeats": s.repeats,
            "steps": s.steps,
            "batch_size": s.batch_size,
            "num_generations": s.num_generations,
            "max_completion_length": s.max_completion_length,
            "hidden": hidden,
            "layers": layers,
            "params": a["params"],
        },
        "compared": "training loop: transformers' train_runtime, both sides",
        "loop_ratio": loop_ratio,
        "span_ratio": span_ratio,
        "process_ratio": total_ratio,
        "process_cpu_ratio": cpu_ratio,
        "loop_ratio_fastest": best_ratio,
        "loop_ratio_paired_median": median(per_repeat),
        "loop_ratio_per_repeat": per_repeat,
        "extra_time_medians": extra,
        "in_loop_profile": {**prof, "loop_s": prof_run["loop_s"], "added_s": in_loop},
        "runs": runs,
    }
    write_results("overhead", md, data, s.quick, Path(s.out) if s.out else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
