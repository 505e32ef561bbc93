"""One JSON POST with a total deadline (``base/httpclient.py``): a judge or planning model that sends its headers
and then one byte a second is cut off at its deadline; an answer larger than the limit is refused.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.conftest import refused


@pytest.fixture
def trickle_server():
    """Answers every POST with headers, then one byte of the body every 0.5 s (or a huge body)."""
    state = {"mode": "trickle"}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server API
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"choices": [{"message": {"content": "7" + " " * 200}}]}).encode()
            if state["mode"] == "huge":
                body = b'{"x": "' + b"a" * 5_000_000 + b'"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if state["mode"] == "huge":
                    self.wfile.write(body)
                    return
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.5)
            except OSError:  # the client gave up, as it should
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", state
    server.shutdown()
    server.server_close()


def test_a_trickling_judge_is_cut_off_at_its_timeout(trickle_server, tmp_path):
    from ark_trainer.rewards.composite import CompositeReward

    url, state = trickle_server
    spec = tmp_path / "judge.yaml"
    judge = {
        "name": "j",
        "type": "llm_judge",
        "base_url": url,
        "model": "m",
        "rubric": "{{sample.output_text}}",
    }
    judge |= {"range": [1, 10], "timeout": 1.0, "max_retries": 0}
    spec.write_text(json.dumps({"graders": [judge]}), encoding="utf-8")
    reward = CompositeReward.from_spec(spec)
    started = time.monotonic()
    assert reward(["q"], ["answer"]) == [None]
    assert time.monotonic() - started < 3.5  # it held `score` 70 s (one byte a second, a 30 s timeout)
    assert reward.components[0].fn.stats["request_failures"] == 1
    state["mode"] = "huge"
    assert reward(["q2"], ["answer2"]) == [None]
    assert reward.components[0].fn.stats["request_failures"] == 2


def test_a_trickling_planning_model_is_cut_off(trickle_server, capsys, monkeypatch):
    import ark_trainer.services.nl.llm as llm

    url, state = trickle_server
    monkeypatch.setattr(llm, "TIMEOUT_S", 1.0)
    started = time.monotonic()
    lines = refused(capsys, ["plan", "only GRPO", "--llm-base-url", url, "--llm-model", "m"])
    assert time.monotonic() - started < 3.5
    assert lines == [f"error: --llm-base-url: {url}/chat/completions gave no complete answer within 1.0s"]
    state["mode"] = "huge"
    lines = refused(capsys, ["plan", "only GRPO", "--llm-base-url", url, "--llm-model", "m"])
    assert lines == [f"error: --llm-base-url: {url}/chat/completions answered more than 1000000 bytes"]
