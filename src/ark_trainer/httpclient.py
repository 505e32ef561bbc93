"""One JSON POST with a total deadline: from connecting to the answer's last byte, not per socket read.

``urllib``'s ``timeout`` bounds each socket operation, so a server that sends its headers and then one byte
a second holds a caller for as long as it likes. Here a timer shuts the connection's socket down when the
deadline passes, wherever the request is (connecting, sending, reading headers or the body), and the answer
is read up to ``max_bytes``. Used by the LLM judge (``rewards/llm_judge.py``) and the planning model
(``nl/llm.py``); standard library only.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import urllib.request
from typing import Any


class AnswerTooLarge(ValueError):
    """The server sent more than ``max_bytes``."""


class _Deadline:
    """Shuts down every connection it was given once ``seconds`` have passed."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def track(self, conn: http.client.HTTPConnection) -> http.client.HTTPConnection:
        with self._lock:
            self._connections.append(conn)
            if self.expired:
                _shut(conn)
        return conn

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._connections:
                _shut(conn)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv/send in the requesting thread


class _HTTP(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req):
        return self.do_open(
            lambda host, **kw: self.deadline.track(http.client.HTTPConnection(host, **kw)), req
        )


class _HTTPS(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req):
        def connect(host, **kw):
            return self.deadline.track(http.client.HTTPSConnection(host, **kw))

        return self.do_open(connect, req, context=self._context)


def post_json(
    url: str,
    body: Any,
    headers: dict[str, str],
    timeout: float,
    max_bytes: int,
    handlers: tuple[urllib.request.BaseHandler, ...] = (),
) -> Any:
    """POST ``body`` as JSON, return the parsed answer; the whole exchange takes at most ``timeout`` s.

    Raises what ``urllib`` raises (``HTTPError``, ``URLError``, ``OSError``), ``TimeoutError`` when the
    deadline passed, :class:`AnswerTooLarge`, or ``ValueError`` for an answer that is not JSON.
    ``handlers`` go to the opener too (e.g. one that refuses redirects).
    """
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with _Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(*handlers, _HTTP(deadline), _HTTPS(deadline))
        try:
            with opener.open(request, timeout=timeout) as response:
                raw = response.read(max_bytes + 1)
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise TimeoutError(f"no complete answer within {timeout:g}s") from None
            if isinstance(exc, http.client.HTTPException):
                raise ConnectionError(f"{type(exc).__name__}: {exc}") from None
            raise
        if deadline.expired:  # the shutdown ended the read early: what came is not the whole answer
            raise TimeoutError(f"no complete answer within {timeout:g}s")
    if len(raw) > max_bytes:
        raise AnswerTooLarge(f"more than {max_bytes} bytes")
    return json.loads(raw.decode("utf-8"))
