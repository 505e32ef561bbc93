"""The shape of a chat-completions request body, checked before the model server sees it.

``transformers serve`` trusts the body: ``"messages": "hi"`` or a content object raised inside its handler
(HTTP 500 and a traceback in ``server.log``), and an unknown role was answered 200. OpenAI's API answers
400 with the field and the reason; :func:`body_problem` says the same in one line, and
:class:`ark_trainer.services.deploy.gate.Gate` answers 400 with it.

Checked: the body is a JSON object (UTF-8, no lone surrogates); ``messages`` is a non-empty list of at most
:data:`MAX_MESSAGES` objects, at least one of them a user or assistant turn; each ``role`` is one of OpenAI's
(system, developer, user, assistant, tool, function); each ``content`` is text, a list of content parts
(objects with a ``type``; a ``text`` part holds text), or null for an assistant message (one with tool
calls); a ``name`` is text; ``tool_calls`` is a list of objects whose ``function`` has a name and its
arguments as text. The parameters transformers reads without checking (a ``"temperature": "hot"`` or a
``"seed": "x"`` was a 500) have OpenAI's types and ranges (:data:`NUMBERS`, :data:`SWITCHES`), and so do
``stop``, ``tools``, ``tool_choice``, ``response_format`` and ``model``. ``logit_bias`` (which transformers
turns into a ``sequence_bias`` without checking: a key that is not a number, a token past the vocabulary, an
empty object or a bias of ``1e400`` was a 500) is a non-empty object of at most :data:`MAX_BIASED` token ids
(decimal text, below the model's vocabulary size where known) to biases in [-100, 100], as OpenAI's. Other
keys are left to the server.
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
MAX_MESSAGES = 10_000  # 200,000 short messages held the server for minutes
INT64 = 2**63
# name → (low, high, integer): OpenAI's ranges; an integer outside int64 overflows torch's seed
NUMBERS: dict[str, tuple[float, float, bool]] = {
    "max_tokens": (1, 2**31 - 1, True), "max_completion_tokens": (1, 2**31 - 1, True), "n": (1, 128, True),
    "temperature": (0, 2, False), "top_p": (0, 1, False), "frequency_penalty": (-2, 2, False),
    "presence_penalty": (-2, 2, False), "seed": (-INT64, INT64 - 1, True), "top_logprobs": (0, 20, True),
}  # fmt: skip
SWITCHES = ("stream", "logprobs", "parallel_tool_calls")
MAX_BIASED = 300  # token ids in one logit_bias: OpenAI's limit
MAX_BIAS = 100.0
TOOL = "{type: function, function: {name, ...}}"
_KINDS = {str: "string", int: "number", float: "number", bool: "boolean", list: "list", dict: "object"}


def _kind(value: Any) -> str:
    return "null" if value is None else _KINDS.get(type(value), type(value).__name__)


def body_problem(body: bytes, vocab_size: int | None = None) -> str | None:
    """One line saying what is wrong with a chat-completions body, or None when its shape is right.

    ``vocab_size``: the served model's, when known (a ``logit_bias`` token at or past it is refused)."""
    from ark_trainer.data.text import first_lone_surrogate

    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        reason = exc.msg if isinstance(exc, json.JSONDecodeError) else type(exc).__name__
        return f"the body is not valid JSON ({reason}); send a JSON object"
    if not isinstance(data, dict):
        return f"the body must be a JSON object, got {_kind(data)}"
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        got = "none" if "messages" not in data else _kind(messages)
        return f"messages: expected a non-empty list of {{role, content}} messages, got {got}"
    if len(messages) > MAX_MESSAGES:
        return f"messages: {len(messages)} messages; at most {MAX_MESSAGES} in one request"
    for i, message in enumerate(messages):
        problem = _message_problem(message)
        if problem:
            return f"messages[{i}]{problem}"
    if not any(m.get("role") in ("user", "assistant") for m in messages):
        return "messages: holds no user or assistant message; send the user's turn"
    problem = _params_problem(data) or _logit_bias_problem(data.get("logit_bias"), vocab_size)
    if problem:
        return problem
    bad = first_lone_surrogate(data)
    if bad is not None:
        return f"{bad[0]}: holds a lone surrogate ({bad[1]}), which is not a character; send UTF-8 text"
    return None


