"""Each training strategy on the toy QC demo, reported on the test split with n, a 95% interval and p.

One seed (0), the demo's data (800 training dialogues, 300 held out: 149 dev, 151 test by prompt hash) and
the toy base model shipped with the package (``src/ark_trainer/app/demo/base_model``, the one ``ark-trainer demo``
copies), each strategy run by ``train --config presets/demo.yaml --strategy S``: the demo's settings and its
450 steps (a strategy with an RFT stage gives it the preset's 150 of them). Every figure is the test split's;
the dev split chose the stage that ships (``--final_model best``). The change of the final model over the
base is the paired test the report shows (``stats.py``: exact McNemar for a rate, Newcombe's interval).

Equal steps, not equal wall time (``bench/strategies.py`` calibrates steps to a time budget over three seeds
and reports on all 300 held-out dialogues, from before the dev/test split). Runs already finished in
``--out`` are reused; the results are rewritten after each strategy.

    .venv/bin/python bench/strategies_test_split.py --out /tmp/strat            # every strategy (~5 min each, quiet)
    .venv/bin/python bench/strategies_test_split.py --out /tmp/strat --strategies GRPO DPO
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import write_results  # noqa: E402  (bench/ is not a package)

ROOT = Path(__file__).resolve().parents[1]
NAME = "strategies_test_split"
STRATEGIES = ("RFT+GRPO", "GRPO", "RFT+DPO", "DPO", "KTO", "RLOO")
METRICS = ("task_accuracy", "compliance_rate", "preference_alignment")


def run_strategy(out: Path, data: Path, strategy: str) -> Path:
    """``train`` with the demo preset and ``strategy`` into ``out/<strategy>``; reused when it finished."""
    from ark_trainer.app.demo.run import demo_config_path, shipped_base_model

    folder = out / strategy.replace("+", "_")
    if (folder / "report.md").is_file() and (folder / "eval" / "base.json").is_file():
        return folder
    base = shipped_base_model()
    assert base is not None, "the shipped toy base model is missing (src/ark_trainer/app/demo/base_model)"
    argv = [
        sys.executable, "-m", "ark_trainer", "train", "--config", str(demo_config_path()),
        "--strategy", strategy, "--model_path", str(base), "--data_path", str(data / "train.jsonl"),
        "--eval_dataset", str(data / "eval.jsonl"), "--output_dir", str(folder), "--seed", "0",
        "--overwrite_output_dir", "True",
    ]  # fmt: skip
    start = time.monotonic()
    with open(out / f"{folder.name}.log", "w", encoding="utf-8") as log:
        subprocess.run(argv, check=True, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
    (folder / "bench_wall_seconds.txt").write_text(f"{time.monotonic() - start:.1f}\n")
    return folder


def summary(strategy: str, folder: Path) -> dict:
    """The test figures of a finished run: each model's metrics, the final model against the base
    (paired), the stage the dev split chose, wall and training times."""
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.core.stats import compare_evals

    run = RunFolder(folder)
    plan = json.loads((folder / "plan.json").read_text())
    stages = [s["name"] for s in plan["stages"]]
    evals = {name: run.eval(name) for name in ("base", *stages) if run.eval_path(name).is_file()}
    final = run.final_name(list(evals)) or stages[-1]
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line]
    seconds = {e["stage"]: e.get("seconds") for e in events if e.get("event") == "stage_end"}
    changes = {}
    for metric in METRICS:
        found = compare_evals(evals["base"], evals[final], metric)
        if found is not None:
            changes[metric] = {**found.to_json(), "text": found.text(values=True)}
    wall = folder / "bench_wall_seconds.txt"
    return {
        "strategy": strategy,
        "steps": {s["name"]: s["steps"] for s in plan["stages"]},
        "n_test": evals["base"].get("n"),
        "split": evals["base"].get("measurement", {}).get("split"),
        "models": {name: {m: e.get(m) for m in METRICS} for name, e in evals.items()},
        "final": final,
        "final_vs_base": changes,
        "training_seconds": round(sum(v for k, v in seconds.items() if k in stages and v), 1),
        "wall_seconds": float(wall.read_text()) if wall.is_file() else None,
    }


def percent(share: float | None) -> str:
    return "—" if share is None else f"{share * 100:.1f}%"


def render(rows: list[dict], n_dev: int | None) -> list[str]:
    lines = [
        "# Training strategies on the toy QC demo, on the test split",
        "",
        "Seed 0, the demo's data and the shipped toy base model, `train --config presets/demo.yaml --strategy S`"
        " (450 steps; RFT 150 of them where the strategy has an RFT stage). Figures: the test split "
        f"(n = {rows[0]['n_test'] if rows else '?'}); the dev split (n = {n_dev}) chose the stage that ships. "
        "Change: the shipped model against the base on the same test prompts, 95% interval (Newcombe), exact "
        "McNemar p. Times: this shared 2-core machine, other work running: not a benchmark.",
        "",
        "| strategy | steps | ships (dev) | task accuracy, base → shipped | change [95% interval], p | compliance | "
        "preference alignment | training (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        acc = r["final_vs_base"].get("task_accuracy", {})
        final = r["models"][r["final"]]
        change = (
            acc["text"].split(", ", 1)[1].rsplit(", ", 1)[0] if acc else "not tested"
        )  # "+31.1 pts [+22.9, +38.6], n = 151, p < 0.001"
        lines.append(
            f"| {r['strategy']} | {' + '.join(f'{k} {v}' for k, v in r['steps'].items())} | {r['final']} | "
            f"{percent(r['models']['base']['task_accuracy'])} → {percent(final['task_accuracy'])} | {change} | "
            f"{percent(final['compliance_rate'])} | {percent(final['preference_alignment'])} | "
            f"{r['training_seconds']} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="work folder (runs are kept and reused)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES))
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    from ark_trainer.app.demo.data import write_demo_data

    data = args.out / "data"
    if not (data / "eval.jsonl").is_file():
        write_demo_data(data, seed=0)
    rows, n_dev = [], None
    for strategy in args.strategies:
        folder = run_strategy(args.out, data, strategy)
        rows.append(summary(strategy, folder))
        n_dev = json.loads((folder / "data" / "stats.json").read_text())["splits"]["dev"]
        write_results(NAME, render(rows, n_dev), {"seed": 0, "n_dev": n_dev, "runs": rows}, quick=False,
                      out_dir=args.results)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
