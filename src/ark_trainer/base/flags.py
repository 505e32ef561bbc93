"""How a flag is declared: :func:`flag`, a dataclass field whose metadata says all there is to know about it.

Every ``train`` flag is one field of an options dataclass declared with :func:`flag`: the shared run
fields (``base/run_options.py``) and each stage's own options, beside its stage (``stages/rft/options.py``,
``stages/grpo/options.py``, ...). The ``train`` config (:func:`~ark_trainer.core.config.config_class`) is
made of them; the parser, the grouped ``--help``, ``docs/cli.md``, the range and choice checks and
``run.yaml`` are derived from the declarations. This module imports nothing of ark_trainer but the error type, so any options class may use it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import Field, field
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import Range

_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def parse_bool(value: Any, flag: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UserError(f"{flag}: expected True or False, got {value!r}")


def flag(
    default: Any,
    help: str | Callable[[], str],
    *,
    group: str,
    range: Range | None = None,
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None,
    noun: str = "value",
    comma_list: bool = False,
    cli_only: bool = False,
) -> Any:
    """One flag, declared once: a dataclass field whose metadata says all there is to know about it.

    ``help`` and ``group`` (its heading in ``train --help``) are required. ``range``: the valid values of
    a number (a numeric flag without one gets :data:`~ark_trainer.base.ranges.DEFAULT`, ≥ 0). ``choices``: the
    values a text flag takes (``noun`` names one in the error, ``unknown mode 'x'``; ``comma_list``: a
    comma-separated list of them). ``help`` and ``choices`` may be functions, called when the help is shown
    or the value checked: the values of a registry (``--strategy``, ``--deploy_target``), which is filled on
    first use; read them with :func:`help_of` and :func:`choices_of`. ``cli_only``: a command-line switch, not a setting of the run (left out
    of ``run.yaml`` and ``--config``).
    """
    meta: dict[str, Any] = {"help": help, "group": group}
    if range is not None:
        meta["range"] = range
    if choices is not None:
        meta.update(
            choices=choices if callable(choices) else tuple(choices), noun=noun, comma_list=comma_list
        )
    if cli_only:
        meta["cli_only"] = True
    return field(default=default, metadata=meta)


def help_of(f: Field) -> str:
    """A flag's help text (a function's, called now)."""
    text = f.metadata.get("help", "")
    return str(text()) if callable(text) else str(text)


def choices_of(f: Field) -> tuple[str, ...] | None:
    """The values a flag takes (a function's, called now); ``None`` for a flag that takes any."""
    choices = f.metadata.get("choices")
    return tuple(choices()) if callable(choices) else choices


def comma_values(value: str) -> list[str]:
    """``sigmoid,sft`` → ``["sigmoid", "sft"]``: the values of a ``comma_list`` flag."""
    return [v.strip() for v in value.split(",") if v.strip()]


def finite_number(kind: type, value: Any, where: str, rng: Range) -> int | float:
    """An int or a finite float; ``nan``, ``inf`` and ``1e999`` are refused here, naming the valid range."""
    number = float(value)  # ValueError/TypeError: not a number at all (the caller says so)
    if not math.isfinite(number):
        limits = "" if rng.lo is None and rng.hi is None else f"; must be {rng.text()}"
        raise UserError(f"{where}: {value!r} is not a finite number{limits}")
    if kind is float:
        return number
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())  # exact, also for big ints
    except ValueError:
        if not number.is_integer():  # 2.5 is not an int; 1e3 is
            raise
        return int(number)
