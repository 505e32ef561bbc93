"""One JSON POST with a total deadline: from connecting to the answer's last byte, not per socket read.

``urllib``'s ``timeout`` bounds each socket operation, so a server that sends its headers and then one byte
a second holds a caller for as long as it likes. Here the exchange runs in a daemon thread that the caller
waits on for ``timeout`` seconds at most; at the deadline the connection's socket is shut down and the body,
read a piece at a time, stops being read. The answer is read up to ``max_bytes``. Used by the LLM judge
(``rewards/llm_judge.py``) and the planning model (``services/nl/llm.py``); standard library only.
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
    """The connections of one exchange; :meth:`expire` shuts them down and makes the reader stop."""

    def __init__(self) -> None:
        self.expired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def track(self, conn: http.client.HTTPConnection) -> http.client.HTTPConnection:
        with self._lock:
            self._connections.append(conn)
        return conn

    def expire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._connections:
                _shut(conn)


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

        return self.do_open(connect, req, context=getattr(self, "_context", None))


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
    ``handlers`` go to the opener too (e.g. one that refuses redirects). The exchange runs in a daemon
    thread: at the deadline the caller gets its TimeoutError at once, and the thread's socket is shut down
    (a server still trickling headers keeps only that thread, never the caller).
    """
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    deadline = _Deadline()
    outcome: dict[str, Any] = {}

    def exchange() -> None:
        try:
            outcome["raw"] = _exchange(request, deadline, timeout, max_bytes, handlers)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=exchange, name="ark-http", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive() or deadline.expired:
        deadline.expire()
        raise TimeoutError(f"no complete answer within {timeout:g}s")
    if "error" in outcome:
        error = outcome["error"]
        if isinstance(error, http.client.HTTPException):  # a garbled status line or headers
            raise ConnectionError(f"{type(error).__name__}: {error}") from None
        raise error
    try:
        return json.loads(outcome["raw"].decode("utf-8"))
    except RecursionError:  # thousands of nested brackets: not an answer anyone means
        raise ValueError("the answer nests too deeply") from None


def _exchange(
    request: urllib.request.Request,
    deadline: _Deadline,
    timeout: float,
    max_bytes: int,
    handlers: tuple[urllib.request.BaseHandler, ...],
) -> bytes:
    """The answer's bytes, read a piece at a time so that an expired deadline stops the reading."""
    opener = urllib.request.build_opener(*handlers, _HTTP(deadline), _HTTPS(deadline))
    chunks: list[bytes] = []
    size = 0
    with opener.open(request, timeout=timeout) as response:
        while not deadline.expired:
            chunk = response.read1(65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise AnswerTooLarge(f"more than {max_bytes} bytes")
    raise TimeoutError("deadline passed")
