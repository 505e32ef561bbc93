"""Which stage's model ``OUT/model`` is: the best stage on the dev split, or the last (``--final_model``).

Every stage of a plan is evaluated on the same dev and test prompts (``pipeline._Evaluator``). Once the last
one is, :func:`choose` picks the model that ships by the run's main metric on **dev**
(:func:`metrics.main_metric`: the first of task success, task accuracy, pass rate and mean reward that every
stage has), ties going to the later stage (the plan's intent), and states the shipped stage's **test**
figure: a model chosen on the prompts it is reported on would look better than it is (the choice picks
the luckiest of several noisy figures), so the reported figure comes from prompts the choice never read.
The base model never ships: when every stage is below it, the best stage does and the choice says so (the
diagnosis's ``no_improvement`` and the deploy gate take it from there). Without a dev evaluation of every
stage (``--eval_auto False``, no dev rows), or when the evaluations were measured differently (their
``measurement``: rows, dtype, precision, decoding, completion length), the last stage ships, as with
``--final_model last``, and the reason says why.

:func:`ship` then makes ``OUT/model`` that stage's model by renames, so a kill at any point loses no model
and the next attempt (``--resume``) finishes the move:

- the last stage trains straight into ``OUT/model``; when another stage's model ships, the last stage's is
  moved to ``OUT/<last>/final``, where :func:`trained_dir` finds it again;
- an earlier stage's model is copied from ``OUT/<stage>/final`` (which keeps it) into
  ``OUT/.model.incoming``, renamed to ``OUT/model`` once complete;
- the record ``OUT/model/ark_final_model.json`` (the stage, the rule, the metric, the reason) is written
  into a folder before it becomes ``OUT/model``, so it always names the weights beside it.
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import write_json
from ark_trainer.core.metrics import main_metric, shown
from ark_trainer.core.runfolder import FINAL_MODEL, RunFolder


@dataclass(frozen=True)
class FinalChoice:
    """The stage whose model ships, and why (``OUT/model/ark_final_model.json``, the ``final_model`` event)."""

    stage: str
    policy: str  # "best": chosen on the held-out set; "last": asked for, or nothing to choose on
    metric: str | None
    reason: str
    below_base: bool = False  # every stage is below the base model on the metric
    split: str | None = None  # the split the choice read ("dev"), None when nothing was compared
    n: int | None = None  # its prompts
    test_value: float | None = None  # the shipped stage's metric on the test split (what reports show)
    n_test: int | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def choose(
    evals: dict[str, dict[str, Any]],
    stages: list[str],
    policy: str,
    test: dict[str, dict[str, Any]] | None = None,
) -> FinalChoice:
    """``stages``: the trained stages in plan order; ``evals``: the dev evaluations by name (``base`` too),
    the only ones compared; ``test``: the test evaluations, of which the shipped stage's figure is stated."""
    last = stages[-1]
    if policy == "last":
        return _with_test(FinalChoice(last, "last", None, "the last stage (--final_model last)"), test)
    measured = [evals.get(s) or {} for s in stages]
    metric = main_metric(measured) if all(measured) else None
    if metric is None:
        reason = "the last stage (no dev-split evaluation of every stage)"
        return _with_test(FinalChoice(last, "last", None, reason), test)
    unlike = measured_unlike({s: e for s, e in evals.items() if s in ("base", *stages)})
    if unlike:
        reason = f"the last stage (the dev evaluations were measured differently: {unlike}; not compared)"
        return _with_test(FinalChoice(last, "last", None, reason), test)
    values = {s: float(e[metric]) for s, e in zip(stages, measured, strict=True)}
    best = stages[0]
    for stage in stages[1:]:
        if values[stage] >= values[best]:  # a tie goes to the later stage
            best = stage
    n = _n(measured[0])
    where = f"the dev split (n={n})" if n is not None else "the dev split"
    others = ", ".join(f"{s} {shown(metric, values[s])}" for s in stages if s != best)
    if others:
        reason = f"the best stage on {where} by {metric}: {shown(metric, values[best])} ({others})"
    else:
        reason = f"the only stage ({metric} {shown(metric, values[best])} on {where})"
    if best != last:
        reason += f"; the last stage's model is kept in OUT/{last}/final (--final_model last ships it)"
    base = (evals.get("base") or {}).get(metric)
    below = isinstance(base, int | float) and values[best] < base
    if below:
        reason += f"; every stage is below the base model on dev ({shown(metric, base)}), which never ships"
    return _with_test(FinalChoice(best, "best", metric, reason, below, "dev", n), test)


