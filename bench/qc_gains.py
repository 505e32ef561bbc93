"""QC gains benchmark: base vs RFT vs RFT+GRPO vs Only GRPO (same wall-clock budget), over several seeds.

For each seed it makes the demo's data and base model (``ark_trainer.app.demo``), runs RFT+GRPO with the demo
preset, then runs Only GRPO for as many steps as fit in the time RFT+GRPO spent training (RFT sampling +
RFT + GRPO), and writes ``bench/results/qc_gains.md``: mean ± std per metric and stage, wall time per stage,
the machine, and the exact command.

    .venv/bin/python bench/qc_gains.py                 # 3 seeds, ~15 minutes on 2 CPU cores
    .venv/bin/python bench/qc_gains.py --seeds 0 --out /tmp/qc_bench
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

METRICS = ("task_accuracy", "preference_alignment", "compliance_rate", "pass_rate", "reward_mean")
TRAIN_STAGES = ("rft_sampling", "rft", "grpo")
RESULTS = Path(__file__).parent / "results" / "qc_gains.md"


def stage_seconds(run_dir: Path) -> dict[str, float]:
    events = [
        json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    return {e["stage"]: e["seconds"] for e in events if e["event"] == "stage_end"}


def evals(run_dir: Path) -> dict[str, dict]:
    out = {}
    for path in (run_dir / "eval").glob("*.json"):
        result = json.loads(path.read_text(encoding="utf-8"))
        out[path.stem] = {k: result.get(k) for k in (*METRICS, "n")}
    return out


def run_seed(seed: int, root: Path) -> dict:
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model
    from ark_trainer.app.demo.run import demo_config_path
    from ark_trainer.base.fileio import read_jsonl
    from ark_trainer.core.config import resolve_config
    from ark_trainer.services.train import run_train

    train, eval_ = write_demo_data(root / "data", seed=seed)
    base = build_base_model(root / "base_model", read_jsonl(train), seed=seed, progress=False)
    common = {
        "config": str(demo_config_path()),
        "model_path": str(base),
        "data_path": str(train),
        "eval_dataset": str(eval_),
        "seed": seed,
    }

    two_step = run_train(resolve_config({**common, "output_dir": str(root / "rft_grpo")}))
    times = stage_seconds(two_step)
    budget = sum(times.get(s, 0.0) for s in TRAIN_STAGES)
    stages = json.loads((two_step / "plan.json").read_text())["stages"]
    grpo_steps = next(s["steps"] for s in stages if s["name"] == "grpo")
    steps = max(1, round(budget / (times["grpo"] / grpo_steps)))
    one_step = run_train(
        resolve_config(
            {**common, "output_dir": str(root / "only_grpo"), "strategy": "GRPO", "max_train_steps": steps}
        )
    )
    e2, e1 = evals(two_step), evals(one_step)
    return {
        "seed": seed,
        "metrics": {"base": e2["base"], "RFT": e2["rft"], "RFT+GRPO": e2["grpo"], "Only GRPO": e1["grpo"]},
        "times": {"RFT+GRPO": times, "Only GRPO": stage_seconds(one_step)},
        "budget": budget,
        "only_grpo_steps": steps,
    }


def mean_std(values: list[float]) -> str:
    if not values:
        return "—"
    mean = statistics.fmean(values)
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{100 * mean:.1f} ± {100 * std:.1f}"


def machine() -> str:
    import torch
    import transformers
    import trl

    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    return (
        f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python "
        f"{platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}, "
        f"trl {trl.__version__}, GPU: {'yes' if torch.cuda.is_available() else 'none'}"
    )


def render(results: list[dict], command: str, seconds: float) -> str:
    stages = ("base", "RFT", "RFT+GRPO", "Only GRPO")
    lines = [
        "# QC gains: base → RFT → RFT+GRPO, and Only GRPO at equal wall time",
        "",
        f"Seeds: {', '.join(str(r['seed']) for r in results)} (each seed: its own data, base model and "
        "training). Eval: 300 held-out dialogues per seed, greedy decoding. Values: mean ± std over seeds, "
        "in % (reward_mean ×100).",
        "",
        "| metric | " + " | ".join(stages) + " |",
        "| --- |" + " --- |" * len(stages),
    ]
    for metric in METRICS:
        cells = [
            mean_std([r["metrics"][s][metric] for r in results if r["metrics"][s].get(metric) is not None])
            for s in stages
        ]
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    lines += ["", "## Gains (points, mean ± std over seeds)", ""]
    for label, a, b, metric in (
        ("RFT vs base", "RFT", "base", "preference_alignment"),
        ("RFT vs base", "RFT", "base", "task_accuracy"),
        ("RFT+GRPO vs base", "RFT+GRPO", "base", "task_accuracy"),
        ("RFT+GRPO vs RFT (what GRPO adds)", "RFT+GRPO", "RFT", "task_accuracy"),
        ("RFT+GRPO vs Only GRPO", "RFT+GRPO", "Only GRPO", "task_accuracy"),
    ):
        deltas = [r["metrics"][a][metric] - r["metrics"][b][metric] for r in results]
        lines.append(f"- {label}, {metric}: {mean_std(deltas)} pts")
    wins = sum(
        r["metrics"]["RFT+GRPO"]["task_accuracy"] > r["metrics"]["Only GRPO"]["task_accuracy"]
        for r in results
    )
    verdict = "beat" if wins * 2 > len(results) else "did not beat"
    lines += [
        "",
        f"**At equal wall time, RFT+GRPO {verdict} Only GRPO on task accuracy** "
        f"({wins} of {len(results)} seeds).",
        "",
        "## Wall time per stage (seconds, per seed)",
        "",
        "| seed | RFT sampling | RFT | GRPO | RFT+GRPO training total | Only GRPO steps | Only GRPO GRPO |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in results:
        t, o = r["times"]["RFT+GRPO"], r["times"]["Only GRPO"]
        lines.append(
            f"| {r['seed']} | {t.get('rft_sampling', 0):.1f} | {t.get('rft', 0):.1f} | "
            f"{t.get('grpo', 0):.1f} | {r['budget']:.1f} | {r['only_grpo_steps']} | {o.get('grpo', 0):.1f} |"
        )
    lines += [
        "",
        f"Whole benchmark: {seconds / 60:.1f} minutes.",
        "",
        f"Machine: {machine()}",
        "",
        f"Command: `{command}`",
        "",
        "What this shows and what it doesn't: the data and the 0.2M-parameter base model are synthetic and "
        "tiny (see docs/getting-started.md, 'The demo and its base model'); the numbers show that the pipeline's rewards "
        "move such a model, not how a real model would fare on real dialogues.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--render", action="store_true", help="only rebuild the .md from the saved .json")
    args = parser.parse_args()
    if args.render:
        saved = json.loads(args.results.with_suffix(".json").read_text(encoding="utf-8"))
        args.results.write_text(render(saved["seeds"], saved["command"], saved["seconds"]), encoding="utf-8")
        return 0
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(var, "1")
    started = time.time()
    work = args.out or Path(tempfile.mkdtemp(prefix="qc_gains_"))
    results = [run_seed(seed, work / f"seed{seed}") for seed in args.seeds]
    command = "python bench/qc_gains.py " + shlex.join(sys.argv[1:])
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(render(results, command.strip(), time.time() - started), encoding="utf-8")
    (args.results.with_suffix(".json")).write_text(
        json.dumps(results, indent=1, default=str), encoding="utf-8"
    )
    print(f"wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
