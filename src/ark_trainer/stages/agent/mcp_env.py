"""MCP servers as the episode environment: their tools listed over the protocol, called in every episode.

:func:`mcp_env_spec` starts the servers (``stages/agent/mcp_client.py``: once per process, reused), lists their
tools and builds an environment class in the contract of ``stages/agent/env.py``: one method per tool, with the
signature and docstring that transformers' ``get_json_schema`` turns back into the tool's JSON schema. So
the model sees an MCP tool exactly as it sees a Python tool (the same schema dicts, rendered by the same
chat template), in our episode loop and in TRL's GRPO tool loop, which lists an environment's methods.

**State between episodes.** A server process is shared by every episode of the run (episodes of a batch
run side by side). Two tool names are reserved, as in the Python contract, and never shown to the model:

- ``reset``: called at the start of each episode with the data row's columns its input schema names (all
  of them if it names none); text it returns is appended to the prompt, as a Python ``reset`` does;
- ``get_reward``: called when the episode is scored; its text is read as a number in [0, 1], the
  environment's reward (``env_reward``; an episode is solved at 1.0).

Every call of an episode carries the episode's id in the request's ``_meta`` (``ark-trainer/episode``),
so one server process can keep the state of many concurrent episodes apart (the agent demo's MCP server,
``app/demo/agent_mcp_server.py``, does). A server without ``reset`` keeps whatever state it has across
episodes, as it would for the agent in production.
"""

from __future__ import annotations

import keyword
import logging
import uuid
from collections.abc import Callable
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.external.mcp_config import McpServer
from ark_trainer.stages.agent.tools import (
    MAX_TOOL_CHARS,
    MAX_TOOLS,
    EnvSpec,
    ToolError,
    tool_name_problem,
    tool_schema,
)

log = logging.getLogger("ark_trainer")
HOOKS = ("reset", "get_reward")
EPISODE_META = "ark-trainer/episode"
JSON_TYPES: dict[str, Any] = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


class McpEnvironment:
    """One episode's view of the run's MCP servers (tool methods are added per run by :func:`env_class`)."""

    _routes: dict[str, tuple[McpServer, str]]  # tool shown to the model -> (server, the server's tool name)
    _hooks: dict[str, list[tuple[McpServer, dict]]]  # reset / get_reward -> servers offering it (schema)
    timeout: float = 5.0  # seconds per call; set from --tool_timeout by the limit-applying wrapper

    def __init__(self) -> None:
        self.episode = uuid.uuid4().hex[:16]
        self._score: tuple[float | None] | None = None  # get_reward's answer, until the next call

    def reset(self, **row: Any) -> str | None:
        """Start an episode: a new id, and each server's ``reset`` with the row's columns."""
        self.episode, self._score = uuid.uuid4().hex[:16], None
        texts = [
            self._hook(server, "reset", _row_arguments(row, schema))
            for server, schema in self._hooks["reset"]
        ]
        return "\n".join(t for t in texts if t) or None

    def _reward(self) -> float | None:
        """The servers' ``get_reward`` (the lowest when several answer); asked once per finished episode,
        as the record, the graders and TRL all read it."""
        if self._score is None:
            rewards = [_number(self._hook(s, "get_reward", {})) for s, _ in self._hooks["get_reward"]]
            known = [r for r in rewards if r is not None]
            self._score = (min(known) if known else None,)
        return self._score[0]

    def _hook(self, server: McpServer, name: str, arguments: dict) -> str:
        try:
            return self._call(server, name, arguments)
        except Exception as exc:  # noqa: BLE001 - a failing hook fails the episode, not the run
            log.warning("MCP server %r: %s failed: %s", server.name, name, exc)
            return ""

    def _call(self, server: McpServer, tool: str, arguments: dict) -> str:
        from mcp.shared.exceptions import MCPError

        from ark_trainer.stages.agent.mcp_client import ServerFailure, hub

        if tool not in HOOKS:
            self._score = None  # the episode goes on: its reward may change
        try:
            result = hub().call(server, tool, arguments, self.timeout, {EPISODE_META: self.episode})
        except ServerFailure as exc:
            raise ToolError(f"MCP server {server.name!r} failed: {exc}") from None
        except MCPError as exc:
            raise ToolError(exc.message) from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"{tool} failed")
        return text


