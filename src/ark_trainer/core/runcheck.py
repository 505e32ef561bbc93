"""Checks of what a run folder's files hold, applied where :class:`~ark_trainer.core.runfolder.RunFolder` reads them.

A run folder is plain files anyone may edit, and its numbers decide things: the eval files which model ships,
``heartbeat.json`` whether ``status`` says running, ``plan.json`` what a resume trains. Read on trust, an
``inf`` accuracy shipped a model "best by task_accuracy: inf%", and NaN, a string or a list where a number
belongs stopped the report and the diagnosis with a traceback. So every file is checked once, as it is read,
against what the run writes there: numbers finite and within bounds (shares in [0, 1], counts and steps
whole and >= 0), the types of the fields the tool reads, and nesting at most :data:`MAX_DEPTH` deep. A file
that fails is :class:`BadRunFile`: one line naming the file and the field, exit 2; code downstream only
ever sees values that passed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.metrics import (
    COMPLIANCE_RATE,
    HELDOUT_REWARD_MEAN,
    MEAN_TOOL_CALLS,
    MEAN_TURNS,
    PASS_RATE,
    PREFERENCE_ALIGNMENT,
    REWARD_MEAN,
    TASK_ACCURACY,
    TASK_SUCCESS,
    TOOL_CALL_VALIDITY,
)

# a run nests 6 levels, and a tool call's arguments (the model's own JSON) below them; the parsers recurse
MAX_DEPTH = 64
MAX_LINE_BYTES = 4 << 20  # one events.jsonl line: a metrics event is under 4 KiB; longer ones are not parsed
MAX_MAGNITUDE = 1e15  # no metric, count, step or time of a run comes near it; 1e308 overflows a sum
REWRITTEN = "restore it from the run, or delete it and run the command that writes it again"

# what a field must hold: a rule returns what is wrong with a value, or None when it is fine
Rule = Callable[[Any], str | None]


class BadRunFile(UserError, ValueError):
    """A run-folder file holding what the run never writes (one line naming the file, the field and the fix).

    A ValueError too, so a tolerant reader (the dashboard) takes it as it takes a torn file."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def number(value: Any) -> str | None:
    if not _is_number(value):
        return f"{_shown(value)} is not a number"
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    return f"{value} is out of range (|x| <= {MAX_MAGNITUDE:g})" if abs(value) > MAX_MAGNITUDE else None


def share(value: Any) -> str | None:
    """A share (a rate, an accuracy): a number in [0, 1]."""
    wrong = number(value)
    return wrong or (f"{value} is not a share in [0, 1]" if not 0 <= value <= 1 else None)


def nonnegative(value: Any) -> str | None:
    wrong = number(value)
    return wrong or (f"{value} is below 0" if value < 0 else None)


def positive(value: Any) -> str | None:
    wrong = number(value)
    return wrong or (f"{value} is not above 0" if value <= 0 else None)


def count(value: Any) -> str | None:
    """A count or a step: a whole number >= 0 (``3.0`` is not one: the run writes ints)."""
    if not isinstance(value, int) or isinstance(value, bool):
        return f"{_shown(value)} is not a whole number"
    return f"{value} is below 0" if value < 0 else number(value)


def text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"{_shown(value)} is not a string"


def flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else f"{_shown(value)} is not true or false"


def optional(rule: Rule) -> Rule:
    """``rule``, or null (a metric a model could not be measured on is written as null)."""
    return lambda value: None if value is None else rule(value)


def mapping_of(rule: Rule) -> Rule:
    """An object whose every value passes ``rule``."""

    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"{_shown(value)} is not an object"
        return next((f".{k}: {w}" for k, v in value.items() if (w := rule(v))), None)

    return check


def list_of(fields: dict[str, Rule], required: tuple[str, ...] = ()) -> Rule:
    """A list of objects whose ``fields`` (where present) pass their rules and that have the ``required``."""

    def check(value: Any) -> str | None:
        if not isinstance(value, list):
            return f"{_shown(value)} is not a list"
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                return f"[{i}]: {_shown(item)} is not an object"
            if missing := [k for k in required if k not in item]:
                return f"[{i}]: no {missing[0]!r} field"
            if wrong := _first_wrong(item, fields):
                return f"[{i}].{wrong}"
        return None

    return check


