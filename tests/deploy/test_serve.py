"""The model server process (``services/deploy/serve.py``): what it imports is installed with the package, a render
failure is answered with its reason, and a body of the wrong shape is a 400, not a 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from tests.conftest import ROOT, save_tiny_qwen
from tests.deploy.chat_bodies import BAD_BODIES, LOGIT_BIAS_BODIES, PAST_THE_VOCABULARY, USER, encoded
from tests.deploy.templates import REASON


def _closure(requirements: list[str]) -> set[str]:
    """Distributions the requirements install, transitively (extras not asked for are left out)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        seen.add(name)
        with contextlib.suppress(PackageNotFoundError):  # not installed: it brings nothing here
            todo += [Requirement(r) for r in requires(req.name) or []]
    return seen


@pytest.mark.slow
def test_the_core_dependencies_cover_every_package_deploy_imports():
    """`pip install -e .` (no extras) must install what the deploy server imports: the declared
    dependencies' closure must hold every distribution the serve stack loads."""
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    code = (
        "import sys, ark_trainer.services.deploy.serve, ark_trainer.services.deploy.gate, ark_trainer.services.openclaw.config_edit\n"
        "import json5, uvicorn, transformers.cli.serve, transformers.cli.serving.server\n"
        "import transformers.cli.serving.chat_completion\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    names = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    dists = packages_distributions()
    imported = {canonicalize_name(d) for n in names for d in dists.get(n, [])} - {"ark-trainer"}
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    missing = sorted(imported - _closure(declared))
    assert {"fastapi", "uvicorn", "openai", "json5"} <= imported and not missing, missing


@pytest.mark.slow
def test_the_real_server_answers_400_not_500(openclaw, tmp_path):
    from ark_trainer.base.fileio import read_json
    from ark_trainer.cli import main
    from ark_trainer.services.deploy.process import stop_server
    from tests.deploy_runs import _config, _request, _run_dir

    out = _run_dir(tmp_path)
    _config()
    assert main(["deploy", str(out)]) == 0
    record = read_json(out / "deploy" / "deploy.json")
    key = Path(record["api_key_file"]).read_text().strip()
    url = f"http://127.0.0.1:{record['port']}/v1/chat/completions"
    try:
        for body, reason in (
            BAD_BODIES[3:] + LOGIT_BIAS_BODIES[:1] + LOGIT_BIAS_BODIES[3:] + PAST_THE_VOCABULARY
        ):
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


REFUSES_GREETINGS = (  # the smoke request says 你好
    "{% for m in messages %}{% if '你好' in (m['content'] | string) %}"
    "{{ raise_exception('this template refuses a greeting') }}{% endif %}"
    "{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)


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

    from ark_trainer.services.deploy.serve import _fitting_handler

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


@pytest.mark.slow
def test_the_real_server_says_why_the_template_failed(tmp_path):
    """The real server on a model whose template refuses the smoke request's greeting."""
    import secrets

    from ark_trainer.base.fileio import atomic_write_text
    from ark_trainer.services.deploy.process import smoke_request, start_server, stop_server, wait_healthy

    out = tmp_path / "run"
    save_tiny_qwen(out / "model")
    config = out / "model" / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "chat_template": REFUSES_GREETINGS}))
    (out / "model" / "chat_template.jinja").unlink(missing_ok=True)
    key = secrets.token_urlsafe(16)
    atomic_write_text(out / "deploy" / "api_key", key + "\n", mode=0o600)
    from ark_trainer.core.runtime.system import free_port

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