def result_text(result: Any) -> str:
    """What the model reads of a ``CallToolResult``: its text parts (other parts named, not inlined)."""
    import json

    parts = []
    for item in result.content or []:
        kind = getattr(item, "type", "")
        parts.append(item.text if kind == "text" else f"[{kind or 'content'}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _number(text: str) -> float | None:
    try:
        return float(text.strip())
    except ValueError:
        return None


def _row_arguments(row: dict, schema: dict) -> dict:
    props = schema.get("properties") or {}
    if not props:
        return dict(row)
    return {k: v for k, v in row.items() if k in props}


def mcp_env_spec(servers: list[McpServer], source: str, flag: str = "--env"):
    """Start the servers, list their tools and build the run's :class:`EnvSpec` (refused in one line each)."""
    from ark_trainer.stages.agent.mcp_client import ServerFailure, hub

    routes: dict[str, tuple[McpServer, str]] = {}
    hooks: dict[str, list[tuple[McpServer, dict]]] = {h: [] for h in HOOKS}
    methods: dict[str, Callable] = {}
    problems = []
    for server in servers:
        try:
            tools = hub().tools(server)
        except ServerFailure as exc:
            problems.append(f"{flag}: MCP server {server.name!r} ({server.describe()}) cannot start: {exc}")
            continue
        for tool in tools:
            schema = dict(tool.input_schema or {})
            if tool.name in HOOKS:
                hooks[tool.name].append((server, schema))
                continue
            if not server.shows(tool.name):
                continue
            hide = f"hide it with toolFilter: {{exclude: [{tool.name[:80]}]}}"
            if problem := tool_name_problem(tool.name):
                problems.append(
                    f"{flag}: MCP server {server.name!r}: tool {tool.name[:80]!r} {problem}; {hide}"
                )
                continue
            if (size := _tool_chars(tool.description, schema)) > MAX_TOOL_CHARS:
                problems.append(
                    f"{flag}: MCP server {server.name!r}: tool {tool.name!r}: its description and schema take "
                    f"{size} characters of every prompt (at most {MAX_TOOL_CHARS}); {hide}"
                )
                continue
            if tool.name in routes:
                problems.append(
                    f"{flag}: MCP tool {tool.name!r} is offered by both {routes[tool.name][0].name!r} and "
                    f"{server.name!r}; hide one with toolFilter: {{exclude: [{tool.name}]}}"
                )
                continue
            method = tool_method(tool.name, tool.description or "", schema)
            if method is None:
                continue
            routes[tool.name] = (server, tool.name)
            methods[tool.name] = method
    if len(methods) > MAX_TOOLS and not problems:
        problems.append(
            f"{flag}: the MCP servers show {len(methods)} tools; a model is shown at most {MAX_TOOLS} (each one "
            "is in every prompt): hide some with toolFilter: {include: [...]} or {exclude: [...]}"
        )
    if len(problems) > 20:
        problems[20:] = [f"{flag}: ... and {len(problems) - 20} more problems of the same kinds"]
    if problems:
        raise UserError(*problems)
    if not methods:
        raise UserError(f"{flag}: the MCP servers ({', '.join(s.name for s in servers)}) offer no tools")
    cls = env_class(routes, hooks, methods)
    spec = EnvSpec(source, cls, dict(methods), [], True, cls.__name__)
    spec.schemas = [tool_schema(n, fn, source, flag) for n, fn in methods.items()]
    spec.own_timeouts = True
    return spec


def _tool_chars(description: Any, schema: dict) -> int:
    import json

    try:
        return len(str(description or "")) + len(json.dumps(schema, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError):
        return MAX_TOOL_CHARS + 1


def env_class(routes: dict, hooks: dict, methods: dict[str, Callable]) -> type[McpEnvironment]:
    namespace: dict[str, Any] = {"_routes": routes, "_hooks": hooks, **methods}
    if hooks["get_reward"]:
        namespace["get_reward"] = McpEnvironment._reward
    return type("McpEnvironment", (McpEnvironment,), namespace)


def tool_method(name: str, description: str, schema: dict) -> Callable | None:
    """A method whose signature and Google docstring ``get_json_schema`` reads back as the tool's schema."""
    import inspect

    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    annotations: dict[str, Any] = {}
    doc_args = []
    for arg, prop in props.items():
        if not arg.isidentifier() or keyword.iskeyword(arg):
            log.warning("MCP tool %r left out: its argument %r is not a Python name", name, arg)
            return None
        kind = _python_type(prop if isinstance(prop, dict) else {})
        default = inspect.Parameter.empty if arg in required else prop.get("default")
        params.append(
            inspect.Parameter(arg, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind)
        )
        annotations[arg] = kind
        text = _one_line(prop.get("description") or prop.get("title") or arg)
        if isinstance(prop.get("enum"), list):
            import json

            text += f" (choices: {json.dumps(prop['enum'], ensure_ascii=False)})"
        doc_args.append(f"    {arg}: {text}")

    def method(self, **arguments):
        server, tool = self._routes[name]
        return self._call(server, tool, arguments)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = (_one_line(description) or name) + (
        "\n\nArgs:\n" + "\n".join(doc_args) if doc_args else ""
    )
    # What the model reads is always text: ``-> str``, as the Python tools of the contract are typed.
    method.__signature__ = inspect.Signature(params, return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = {**annotations, "return": str}
    return method


def _python_type(prop: dict) -> Any:
    kind = prop.get("type")
    if isinstance(kind, list):  # ["string", "null"]: the non-null type
        kind = next((k for k in kind if k != "null"), None)
    if kind is None and isinstance(prop.get("anyOf"), list):
        kind = next(
            (o.get("type") for o in prop["anyOf"] if isinstance(o, dict) and o.get("type") != "null"), None
        )
    if kind == "array":
        items = prop.get("items")
        if isinstance(items, dict) and items.get("type") in JSON_TYPES:
            return list[_python_type(items)]  # type: ignore[misc]
        return list
    return JSON_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _one_line(text: str) -> str:
    return " ".join(str(text).split())
