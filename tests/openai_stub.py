"""A scripted OpenAI-compatible chat server for OpenClaw tests (stdlib only, 127.0.0.1).

The first request of a session gets a tool call to ``ls``; every request that carries a tool result
gets a text reply. Every request body is kept in ``StubServer.requests``.
Run alone for manual checks: ``python tests/openai_stub.py PORT``.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = "Done: the folder is listed. Contact ops@example.com or 13812345678."


def _chunk(model: str, delta: dict, finish: str | None = None) -> bytes:
    body = {
        "id": "stub-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server: StubServer

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:
        self._send(200, "application/json", json.dumps({"object": "list", "data": []}).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        self.server.requests.append(body)
        model = body.get("model", "stub")
        if any(m.get("role") == "tool" for m in body["messages"]):
            deltas = [({"role": "assistant", "content": REPLY}, None), ({}, "stop")]
        else:
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "ls", "arguments": json.dumps({"path": "."})},
            }
            deltas = [({"role": "assistant", "tool_calls": [call]}, None), ({}, "tool_calls")]
        chunks = b"".join(_chunk(model, d, f) for d, f in deltas) + b"data: [DONE]\n\n"
        self._send(200, "text/event-stream", chunks)

    def _send(self, code: int, kind: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.requests: list[dict] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def start(self) -> StubServer:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self


if __name__ == "__main__":
    StubServer(int(sys.argv[1])).serve_forever()
