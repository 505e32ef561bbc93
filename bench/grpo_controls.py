"""The GRPO controls' figures, read from their run folders: a GRPO stage against its start, on the test split.

``tests/stages/test_grpo_controls.py`` and ``test_grpo_controls_shuffled.py`` run them as tests; this
writes what one set of such runs measured to ``bench/results/grpo_controls.md`` and ``.json`` (the machine,
n, each change with its 95% interval and p):

    .venv/bin/python bench/grpo_controls.py --run shuffled=OUT1 --run real=OUT2 [--note TEXT]

Each OUT is a ``train --strategy GRPO`` run folder (its ``eval/base.json`` is the start, ``eval/grpo.json``
the GRPO stage). No training: it reads the folders.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import write_results  # noqa: E402  (bench/ is not a package)

NAME = "grpo_controls"
METRICS = ("task_accuracy", "pass_rate", "compliance_rate", "reward_mean")


def measured(name: str, folder: Path) -> dict:
    """The run's GRPO stage against its start: each metric paired on the test prompts, and the run's facts."""
    from ark_trainer.core.runfolder import RunFolder
    from ark_trainer.core.stats import compare_evals

    run = RunFolder(folder)
    start, grpo = run.eval("base"), run.eval("grpo")
    plan = json.loads((folder / "plan.json").read_text())
    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line]
    seconds = {e["stage"]: e.get("seconds") for e in events if e.get("event") == "stage_end"}
    changes = {}
    for metric in METRICS:
        found = compare_evals(start, grpo, metric)
        if found is not None:
            changes[metric] = {**found.to_json(), "text": found.text(values=True)}
    same = sum(
        a["completion"] == b["completion"] for a, b in zip(start["answers"], grpo["answers"], strict=True)
    )
    return {
        "name": name,
        "folder": str(folder),
        "model_path": run.config().get("model_path"),
        "grpo_steps": next(s["steps"] for s in plan["stages"] if s["name"] == "grpo"),
        "rewards": plan.get("rewards"),
        "split": grpo.get("measurement", {}).get("split"),
        "n_test": grpo.get("n"),
        "answers_unchanged": same,
        "changes": changes,
        "grpo_seconds": seconds.get("grpo"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, help="NAME=OUT (a GRPO run folder)")
    parser.add_argument("--note", default="", help="how the runs were made (one paragraph)")
    parser.add_argument("--results", type=Path, default=Path(__file__).parent / "results")
    args = parser.parse_args(argv)
    runs = [measured(name, Path(out)) for name, out in (item.split("=", 1) for item in args.run)]
    lines = ["# GRPO controls: a GRPO stage against its start, on the test split", "", args.note, ""]
    lines += [
        "| run | GRPO steps | n (test) | answers unchanged | task accuracy | pass rate | compliance | mean reward |"
    ]
    lines += ["| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in runs:
        cells = [r["changes"].get(m, {}).get("text", "—") for m in METRICS]
        lines.append(
            f"| {r['name']} | {r['grpo_steps']} | {r['n_test']} | {r['answers_unchanged']} | "
            + " | ".join(cells)
            + " |"
        )
    write_results(NAME, lines, {"note": args.note, "runs": runs}, quick=False, out_dir=args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
