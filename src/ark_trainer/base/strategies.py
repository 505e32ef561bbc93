"""The strategy table: each ``--strategy`` name and the stages it runs, in order; and one planned stage.

This module sits below the config: it imports nothing of ark_trainer but the error type at module level,
so the config can canonicalise ``--strategy`` with it (the plug-ins that fill the table are imported by
name, on first use, by ``ark_trainer.base.plugins``). The stages themselves (what ``rft`` or ``grpo``
does) are registered in :mod:`ark_trainer.stages.registry`, whose stages are handed a :class:`PlanStage`
(resolved by ``stages/plan.py``) to run.

Read the table through :func:`strategy_table`: the first time it is read, the ``register_strategies`` hook
of every plug-in (``ark_trainer.base.plugins``) adds its lines, the built-in stages' first (each stage's
``stage.py`` registers the strategies that end with it: ``stages/grpo/stage.py`` holds ``RFT+GRPO`` and
``GRPO``), then installed plug-ins'.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ark_trainer.base.errors import UserError


@dataclass(frozen=True)
class PlanStage:
    """One stage of a resolved plan (``stages/plan.py``); ``last`` marks the stage whose model becomes ``OUT/model``."""

    name: str
    steps: int
    learning_rate: float
    last: bool = False


@dataclass(frozen=True)
class Strategy:
    """The stages a strategy runs, in order; why one would pick it; other spellings ``--strategy`` takes; and
    how a request in words names it (``services/nl/parse.py``): ``phrases``, patterns (lower case, regular
    expressions) that name it specifically ("RFT then GRPO", "only GRPO"), most specific first, read before
    ``auto``; ``words``, patterns of its bare name ("grpo"), read after every strategy's phrases."""

    stages: tuple[str, ...]
    reason: str
    aliases: tuple[str, ...] = ()
    phrases: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


_STRATEGIES: dict[str, Strategy] = {}  # the table, filled by the register_strategies hooks on first use
AUTO = "auto"  # not a strategy: the plan picks one after probing the base model (stages/probe.py)
# what auto picks (stages/probe.py: decide): a weak / a strong base model, data holding only preference
# pairs, data holding only thumbs-up/down labelled answers
AUTO_CHOICES = {"weak": "RFT+GRPO", "strong": "GRPO", "pairs": "DPO", "labels": "KTO"}
DEFAULT_STRATEGY = "RFT+GRPO"  # also what a pending auto plan shows until the probe decides

_loaded = False


def strategy_table() -> dict[str, Strategy]:
    """Every strategy by name, in the order registered: the built-in ones, then installed plug-ins'."""
    global _loaded
    if not _loaded:
        _loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_strategies", add_strategy)
    return _STRATEGIES


def add_strategy(name: str, strategy: Strategy) -> None:
    """Add a line to the strategy table (the ``register`` of the ``register_strategies`` hook); a name
    already registered, or ``auto``, is refused."""
    if name in strategy_table() or name == AUTO:
        raise ValueError(f"a strategy named {name!r} is already registered; pick another name")
    _STRATEGIES[name] = strategy


def strategies_text() -> str:
    """The registered strategies with their stages, and ``auto``: ``RFT+GRPO (rft -> grpo), ... or auto``."""
    names = [f"{name} ({' -> '.join(s.stages)})" for name, s in strategy_table().items()]
    return f"{', '.join(names)} or {AUTO}"


def strategy_aliases() -> dict[str, str]:
    """Every accepted ``--strategy`` spelling (lower case, single spaces) → its canonical name."""
    out = {AUTO: AUTO}
    for name, strategy in strategy_table().items():
        out[" ".join(name.lower().split())] = name
        out.update({alias: name for alias in strategy.aliases})
    return out


def _key(value: str) -> str:
    return " ".join(str(value).strip().lower().split())


def canonical_strategy(value: str) -> str:
    """The table's name for any accepted spelling of a strategy; an unknown one is returned as given."""
    return strategy_aliases().get(_key(value), value)


def normalize_strategy(value: str) -> str:
    """Canonical strategy name (a name of the strategy table, or ``auto``) for any accepted spelling."""
    key = _key(value)
    if re.search(r"(?<![a-z])ppo(?![a-z])", key):
        raise UserError(
            f"--strategy: {value!r}: TRL, the training library, no longer ships PPO; use GRPO or RLOO, "
            "its critic-free successors here (or RFT+GRPO)"
        )
    aliases = strategy_aliases()
    if key not in aliases:
        raise UserError(f"--strategy: unknown strategy {value!r}; use {', '.join(strategy_table())} or auto")
    return aliases[key]


def stages_it_may_run(strategy: str) -> tuple[str, ...]:
    """The stages ``strategy`` runs, in order; under ``auto`` those of every strategy the probe may choose
    (:data:`AUTO_CHOICES`), each once."""
    table = strategy_table()
    chosen = AUTO_CHOICES.values() if strategy == AUTO else (strategy,)
    return tuple(dict.fromkeys(stage for name in chosen for stage in table[name].stages))
