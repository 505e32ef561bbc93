"""The reward contract, the scores it may return, and the decorators that name a reward.

A reward is TRL's contract ``fn(prompts, completions, **columns) -> list[float | None]``: one score per
completion, ``None`` where the reward does not apply. Every extra dataset column arrives as a keyword
argument. :func:`register_reward` records a reward under its name; a parameterised reward is a *factory*
recorded with :func:`register_reward_factory` and built from keyword parameters (the YAML spec's
``params``). Looking a name up (and loading the built-in rewards first) is ``rewards/registry.py``'s job;
this module imports nothing of the rewards, so the built-in reward modules can register themselves here.

A score must be a finite number within ±:data:`SCORE_LIMIT` (:func:`as_score`); anything else (inf, nan,
1e308, 10**400) is refused for that sample by the composite, never trained on.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ark_trainer.base.errors import UserError

RewardFn = Callable[..., list[float | None]]
SCORE_LIMIT = 1e6  # no grader of ours comes near; beyond it a score would swamp GRPO's group statistics
CONTRACT = (
    "a rule is a function reward(prompts, completions, **kwargs) returning one float or None per "
    "completion (for grade(sample, item) use type: python)"
)


class RewardUnavailable(UserError):
    """A reward that cannot work at all (its judge refuses the key, redirects or cannot be reached).

    Unlike a failure on one sample, it stops ``train`` and ``score`` at once: the training guards re-raise
    it instead of skipping sample after sample and training with no reward.
    """


def as_score(value: Any) -> float | None:
    """``value`` as a reward, or ``None`` when it is not a finite number within ±SCORE_LIMIT.

    inf, nan, 1e308 or 10**400 would wreck GRPO's group normalisation and RFT's ranking, so the caller
    counts such a score as refused and leaves the sample out. A value that is no number at all raises
    TypeError/ValueError: that is a broken reward, not a bad sample.
    """
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float
        return None
    return number if math.isfinite(number) and abs(number) <= SCORE_LIMIT else None


# every registered name: plain rewards and factories of parameterised ones
REWARDS: dict[str, RewardFn] = {}
FACTORIES: dict[str, Callable[..., RewardFn]] = {}


def _check_free(name: str) -> None:
    if name in REWARDS or name in FACTORIES:
        raise ValueError(f"a reward named {name!r} is already registered; pick another name")


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Decorator: register ``fn`` under ``name``. A second registration of the same name is an error."""

    def decorator(fn: RewardFn) -> RewardFn:
        _check_free(name)
        fn.__name__ = name  # TRL logs each reward by its function's name
        REWARDS[name] = fn
        return fn

    return decorator


def register_reward_factory(name: str) -> Callable[[Callable[..., RewardFn]], Callable[..., RewardFn]]:
    """Decorator for parameterised rewards: ``factory(**params)`` returns the reward function."""

    def decorator(factory: Callable[..., RewardFn]) -> Callable[..., RewardFn]:
        _check_free(name)
        FACTORIES[name] = factory
        return factory

    return decorator


def completion_text(completion: Any) -> str:
    """The text of a completion, whether TRL passes a string or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        from ark_trainer.base.chat.episode import final_answer, is_episode

        if is_episode(completion):  # an agent episode: its final answer
            return final_answer(completion)
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    return str(completion)


def prompt_text(prompt: Any) -> str:
    """The last user turn of a prompt (string or chat messages)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return str(users[-1]) if users else ""
    return str(prompt)
