"""Recording what the model server answers: every chat completion as one scrubbed training row.

``python -m ark_trainer.services.deploy.serve ... --record TURNS.jsonl --tag round-3`` wraps the app in
:class:`Recorder` (inside the key gate, so refused requests are never recorded). For each
``POST /v1/chat/completions`` answered with 200 it appends one JSON line::

    {"messages": [...the request's messages..., {"role": "assistant", "content": REPLY}],
     "served_by": "round-3", "model": ..., "timestamp": ..., "request_id": N, "stream": true,
     "tool_calls": [...], "source": "ark-serve", "finish_reason": "stop"}

The ``messages`` row is the shape ``train``'s loader reads (the last assistant message becomes the
candidate). Every string is scrubbed with :class:`ark_trainer.data.scrub.Scrubber`, as ``data collect``
scrubs, before it reaches the disk: API keys, e-mails, phone and ID numbers become placeholders. Content
parts are joined to text (images become ``[image]``); an assistant message's ``tool_calls`` become the
``<tool_call>`` text of :mod:`ark_trainer.stages.agent.toolcall`, so the row trains the format the model serves.

Off unless asked: plain ``ark-trainer deploy`` records nothing; ``deploy OUT --record PATH`` and
``ark-trainer loop`` (into ``LOOP/turns/turns.jsonl``) turn it on. One line is written per exchange with
a single ``write`` on a file opened for appending, so a crash loses at most the exchange in flight and a
reader never sees half a line except the last (which :func:`read_turns` skips).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ark_trainer.base.chat.toolcall import format_tool_calls
from ark_trainer.base.fileio import json_line
from ark_trainer.data.scrub import Scrubber
from ark_trainer.data.text import is_blank, replace_lone_surrogates

ROUTE = ("POST", "/v1/chat/completions")
SMOKE_HEADER = b"x-ark-smoke"


def message_text(content: Any) -> str:
    """OpenAI content (a string or a list of parts) as plain text; images become ``[image]``."""
    if isinstance(content, str):
        return content
    parts = []
    for part in content or []:
        if not isinstance(part, dict):
            continue
        if part.get("type") == "text":
            parts.append(str(part.get("text") or ""))
        elif part.get("type") in ("image", "image_url"):
            parts.append("[image]")
    return "\n".join(p for p in parts if p)


def _message(msg: dict) -> dict | None:
    """One request message in the loader's ``{role, content}`` shape (tool calls as their text)."""
    role = msg.get("role")
    if role not in ("system", "developer", "user", "assistant", "tool"):
        return None
    text = message_text(msg.get("content"))
    calls = msg.get("tool_calls") or []
    if role == "assistant" and calls:
        shown = [c.get("function", c) for c in calls if isinstance(c, dict)]
        text = "\n".join(t for t in (text, format_tool_calls(shown)) if t)
    return {"role": role, "content": text}


def reply_of(body: bytes, stream: bool) -> tuple[str, list[dict]]:
    """The assistant's text and tool calls from a response body (SSE chunks when ``stream``)."""
    if not stream:
        try:
            message = (json.loads(body).get("choices") or [{}])[0].get("message") or {}
        except (ValueError, AttributeError):
            return "", []
        found = [c.get("function", c) for c in message.get("tool_calls") or []]
        return message_text(message.get("content")), found
    text: list[str] = []
    calls: dict[int, dict] = {}
    for line in _sse_lines(body.decode("utf-8", "replace")):
        line = line.strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            continue
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                fn = call.get("function") or {}
                slot = calls.setdefault(call.get("index", len(calls)), {"name": "", "arguments": ""})
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
    return "".join(text), list(calls.values())


