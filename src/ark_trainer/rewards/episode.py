"""Graders that see the whole episode: its tool calls with arguments and results, its turns, its reward.

Grader types of the spec (``rewards/spec.py``), registered by this module's plug-in hook
:func:`register_grader_kinds`::

    graders:
      - name: looked_up_the_order
        type: tool_called             # 1 when a valid call of `tool` was made (with these arguments), else 0
        tool: lookup_order
        args_from: {order_id: order_id}   # argument → the row's column it must equal
        args: {verbose: false}            # argument → a fixed value it must equal
      - name: no_bad_calls
        type: no_invalid_calls        # 1 when every tool call parsed and fit a tool's schema, else 0
      - name: quick
        type: max_turns               # 1 when the episode answered within `turns` assistant turns, else 0
        turns: 4
      - name: solved
        type: env_reward              # the environment's get_reward() (added with weight 1 under --env)

They read the episode through ``base/chat/episode.py`` (the same reading as the evaluation's agent metrics).
A plain text answer (``ark-trainer score`` on a data file) is a one-turn episode whose calls are the
``<tool_call>`` blocks of its text. The final answer is what text graders (``{{sample.output_text}}``) see.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ark_trainer.base.chat.episode import EpisodeView, view
from ark_trainer.rewards.graders import TRL_KWARGS
from ark_trainer.rewards.spec import _Entry


class EpisodeGrader:
    """A batch reward function that scores each completion's :class:`EpisodeView` with ``score``."""

    def __init__(self, name: str, score: Callable[[EpisodeView, dict], float | None]) -> None:
        self.__name__, self.score = name, score

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        envs = columns.get("environments") or [None] * len(completions)
        names = [k for k, v in columns.items() if k not in TRL_KWARGS and isinstance(v, list | tuple)]
        out = []
        for i, completion in enumerate(completions):
            spec = getattr(envs[i], "_spec", None) if i < len(envs) else None
            item = {k: columns[k][i] for k in names if i < len(columns[k])}
            out.append(self.score(view(completion, spec.schemas if spec else None), item))
        return out


def _same(value: Any, expected: Any) -> bool:
    return str(value).strip() == str(expected).strip()


def _tool_called(entry: _Entry, name: str) -> Callable:
    tool = entry.get("tool", str, required=True)
    args_from = entry.get("args_from", dict, {})
    fixed = entry.get("args", dict, {})
    for key, column in args_from.items():
        if not isinstance(column, str):
            raise entry.fail("args_from", f"{key}: expected a column name, got {column!r}")

    def score(ep: EpisodeView, item: dict) -> float | None:
        wanted = dict(fixed)
        for arg, column in args_from.items():
            if item.get(column) is None:
                return None  # the row does not say what the argument should be
            wanted[arg] = item[column]
        hit = any(
            c["valid"]
            and c["name"] == tool
            and all(_same(c["arguments"].get(a), v) for a, v in wanted.items())
            for c in ep.calls
        )
        return 1.0 if hit else 0.0

    return EpisodeGrader(name, score)


def _no_invalid_calls(entry: _Entry, name: str) -> Callable:
    return EpisodeGrader(name, lambda ep, item: 0.0 if ep.n_invalid else 1.0)


def _max_turns(entry: _Entry, name: str) -> Callable:
    limit = int(entry.number("turns", 4, low=1, integer=True))
    return EpisodeGrader(name, lambda ep, item: 1.0 if ep.finished and ep.turns <= limit else 0.0)


class EnvReward:
    """The environment's own score of each episode (``get_reward()``); ``None`` without an environment."""

    def __init__(self, name: str = "env_reward") -> None:
        self.__name__ = name

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        envs = columns.get("environments") or [None] * len(completions)
        return [_env_score(env) for env in envs]

    def applies(self, prompts: list, completions: list, **columns: Any) -> list[bool]:
        return [True] * len(completions)  # the environment is made per episode, at training time


def _env_score(env: Any) -> float | None:
    if env is None:
        return None
    get = getattr(env, "_reward", None) or getattr(env, "get_reward", None)
    return get() if callable(get) else None


def _env_reward(entry: _Entry, name: str) -> Callable:
    return EnvReward(name)


def _answer_from_tool(entry: _Entry, name: str) -> Callable:
    """1 when the final answer quotes what a tool returned: the last good result of ``tool`` (its JSON
    ``field`` when given; the first match of ``pattern`` in it when given) appears in the answer; 0 when it
    does not or the tool was never called successfully. For tools whose results change between runs (the
    time, a search), where the row cannot say what the answer should be."""
    import json
    import re

    tool = entry.get("tool", str, required=True)
    field = entry.get("field", str)
    raw = entry.get("pattern", str)
    try:
        pattern = re.compile(raw) if raw else None
    except re.error as exc:
        raise entry.fail("pattern", f"not a regular expression: {exc}") from None

    def quoted(result: str) -> str | None:
        value: Any = result
        if field:
            try:
                value = json.loads(result).get(field)
            except (ValueError, AttributeError):
                return None
        if value is None:
            return None
        text = str(value)
        if pattern is None:
            return text
        match = pattern.search(text)
        return (match.group(1) if match.groups() else match.group(0)) if match else None

    def score(ep: EpisodeView, item: dict) -> float | None:
        results = [
            c["result"]
            for c in ep.calls
            if c["valid"] and c["name"] == tool and c["result"] and not c["result"].startswith("error:")
        ]
        value = quoted(results[-1]) if results else None
        return 1.0 if value and value in ep.final_answer else 0.0

    return EpisodeGrader(name, score)


def register_grader_kinds(register: Callable) -> None:
    """The plug-in hook (``ark_trainer.base.plugins``) that registers the episode grader types: the type, the keys
    its entries may have, the builder."""
    register("tool_called", {"tool", "args_from", "args"}, _tool_called)
    register("no_invalid_calls", set(), _no_invalid_calls)
    register("max_turns", {"turns"}, _max_turns)
    register("env_reward", set(), _env_reward)
    register("answer_from_tool", {"tool", "field", "pattern"}, _answer_from_tool)
