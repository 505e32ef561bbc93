"""Chat bodies of the wrong shape, and one chat request through the model server's gate (``call_gate``).

A chat body whose ``messages`` is a string, whose content is an object, or whose role is unknown is answered
400 with the field and the reason (as OpenAI's API does), never 500 with a traceback in ``server.log``.
"""

from __future__ import annotations

import asyncio
import json

USER = {"role": "user", "content": "hi"}
BAD_BODIES = [
    (b"not json", "the body is not valid JSON"),
    (b"\xff\xfe{}", "the body is not valid JSON"),
    (b"[1, 2]", "the body must be a JSON object, got list"),
    ({"model": "m"}, "messages: expected a non-empty list of {role, content} messages, got none"),
    ({"messages": "hi"}, "messages: expected a non-empty list of {role, content} messages, got string"),
    ({"messages": []}, "messages: expected a non-empty list"),
    ({"messages": {"role": "user", "content": "hi"}}, "messages: expected a non-empty list of {role, content} messages, got object"),
    ({"messages": ["hi"]}, "messages[0]: expected an object with 'role' and 'content', got string"),
    ({"messages": [{"role": "hacker", "content": "hi"}]}, "messages[0].role: unknown role 'hacker'; use one of system"),
    ({"messages": [USER, {"role": "root", "content": "x"}]}, "messages[1].role: unknown role 'root'"),
    ({"messages": [{"content": "hi"}]}, "messages[0].role: unknown role null"),
    ({"messages": [{"role": 1, "content": "hi"}]}, "messages[0].role: unknown role number"),
    ({"messages": [{"role": "user", "content": {"text": "hi"}}]}, "messages[0].content: expected text or a list of content parts, got object"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages[0].content: expected text or a list of content parts, got number"),
    ({"messages": [{"role": "user"}]}, "messages[0].content: required for a user message"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content: required for a user message"),
    ({"messages": [{"role": "user", "content": ["hi"]}]}, "messages[0].content[0]: expected a content part"),
    ({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, "messages[0].content[0].text: expected text, got number"),
    ({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": {"id": 1}}]}, "messages[1].tool_calls: expected a list"),
    ({"messages": [{"role": "user", "content": "a\ud800"}]}, "messages[0].content: holds a lone surrogate (\\ud800)"),
]  # fmt: skip
# logit_bias maps transformers turned into a 500; the last ones only with the model's vocabulary known (the
# tiny test models' is at most a few thousand tokens)
LOGIT_BIAS_BODIES = [
    ({"messages": [USER], "logit_bias": {"1": 1e300}}, "logit_bias['1']: expected a number in [-100, 100], got 1e+300"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"1": 1e400}}', "logit_bias['1']: expected a number in [-100, 100], got inf"),
    (b'{"messages": [{"role": "user", "content": "hi"}], "logit_bias": {"1": NaN}}', "logit_bias['1']: expected a number in [-100, 100], got nan"),
    ({"messages": [USER], "logit_bias": {"1": -101}}, "logit_bias['1']: expected a number in [-100, 100], got -101"),
    ({"messages": [USER], "logit_bias": {"1": "100"}}, "logit_bias['1']: expected a number in [-100, 100], got string"),
    ({"messages": [USER], "logit_bias": {"1": True}}, "logit_bias['1']: expected a number in [-100, 100], got boolean"),
    ({"messages": [USER], "logit_bias": {"hello": 5}}, "logit_bias: key 'hello' is not a token id"),
    ({"messages": [USER], "logit_bias": {"-3": 5}}, "logit_bias: key '-3' is not a token id"),
    ({"messages": [USER], "logit_bias": {"1.5": 5}}, "logit_bias: key '1.5' is not a token id"),
    ({"messages": [USER], "logit_bias": {"\u0661": 5}}, "logit_bias: key '\u0661' is not a token id"),  # Arabic-Indic one
    ({"messages": [USER], "logit_bias": {"9" * 400: 5}}, "logit_bias: key '9999999999"),
    ({"messages": [USER], "logit_bias": {}}, "logit_bias: expected an object of 1 to 300 token ids to biases, got 0 entries"),
    ({"messages": [USER], "logit_bias": [[1, 5]]}, "logit_bias: expected an object of 1 to 300 token ids to biases, got list"),
    ({"messages": [USER], "logit_bias": {str(i): 1 for i in range(301)}}, "logit_bias: expected an object of 1 to 300 token ids to biases, got 301 entries"),
]  # fmt: skip
PAST_THE_VOCABULARY = [
    ({"messages": [USER], "logit_bias": {str(t): 5}}, "logit_bias: key") for t in (100_000, 2**31, 10**9)
]


def encoded(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def call_gate(body: bytes, chunks: int = 1, vocab_size: int | None = None) -> tuple[int, dict, bytes | None]:
    """(status, JSON answer, body the app received) of one chat request through the gate."""
    from ark_trainer.services.deploy.gate import Gate

    seen: list[bytes] = []

    async def app(scope, receive, send):
        parts, more = [], True
        while more:
            message = await receive()
            parts.append(message.get("body", b""))
            more = message.get("more_body", False)
        seen.append(b"".join(parts))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b'{"ok": true}'})

    gate = Gate(app, "k" * 43, 8765, vocab_size=lambda: vocab_size)
    size = max(1, len(body) // chunks + 1)
    pieces = [body[i : i + size] for i in range(0, len(body), size)] or [b""]
    incoming = [
        {"type": "http.request", "body": p, "more_body": i < len(pieces) - 1} for i, p in enumerate(pieces)
    ]
    sent: list[dict] = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    headers = [(b"host", b"127.0.0.1:8765"), (b"authorization", b"Bearer " + b"k" * 43),
               (b"content-type", b"application/json")]  # fmt: skip
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}
    asyncio.run(gate(scope, receive, send))
    answer = json.loads(b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body"))
    return sent[0]["status"], answer, seen[0] if seen else None