def _sse_lines(text: str) -> list[str]:
    """Server-sent event lines: ended by CRLF, LF or CR (the SSE spec), not by the other characters
    ``str.splitlines`` breaks at, which a JSON ``data:`` payload may hold raw (U+2028, NEL, ...)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def build_row(
    request: dict, reply: str, calls: list[dict], tag: str, request_id: int, finish_reason: str | None = None
) -> dict | None:
    """The scrubbed training row of one exchange, or ``None`` when it holds no user turn. A blank answer is
    recorded: the user's correction that follows it says what it should have been (the loop trains on that
    correction, never on the blank answer)."""
    scrubber = Scrubber()
    history = [m for m in (_message(x) for x in request.get("messages") or [] if isinstance(x, dict)) if m]
    answer = "\n".join(t for t in (reply, format_tool_calls(calls) if calls else "") if t)
    if not any(m["role"] == "user" and not is_blank(m["content"]) for m in history):
        return None
    row = {
        "messages": history + [{"role": "assistant", "content": answer}],
        "served_by": tag,
        "model": str(request.get("model") or ""),
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "request_id": request_id,
        "stream": bool(request.get("stream")),
        "tool_calls": calls,
        "source": "ark-serve",
        **({"finish_reason": finish_reason} if finish_reason else {}),  # "length": cut at the reply limit
    }
    return scrubber.value(replace_lone_surrogates(row))  # one bad character must not lose the turn


def _smoke(scope) -> bool:
    """The deploy's own smoke request (header ``X-Ark-Smoke``) is not a user's turn."""
    return any(name.lower() == SMOKE_HEADER for name, _ in scope.get("headers") or [])


async def tap_bodies(app, scope, receive, send, done: Callable[[bytes, bytes, int], None]) -> None:
    """Run ASGI ``app`` on one request, collecting its request and response bodies on the way through;
    ``done(request_body, response_body, status)`` is called once the last response chunk is sent."""
    request: list[bytes] = []
    response: list[bytes] = []
    status = [0]

    async def recv():
        message = await receive()
        if message.get("type") == "http.request":
            request.append(message.get("body", b""))
        return message

    async def snd(message):
        if message["type"] == "http.response.start":
            status[0] = message["status"]
        elif message["type"] == "http.response.body":
            response.append(message.get("body", b""))
            if not message.get("more_body"):
                done(b"".join(request), b"".join(response), status[0])
        await send(message)

    await app(scope, recv, snd)


class Recorder:
    """ASGI middleware: passes every request through to ``app`` and records chat completions to ``path``."""

    def __init__(self, app, path: str | Path, tag: str = "", log=print) -> None:
        self.app, self.path, self.tag, self.log = app, Path(path), tag, log
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.count = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or (scope.get("method"), scope.get("path")) != ROUTE or _smoke(scope):
            return await self.app(scope, receive, send)

        def done(request: bytes, response: bytes, status: int) -> None:
            if status == 200:
                self._record(request, response)

        await tap_bodies(self.app, scope, receive, send, done)

    def _record(self, request_body: bytes, response_body: bytes) -> None:
        try:
            request = json.loads(request_body or b"{}")
        except ValueError:
            return
        reply, calls = reply_of(response_body, bool(request.get("stream")))
        finish = usage_of(response_body, bool(request.get("stream"))).get("finish_reason")
        with self.lock:
            self.count += 1
            row = build_row(request, reply, calls, self.tag, self.count, finish)
            if row is None:
                return
            line = json_line(row).encode("utf-8")
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        self.log(f"[ark record] turn {self.count} answered by {self.tag or 'the served model'}", flush=True)


def read_turns(path: str | Path, start: int = 0) -> list[dict]:
    """The recorded rows from line ``start`` on; a torn last line (a write in flight) is left for later."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = []
    # "\n" only (see ark_trainer.base.fileio); the piece after the last "\n" is a write in flight, or empty
    *lines, _torn = path.read_bytes().decode("utf-8", "replace").split("\n")
    for line in lines[start:]:
        try:
            rows.append(json.loads(line))
        except ValueError:
            rows.append({"_torn": True})  # counted, so line numbers stay aligned
    return rows


def usage_of(body: bytes, stream: bool) -> dict:
    """The ``usage`` and last ``finish_reason`` of a chat completion response (SSE chunks when ``stream``)."""
    if not stream:
        try:
            data = json.loads(body)
            return {
                **(data.get("usage") or {}),
                "finish_reason": (data.get("choices") or [{}])[0].get("finish_reason"),
            }
        except (ValueError, AttributeError, IndexError):
            return {}
    found: dict = {}
    for line in _sse_lines(body.decode("utf-8", "replace")):
        line = line.strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        try:
            chunk = json.loads(line[5:])
        except ValueError:
            continue
        found.update(chunk.get("usage") or {})
        for choice in chunk.get("choices") or []:
            found["finish_reason"] = choice.get("finish_reason") or found.get("finish_reason")
    return found


class BudgetLog:
    """ASGI middleware: one log line per chat completion, what the client asked and what it got.

    ``[ark serve] turn: asked max_completion_tokens=512; prompt 211 tokens, reply 9 tokens (stop)``: the
    client's budget next to the answer's length, so a client that budgets 1 token (a provider entry whose
    window is smaller than the client's own prompt) shows at once.
    """

    def __init__(self, app, log=print) -> None:
        self.app, self.log = app, log

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or (scope.get("method"), scope.get("path")) != ROUTE:
            return await self.app(scope, receive, send)
        await tap_bodies(
            self.app, scope, receive, send, lambda request, response, _status: self._say(request, response)
        )

    def _say(self, request_body: bytes, response_body: bytes) -> None:
        try:
            body = json.loads(request_body or b"{}")
        except ValueError:
            return
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        usage = usage_of(response_body, bool(body.get("stream")))
        self.log(
            f"[ark serve] turn: asked max_completion_tokens={asked}; prompt {usage.get('prompt_tokens')} tokens, "
            f"reply {usage.get('completion_tokens')} tokens ({usage.get('finish_reason')})",
            flush=True,
        )
