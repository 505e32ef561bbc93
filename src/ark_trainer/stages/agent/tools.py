"""A tool as the model sees it, whatever serves it: the environment's spec (its tools and their JSON
schemas), the schema of a Python function (as the chat template shows it), and a tool's error.

Below both kinds of environment: ``stages/agent/env.py`` (Python classes and functions) and ``stages/agent/mcp_env.py``
(MCP servers) build an :class:`EnvSpec` from here.
"""

from __future__ import annotations

import functools
import inspect
import keyword
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ark_trainer.base.errors import UserError


@dataclass
class EnvSpec:
    """A loaded, checked environment factory: its tools (name → function) and their JSON schemas."""

    source: str
    factory: Callable[[], Any]
    tools: dict[str, Callable]
    schemas: list[dict]
    stateful: bool  # a class with reset (and maybe get_reward); False: a list of plain functions
    class_name: str
    own_timeouts: bool = False  # the tools apply --tool_timeout themselves (MCP calls: agent/mcp_env.py)


MAX_TOOLS = 128  # tools one environment shows the model (OpenAI's API takes 128 too); each costs prompt
MAX_TOOL_CHARS = 16_000  # one tool's description and JSON schema as the prompt shows them
# names of the wrappers' own (env.ToolEnv, mcp_env.McpEnvironment: methods and instance attributes): a tool
# of the same name would replace them (tests/agent/test_mcp_env.py checks this list against both classes)
WRAPPER_NAMES = frozenset({"reset", "get_reward", "calls", "tool_errors", "n_invalid", "episode", "timeout"})


def tool_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a tool's method on the wrappers (None: it can)."""
    if not name.isidentifier() or keyword.iskeyword(name):
        return "is not a Python name"
    if name.startswith("_"):
        return "starts with '_' (the wrapper's private names)"
    if name in WRAPPER_NAMES:
        return "is a name the environment wrapper uses itself"
    return None


class ToolError(Exception):
    """A tool answered with an error (``isError``, or a JSON-RPC error); the model reads its text."""


def tool_schema(name: str, fn: Callable, source: str, flag: str) -> dict:
    from transformers.utils import get_json_schema

    try:
        return get_json_schema(as_tool(fn))
    except Exception as exc:  # noqa: BLE001 - transformers' docstring and type-hint errors
        raise UserError(
            f"{flag}: {source}: tool {name!r}: {str(exc).splitlines()[0]}; give every argument a type hint and "
            "a docstring with a description and an Args: section"
        ) from None


def as_tool(fn: Callable) -> Callable:
    """``fn`` as the model calls it: a method's ``self`` left out of the signature."""
    params = list(inspect.signature(fn).parameters.values())
    if params and params[0].name == "self":

        @functools.wraps(fn)
        def tool(*args, **kwargs):  # pragma: no cover - never called, only described
            return fn(*args, **kwargs)

        tool.__signature__ = inspect.signature(fn).replace(parameters=params[1:])  # type: ignore[attr-defined]
        return tool
    return fn
