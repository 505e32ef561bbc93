"""The request an OpenClaw turn really sends, recorded from the installed OpenClaw and replayed.

    ark-trainer eval --record-openclaw-shape      # one real `openclaw agent --local` turn, captured

Parity (``ark-trainer eval OUT --through openclaw``) asks the served model each held-out prompt in the
shape OpenClaw sends it: OpenClaw's system prompt (identity, safety, tooling, skills, the workspace's
bootstrap files), its tool schemas, the user's message as OpenClaw wraps it (``[date] message``) and the
internal-context note it adds after it. That shape is not guessed: :func:`record_shape` runs one real
``openclaw agent --local`` turn in a fresh OpenClaw state (its default workspace and bootstrap files)
against :class:`CaptureServer`, a stdlib server on 127.0.0.1 that keeps the request body and answers
"ok", with the message replaced by :data:`MARKER`. The body is saved as ``openclaw_turn.json`` next to
this module (shipped in the package); :func:`turn_request` puts a message back in place of the marker.
Refresh it when OpenClaw changes (the file names the version it came from).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, write_json

MARKER = "ARK-SHAPE-MESSAGE-5f1d"
SHAPE_FILE = Path(__file__).with_name("openclaw_turn.json")
SHAPE_MODEL = "ark-shape"


def _sse(model: str, text: str) -> bytes:
    def chunk(delta: dict, finish: str | None) -> str:
        body = {"id": "shape-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}  # fmt: skip
        return f"data: {json.dumps(body)}\n\n"

    usage = {"id": "shape-1", "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [],
             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}  # fmt: skip
    parts = [chunk({"role": "assistant", "content": text}, None), chunk({}, "stop")]
    return ("".join(parts) + f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n").encode()


class _Handler(BaseHTTPRequestHandler):
    server: CaptureServer

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        data = {"object": "list", "data": [{"id": SHAPE_MODEL, "object": "model", "owned_by": "ark"}]}
        self._send(200, "application/json", json.dumps(data).encode())

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.requests.append(body)
        self._send(200, "text/event-stream", _sse(str(body.get("model") or SHAPE_MODEL), "ok"))

    def _send(self, code: int, kind: str, data: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class CaptureServer(ThreadingHTTPServer):
    """An OpenAI-compatible server on 127.0.0.1 that keeps every request body and answers "ok"."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[dict] = []
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def __enter__(self) -> CaptureServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()
        self.server_close()


def capture_turn(patch: dict, message: str = MARKER, timeout: float = 240) -> tuple[dict, dict]:
    """``(request body, agent reply)`` of one real ``openclaw agent --local`` turn in a fresh state.

    ``patch(base_url)``'s config (a provider entry pointing at the capture server, and any knobs) is the
    whole ``openclaw.json`` of that state; OpenClaw writes its default workspace there on first use.
    """
    from ark_trainer.base.external import openclaw_cli as cli

    with tempfile.TemporaryDirectory(prefix="ark-shape-") as tmp, CaptureServer() as server:
        state = Path(tmp) / "state"
        state.mkdir()
        write_json(state / "openclaw.json", patch_for(server.base_url, patch))
        env = {
            "OPENCLAW_STATE_DIR": str(state),
            "HOME": tmp,
            "OPENCLAW_CONFIG_PATH": str(state / "openclaw.json"),
        }
        args = ["agent", "--local", "--json", "--timeout", str(int(timeout)), "--session-id", "shape",
                "--message", message]  # fmt: skip
        reply = cli.run_json(args, timeout=timeout + 60, env=env)
        if not server.requests:
            raise UserError("eval --record-openclaw-shape: OpenClaw sent no request to the capture server")
        return server.requests[-1], reply


def patch_for(base_url: str, patch: dict) -> dict:
    """``patch`` with every provider's ``baseUrl`` set to ``base_url`` (the capture server)."""
    out = json.loads(json.dumps(patch))
    for provider in out.get("models", {}).get("providers", {}).values():
        provider["baseUrl"] = base_url
    return out


def record_shape(path: Path = SHAPE_FILE, log=print) -> dict:
    """Record OpenClaw's turn request with its defaults and deploy's provider entry; write ``path``."""
    from ark_trainer.base.external import openclaw_cli as cli
    from ark_trainer.services.openclaw.deploy import provider_patch

    patch = provider_patch(SHAPE_MODEL, 1, 8192, 512, None, "ark-shape-key")
    body, _reply = capture_turn(patch)
    shape = {
        "openclaw": cli.version(),
        "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "how": "one `openclaw agent --local` turn in a fresh state, OpenClaw's defaults, provider entry as "
        "deploy writes it (contextWindow 8192, maxTokens 512); the message is the marker",
        "marker": MARKER,
        "request": body,
    }
    if MARKER not in json.dumps(body["messages"], ensure_ascii=False):
        raise UserError("eval --record-openclaw-shape: the message did not appear in OpenClaw's request")
    write_json(path, shape)
    system: dict = next((m for m in body["messages"] if m.get("role") == "system"), {})
    log(
        f"recorded OpenClaw's turn request ({shape['openclaw']}): {len(body['messages'])} messages, "
        f"system prompt {len(str(system.get('content') or ''))} chars, {len(body.get('tools') or [])} tools "
        f"-> {path}"
    )
    return shape


def load_shape(path: Path | None = None) -> dict:
    path = Path(path or os.environ.get("ARK_OPENCLAW_SHAPE") or SHAPE_FILE)
    if not path.is_file():
        raise UserError(
            f"eval: no recorded OpenClaw request at {path}; run `ark-trainer eval --record-openclaw-shape`"
        )
    return read_json(path)


def _replace(value: Any, marker: str, text: str) -> Any:
    if isinstance(value, str):
        return value.replace(marker, text)
    if isinstance(value, list):
        return [_replace(v, marker, text) for v in value]
    if isinstance(value, dict):
        return {k: _replace(v, marker, text) for k, v in value.items()}
    return value


def turn_request(shape: dict, message: str, model: str) -> dict:
    """The body OpenClaw would send for ``message`` (its system prompt, tools, wrapping), to ``model``."""
    body = _replace(shape["request"], shape["marker"], message)
    body["model"] = model
    return body
