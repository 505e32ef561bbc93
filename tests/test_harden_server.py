"""The model server on bodies of the wrong shape, and deploying on a port that is taken.

A chat body whose ``messages`` is a string, whose content is an object, or whose role is unknown is
answered 400 with the field and the reason (as OpenAI's API does), never 500 with a traceback in
``server.log``; the gate checks the shape before transformers sees the body. ``deploy --port P`` with P
held by another program exits 2 naming the port and the fix, and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
import socket
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.deploy.chatbody import body_problem

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
GOOD_BODIES = [
    {"messages": [USER]},
    {"model": "m", "stream": True, "messages": [{"role": "system", "content": "s"}, USER]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]}]},
    {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                  "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "content": "ok", "tool_call_id": "c"}]},
    {"messages": [{"role": "developer", "content": "d"}, USER]},
]  # fmt: skip


def encoded(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES)
def test_a_wrong_body_is_one_line_naming_the_field(body, reason):
    problem = body_problem(encoded(body))
    assert problem is not None and problem.startswith(reason), problem
    assert "\n" not in problem


@pytest.mark.parametrize("body", GOOD_BODIES)
def test_right_bodies_pass(body):
    assert body_problem(encoded(body)) is None


def call_gate(body: bytes, chunks: int = 1) -> tuple[int, dict, bytes | None]:
    """(status, JSON answer, body the app received) of one chat request through the gate."""
    from ark_trainer.deploy.gate import Gate

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

    gate = Gate(app, "k" * 43, 8765)
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


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES[:12])
def test_the_gate_answers_400_and_never_calls_the_model(body, reason):
    status, answer, reached = call_gate(encoded(body))
    assert status == 400 and reached is None
    assert answer["error"]["message"].startswith(reason)


@pytest.mark.parametrize("chunks", [1, 3])
def test_the_gate_hands_a_right_body_on_whole(chunks):
    body = json.dumps(
        {"messages": [{"role": "user", "content": "长的问题 " * 200}]}, ensure_ascii=False
    ).encode()
    status, answer, reached = call_gate(body, chunks)
    assert status == 200 and answer == {"ok": True} and reached == body


def _held_port() -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    return sock, sock.getsockname()[1]


def test_deploy_on_a_taken_port_names_it_and_writes_nothing(tmp_path):
    from conftest import run_cli, save_tiny_qwen

    out = tmp_path / "run"
    save_tiny_qwen(out / "model")
    sock, port = _held_port()
    try:
        result = run_cli("deploy", str(out), "--port", str(port), cwd=tmp_path)
    finally:
        sock.close()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"port {port}" in lines[0] and "already in use" in lines[0] and "--port" in lines[0]
    assert not (out / "deploy").exists()


def test_a_server_that_lost_the_race_for_its_port_is_named(tmp_path):
    from ark_trainer.deploy.process import wait_healthy
    from ark_trainer.errors import UserError

    log = tmp_path / "server.log"
    log.write_text("INFO: started\nERROR: [Errno 98] error while attempting to bind on address "
                   "('127.0.0.1', 8765): address already in use\n")  # fmt: skip
    with pytest.raises(UserError, match=r"port 8765 on 127\.0\.0\.1 is already in use.*--port"):
        wait_healthy({"pid": 2**22 + 1, "host": "127.0.0.1", "port": 8765, "log": str(log)}, "k", timeout=5)


@pytest.mark.slow
def test_the_real_server_answers_400_not_500(openclaw, tmp_path):
    from ark_trainer.cli import main
    from ark_trainer.deploy.process import stop_server
    from ark_trainer.fileio import read_json
    from test_harden_deploy import _config, _request, _run_dir

    out = _run_dir(tmp_path)
    _config()
    assert main(["deploy", str(out)]) == 0
    record = read_json(out / "deploy" / "deploy.json")
    key = Path(record["api_key_file"]).read_text().strip()
    url = f"http://127.0.0.1:{record['port']}/v1/chat/completions"
    try:
        for body, reason in BAD_BODIES[3:]:
            data = encoded({"model": record["name"], "max_tokens": 4, **body})
            req = urllib.request.Request(url, data=data, method="POST", headers={
                "Authorization": f"Bearer {key}", "Content-Type": "application/json"})  # fmt: skip
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(req, timeout=60)
            assert err.value.code == 400, (body, err.value.code)
            assert json.loads(err.value.read())["error"]["message"].startswith(reason)
        good = encoded({"model": record["name"], "max_tokens": 4, "messages": [USER]})
        assert _request(url, key, "POST", good, **{"Content-Type": "application/json"}) == 200
        assert "Traceback" not in Path(record["log"]).read_text()
    finally:
        stop_server(record["pid"])
    assert main(["deploy", "--rollback"]) == 0


def test_a_loop_on_a_taken_port_names_it_and_writes_nothing(tmp_path):
    from conftest import run_cli, save_tiny_qwen

    model = save_tiny_qwen(tmp_path / "model")
    sock, port = _held_port()
    try:
        result = run_cli("loop", "--output_dir", str(tmp_path / "loop"), "--model_path", str(model),
                         "--port", str(port), cwd=tmp_path)  # fmt: skip
    finally:
        sock.close()
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"port {port}" in result.stderr and "already in use" in result.stderr
    assert not (tmp_path / "loop").exists()
