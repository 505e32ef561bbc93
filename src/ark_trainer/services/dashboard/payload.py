"""The JSON the dashboard page polls: runs found under folders, and everything shown for one run.

Built from the run folder alone (``core/runfolder.py``), like the report and the diagnosis. ``events.jsonl`` is
read incrementally (``runfolder.EventLog``: only the bytes appended since the last poll), so polling a long
run stays cheap.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ark_trainer.core.metrics import HEADLINE
from ark_trainer.core.runfolder import (
    BASE_MODEL_DIR,
    DATA_DIR,
    EVAL_DIR,
    LOG_DIR,
    MODEL_DIR,
    PLOT_DIR,
    RunFolder,
)
from ark_trainer.core.stats import TESTED, compare_evals, p_text, untested
from ark_trainer.data.split import sizes_line

SCAN_DEPTH = 3  # run folders are looked for this many levels below each folder given
# folders inside a run that are never a run themselves (each stage's folder is skipped too)
SKIP_DIRS = {"checkpoint", MODEL_DIR, LOG_DIR, DATA_DIR, EVAL_DIR, PLOT_DIR, BASE_MODEL_DIR}
EVAL_KEYS = ("n", *HEADLINE)
MAX_EXAMPLES = 4


def is_run(path: Path) -> bool:
    return RunFolder(path).is_run()


def find_runs(roots: list[Path]) -> dict[str, Path]:
    """``{key: folder}`` of every run folder in ``roots`` (a root may itself be a run); keys are stable."""
    found: dict[str, Path] = {}
    for root in roots:
        for run in _scan(Path(root), SCAN_DEPTH):
            key = str(run.resolve())
            found.setdefault(key, run)
    return dict(sorted(found.items()))


def _scan(folder: Path, depth: int) -> list[Path]:
    if is_run(folder):
        return [folder]
    if depth <= 0 or not folder.is_dir():
        return []
    runs = []
    try:
        children = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    from ark_trainer.stages.registry import stage_names_in_order

    skip = SKIP_DIRS | set(stage_names_in_order())
    for child in children:
        if child.name not in skip and not child.name.startswith("checkpoint-"):
            runs += _scan(child, depth - 1)
    return runs


def run_summary(key: str, folder: Path) -> dict[str, Any]:
    from ark_trainer.core.runtime.estimate import expected_left
    from ark_trainer.core.runtime.monitor import read_status

    try:
        state, beat = read_status(folder)
    except (OSError, ValueError, TypeError):
        state, beat = "unknown", {}
    left = expected_left(folder, beat) if state == "running" else None  # plan.json's estimate
    return {
        "key": key,
        "name": folder.name,
        "path": str(folder),
        "state": state,
        "stage": beat.get("stage"),
        "step": beat.get("step"),
        "total": beat.get("total"),
        "eta_seconds": beat.get("eta_seconds"),
        "run_left_seconds": round(left) if left is not None else None,
        "updated_at": beat.get("updated_at"),
    }


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def stage_metrics(events: list[dict[str, Any]]) -> dict[str, dict[str, list]]:
    """``{stage: {"step": [...], metric: [...]}}``: every numeric metric a stage logged, aligned by row."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for e in events:
        if e.get("event") == "metrics":
            rows.setdefault(str(e.get("stage")), []).append(e)
    out: dict[str, dict[str, list]] = {}
    skip = {"ts", "step", "epoch", "num_tokens"}
    for stage, logs in rows.items():
        by_step: dict[float, dict[str, Any]] = {}  # a resumed stage logs its steps again: the last one wins
        for i, e in enumerate(logs):
            step = _finite(e.get("step"))
            by_step[step if step is not None else float(i)] = e
        steps = sorted(by_step)  # uPlot wants an ascending x
        kept = [by_step[s] for s in steps]
        keys = sorted({k for e in kept for k, v in e.items() if k not in skip and _finite(v) is not None})
        out[stage] = {"step": steps, **{k: [_finite(e.get(k)) for e in kept] for k in keys}}
    return out


def timeline(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per stage: start time, seconds, status (``running`` while it has no end)."""
    stages: dict[str, dict[str, Any]] = {}
    for e in events:
        name = str(e.get("stage"))
        if e.get("event") == "stage_start":
            stages[name] = {"stage": name, "start": e.get("ts"), "seconds": None, "status": "running"}
        elif e.get("event") == "stage_end" and name in stages:
            stages[name].update(seconds=e.get("seconds"), status=e.get("status", "ok"))
    return list(stages.values())


def eval_tables(folder: Path) -> dict[str, Any]:
    """The headline metrics and per-grader means of every ``eval/<name>.json``, and the final model's examples."""
    from ark_trainer.stages.diagnose.rundata import load

    run = load(folder)
    evals = run.evals  # in the order the run evaluated them
    table = {name: {k: data.get(k) for k in EVAL_KEYS} for name, data in evals.items()}
    graders = {name: data.get("components") or {} for name, data in evals.items()}
    final = run.final_name() or (list(evals)[-1] if evals else None)  # the stage OUT/model is
    examples = (evals[final].get("examples") or [])[:MAX_EXAMPLES] if final else []
    changes = _cached_changes(folder, evals, final)
    splits = _sizes(folder)  # which prompts the figures are on: test n, dev n
    return {
        "models": table, "graders": graders, "final": final, "examples": examples, "changes": changes,
        "splits": splits,
    }  # fmt: skip


def _sizes(folder: Path) -> str | None:
    """``data/split.sizes_line`` of the run's ``data/stats.json``; None without it (a torn file too)."""
    try:
        return sizes_line(RunFolder(folder).data_stats().get("splits"))
    except (OSError, ValueError):
        return None


_CHANGES: dict[tuple, list[dict[str, Any]]] = {}  # the page polls every 2 s; the tests take ~0.1 s a metric


def _cached_changes(
    folder: Path, evals: dict[str, dict[str, Any]], final: str | None
) -> list[dict[str, Any]]:
    """:func:`stage_changes`, computed again only when an eval file changed (its size or time)."""
    run = RunFolder(folder)
    stamps = []
    for name in evals:
        try:
            info = run.eval_path(name).stat()
        except OSError:
            return stage_changes(evals, final)
        stamps.append((name, info.st_mtime_ns, info.st_size))
    key = (str(folder), final, tuple(stamps))
    if key not in _CHANGES:
        if len(_CHANGES) >= 64:
            _CHANGES.clear()
        _CHANGES[key] = stage_changes(evals, final)
    return _CHANGES[key]


def stage_changes(evals: dict[str, dict[str, Any]], final: str | None) -> list[dict[str, Any]]:
    """Each model against the one evaluated before it, and the final model against the base: every metric
    both measured, paired prompt by prompt (``core/stats.py``: change, 95% interval, n, p, verdict and the line
    the report shows), or why it could not be tested."""
    names = list(evals)
    pairs = list(zip(names, names[1:], strict=False))
    if final and "base" in evals and final != "base" and ("base", final) not in pairs:
        pairs.append(("base", final))
    changes = []
    for before, after in pairs:
        for metric in TESTED:
            a, b = evals[before].get(metric), evals[after].get(metric)
            if _finite(a) is None or _finite(b) is None:
                continue
            row = {"models": f"{after} vs {before}", "metric": metric}
            found = compare_evals(evals[before], evals[after], metric)
            if found is None:
                changes.append({**row, "untested": untested(evals[before], evals[after], metric)})
            else:
                said = {"change": found.change(), "p_text": p_text(found.p), "text": found.text(values=True)}
                changes.append({**row, **found.to_json(), **said})
    return changes
