"""The shape of a chat-completions request body, checked before the model server sees it.

``transformers serve`` trusts the body: ``"messages": "hi"`` or a content object raised inside its handler
(HTTP 500 and a traceback in ``server.log``), and an unknown role was answered 200. OpenAI's API answers
400 with the field and the reason; :func:`body_problem` says the same in one line, and
:class:`ark_trainer.deploy.gate.Gate` answers 400 with it.

Checked: the body is a JSON object (UTF-8, no lone surrogates); ``messages`` is a non-empty list of
objects; each ``role`` is one of OpenAI's (system, developer, user, assistant, tool, function); each
``content`` is text, a list of content parts (objects with a ``type``; a ``text`` part holds text), or null
for an assistant message (one with tool calls); ``tool_calls`` is a list of objects. The rest of the body
(sampling parameters, tools) is left to the server.
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "developer", "user", "assistant", "tool", "function")
_KINDS = {str: "string", int: "number", float: "number", bool: "boolean", list: "list", dict: "object"}


def _kind(value: Any) -> str:
    return "null" if value is None else _KINDS.get(type(value), type(value).__name__)


def body_problem(body: bytes) -> str | None:
    """One line saying what is wrong with a chat-completions body, or None when its shape is right."""
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
    for i, message in enumerate(messages):
        problem = _message_problem(message)
        if problem:
            return f"messages[{i}]{problem}"
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
    calls = message.get("tool_calls")
    if calls is not None and (not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls)):
        return f".tool_calls: expected a list of tool-call objects, got {_kind(calls)}"
    return None