def _message_problem(message: Any) -> str | None:
    """``.field: reason`` for one message (appended to ``messages[i]``), or None."""
    if not isinstance(message, dict):
        return f": expected an object with 'role' and 'content', got {_kind(message)}"
    role = message.get("role")
    if role not in ROLES:
        shown = repr(role) if isinstance(role, str) else _kind(role)
        return f".role: unknown role {shown}; use one of {', '.join(ROLES)}"
    content = message.get("content")
    if content is None and role != "assistant":
        return f".content: required for a {role} message (text or a list of content parts)"
    if content is not None and not isinstance(content, str):
        if not isinstance(content, list):
            return f".content: expected text or a list of content parts, got {_kind(content)}"
        for j, part in enumerate(content):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                return f".content[{j}]: expected a content part (an object with a 'type'), got {_kind(part)}"
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                return f".content[{j}].text: expected text, got {_kind(part.get('text'))}"
    if "name" in message and not isinstance(message["name"], str):
        return f".name: expected text, got {_kind(message['name'])}"
    calls = message.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)):
        return f".tool_calls: expected a list of tool-call objects, got {_kind(calls)}"
    for j, call in enumerate(calls or []):
        function = call.get("function")
        if not (
            isinstance(function, dict)
            and isinstance(function.get("name"), str)
            and isinstance(function.get("arguments", ""), str)
        ):
            got = _kind(function.get("arguments")) if isinstance(function, dict) else _kind(function)
            return (
                f".tool_calls[{j}].function: expected an object with a name and arguments (text), got {got}"
            )
    return None


def _params_problem(data: dict) -> str | None:
    """``key: reason`` for the first sampling or tool parameter of the wrong type or range, or None."""
    for key, (low, high, integer) in NUMBERS.items():
        value = data.get(key)
        if value is None:
            continue
        kinds = int if integer else int | float
        if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
            what = (
                f"an integer in [{int(low)}, {int(high)}]" if integer else f"a number in [{low:g}, {high:g}]"
            )
            shown = value if isinstance(value, int | float) and not isinstance(value, bool) else _kind(value)
            return f"{key}: expected {what}, got {shown}"
    for key in SWITCHES:
        if key in data and data[key] is not None and not isinstance(data[key], bool):
            return f"{key}: expected true or false, got {_kind(data[key])}"
    return _stop_problem(data.get("stop")) or _tools_problem(data) or _other_problem(data)


def _logit_bias_problem(bias: Any, vocab_size: int | None) -> str | None:
    """``logit_bias: reason`` for a bias map transformers would fail on (or apply as infinity), or None."""
    if bias is None:
        return None
    if not isinstance(bias, dict) or not bias or len(bias) > MAX_BIASED:
        got = f"{len(bias)} entries" if isinstance(bias, dict) else _kind(bias)
        return f"logit_bias: expected an object of 1 to {MAX_BIASED} token ids to biases, got {got}"
    limit = vocab_size if vocab_size and vocab_size > 0 else 2**31
    for key, value in bias.items():
        if not (key.isascii() and key.isdigit() and len(key) <= 10 and int(key) < limit):
            which = f"below the vocabulary size {limit}" if vocab_size else "a token id"
            return f'logit_bias: key {key[:40]!r} is not a token id; use decimal ids {which}, e.g. "50256"'
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not -MAX_BIAS <= value <= MAX_BIAS
        ):
            shown = value if isinstance(value, int | float) and not isinstance(value, bool) else _kind(value)
            return f"logit_bias[{key!r}]: expected a number in [-100, 100], got {shown}"
    return None


def _stop_problem(stop: Any) -> str | None:
    if stop is None or isinstance(stop, str):
        return None
    if isinstance(stop, list) and len(stop) <= 4 and all(isinstance(s, str) for s in stop):
        return None
    return f"stop: expected text or a list of up to 4 texts, got {_kind(stop)}"


def _tools_problem(data: dict) -> str | None:
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            return f"tools: expected a list of {TOOL} objects, got {_kind(tools)}"
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                return f"tools[{i}]: expected a {TOOL} object, got {_kind(tool)}"
            function = tool.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                return f"tools[{i}].function: expected an object with a name, got {_kind(function)}"
    choice = data.get("tool_choice")
    if choice is not None and choice not in ("none", "auto", "required") and not isinstance(choice, dict):
        return f"tool_choice: expected none, auto, required or an object, got {_kind(choice)}"
    return None


def _other_problem(data: dict) -> str | None:
    response_format = data.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        return f"response_format: expected an object, got {_kind(response_format)}"
    if "model" in data and not isinstance(data["model"], str):
        return f"model: expected text, got {_kind(data['model'])}"
    return None
