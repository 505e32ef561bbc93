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
# the sampling parameters and tool fields transformers read without checking (HTTP 500 and a traceback in
# server.log), message shapes it failed on, and sizes that held the server for minutes
MORE_BAD_BODIES = [
    ({"messages": None}, "messages: expected a non-empty list of {role, content} messages, got null"),
    ({"messages": [[USER]]}, "messages[0]: expected an object with 'role' and 'content', got list"),
    ({"messages": [USER], "max_tokens": "lots"}, "max_tokens: expected an integer in [1, 2147483647], got string"),
    ({"messages": [USER], "max_completion_tokens": -5}, "max_completion_tokens: expected an integer in [1, 2147483647], got -5"),
    ({"messages": [USER], "temperature": "hot"}, "temperature: expected a number in [0, 2], got string"),
    ({"messages": [USER], "temperature": -1}, "temperature: expected a number in [0, 2], got -1"),
    ({"messages": [USER], "top_p": 5}, "top_p: expected a number in [0, 1], got 5"),
    ({"messages": [USER], "frequency_penalty": "x"}, "frequency_penalty: expected a number in [-2, 2], got string"),
    ({"messages": [USER], "presence_penalty": 9}, "presence_penalty: expected a number in [-2, 2], got 9"),
    ({"messages": [USER], "seed": "x"}, "seed: expected an integer in [-9223372036854775808, 9223372036854775807], got string"),
    ({"messages": [USER], "seed": 10**30}, "seed: expected an integer in [-9223372036854775808, 9223372036854775807], got 1000000000000000000000000000000"),
    ({"messages": [USER], "n": 1000000}, "n: expected an integer in [1, 128], got 1000000"),
    ({"messages": [USER], "n": "two"}, "n: expected an integer in [1, 128], got string"),
    ({"messages": [USER], "top_logprobs": 1000000}, "top_logprobs: expected an integer in [0, 20], got 1000000"),
    ({"messages": [USER], "stream": "yes"}, "stream: expected true or false, got string"),
    ({"messages": [USER], "logprobs": 1}, "logprobs: expected true or false, got number"),
    ({"messages": [USER], "stop": {"a": 1}}, "stop: expected text or a list of up to 4 texts, got object"),
    ({"messages": [USER], "stop": ["a"] * 5}, "stop: expected text or a list of up to 4 texts, got list"),
    ({"messages": [USER], "tools": "x"}, "tools: expected a list of {type: function, function: {name, ...}} objects, got string"),
    ({"messages": [USER], "tools": {"type": "function"}}, "tools: expected a list of {type: function, function: {name, ...}} objects, got object"),
    ({"messages": [USER], "tools": ["ls"]}, "tools[0]: expected a {type: function, function: {name, ...}} object, got string"),
    ({"messages": [USER], "tools": [{"type": "function", "function": "ls"}]}, "tools[0].function: expected an object with a name, got string"),
    ({"messages": [USER], "tool_choice": 5}, "tool_choice: expected none, auto, required or an object, got number"),
    ({"messages": [USER], "response_format": "json"}, "response_format: expected an object, got string"),
    ({"messages": [USER], "model": 5}, "model: expected text, got number"),
    ({"messages": [{"role": "user", "content": "hi", "name": {"a": 1}}]}, "messages[0].name: expected text, got object"),
    ({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": "ls"}]}]},
     "messages[1].tool_calls[0].function: expected an object with a name and arguments (text), got string"),
    ({"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "ls", "arguments": {"p": 1}}}]}]},
     "messages[1].tool_calls[0].function: expected an object with a name and arguments (text), got object"),
    ({"messages": [{"role": "system", "content": "s"}]}, "messages: holds no user or assistant message; send the user's turn"),
    ({"messages": [USER] * 10_001}, "messages: 10001 messages; at most 10000 in one request"),
]  # fmt: skip
GOOD_BODIES = [
    {"messages": [USER]},
    {"model": "m", "stream": True, "messages": [{"role": "system", "content": "s"}, USER]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "x"}}]}]},
    {"messages": [USER, {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                  "function": {"name": "ls", "arguments": "{}"}}]}, {"role": "tool", "content": "ok", "tool_call_id": "c"}]},
    {"messages": [{"role": "developer", "content": "d"}, USER]},
    {"messages": [USER], "temperature": 0.7, "top_p": 0.9, "max_tokens": 64, "n": 1, "seed": 3, "stop": ["\\n"],
     "stream": True, "tools": [{"type": "function", "function": {"name": "ls", "parameters": {}}}], "tool_choice": "auto",
     "frequency_penalty": 0.5, "presence_penalty": -0.5, "logprobs": False, "response_format": {"type": "text"}, "model": "m"},
    {"messages": [{"role": "system", "content": "s"}, {"role": "assistant", "content": "hello"}]},
]  # fmt: skip


def encoded(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


@pytest.mark.parametrize(("body", "reason"), BAD_BODIES)
def test_a_wrong_body_is_one_line_naming_the_field(body, reason):
    problem = body_problem(encoded(body))
    assert problem is not None and problem.startswith(reason), problem
    assert "\n" not in problem


@pytest.mark.parametrize(("body", "reason"), MORE_BAD_BODIES)
def test_sampling_and_tool_fields_of_the_wrong_type_are_one_line(body, reason):
    problem = body_problem(encoded(body))
    assert problem == reason or (problem or "").startswith(reason), problem
    status, answer, reached = call_gate(encoded(body))
    assert status == 400 and reached is None and answer["error"]["message"] == problem


def test_a_body_over_the_limit_is_refused_before_it_is_all_read():
    from ark_trainer.deploy.gate import MAX_BODY_BYTES

    body = b'{"messages": [{"role": "user", "content": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}]}'
    status, answer, reached = call_gate(body, chunks=64)
    assert status == 413 and reached is None
    assert (
        answer["error"]["message"] == f"the body is over {MAX_BODY_BYTES} bytes; send a shorter conversation"
    )


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
    from tests.conftest import run_cli, save_tiny_qwen

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
    from tests.deploy.test_harden_deploy import _config, _request, _run_dir

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
    from tests.conftest import run_cli, save_tiny_qwen

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
