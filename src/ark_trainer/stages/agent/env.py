"""The environment an agent acts in: ``--env module:factory`` or ``--env path/to/file.py:factory``.

The factory returns one environment per episode, in the style of TRL's ``environment_factory``::

    class ShopEnv:
        def reset(self, **row) -> str | None: ...   # the data row's columns, at each episode start
        def lookup_order(self, order_id: str) -> str:  # every other public method is a tool
            '''Look up an order.

            Args:
                order_id: The order's id, e.g. A1234.
            '''
        def get_reward(self) -> float: ...          # 0..1 from the environment's state; 1.0 = solved

    def make_env():
        return ShopEnv()

A factory may instead return a list of plain functions (stateless tools: no reset, no reward). Each tool's
signature and Google-style docstring become the JSON schema the chat template shows the model
(transformers' ``get_json_schema``), so a tool the schema cannot describe is refused when the run starts.

:func:`limited_env_class` wraps the user's environment in a class that applies the limits
(``--tool_timeout``, ``--max_tool_output``) and counts what went wrong: a tool that raises or runs out of
time, an unknown tool, missing or unknown arguments. The model then sees the error text as the tool's
result, as agents do. The same class drives our own episode loop (``stages/agent/rollout.py``) and TRL's
GRPOTrainer (``environment_factory``): TRL lists its public methods as tools, calls ``reset(**row)`` and
passes the instances to the reward functions as ``environments``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ark_trainer.base.errors import UserError
from ark_trainer.stages.agent.tools import MAX_TOOLS, EnvSpec, ToolError, tool_name_problem, tool_schema

FLAG = "--env"
RESERVED = ("reset", "get_reward")  # environment methods that are not tools
CUT_MARKER = "… [cut: {n} more characters]"


@dataclass(frozen=True)
class Limits:
    """What one episode may do: assistant turns, seconds per tool call, characters of tool output."""

    max_turns: int = 4
    tool_timeout: float = 5.0
    max_tool_output: int = 500


_MCP_SPECS: dict[tuple, EnvSpec] = {}


def load_env(source: str | dict, flag: str = FLAG) -> EnvSpec:
    """Import ``module:factory`` or ``file.py:factory``, make one environment and check its tools.

    MCP servers (``{mcp_servers: ...}``, ``mcp:FILE`` or ``openclaw``; ``base/external/mcp_config.py``) are started
    and their tools listed instead (``stages/agent/mcp_env.py``).
    """
    from ark_trainer.base.external.mcp_config import is_mcp_source, servers_from_source

    if is_mcp_source(source):
        from ark_trainer.stages.agent.mcp_env import mcp_env_spec

        servers = tuple(servers_from_source(source, flag))  # read again: OpenClaw's config may have changed
        if servers not in _MCP_SPECS:  # listed once per process: each stage reuses the tools (and servers)
            label = source if isinstance(source, str) else "mcp_servers"
            _MCP_SPECS[servers] = mcp_env_spec(list(servers), label, flag)
        return _MCP_SPECS[servers]
    assert isinstance(source, str)
    factory = _import_factory(source, flag)
    try:
        probe = factory()
    except Exception as exc:  # noqa: BLE001 - user code
        raise UserError(f"{flag}: {source}: the factory raised {type(exc).__name__}: {exc}") from None
    if isinstance(probe, list | tuple):
        bad = [t for t in probe if not inspect.isfunction(t)]
        if bad:
            raise UserError(f"{flag}: {source}: the factory's list holds {bad[0]!r}, not a function")
        tools = {t.__name__: t for t in probe}
        stateful, class_name = False, "Tools"
    else:
        if not callable(getattr(probe, "reset", None)):
            raise UserError(
                f"{flag}: {source}: the factory returned a {type(probe).__name__} without reset(self, **row); "
                "add one (it starts each episode), or return a list of tool functions"
            )
        tools = {
            name: fn
            for name, fn in inspect.getmembers(type(probe), predicate=inspect.isfunction)
            if not name.startswith("_") and name not in RESERVED
        }
        stateful, class_name = True, type(probe).__name__
    problems = [f"{flag}: {source}: tool {n!r} {p}; rename it" for n in tools if (p := tool_name_problem(n))]
    if len(tools) > MAX_TOOLS:
        problems.append(f"{flag}: {source}: {len(tools)} tools; a model is shown at most {MAX_TOOLS}")
    if problems:
        raise UserError(*problems)
    if not tools:
        raise UserError(
            f"{flag}: {source}: the environment has no tools; give it public methods (or return functions) "
            "with type hints and a docstring with an Args: section"
        )
    return EnvSpec(
        source,
        factory,
        tools,
        [tool_schema(n, fn, source, flag) for n, fn in tools.items()],
        stateful,
        class_name,
    )


def _import_factory(source: str, flag: str) -> Callable[[], Any]:
    target, sep, attr = source.rpartition(":")
    if not sep or not target or not attr:
        raise UserError(f"{flag}: expected module:factory or path/to/file.py:factory, got {source!r}")
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise UserError(f"{flag}: no such file {target!r}; give path/to/file.py:factory")
        module = _module_from_file(path, flag)
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:  # noqa: BLE001 - user code, or a typo
            raise UserError(f"{flag}: cannot import {target!r}: {type(exc).__name__}: {exc}") from None
    factory = getattr(module, attr, None)
    if factory is None:
        raise UserError(f"{flag}: {target} has no {attr!r}; define {attr}() returning the environment")
    if not callable(factory):
        raise UserError(f"{flag}: {target}:{attr} is not callable; it must be a function or a class")
    return factory


def _module_from_file(path: Path, flag: str) -> Any:
    name = f"ark_env_{abs(hash(str(path.resolve())))}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None  # a .py file always has a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - user code
        del sys.modules[name]
        raise UserError(f"{flag}: {path} does not run: {type(exc).__name__}: {exc}") from None
    return module


class ToolEnv:
    """The limit-applying wrapper around one user environment; see :func:`limited_env_class`.

    Counters per episode (reset by :meth:`reset`): ``tool_errors`` (a tool raised or ran out of time),
    ``n_invalid`` (unknown tool, missing or unknown arguments, malformed calls reported by the rollout) and
    ``calls`` (name, arguments, result, ok) in order.
    """

    _spec: EnvSpec
    _limits: Limits

    def __init__(self) -> None:
        made = self._spec.factory()
        if self._spec.own_timeouts:
            made.timeout = self._limits.tool_timeout
        self._inner = made if self._spec.stateful else None
        self._funcs = {t.__name__: t for t in made} if not self._spec.stateful else {}
        self._clear()

    def _clear(self) -> None:
        self.tool_errors, self.n_invalid = 0, 0
        self.calls: list[dict[str, Any]] = []

    def reset(self, **row: Any) -> str | None:
        """Start an episode from a data row: the user's ``reset`` gets the columns it accepts."""
        self._clear()
        if self._inner is None:
            return None
        fn = self._inner.reset
        params = inspect.signature(fn).parameters.values()
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            names = {p.name for p in params}
            row = {k: v for k, v in row.items() if k in names}
        observation = fn(**row)
        # the prompt grows by it: cut like any tool output (an MCP reset once returned 10 MB)
        return self._cut(observation) if isinstance(observation, str) and observation else None

    def _reward(self) -> float | None:
        """The environment's own score of the finished episode (``None`` without ``get_reward``)."""
        get = getattr(self._inner, "get_reward", None)
        if not callable(get):
            return None
        value = get()
        return None if value is None else float(value)

    def _call(self, name: str, arguments: dict[str, Any]) -> str:
        """Run one tool call within the limits; the result (or the error) as the model will read it."""
        fn = self._tool(name)
        problem = (
            "" if fn is not None else f"no tool named {name!r}; the tools are {', '.join(self._spec.tools)}"
        )
        if fn is not None:
            problem = _argument_problem(name, arguments, self._schema(name))
        if fn is None or problem:
            self.n_invalid += 1
            return self._record(name, arguments, f"error: {problem}", ok=False)
        try:
            if self._spec.own_timeouts:
                result = fn(**arguments)
            else:
                result = _run_with_timeout(fn, arguments, self._limits.tool_timeout)
        except ToolError as exc:  # the tool's own error answer (an MCP isError result, a server failure)
            self.tool_errors += 1
            return self._record(name, arguments, self._cut(f"error: {exc}"), ok=False)
        except TimeoutError:
            self.tool_errors += 1
            text = f"error: {name} took longer than {self._limits.tool_timeout:g}s and was stopped"
            return self._record(name, arguments, text, ok=False)
        except Exception as exc:  # noqa: BLE001 - the model sees what the tool raised, as agents do
            self.tool_errors += 1
            return self._record(name, arguments, f"error: {type(exc).__name__}: {exc}", ok=False)
        return self._record(name, arguments, self._cut(_as_text(result)), ok=True)

    def _malformed(self, body: str) -> str:
        """What the model reads after a ``<tool_call>`` block that is not a call (counted as invalid)."""
        self.n_invalid += 1
        text = (
            'error: malformed tool call; write <tool_call>{"name": ..., "arguments": {...}}</tool_call> '
            "with a JSON object"
        )
        return self._record("?", {"raw": body[:200]}, text, ok=False)

    def _tool(self, name: str) -> Callable | None:
        if name not in self._spec.tools:
            return None
        return getattr(self._inner, name) if self._inner is not None else self._funcs[name]

    def _schema(self, name: str) -> dict:
        return next(s for s in self._spec.schemas if s["function"]["name"] == name)

    def _cut(self, text: str) -> str:
        cap = self._limits.max_tool_output
        return text if len(text) <= cap else text[:cap] + CUT_MARKER.format(n=len(text) - cap)

    def _record(self, name: str, arguments: dict, result: str, ok: bool) -> str:
        self.calls.append({"name": name, "arguments": arguments, "result": result, "ok": ok})
        return result


