"""The strategy table: each ``--strategy`` name and the stages it runs, in order; and one planned stage.

This module sits below the config: it imports nothing of ark_trainer but the error type, so the config
can canonicalise ``--strategy`` and the plan can list a strategy's stages without importing a stage. The
stages themselves (what ``rft`` or ``grpo`` does) are registered in :mod:`ark_trainer.stages.registry`,
whose stages are handed a :class:`PlanStage` (resolved by ``plan.py``) to run.

Read the table through :func:`strategy_table`: it holds the built-in lines below plus the strategies of
installed plug-ins (``ark_trainer.base.plugins``), added the first time the table is read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ark_trainer.base.errors import UserError


@dataclass(frozen=True)
class PlanStage:
    """One stage of a resolved plan (``plan.py``); ``last`` marks the stage whose model becomes ``OUT/model``."""

    name: str
    steps: int
    learning_rate: float
    last: bool = False


@dataclass(frozen=True)
class Strategy:
    """The stages a strategy runs, in order; why one would pick it; other spellings ``--strategy`` takes."""

    stages: tuple[str, ...]
    reason: str
    aliases: tuple[str, ...] = ()


# The strategy table: one line per strategy (names are what --strategy, plan.json and the report show).
STRATEGIES: dict[str, Strategy] = {
    "RFT+GRPO": Strategy(
        ("rft", "grpo"),
        "two steps: RFT first calibrates the model's preferences on reward-selected answers, then GRPO "
        "optimises the task reward from there (stable, precise alignment; the choice for customer-service QC)",
        ("rftgrpo", "rft_grpo", "rft-grpo", "rft grpo"),
    ),
    "GRPO": Strategy(
        ("grpo",),
        "one step: GRPO straight from the base model (faster iteration for a model whose preferences "
        "are already good)",
        ("only grpo", "only_grpo", "only-grpo", "onlygrpo", "grpo only"),
    ),
    "DPO": Strategy(
        ("dpo",),
        "one step: DPO on preference pairs (the data's chosen/rejected, or the model's own best vs worst "
        "sampled answer); no reward in the training loop, cheap and stable",
        ("only dpo", "dpo only"),
    ),
    "RFT+DPO": Strategy(
        ("rft", "dpo"),
        "two steps: RFT on reward-selected answers, then DPO on fresh best-vs-worst pairs sampled from the "
        "RFT model",
        ("rftdpo", "rft_dpo", "rft-dpo", "rft dpo"),
    ),
    "KTO": Strategy(
        ("kto",),
        "one step: KTO on unpaired good/bad answers (thumbs-up/down labels, or sampled answers split by "
        "a reward threshold)",
        ("only kto", "kto only"),
    ),
    "RLOO": Strategy(
        ("rloo",),
        "one step: RLOO, the critic-free policy gradient with a leave-one-out baseline, on the GRPO rewards",
        ("only rloo", "rloo only"),
    ),
}
AUTO = "auto"  # not a strategy: the plan picks one after probing the base model (stages/probe.py)
# what auto picks (stages/probe.py: decide): a weak / a strong base model, data holding only preference
# pairs, data holding only thumbs-up/down labelled answers
AUTO_CHOICES = {"weak": "RFT+GRPO", "strong": "GRPO", "pairs": "DPO", "labels": "KTO"}
DEFAULT_STRATEGY = "RFT+GRPO"  # also what a pending auto plan shows until the probe decides

_plugins_loaded = False


def strategy_table() -> dict[str, Strategy]:
    """Every strategy by name: the built-in table, then those of installed plug-ins (added on first use)."""
    global _plugins_loaded
    if not _plugins_loaded:
        _plugins_loaded = True
        from ark_trainer.base.plugins import call_hook

        call_hook("register_strategies", add_strategy)
    return STRATEGIES


def add_strategy(name: str, strategy: Strategy) -> None:
    """Add a strategy at run time (plug-ins, tests); the built-in ones are lines of :data:`STRATEGIES`."""
    if name in STRATEGIES or name == AUTO:
        raise ValueError(f"a strategy named {name!r} is already registered; pick another name")
    STRATEGIES[name] = strategy


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
