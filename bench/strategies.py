"""Training strategies compared on the demo's QC benchmark at equal wall time, over several seeds.

For each seed: the demo's data (800 train, ``--n_eval`` held-out dialogues) and base model are made once and
shared by every strategy. The first available strategy (default RFT+GRPO with the demo preset, ``ark-trainer demo``'s
run) sets the budget: its training wall time (every stage but the evaluations). Every other strategy gets a
step count calibrated to that budget: a pilot run of ``--pilot_steps`` steps (no evaluation) measures its
fixed cost (stages named ``*_sampling``: sampling answers before training) and its seconds per training step;
the real run gets ``(budget - fixed) / seconds_per_step`` steps (at least the pilot's). The pilot runs once per
strategy, on the first seed (``--pilot_every_seed``: on each); after it, each full run's own fixed cost and
seconds per step calibrate the next seed's (a short pilot underestimates GRPO with dynamic sampling, whose
late steps refill more groups). A run whose training time misses the budget by more than 15% is set aside
(``NAME.off_budget``) and rerun once at the rate it measured. Strategies with an RFT
stage give it ``RFT_SHARE`` (3/8) of the steps, the share the recorded results were measured with. TRL and transformers have no
wall-time cap on training, hence the calibration; on a shared machine per-step times are noisy, so the
wall times in the table are what each run really took, next to the budget. The results files are rewritten
after each seed; rerunning with the same ``--out`` reuses every run (and pilot) that finished.

Names ``--strategies`` gives that this install's strategy table does not know are reported as "not
available" (no run), so the script works before and after a strategy lands.

    .venv/bin/python bench/strategies.py                                  # 6 strategies × 3 seeds (hours on CPU)
    .venv/bin/python bench/strategies.py --strategies RFT+GRPO GRPO --seeds 0
    .venv/bin/python bench/strategies.py --render                         # rebuild the .md from the .json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import RESULTS, machine_line, write_results  # noqa: E402  (bench/ is not a package)

OFF_BUDGET = 0.15  # a run whose training time is further than this from the budget is rerun once
DEFAULT_STRATEGIES = ("RFT+GRPO", "GRPO", "RFT+DPO", "DPO", "KTO", "RLOO")
METRICS = ("task_accuracy", "preference_alignment", "compliance_rate")
NAME = "strategies"
RFT_SHARE = Fraction(3, 8)  # of a strategy's steps, its RFT stage's (what the recorded results used)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--strategies", nargs="+", default=list(DEFAULT_STRATEGIES),
                        help="strategy names; the first sets the wall-time budget")  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--n_eval", type=int, default=300, help="held-out dialogues per seed (≥ 300 to report)"
    )
    parser.add_argument("--pilot_steps", type=int, default=40, help="steps of each calibration run")
    parser.add_argument("--budget_s", type=float, default=None,
                        help="fixed training budget in seconds (default: the first strategy's, per seed)")  # fmt: skip
    parser.add_argument("--pilot_every_seed", action="store_true",
                        help="calibrate on every seed (default: once per strategy, on the first seed)")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="work folder (default: a temp folder)")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for strategies.md/.json")
    parser.add_argument("--render", action="store_true", help="only rebuild the .md from the saved .json")
    args = parser.parse_args(argv)
    if args.n_eval < 1 or args.pilot_steps < 1 or (args.budget_s is not None and args.budget_s <= 0):
        parser.error("--n_eval, --pilot_steps and --budget_s must be positive")
    return args


def canonical(names: list[str]) -> dict[str, str | None]:
    """Each requested name → the strategy table's name for it, or None when this install lacks it."""
    from ark_trainer.base.strategies import AUTO, strategy_aliases

    aliases = strategy_aliases()
    out: dict[str, str | None] = {}
    for name in names:
        found = aliases.get(" ".join(name.lower().split()))
        out[name] = None if found in (None, AUTO) else found
    return out


def events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def train_seconds(run: Path) -> tuple[float, float]:
    """(training wall time: every stage but evaluations, of which fixed ``*_sampling`` time) of a run."""
    ends = [e for e in events(run) if e["event"] == "stage_end" and not e["stage"].startswith("eval")]
    total = sum(e["seconds"] for e in ends)
    return total, sum(e["seconds"] for e in ends if e["stage"].endswith("_sampling"))


def final_eval(run: Path, strategy: str) -> dict:
    from ark_trainer.base.strategies import strategy_table

    last = strategy_table()[strategy].stages[-1]
    result = json.loads((run / "eval" / f"{last}.json").read_text(encoding="utf-8"))
    return {k: result.get(k) for k in (*METRICS, "n")}


