"""Which stage's model ``OUT/model`` is: the best stage on the held-out set, or the last (``--final_model``).

Every stage of a plan is evaluated on the same held-out prompts (``pipeline._Evaluator``). Once the last one
is, :func:`choose` picks the model that ships by the run's main metric (:func:`metrics.main_metric`: the
first of task success, task accuracy, pass rate and mean reward that every stage has), ties going to the
later stage (the plan's intent). The base model never ships: when every stage is below it, the best stage
does and the choice says so (the diagnosis's ``no_improvement`` and the deploy gate take it from there).
Without an evaluation of every stage (``--eval_auto False``, no held-out rows) the last stage ships, as
with ``--final_model last``.

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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ark_trainer.fileio import write_json
from ark_trainer.metrics import main_metric, shown
from ark_trainer.runfolder import FINAL_MODEL, RunFolder


@dataclass(frozen=True)
class FinalChoice:
    """The stage whose model ships, and why (``OUT/model/ark_final_model.json``, the ``final_model`` event)."""

    stage: str
    policy: str  # "best": chosen on the held-out set; "last": asked for, or nothing to choose on
    metric: str | None
    reason: str
    below_base: bool = False  # every stage is below the base model on the metric

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def choose(evals: dict[str, dict[str, Any]], stages: list[str], policy: str) -> FinalChoice:
    """``stages``: the trained stages in plan order; ``evals``: the evaluations by name (``base`` too)."""
    last = stages[-1]
    if policy == "last":
        return FinalChoice(last, "last", None, "the last stage (--final_model last)")
    measured = [evals.get(s) or {} for s in stages]
    metric = main_metric(measured) if all(measured) else None
    if metric is None:
        return FinalChoice(last, "last", None, "the last stage (no held-out evaluation of every stage)")
    values = {s: float(e[metric]) for s, e in zip(stages, measured, strict=True)}
    best = stages[0]
    for stage in stages[1:]:
        if values[stage] >= values[best]:  # a tie goes to the later stage
            best = stage
    others = ", ".join(f"{s} {shown(metric, values[s])}" for s in stages if s != best)
    if others:
        reason = f"the best stage on the held-out set by {metric}: {shown(metric, values[best])} ({others})"
    else:
        reason = f"the only stage ({metric} {shown(metric, values[best])} on the held-out set)"
    if best != last:
        reason += f"; the last stage's model is kept in OUT/{last}/final (--final_model last ships it)"
    base = (evals.get("base") or {}).get(metric)
    below = isinstance(base, int | float) and values[best] < base
    if below:
        reason += f"; every stage is below the base model ({shown(metric, base)}), which never ships"
    return FinalChoice(best, "best", metric, reason, below)


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
