"""A user's own data on a real model, with no tuning flags: does ``train``'s automatic choice learn?

The data is the own-data fixture (``tests/fixtures/own_data.py``: QC of a mobile carrier's English support
desk, five labels as a class-valued ``reference``, 240 training rows and 60 held-out rows), never the demo's.
The run is what a user who read only the README would type::

    ark-trainer train --model_path SmolLM2-135M-Instruct.gguf --data_path own/train.jsonl \\
        --eval_dataset own/heldout.jsonl --output_dir runs/own

and nothing else (``--eval_dataset`` only names the held-out rows; it tunes nothing). Recorded: the test
split's task accuracy of the base model, of each stage and of the model that ships, against always answering
the test split's commonest label (the majority share); which of the five labels the shipped model answered at
least once; the wall time; the machine and its CPU class (``ark-trainer doctor``'s ``cpu`` line: the column of
docs/real-models.md's times it belongs in). Targets: accuracy ≥ the majority share + 25
points, every label answered, ≤ 30 min on 2 cores.

    python bench/own_data.py --model_path SmolLM2-135M-Instruct.gguf     # trains (tens of minutes)
    python bench/own_data.py --model_path M.gguf --dry_run                # writes the data, prints the command
    python bench/own_data.py --figures runs/own                           # the figures of a finished run

Writes ``bench/results/own_data.md`` and ``.json`` (``--results_dir`` elsewhere) after a run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # the repository: tests.fixtures.own_data

from tests.fixtures import own_data  # noqa: E402

TARGET_POINTS = 25.0  # over the majority share
TARGET_MINUTES = 30.0


def train_command(model_path: str, data: tuple[Path, Path], out: Path) -> list[str]:
    """The user's command: the model, the data, the held-out rows, the run folder; no tuning flag."""
    train, heldout = data
    return [
        sys.executable, "-m", "ark_trainer", "train", "--model_path", model_path, "--data_path", str(train),
        "--eval_dataset", str(heldout), "--output_dir", str(out),
    ]  # fmt: skip


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _labels_answered(answers: list[str]) -> dict[str, int]:
    """How often each label was answered (whitespace, case and a final full stop aside)."""
    counts = dict.fromkeys(own_data.LABELS, 0)
    for answer in answers:
        said = " ".join(answer.split()).lower().rstrip(".")
        for label in own_data.LABELS:
            if said == label.lower():
                counts[label] += 1
    return counts


def figures(run: Path) -> dict:
    """A finished run's figures: the test split's majority share, each evaluated model's task accuracy, the
    shipped stage, the labels its answers name."""
    test = [json.loads(line) for line in (run / "data" / "test.jsonl").read_text().splitlines() if line]
    label, share = own_data.majority_share(test)
    evals = {p.stem: _read(p) for p in sorted((run / "eval").glob("*.json"))}
    final = run / "model" / "ark_final_model.json"
    shipped = _read(final).get("stage") if final.is_file() else None
    shipped = shipped if shipped in evals else next((n for n in reversed(list(evals)) if n != "base"), None)
    accuracy = {name: e.get("task_accuracy") for name, e in evals.items()}
    answered = _labels_answered([a["completion"] for a in evals[shipped]["answers"]]) if shipped else {}
    final_accuracy = accuracy.get(shipped) if shipped else None
    over = None if final_accuracy is None else round(100 * (final_accuracy - share), 1)
    return {
        "n_test": len(test),
        "majority_label": label,
        "majority_share": share,
        "task_accuracy": accuracy,
        "shipped": shipped,
        "points_over_majority": over,
        "labels_answered": answered,
        "every_label_answered": bool(answered) and all(answered.values()),
        "compliance_rate": {name: e.get("compliance_rate") for name, e in evals.items()},
    }


def summary_lines(f: dict, minutes: float | None) -> list[str]:
    pct = lambda x: "n/a" if x is None else f"{100 * x:.1f}%"  # noqa: E731
    lines = [
        "# A user's own data on a real model, no tuning flags",
        "",
        f"Test split: n = {f['n_test']}; always answering `{f['majority_label']}` scores "
        f"{pct(f['majority_share'])}.",
        "",
        "| model | task accuracy |",
        "| --- | --- |",
        *(f"| {name} | {pct(acc)} |" for name, acc in f["task_accuracy"].items()),
        "",
        f"Ships: {f['shipped']}; {f['points_over_majority']} points over the majority share (target "
        f"≥ {TARGET_POINTS:g}).",
        "Labels answered: "
        + ", ".join(f"`{label}` {n}" for label, n in f["labels_answered"].items())
        + f" (every label: {'yes' if f['every_label_answered'] else 'no'}).",
    ]
    if minutes is not None:
        lines.append(f"Wall time: {minutes:.1f} min (target ≤ {TARGET_MINUTES:g}).")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model_path", help="the real model: SmolLM2-135M-Instruct's .gguf (or an HF folder)"
    )
    parser.add_argument("--work", help="folder for the data and the run (default: a temporary one)")
    parser.add_argument(
        "--dry_run", action="store_true", help="write the data, print the command, train nothing"
    )
    parser.add_argument(
        "--figures", metavar="RUN", help="print the figures of a finished run folder and stop"
    )
    parser.add_argument("--results_dir", default=None, help="where own_data.md/.json go (bench/results)")
    a = parser.parse_args(argv)
    if a.figures:
        print("\n".join(summary_lines(figures(Path(a.figures)), None)))
        return 0
    if not a.model_path:
        parser.error("--model_path is required (or --figures RUN)")
    work = Path(a.work or tempfile.mkdtemp(prefix="own_data_"))
    data = own_data.write(work / "own")
    cmd = train_command(a.model_path, data, work / "run")
    print(" ".join(cmd))
    if a.dry_run:
        return 0
    from bench_common import src_env, write_results

    start = time.time()
    done = subprocess.run(cmd, env=src_env())
    minutes = (time.time() - start) / 60
    if done.returncode:
        print(f"train failed (exit {done.returncode}) after {minutes:.1f} min", file=sys.stderr)
        return done.returncode
    from ark_trainer.base.scale import cpu_class

    f = figures(work / "run")
    lines = summary_lines(f, minutes)
    lines.insert(2, f"CPU class (`ark-trainer doctor`'s `cpu` line): {cpu_class()[0]}.")
    results = {**f, "minutes": round(minutes, 1), "cpu_class": cpu_class()[0], "train_command": cmd}
    write_results(
        "own_data", lines, results, quick=False, out_dir=Path(a.results_dir) if a.results_dir else None
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