def _shown(value: Any) -> str:
    """``value`` in a message: a list or an object by its kind, anything else as it reads, cut at 40."""
    if isinstance(value, list | dict):
        return "a list" if isinstance(value, list) else "an object"
    shown = repr(value)
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _first_wrong(data: dict[str, Any], fields: dict[str, Rule]) -> str | None:
    for key, rule in fields.items():
        if key in data and (wrong := rule(data[key])):
            return f"{key}{wrong}" if wrong.startswith(("[", ".")) else f"{key}: {wrong}"
    return None


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests lists and objects more than ``limit`` deep (counted without recursion)."""
    level: list[Any] = [value] if isinstance(value, dict | list) else []
    for _ in range(limit):
        level = [
            c for v in level for c in (v.values() if isinstance(v, dict) else v) if isinstance(c, dict | list)
        ]
        if not level:
            return False
    return True


# what the model and its tools wrote (a tool call's arguments, an episode's messages): any JSON, NaN included;
# the tool reads no number from it
MODEL_CONTENT = frozenset({"arguments", "messages", "episode", "result"})


def all_numbers_wrong(value: Any) -> str | None:
    """The first number anywhere in ``value`` (but under :data:`MODEL_CONTENT`) that is not finite or is
    beyond :data:`MAX_MAGNITUDE`, as ``path: what``."""
    todo: list[tuple[str, Any]] = [("", value)]
    while todo:
        path, v = todo.pop()
        if isinstance(v, dict):
            kept = [(k, c) for k, c in v.items() if k not in MODEL_CONTENT]
            todo += [(f"{path}.{k}" if path else str(k), c) for k, c in reversed(kept)]
        elif isinstance(v, list):
            todo += [(f"{path}[{i}]", c) for i, c in reversed(list(enumerate(v)))]
        elif _is_number(v) and (wrong := number(v)):
            return f"{path}: {wrong}"
    return None


def check_file(
    data: Any, where: str, fields: dict[str, Rule], required: tuple[str, ...] = (), fix: str = ""
) -> dict[str, Any]:
    """``data`` (the parsed file ``where``) when it is an object whose ``fields`` pass their rules and that
    has every ``required`` key; :class:`BadRunFile` naming the field otherwise. ``fix``: what to do about it."""
    fix = fix or REWRITTEN
    if too_deep(data):
        raise BadRunFile(f"{where}: nested more than {MAX_DEPTH} levels deep; {fix}")
    if not isinstance(data, dict):
        raise BadRunFile(f"{where}: {_shown(data)} is not a JSON object; {fix}")
    missing = [k for k in required if k not in data]
    if missing:
        raise BadRunFile(f"{where}: no {missing[0]!r} field; {fix}")
    if wrong := _first_wrong(data, fields):
        raise BadRunFile(f"{where}: {wrong}; {fix}")
    return data


def checked(
    data: Any,
    where: str,
    fields: dict[str, Any],
    required: tuple[str, ...] = (),
    fix: str = REWRITTEN,
    absent_ok: bool = True,
    every_number: bool = True,
) -> dict[str, Any]:
    """``data`` read from the file ``where`` once its fields pass their rules (``core/runcheck.py``) and (with
    ``every_number``) every number in it is finite and within bounds; {} stays {} (absent or torn) unless
    ``absent_ok`` is False."""
    if absent_ok and data == {}:
        return {}
    data = check_file(data, where, fields, required, fix)
    if every_number and (wrong := all_numbers_wrong(data)):
        raise BadRunFile(f"{where}: {wrong}; {fix}")
    return data


def parse_checked(text: str, where: str, yaml_text: bool = False) -> Any:
    """JSON (or YAML) ``text`` of the file ``where``; one nested deeper than a run writes is BadRunFile
    (the parsers recurse: 100000 brackets were a RecursionError)."""
    import yaml  # here, not at the top: importing the run folder's readers does no work

    try:
        data = yaml.safe_load(text) if yaml_text else json.loads(text)
    except RecursionError:
        data = None
        deep = True
    else:
        deep = too_deep(data)
    if deep:
        raise BadRunFile(f"{where}: nested more than {MAX_DEPTH} levels deep; {REWRITTEN}")
    return data


# --- what each file holds (the fields the tool reads; the others are checked for finite numbers only) ---
_REWARDED = {"reward": optional(number), "completion": optional(text), "prompt": optional(text)}
_RATES = (PASS_RATE, TASK_ACCURACY, COMPLIANCE_RATE, PREFERENCE_ALIGNMENT, TASK_SUCCESS)
EVAL_FIELDS: dict[str, Rule] = {
    "name": text,
    "model": text,
    "dtype": optional(text),
    "n": count,
    REWARD_MEAN: optional(number),
    **{rate: optional(share) for rate in (*_RATES, TOOL_CALL_VALIDITY)},
    HELDOUT_REWARD_MEAN: optional(number),
    MEAN_TURNS: optional(nonnegative),
    MEAN_TOOL_CALLS: optional(nonnegative),
    "components": mapping_of(optional(number)),
    "examples": list_of(_REWARDED),
    "answers": list_of(_REWARDED, ("reward",)),  # the gate and the significance tests read it
    "episodes": list_of(_REWARDED),
}

FINAL_MODEL_FIELDS: dict[str, Rule] = {
    "stage": text,
    "policy": lambda v: None if v in ("best", "last") else f"{_shown(v)} is not 'best' or 'last'",
    "metric": optional(text),
    "reason": optional(text),
    "below_base": flag,
}

PLAN_STAGE_FIELDS: dict[str, Rule] = {"name": text, "steps": count, "learning_rate": positive, "last": flag}
PLAN_FIELDS: dict[str, Rule] = {
    "schema": count,
    "strategy": text,
    "requested": optional(text),
    "reason": optional(text),
    "task_name": optional(text),
    "stages": list_of(PLAN_STAGE_FIELDS, ("name",)),  # a resume needs steps and learning_rate too
}

HEARTBEAT_FIELDS: dict[str, Rule] = {
    "state": text,
    "stage": optional(text),
    "step": nonnegative,
    "total": nonnegative,
    "pid": lambda v: count(v) or (f"{v} is not a process id" if v >= 1 << 31 else None),  # 0: none
    "pid_started": optional(text),
    "updated_ts": nonnegative,
    "interval": positive,
    "eta_seconds": optional(nonnegative),
    "stage_elapsed_seconds": optional(nonnegative),
    "updated_at": optional(text),
    "detail": optional(text),
    "metrics": mapping_of(lambda v: None if _is_number(v) else f"{_shown(v)} is not a number"),
}
HEARTBEAT_REQUIRED = ("state",)

EVENT_FIELDS: dict[str, Rule] = {
    "event": text,
    "ts": nonnegative,
    "stage": optional(text),
    "step": optional(nonnegative),
    "seconds": optional(nonnegative),
    "status": optional(text),
    "message": optional(text),
}

TRAINER_STATE_FIELDS: dict[str, Rule] = {  # the transformers Trainer's trainer_state.json in checkpoint-N/
    "global_step": count,
    "max_steps": count,
    "epoch": optional(nonnegative),
    **{k: optional(nonnegative) for k in ("num_train_epochs", "logging_steps", "save_steps", "eval_steps")},
    "train_batch_size": optional(count),
    "num_input_tokens_seen": optional(nonnegative),
    "log_history": list_of({"step": optional(nonnegative), "epoch": optional(nonnegative)}),
}


def stats_wrong(data: dict[str, Any]) -> str | None:
    """``data/stats.json``: every number in it is a count or a mean of lengths, so >= 0."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        path, v = todo.pop()
        if isinstance(v, dict):
            todo += [(f"{path}.{k}" if path else str(k), c) for k, c in v.items()]
        elif _is_number(v) and (wrong := nonnegative(v)):
            return f"{path}: {wrong}"
    return None
