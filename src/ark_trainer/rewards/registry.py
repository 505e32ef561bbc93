"""The reward registry: one contract, registered by name, duplicates refused.

A reward is TRL's contract ``fn(prompts, completions, **columns) -> list[float | None]``: one score per
completion, ``None`` where the reward does not apply. Every extra dataset column arrives as a keyword
argument. Rewards are registered with :func:`register_reward`; a parameterised reward is a *factory*
registered with :func:`register_reward_factory` and built from keyword parameters (the YAML spec's
``params``). User code is reachable as ``package.module:function``; it is checked to take
``(prompts, completions, **kwargs)`` when the spec is read, so ``os:getcwd`` is refused there, not mid-run.

A score must be a finite number within ±:data:`SCORE_LIMIT` (:func:`as_score`); anything else (inf, nan,
1e308, 10**400) is refused for that sample by the composite, never trained on.
"""

from __future__ import annotations

import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any

from ark_trainer.errors import UserError

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


_REWARDS: dict[str, RewardFn] = {}
_FACTORIES: dict[str, Callable[..., RewardFn]] = {}


def _check_free(name: str) -> None:
    if name in _REWARDS or name in _FACTORIES:
        raise ValueError(f"a reward named {name!r} is already registered; pick another name")


def register_reward(name: str) -> Callable[[RewardFn], RewardFn]:
    """Decorator: register ``fn`` under ``name``. A second registration of the same name is an error."""

    def decorator(fn: RewardFn) -> RewardFn:
        _check_free(name)
        fn.__name__ = name  # TRL logs each reward by its function's name
        _REWARDS[name] = fn
        return fn

    return decorator


def register_reward_factory(name: str) -> Callable[[Callable[..., RewardFn]], Callable[..., RewardFn]]:
    """Decorator for parameterised rewards: ``factory(**params)`` returns the reward function."""

    def decorator(factory: Callable[..., RewardFn]) -> Callable[..., RewardFn]:
        _check_free(name)
        _FACTORIES[name] = factory
        return factory

    return decorator


def available_rewards() -> list[str]:
    _load_builtins()
    return sorted([*_REWARDS, *_FACTORIES])


def get_reward(name: str, params: dict[str, Any] | None = None, where: str = "reward") -> RewardFn:
    """Resolve a registry name or a ``module:function`` path to a reward function."""
    _load_builtins()
    params = params or {}
    if name in _FACTORIES:
        try:
            fn = _FACTORIES[name](**params)
        except TypeError as exc:
            raise UserError(f"{where}: bad params for reward {name!r}: {exc}") from None
        fn.__name__ = name
        return fn
    if name in _REWARDS:
        if params:
            raise UserError(f"{where}: reward {name!r} takes no params; remove them")
        return _REWARDS[name]
    if ":" in name:
        if params:  # a user function is called as the reward itself, so params would be silently lost
            raise UserError(f"{where}: reward {name!r} is a plain function and takes no params; remove them")
        return _import_reward(name, where)
    raise UserError(
        f"{where}: unknown reward {name!r}; use one of {', '.join(available_rewards())} or 'package.module:function'"
    )


def _import_reward(path: str, where: str) -> RewardFn:
    module_name, _, attr = path.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"{where}: cannot import reward {path!r}: {exc}") from None
    if not callable(fn):
        raise UserError(f"{where}: {path!r} is not callable; {CONTRACT}")
    _check_contract(fn, path, where)
    return fn


def _check_contract(fn: Callable, path: str, where: str) -> None:
    """Refuse a callable that cannot take TRL's reward call (``prompts=, completions=, **columns``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise UserError(
            f"{where}: {path!r} is not a reward function (no Python signature); {CONTRACT}"
        ) from None
    takes_columns = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    try:
        sig.bind(prompts=[], completions=[])
    except TypeError:
        takes_columns = False
    if not takes_columns:
        raise UserError(f"{where}: {path!r} is not a reward function: it takes {sig}; {CONTRACT}")


def completion_text(completion: Any) -> str:
    """The text of a completion, whether TRL passes a string or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
        from ark_trainer.agent.episode import final_answer, is_episode

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


def _load_builtins() -> None:
    # Importing the built-in modules runs their @register_reward decorators; done lazily so that importing
    # this module does no work.
    from ark_trainer.rewards import generic, qc  # noqa: F401
