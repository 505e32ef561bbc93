"""The toy QC demo's documented figures against what the demo produces, and against the docs.

``bench/results/demo_figures.json`` holds the figures the docs state for ``ark-trainer demo``: one set for
every CPU (the demo copies the toy base model shipped with the package, so only RFT and GRPO run on this CPU's
float kernels; ``kernel_paths`` records the check on two of them), per stage ``task_accuracy``,
``compliance_rate``, ``preference_alignment`` as shares on the test split, the seed-to-seed noise of each
metric in percentage points (and where that noise comes from), and the docs that state them.

    python bench/demo_figures.py OUT            # OUT/eval/{base,rft,grpo}.json against the set: exit 1
                                                # naming each metric that drifted by more than its noise
    python bench/demo_figures.py --update OUT   # rewrite the set from OUT (noise kept), stamp date/machine
    python bench/demo_figures.py --check-docs   # exit 1 naming each figure a listed doc does not state

No training: it reads a run folder made by ``ark-trainer demo``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "bench" / "results" / "demo_figures.json"
STAGES = ("base", "rft", "grpo")


def load(path: Path = FIGURES) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def view(figures: dict) -> dict:
    """The figures (``stages``, ``measured``, ``n_eval``) with the file's noise and docs: what :func:`drifts`
    compares a run with."""
    return {
        "stages": figures.get("stages", {}),
        "measured": figures.get("measured", ""),
        "n_eval": figures.get("n_eval"),
        "noise": figures["noise"],
        "docs": figures["docs"],
    }


def percent(share: float) -> str:
    """A share as the docs write it: ``71.3%``, ``30.0%``, but ``100%`` and ``0%``."""
    text = f"{share * 100:.1f}"
    return f"{text[:-2]}%" if text in ("100.0", "0.0") else f"{text}%"


def doc_figures(figures: dict) -> list[tuple[str, str, str]]:
    """(stage, metric, text) of every figure the docs must state."""
    return [
        (stage, metric, percent(value))
        for stage, metrics in figures["stages"].items()
        for metric, value in metrics.items()
    ]


def missing_from_docs(figures: dict, root: Path = ROOT) -> list[str]:
    """One line per (doc, figure) the doc does not state; [] when every listed doc states every figure."""
    problems = []
    for doc in figures["docs"]:
        path = root / doc
        if not path.is_file():
            problems.append(f"{doc}: not found")
            continue
        text = path.read_text(encoding="utf-8")
        problems += [
            f"{doc}: {stage} {metric} {shown} not stated"
            for stage, metric, shown in dict.fromkeys(doc_figures(figures))
            if shown not in text
        ]
    return problems


def read_run(out: Path) -> dict[str, dict]:
    """``{stage: eval}`` of the run folder's base, rft and grpo evaluations (the ones it has)."""
    from ark_trainer.core.runfolder import RunFolder

    return RunFolder(out).evals(list(STAGES))


def drifts(figures: dict, evals: dict[str, dict]) -> list[str]:
    """One line per stage metric that is missing from ``evals`` or differs from the figure by more than
    its noise (percentage points); [] when all are within it. ``figures``: :func:`view`'s."""
    if not figures["stages"]:
        return ["no figures yet: --update OUT records them"]
    problems = []
    for stage, metrics in figures["stages"].items():
        for metric, documented in metrics.items():
            noise = figures["noise"][metric]
            got = evals.get(stage, {}).get(metric)
            if not isinstance(got, int | float) or isinstance(got, bool):
                problems.append(
                    f"{stage} {metric}: no figure in eval/{stage}.json (documented {percent(documented)})"
                )
                continue
            drift = (got - documented) * 100
            if abs(drift) > noise:
                problems.append(
                    f"{stage} {metric}: {percent(got)}, documented {percent(documented)}: "
                    f"{drift:+.1f} points, beyond its noise of {noise} points"
                )
    return problems


def eval_size(evals: dict[str, dict]) -> int | None:
    sizes = {e.get("n") for e in evals.values() if isinstance(e.get("n"), int)}
    return sizes.pop() if len(sizes) == 1 else None


def update(figures: dict, evals: dict[str, dict], measured: str) -> dict:
    """The figures with their set rewritten from ``evals`` (every stage and noise metric required), the noise
    and the rest kept."""
    missing = [f"{s} {m}" for s in STAGES for m in figures["noise"] if evals.get(s, {}).get(m) is None]
    if missing:
        raise ValueError(f"the run folder lacks {', '.join(missing)}")
    return {
        **figures,
        "measured": measured,
        "n_eval": eval_size(evals) or figures.get("n_eval"),
        "stages": {s: {m: round(float(evals[s][m]), 4) for m in figures["noise"]} for s in STAGES},
    }


def stamp() -> str:
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_common import machine, machine_line

    return f"{datetime.date.today().isoformat()}, {machine_line(machine())}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", nargs="?", type=Path, help="a demo's run folder (OUT of ark-trainer demo)")
    parser.add_argument("--update", action="store_true", help="rewrite the figures from OUT (noise kept)")
    parser.add_argument("--check-docs", action="store_true", help="check the listed docs state every figure")
    parser.add_argument("--figures", type=Path, default=FIGURES, help=f"default: {FIGURES.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    if args.out is None and (args.update or not args.check_docs):
        parser.error("give a run folder OUT" + ("" if args.update else ", or --check-docs"))
    figures = load(args.figures)
    failed = False
    if args.out is not None:
        evals = read_run(args.out)
        if args.update:
            try:
                figures = update(figures, evals, stamp())
            except ValueError as exc:
                print(f"not updated: {exc}", file=sys.stderr)
                return 1
            args.figures.write_text(
                json.dumps(figures, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            mine = view(figures)
            print(f"wrote {args.figures}: " + "; ".join(
                f"{s} " + ", ".join(f"{m} {percent(v)}" for m, v in ms.items()) for s, ms in mine["stages"].items()
            ))  # fmt: skip
        else:
            mine = view(figures)
            n = eval_size(evals)
            if n is not None and mine["stages"] and n != mine.get("n_eval"):
                print(
                    f"note: the run evaluated {n} prompts, the figures {mine.get('n_eval')}", file=sys.stderr
                )
            problems = drifts(mine, evals)
            for line in problems:
                print(f"DRIFT {line}", file=sys.stderr)
            failed |= bool(problems)
            if not problems:
                print(f"{args.out}: every figure within its noise of {args.figures.name}")
    if args.check_docs:
        problems = missing_from_docs(figures)
        for line in problems:
            print(f"MISSING {line}", file=sys.stderr)
        failed |= bool(problems)
        if not problems:
            print(f"{', '.join(figures['docs'])}: every figure of {args.figures.name} stated")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
