"""The reward registry: rewards looked up by name, duplicates refused, user code by ``module:function``.

The names come from :func:`register_reward` and :func:`register_reward_factory` (``rewards/contract.py``,
re-exported here); the built-in rewards (``rewards/generic.py``, ``rewards/qc.py``) register themselves
when the registry is first asked. User code is reachable as ``package.module:function``; it is checked to take
``(prompts, completions, **kwargs)`` when the spec is read, so ``os:getcwd`` is refused there, not mid-run.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.rewards import contract
from ark_trainer.rewards.contract import (
    CONTRACT,
    SCORE_LIMIT,
    RewardFn,
    RewardUnavailable,
    as_score,
    completion_text,
    prompt_text,
    register_reward,
    register_reward_factory,
)

__all__ = [
    "SCORE_LIMIT",
    "RewardFn",
    "RewardUnavailable",
    "as_score",
    "available_rewards",
    "completion_text",
    "get_reward",
    "prompt_text",
    "register_reward",
    "register_reward_factory",
]


def available_rewards() -> list[str]:
    _load_builtins()
    return sorted([*contract.REWARDS, *contract.FACTORIES])


def get_reward(name: str, params: dict[str, Any] | None = None, where: str = "reward") -> RewardFn:
    """Resolve a registry name or a ``module:function`` path to a reward function."""
    _load_builtins()
    params = params or {}
    if name in contract.FACTORIES:
        try:
            fn = contract.FACTORIES[name](**params)
        except TypeError as exc:
            raise UserError(f"{where}: bad params for reward {name!r}: {exc}") from None
        fn.__name__ = name
        return fn
    if name in contract.REWARDS:
        if params:
            raise UserError(f"{where}: reward {name!r} takes no params; remove them")
        return contract.REWARDS[name]
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


def _load_builtins() -> None:
    # Importing the built-in modules runs their @register_reward decorators; done lazily so that importing
    # this module does no work.
    from ark_trainer.rewards import generic, qc  # noqa: F401
