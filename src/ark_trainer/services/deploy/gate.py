"""The model server's gate: the deployment's API key on every route, no cross-origin browser requests,
and only the three routes OpenClaw uses.

``transformers serve`` on its own answers anyone who can reach the port: it checks no key, its
``/load_model`` loads whatever folder or Hub id a caller names, ``/reset`` unloads the model, and a web page
the user has open can reach 127.0.0.1 with a "simple" cross-origin request (a ``text/plain`` POST needs no
CORS preflight). :class:`Gate` wraps its ASGI app and answers before transformers sees the request:

- 403 for a browser request from another origin (an ``Origin`` that is not the server's own, a
  ``Sec-Fetch-Site`` of ``cross-site``/``same-site``) or a ``Host`` other than 127.0.0.1/localhost:PORT (DNS
  rebinding);
- 401 without ``Authorization: Bearer <key>`` (compared in constant time);
- 404 for any route but ``POST /v1/chat/completions``, ``GET /v1/models`` and ``GET /health`` (so
  ``/load_model``, ``/reset`` and the rest are gone);
- 415 for a POST whose body is not ``application/json``;
- 400 for a chat body of the wrong shape (``"messages": "hi"``, a content object, an unknown role, a
  ``"temperature": "hot"``), with the field and the reason (:mod:`ark_trainer.services.deploy.chatbody`), before
  transformers sees it (a ``logit_bias`` token checked against the served model's vocabulary, read from its
  ``config.json`` at each request, so a hot-swapped model's own); 413 for a body over :data:`MAX_BODY_BYTES`,
  read no further.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from pathlib import Path

from ark_trainer.core.runtime.system import loopback_hosts
from ark_trainer.services.deploy.chatbody import body_problem

CHAT = ("POST", "/v1/chat/completions")
ROUTES = {CHAT, ("GET", "/v1/models"), ("GET", "/health")}


MAX_BODY_BYTES = 32 * 1024 * 1024  # a long agent conversation is a few MB; more is read no further


async def _read_body(receive):
    """The whole request body (None past :data:`MAX_BODY_BYTES`), and a ``receive`` that hands it to the
    app again (then waits as before)."""
    chunks: list[bytes] = []
    size, more = 0, True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client went away: let the app see it
            return b"".join(chunks), _replay([message], receive)
        chunks.append(message.get("body", b""))
        size += len(chunks[-1])
        if size > MAX_BODY_BYTES:
            return None, receive
        more = message.get("more_body", False)
    body = b"".join(chunks)
    return body, _replay([{"type": "http.request", "body": body, "more_body": False}], receive)


def _replay(messages: list[dict], receive):
    async def replayed():
        return messages.pop(0) if messages else await receive()

    return replayed


def config_vocab_size(model_dir: Path) -> int | None:
    """The vocabulary size a model folder's ``config.json`` states (its logits' width), or None."""
    from ark_trainer.base.fileio import read_json

    try:
        config = read_json(Path(model_dir) / "config.json", 1024 * 1024)
        size = config.get("vocab_size", config.get("text_config", {}).get("vocab_size"))
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None


class Gate:
    """ASGI middleware around ``app`` for a server on ``127.0.0.1:port`` whose key is ``key``;
    ``vocab_size`` tells the served model's vocabulary size when it is known."""

    def __init__(self, app, key: str, port: int, vocab_size: Callable[[], int | None] = lambda: None) -> None:
        self.app = app
        self.vocab_size = vocab_size
        self.auth = f"Bearer {key}".encode()
        self.origins = {f"http://{host}:{port}".encode() for host in ("127.0.0.1", "localhost")}
        self.hosts = {host.encode() for host in loopback_hosts(port)}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            return await self.app(scope, receive, send)
        refusal = self.refusal(scope)
        if refusal is None and (scope.get("method"), scope.get("path")) == CHAT:
            body, receive = await _read_body(receive)
            if body is None:
                refusal = (413, f"the body is over {MAX_BODY_BYTES} bytes; send a shorter conversation")
            else:
                problem = body_problem(body, self.vocab_size())
                refusal = (400, problem) if problem else None
        if refusal is None:
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        status, message = refusal
        body = json.dumps({"error": {"message": message, "type": "ark_gate"}}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        if status == 401:
            headers.append((b"www-authenticate", b"Bearer"))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def refusal(self, scope) -> tuple[int, str] | None:
        """``(status, message)`` for a request to refuse, ``None`` for one to serve."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers") or []:
            headers.setdefault(name.lower(), value)
        origin = headers.get(b"origin")
        if origin is not None and origin not in self.origins:
            return 403, "cross-origin requests are refused"
        if headers.get(b"sec-fetch-site", b"none") in (b"cross-site", b"same-site"):
            return 403, "cross-site requests are refused"
        if headers.get(b"host") not in self.hosts:
            return 403, "unexpected Host header"
        if not hmac.compare_digest(headers.get(b"authorization", b""), self.auth):
            return 401, "missing or wrong API key (Authorization: Bearer <key>)"
        method = scope.get("method", "GET")
        if (method, scope.get("path", "")) not in ROUTES:
            return 404, "not found"
        content_type = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        if method == "POST" and content_type != b"application/json":
            return 415, "the body must be application/json"
        return None