def _with_test(choice: FinalChoice, test: dict[str, dict[str, Any]] | None) -> FinalChoice:
    """``choice`` with its stage's test-split figure (on the choice's metric, else the main metric) added
    to its record and reason."""
    shipped = (test or {}).get(choice.stage) or {}
    metric = (choice.metric or main_metric([shipped])) if shipped else None
    value = shipped.get(metric) if metric else None
    if metric is None or not isinstance(value, int | float) or isinstance(value, bool):
        return choice
    n = _n(shipped)
    on = f"the test split (n={n})" if n is not None else "the test split"
    reason = f"{choice.reason}; on {on}, which no choice read, its {metric} is {shown(metric, float(value))}"
    return replace(choice, reason=reason, test_value=float(value), n_test=n)


def _n(evaluation: dict[str, Any]) -> int | None:
    """The prompts an evaluation measured: its ``measurement``'s n, else its own count."""
    n = (evaluation.get("measurement") or {}).get("n", evaluation.get("n"))
    return int(n) if isinstance(n, int | float) and not isinstance(n, bool) else None


def measured_unlike(evals: dict[str, dict[str, Any]]) -> str:
    """What differs between the ``measurement`` records of ``evals`` ("" when they agree): e.g.
    ``dtype: base float32, grpo bfloat16``. An evaluation without a record (an older run) is not compared
    with one that has one."""
    given = {name: e.get("measurement") for name, e in evals.items()}
    if all(r is None for r in given.values()):
        return ""  # an older run: nothing recorded, as every evaluation was measured alike then
    missing = [name for name, r in given.items() if not isinstance(r, dict)]
    if missing:
        return f"no measurement recorded for {', '.join(missing)}"
    records: dict[str, dict[str, Any]] = {name: r for name, r in given.items() if isinstance(r, dict)}
    keys = sorted({k for r in records.values() for k in r})
    for key in keys:
        seen = {name: r.get(key) for name, r in records.items()}
        if len({repr(v) for v in seen.values()}) > 1:
            return f"{key}: " + ", ".join(f"{name} {v}" for name, v in seen.items())
    return ""


def trained_dir(folder: RunFolder, stage: str, last: bool) -> Path:
    """Where a stage saves, or saved, its finished model: ``<stage>/final``, or ``model/`` for the last stage
    unless its model was moved to its ``final/`` because another stage's model ships."""
    aside = folder.stage_final_dir(stage)
    return aside if not last or holds_model(aside) else folder.model_dir


def holds_model(path: Path) -> bool:
    """A model folder with its weights (merged, sharded or a LoRA adapter)."""
    return path.is_dir() and any(path.glob("*.safetensors"))


def held_stage(folder: RunFolder, last: str) -> str | None:
    """The stage whose model ``model/`` holds: the one its record names, else the last stage (which trained
    into it) unless that one's model is in its ``final/`` (then "": not known); None without a model there."""
    if not holds_model(folder.model_dir):
        return None
    recorded = folder.final_model().get("stage")
    if recorded:
        return str(recorded)
    return "" if holds_model(folder.stage_final_dir(last)) else last


def ship(folder: RunFolder, choice: FinalChoice, last: str) -> None:
    """Make ``model/`` the chosen stage's model, with its record; see the module's docstring."""
    for leftover in (folder.incoming_model_dir, folder.outgoing_model_dir):  # of an attempt killed mid-way
        shutil.rmtree(leftover, ignore_errors=True)
    held = held_stage(folder, last)
    if held == choice.stage:
        write_json(folder.final_model_path, choice.to_json())
        return
    if choice.stage == last:
        new = folder.stage_final_dir(last)  # moved back, not copied
    else:
        new = folder.incoming_model_dir
        shutil.copytree(folder.stage_final_dir(choice.stage), new)
    write_json(new / FINAL_MODEL, choice.to_json())
    if held == last:
        aside = folder.stage_final_dir(last)
        shutil.rmtree(aside, ignore_errors=True)  # an empty or partial one: with a model, held would be ""
        aside.parent.mkdir(parents=True, exist_ok=True)
        folder.model_dir.rename(aside)
    elif held is not None:  # a copy of an earlier stage's model, which its final/ still holds (or unknown)
        folder.model_dir.rename(folder.outgoing_model_dir)
    new.rename(folder.model_dir)
    shutil.rmtree(folder.outgoing_model_dir, ignore_errors=True)
