"""The model server's gate (``services/deploy/gate.py``): the deployment's key on every route, no cross-origin browser
request, only the chat routes, and a chat body checked (and bounded) before the model sees it.
"""

from __future__ import annotations

import json

import pytest

from tests.deploy.chat_bodies import BAD_BODIES, call_gate, encoded


def test_the_gate_refuses_each_kind_of_unwanted_request():
    from ark_trainer.services.deploy.gate import Gate

    gate = Gate(None, "k" * 43, 8765)

    def status(method="GET", path="/health", key="k" * 43, **headers) -> int | None:
        headers = {"host": "127.0.0.1:8765", **headers}
        if key is not None:
            headers["authorization"] = f"Bearer {key}"
        raw = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
        refusal = gate.refusal({"type": "http", "method": method, "path": path, "headers": raw})
        return refusal and refusal[0]

    chat = {"method": "POST", "path": "/v1/chat/completions"}
    assert status() is None and status(path="/v1/models") is None
    assert status(**chat, content_type="application/json; charset=utf-8") is None
    assert status(host="localhost:8765", origin="http://localhost:8765") is None  # its own origin
    for key in (None, "", "k" * 42, "k" * 44, "K" * 43):  # no key, empty, short, long, wrong
        assert status(key=key) == 401
    assert status(authorization="Basic " + "k" * 43, key=None) == 401
    for origin in ("http://evil.example", "null", "http://127.0.0.1:8766", "https://127.0.0.1:8765"):
        assert status(origin=origin) == 403
    for site in ("cross-site", "same-site"):
        assert status(sec_fetch_site=site) == 403
    for host in ("evil.example:8765", "127.0.0.1:8766", "127.0.0.1"):  # DNS rebinding, another port
        assert status(host=host) == 403
    for method, path in (("POST", "/load_model"), ("POST", "/reset"), ("OPTIONS", "/v1/models"),
                         ("GET", "/docs"), ("POST", "/v1/responses"), ("GET", "/v1/chat/completions")):  # fmt: skip
        assert status(method, path) == 404, path
    # the three content types a browser sends cross-origin without a preflight
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", ""):
        assert status(**chat, content_type=content_type) == 415


def test_a_body_over_the_limit_is_refused_before_it_is_all_read():
    from ark_trainer.services.deploy.gate import MAX_BODY_BYTES

    body = b'{"messages": [{"role": "user", "content": "' + b"x" * (MAX_BODY_BYTES + 10) + b'"}]}'
    status, answer, reached = call_gate(body, chunks=64)
    assert status == 413 and reached is None
    assert (
        answer["error"]["message"] == f"the body is over {MAX_BODY_BYTES} bytes; send a shorter conversation"
    )


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