def _train(common: dict, out: Path, strategy: str, steps: int | None, evaluate: bool = True) -> Path:
    from ark_trainer.base.strategies import strategy_table
    from ark_trainer.core.config import resolve_config
    from ark_trainer.services.train import run_train
    from ark_trainer.stages.plan import share_of

    if _finished(out):  # a rerun of the bench with the same --out keeps the runs it finished
        return out
    if out.exists():
        shutil.rmtree(out)
    flags = {**common, "output_dir": str(out), "strategy": strategy, "eval_auto": evaluate}
    if steps is not None:
        flags["max_train_steps"] = steps
        flags["rft_steps"] = share_of(steps, RFT_SHARE) if "rft" in strategy_table()[strategy].stages else 0
    return Path(run_train(resolve_config(flags)))


def _finished(run: Path) -> bool:
    path = run / "events.jsonl"
    return path.is_file() and any(
        e["event"] == "run_end" and e.get("status") == "finished" for e in events(run)
    )


def pilot(common: dict, work: Path, strategy: str, steps: int) -> dict:
    """A pilot run of ``steps`` steps without evaluation: its wall time, fixed cost and seconds per step."""
    run = _train(common, work / f"pilot_{strategy}", strategy, steps, evaluate=False)
    total, fixed = train_seconds(run)
    return {"pilot_steps": steps, "pilot_seconds": round(total, 1), "fixed_seconds": round(fixed, 1),
            "seconds_per_step": round(max(total - fixed, 1e-6) / steps, 4)}  # fmt: skip


def calibrated_steps(calib: dict, budget: float) -> int:
    """Steps that fill ``budget`` seconds at a pilot's fixed cost and seconds per step (at least the pilot's)."""
    return max(calib["pilot_steps"], round((budget - calib["fixed_seconds"]) / calib["seconds_per_step"]))


def run_steps(run: Path) -> int:
    """A run's training steps, all stages together (``--max_train_steps`` as the bench passed it)."""
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    return sum(stage["steps"] for stage in plan["stages"])


def measured_rate(calib: dict, seconds: float, fixed: float, steps: int, source: str) -> dict:
    """``calib`` with the fixed cost and seconds per step a full run of ``steps`` steps measured."""
    return {**calib, "fixed_seconds": round(fixed, 1), "rate_from": source,
            "seconds_per_step": round(max(seconds - fixed, 1e-6) / steps, 4)}  # fmt: skip


def run_seed(
    seed: int,
    work: Path,
    strategies: dict[str, str | None],
    args: argparse.Namespace,
    pilots: dict[str, dict],
) -> dict:
    """One seed's runs; ``pilots`` (strategy → calibration) is filled on first use and refined by each run."""
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model
    from ark_trainer.app.demo.run import demo_config_path
    from ark_trainer.base.fileio import read_jsonl

    train, eval_ = write_demo_data(work / "data", seed=seed, n_eval=args.n_eval)
    base = work / "base_model"
    if not (base / "config.json").is_file():
        base = build_base_model(base, read_jsonl(train), seed=seed, progress=False)
    common = {"config": str(demo_config_path()), "model_path": str(base), "data_path": str(train),
              "eval_dataset": str(eval_), "seed": seed}  # fmt: skip
    budget, rows = args.budget_s, {}
    for asked, name in strategies.items():
        if name is None:
            continue
        calib, steps = {}, None  # the first available strategy is the reference: the demo preset's steps
        if budget is not None:
            if name not in pilots or args.pilot_every_seed:
                pilots[name] = {**pilot(common, work, name, args.pilot_steps), "pilot_seed": seed}
            calib = dict(pilots[name])
            steps = calib["steps"] = calibrated_steps(calib, budget)
        started = time.time()
        folder = work / name.replace("+", "_")
        run = _train(common, folder, name, steps)
        seconds, fixed = train_seconds(run)
        if budget is None:
            budget = seconds
        elif steps is not None:
            steps = run_steps(run)  # a reused run's own steps, not what this calibration would give
            pilots[name] = measured_rate(pilots[name], seconds, fixed, steps, f"seed {seed}'s run")
            if (
                abs(seconds - budget) > OFF_BUDGET * budget
            ):  # the pilot's rate was off: rerun once at this one
                calib = {
                    **pilots[name],
                    "off_budget_run": {"steps": steps, "train_seconds": round(seconds, 1)},
                }
                steps = calib["steps"] = calibrated_steps(calib, budget)
                aside = folder.with_name(f"{folder.name}.off_budget")
                shutil.rmtree(aside, ignore_errors=True)
                folder.rename(aside)
                started = time.time()
                run = _train(common, folder, name, steps)
                seconds, fixed = train_seconds(run)
                pilots[name] = measured_rate(pilots[name], seconds, fixed, steps, f"seed {seed}'s run")
        plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
        rows[asked] = {**calib, "strategy": name, "metrics": final_eval(run, name), "train_seconds": round(seconds, 1),
                       "wall_seconds": round(time.time() - started, 1), "steps": plan.get("stages")}  # fmt: skip
    return {"seed": seed, "budget_seconds": round(budget or 0.0, 1), "runs": rows}


def mean_std(values: list[float], scale: float = 100.0, digits: int = 1) -> str:
    if not values:
        return "—"
    std = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{scale * statistics.fmean(values):.{digits}f} ± {scale * std:.{digits}f}"