def _argument_problem(name: str, arguments: dict, schema: dict) -> str:
    params = schema["function"].get("parameters", {})
    known = set(params.get("properties", {}))
    missing = [a for a in params.get("required", []) if a not in arguments]
    unknown = [a for a in arguments if a not in known]
    if missing:
        return f"{name} needs the argument {missing[0]!r}; its arguments are {', '.join(sorted(known)) or 'none'}"
    if unknown:
        return (
            f"{name} has no argument {unknown[0]!r}; its arguments are {', '.join(sorted(known)) or 'none'}"
        )
    return ""


def _as_text(result: Any) -> str:
    if isinstance(result, str):
        return result
    try:
        return json.dumps(result, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(result)


def _run_with_timeout(fn: Callable, arguments: dict, timeout: float) -> Any:
    """``fn(**arguments)`` in a daemon thread; TimeoutError after ``timeout`` s (the thread is abandoned)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn(**arguments)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True, name="ark-tool")
    thread.start()
    thread.join(timeout if timeout > 0 else None)
    if thread.is_alive():
        raise TimeoutError(timeout)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def limited_env_class(spec: EnvSpec, limits: Limits) -> type[ToolEnv]:
    """A :class:`ToolEnv` subclass with one method per tool (same name, signature and docstring).

    TRL's GRPOTrainer takes the class itself as ``environment_factory`` and lists these methods as the
    tools; calling one goes through :meth:`ToolEnv._call`, so TRL's tool loop gets the same limits and
    error texts as ours.
    """
    namespace: dict[str, Any] = {"_spec": spec, "_limits": limits}
    for name, fn in spec.tools.items():
        namespace[name] = _tool_method(name, fn, bound=spec.stateful)
    return type(f"Limited{spec.class_name}", (ToolEnv,), namespace)


def _tool_method(name: str, fn: Callable, bound: bool) -> Callable:
    def method(self, **arguments):
        return self._call(name, arguments)

    functools.update_wrapper(method, fn)
    if not bound:  # a plain function: add the self its bound-method view leaves out
        params = list(inspect.signature(fn).parameters.values())
        this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        method.__signature__ = inspect.signature(fn).replace(parameters=[this, *params])  # type: ignore[attr-defined]
    return method


def check_tokenizer(tokenizer: Any, model_path: str) -> None:
    """Refuse a tokenizer whose chat template cannot show tools, tool calls and tool results."""
    from trl.chat_template_utils import supports_tool_calling

    if not supports_tool_calling(tokenizer):
        raise UserError(
            f"--model_path: {model_path}: the chat template cannot render tool calls (--env needs them); use a "
            "model whose template supports tools (e.g. Qwen2.5), or set ark_trainer.stages.agent.toolcall."
            "AGENT_CHAT_TEMPLATE as its chat_template"
        )


class EnvFlags(Protocol):
    """The agent flags :func:`env_for` reads (the run's config has them all)."""

    @property
    def env(self) -> str | dict | None: ...
    @property
    def max_turns(self) -> int: ...
    @property
    def tool_timeout(self) -> float: ...
    @property
    def max_tool_output(self) -> int: ...


def env_for(flags: EnvFlags) -> tuple[type[ToolEnv], Limits] | None:
    """The run's limit-applying environment class and its limits (``None`` without ``--env``)."""
    if not flags.env:
        return None
    limits = Limits(flags.max_turns, flags.tool_timeout, flags.max_tool_output)
    return limited_env_class(load_env(flags.env), limits), limits


def check_agent(env: str | dict, model_path: str, trust_remote_code: bool) -> None:
    """``train --env``: the environment loads and the model's chat template can show tools (before any write)."""
    from ark_trainer.core.models.loading import load_tokenizer

    load_env(env)
    try:
        tok = load_tokenizer(model_path, trust_remote_code)
    except Exception:  # noqa: BLE001 - the model folder's own check reports a broken tokenizer
        return
    check_tokenizer(tok, model_path)
