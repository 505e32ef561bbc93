"""The reward registry: one contract, registered by name, duplicates refused.

A reward is TRL's contract ``fn(prompts, completions, **columns) -> list[float | None]``: one score per
completion, ``None`` where the reward does not apply. Every extra dataset column arrives as a keyword
argument. Rewards are registered with :func:`register_reward`; a parameterised reward is a *factory*
registered with :func:`register_reward_factory` and built from keyword parameters (the YAML spec's
``params``). User code is reachable as ``package.module:function``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from ark_trainer.errors import UserError

RewardFn = Callable[..., list[float | None]]

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
        raise UserError(f"{where}: {path!r} is not callable")
    return fn


def completion_text(completion: Any) -> str:
    """The text of a completion, whether TRL passes a string or a list of chat messages."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list):
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
