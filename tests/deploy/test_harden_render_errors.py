"""A chat template that fails on one request is answered with its reason, and the client prints it.

transformers let a template's failure escape as a 500 with no readable body, so ``deploy``'s smoke request
(and ``eval --through openclaw``) said only "HTTP Error 500". The server now answers it as OpenAI's API
answers an error (``{"error": {"message": "chat template failed to render: <reason>"}}``; 400 when the
template refused the request, 500 when it broke), and the client prints that message in one line.
"""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from ark_trainer.deploy.rendererror import TemplateRenderError
from ark_trainer.errors import UserError
from tests.conftest import save_tiny_qwen

REFUSES_GREETINGS = (  # the smoke request says 你好
    "{% for m in messages %}{% if '你好' in (m['content'] | string) %}"
    "{{ raise_exception('this template refuses a greeting') }}{% endif %}"
    "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)
REASON = "chat template failed to render: this template refuses a greeting"


def test_a_refusing_template_is_400_a_broken_one_500():
    from jinja2.exceptions import TemplateError

    refused = TemplateRenderError(TemplateError("roles must alternate\nuser/assistant"))
    assert refused.status == 400 and refused.body()["error"]["message"] == (
        "chat template failed to render: roles must alternate user/assistant"
    )
    broken = TemplateRenderError(TypeError('can only concatenate str (not "int") to str'))
    assert broken.status == 500 and broken.body()["error"]["code"] == "chat_template_error"


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    path = save_tiny_qwen(tmp_path_factory.mktemp("render") / "model")
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = REFUSES_GREETINGS
    return tok


def _handler(tokenizer):
    """The server's chat handler on a stand-in for transformers' one, which renders as transformers does."""
    from types import SimpleNamespace

    from ark_trainer.deploy.serve import _fitting_handler

    class Base:
        async def handle_request(self, body, request_id):
            _, _, processor = self._resolve_model(body)
            processor.apply_chat_template(body["messages"], add_generation_prompt=True, tools=body.get("tools"),
                                          return_dict=True, tokenize=True)  # fmt: skip
            return "answered"

        def _resolve_model(self, body):
            return "m", SimpleNamespace(config=SimpleNamespace(model_type="qwen2")), tokenizer

    return _fitting_handler(Base, window=256, reply_tokens=32)()


def test_the_server_answers_a_render_failure_with_its_reason(tokenizer, capsys):
    handler = _handler(tokenizer)
    user = {"role": "user", "content": "hi"}
    assert asyncio.run(handler.handle_request({"messages": [user]}, "r1")) == "answered"
    answer = asyncio.run(handler.handle_request({"messages": [{"role": "user", "content": "你好"}]}, "r2"))
    assert answer.status_code == 400
    assert json.loads(answer.body)["error"]["message"] == REASON
    assert f"[ark serve] answered 400: {REASON}" in capsys.readouterr().out


class _Refusing(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers["Content-Length"]))
        body = json.dumps({"error": {"message": REASON, "type": "invalid_request_error"}}).encode()
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_smoke_request_prints_the_servers_reason_in_one_line():
    from ark_trainer.deploy.process import smoke_request
    from ark_trainer.openclaw.parity import ask

    server = HTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        with pytest.raises(UserError) as smoke:
            smoke_request(base, "m", "k", timeout=30)
        with pytest.raises(UserError) as asked:
            ask(base, "k", {"messages": []}, timeout=30)
    finally:
        server.shutdown()
    assert str(smoke.value) == f"deploy: smoke request to {base} failed: HTTP 400: {REASON}"
    assert (
        str(asked.value) == f"eval --through openclaw: the model server at {base} answered HTTP 400: {REASON}"
    )


@pytest.mark.slow
def test_the_real_server_says_why_the_template_failed(tmp_path):
    """The real server on a model whose template refuses the smoke request's greeting."""
    import secrets

    from ark_trainer.deploy.process import smoke_request, start_server, stop_server, wait_healthy
    from ark_trainer.fileio import atomic_write_text

    out = tmp_path / "run"
    save_tiny_qwen(out / "model")
    config = out / "model" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "chat_template": REFUSES_GREETINGS}))
    (out / "model" / "chat_template.jinja").unlink(missing_ok=True)
    key = secrets.token_urlsafe(16)
    atomic_write_text(out / "deploy" / "api_key", key + "\n", mode=0o600)
    from ark_trainer.runtime.system import free_port

    port = free_port("127.0.0.1")
    server = start_server(out, "ark-run", port, 256, 32, out / "deploy" / "api_key")
    try:
        wait_healthy(server, key)
        with pytest.raises(UserError) as err:
            smoke_request(f"http://127.0.0.1:{port}/v1", "ark-run", key)
    finally:
        stop_server(server["pid"])
    assert str(err.value).endswith(f"failed: HTTP 400: {REASON}"), err.value
    assert "\n" not in str(err.value) and "Traceback" not in Path(server["log"]).read_text()