def render(data: dict) -> list[str]:
    """The results page (title first; write_results adds the label, machine and command under it)."""
    seeds, names, missing = data["seeds"], data["strategies"], data["not_available"]
    lines = [
        "# Training strategies on the demo's QC benchmark, at equal wall time",
        "",
        f"Seeds: {', '.join(str(s['seed']) for s in seeds) or 'none'} (each seed: its own data, base model and "
        f"training). Held-out eval: {data['n_eval']} dialogues per seed, greedy decoding. Values: mean ± std "
        "over seeds, in %; preference alignment is the share of held-out prompts where the final model's "
        "answer scores higher than the base model's (ties count half).",
        "",
        f"Budget: {data['budget_rule']}",
        "",
        "| strategy | seeds | task accuracy | preference alignment | compliance | training wall time (s) | steps |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in names:
        if name in missing:
            lines.append(f"| {name} | — | not available in this install | | | | |")
            continue
        runs = [s["runs"][name] for s in seeds if name in s["runs"]]
        cells = [
            mean_std([r["metrics"][m] for r in runs if r["metrics"].get(m) is not None]) for m in METRICS
        ]
        wall = mean_std([r["train_seconds"] for r in runs], scale=1.0)
        steps = ", ".join(
            "+".join(f"{st['name']} {st['steps']}" for st in (r["steps"] or [])) or "?" for r in runs
        )
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + f" | {wall} | {steps} |")
    lines += ["", "## Per seed", "", "| seed | budget (s) | strategy | task accuracy | preference alignment "
              "| compliance | training (s) | calibration (pilot s / s per step / fixed s) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for s in seeds:
        for name, r in s["runs"].items():
            m = r["metrics"]
            calib = "reference (sets the budget)"
            if "pilot_seconds" in r:
                calib = f"{r['pilot_seconds']} / {r['seconds_per_step']} / {r['fixed_seconds']}"
                if r.get("rate_from"):
                    calib += f" (rate from {r['rate_from']})"
                elif r.get("pilot_seed", s["seed"]) != s["seed"]:
                    calib += f" (seed {r['pilot_seed']}'s pilot)"
                if r.get("off_budget_run"):
                    off = r["off_budget_run"]
                    calib += f"; rerun: {off['steps']} steps first took {off['train_seconds']} s"
            lines.append(
                f"| {s['seed']} | {s['budget_seconds']} | {name} | {_pct(m.get('task_accuracy'))} | "
                f"{_pct(m.get('preference_alignment'))} | {_pct(m.get('compliance_rate'))} | "
                f"{r['train_seconds']} | {calib} |"
            )
    unfinished = [x for x in data.get("seeds_asked", []) if x not in {s["seed"] for s in seeds}]
    if unfinished:
        lines += ["", f"Seeds asked for but not (yet) finished: {', '.join(map(str, unfinished))}."]
    if missing:
        lines += ["", f"Not available in this install (not in the strategy table): {', '.join(missing)}."]
    if data.get("note"):
        lines += ["", data["note"]]
    return lines


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


BUDGET_RULE = (
    "the first strategy's training wall time on each seed (the demo preset, evaluations excluded). Each other "
    "strategy's steps fill it at a measured cost per step: a 40-step pilot on the first seed, then the "
    "previous seed's full run; a run that missed the budget by more than 15% was rerun once at the rate it "
    "measured (the calibration column says which)."
)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = Path(args.results)
    if args.render:  # the saved label, machine and command, not this machine's
        data = json.loads((results / f"{NAME}.json").read_text(encoding="utf-8"))
        lines = render(data)
        header = [lines[0], "", f"**{data['label']}**", "", f"Machine: {machine_line(data['machine'])}", "",
                  f"Command: `{data['command']}`", ""]  # fmt: skip
        (results / f"{NAME}.md").write_text("\n".join(header + lines[1:]) + "\n", encoding="utf-8")
        return 0
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
        os.environ.setdefault(var, "1")
    found = canonical(args.strategies)
    missing = [n for n, c in found.items() if c is None]
    for name in missing:
        print(f"{name}: not available (the strategy table of this install does not know it); skipped")
    work = args.out or Path(tempfile.mkdtemp(prefix="strategies_"))
    started = time.time()
    seeds: list[dict] = []
    pilots: dict[str, dict] = {}
    rule = f"a fixed {args.budget_s} s of training per run" if args.budget_s else BUDGET_RULE
    for seed in args.seeds:  # the results are rewritten after each seed: a stopped run keeps what it finished
        seeds.append(run_seed(seed, work / f"seed{seed}", found, args, pilots))
        data = {"strategies": list(found), "not_available": missing, "n_eval": args.n_eval, "budget_rule": rule,
                "seeds": seeds, "seeds_asked": args.seeds, "seconds": round(time.time() - started, 1)}  # fmt: skip
        write_results(NAME, render(data), data, quick=False, out_dir=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
