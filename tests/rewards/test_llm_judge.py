"""The llm_judge grader against a small OpenAI-compatible server started by the test (stdlib http.server)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.cli import main
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.rewards.llm_judge import parse_score
from tests.conftest import refused
from tests.line_breakers import IDS, RAW_LEGAL, write_raw
from tests.rewards.attacks import closed_port, judge_yaml, one_error_line, score, train_flags, unlabelled_data


class _QuietServer(ThreadingHTTPServer):
    """A client the judge cancelled hangs up mid-reply: that BrokenPipe must not print into a later test."""

    def handle_error(self, request, client_address) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.requests.append(
                {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
            )
            n = len(server.requests)
        mode = server.mode
        if mode == "flaky" and n % 2 == 1:  # every first try fails with a 503
            return self._send(503, {"error": "busy"})
        if mode == "error":
            return self._send(500, {"error": "boom"})
        if mode == "unauthorised":
            return self._send(401, {"error": "bad key"})
        if mode == "slow":
            time.sleep(1.0)
        user = body["messages"][-1]["content"]
        if mode == "garbage":
            reply = "I think the answer is quite nice."
        else:  # the rubric's "judge": polite answers get 9 of 10, others 2
            reply = json.dumps({"score": 9 if "抱歉" in user else 2})
        self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": reply}}]})

    def _send(self, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads = True
    srv.mode, srv.requests, srv.lock = "ok", [], threading.Lock()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    srv.base_url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    yield srv
    srv.shutdown()
    srv.server_close()


def judge_spec(tmp_path, base_url: str, **extra) -> CompositeReward:
    fields = {
        "name": "politeness",
        "type": "llm_judge",
        "base_url": base_url,
        "model": "judge-model",
        "api_key_env": "TEST_JUDGE_KEY",
        "rubric": "Rate from 1 to 10 how polite this reply to {{item.prompt}} is:\n{{sample.output_text}}",
        "range": [1, 10],
        "timeout": 5,
        "max_retries": 2,
        "backoff": 0.01,
        **extra,
    }
    path = tmp_path / "judge.yaml"
    path.write_text(json.dumps({"graders": [fields]}, ensure_ascii=False), encoding="utf-8")  # JSON is YAML
    return CompositeReward.from_spec(path)


def judge_of(comp: CompositeReward):
    return comp.components[0].fn


def test_judge_scores_and_normalises(server, tmp_path, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-test")
    comp = judge_spec(tmp_path, server.base_url)
    scores = comp(["问1", "问2", "问3"], ["非常抱歉，马上处理", "自己去查", "抱歉"])
    assert scores == pytest.approx([8 / 9, 1 / 9, 8 / 9])
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer sk-test"
    assert first["body"]["model"] == "judge-model" and first["body"]["temperature"] == 0.0
    roles = [m["role"] for m in first["body"]["messages"]]
    assert roles == ["system", "user"] and '"score"' in first["body"]["messages"][0]["content"]
    assert any(
        "问2" in r["body"]["messages"][1]["content"] for r in server.requests
    )  # {{item.prompt}} filled
    assert judge_of(comp).stats["scored"] == 3


def test_judge_caches_by_request_in_memory_and_on_disk(server, tmp_path):
    cache = tmp_path / "judge_cache.jsonl"
    comp = judge_spec(tmp_path, server.base_url, cache=str(cache))
    comp(["q"], ["抱歉"])
    comp.score(["q", "q"], ["抱歉", "好的"])  # one new answer, one repeated
    assert len(server.requests) == 2 and judge_of(comp).stats["cache_hits"] == 1
    again = judge_spec(tmp_path, server.base_url, cache=str(cache))  # a new process would read the file
    assert again(["q", "q"], ["抱歉", "好的"]) == pytest.approx([8 / 9, 1 / 9])
    assert len(server.requests) == 2 and judge_of(again).stats["cache_hits"] == 2


def test_judge_retries_a_flaky_server(server, tmp_path):
    server.mode = "flaky"
    comp = judge_spec(tmp_path, server.base_url, concurrency=1)
    assert comp(["q", "q"], ["抱歉", "好的"]) == pytest.approx([8 / 9, 1 / 9])
    assert len(server.requests) == 4
    assert judge_of(comp).stats["request_failures"] == 0


@pytest.mark.parametrize(("mode", "counter"), [("error", "request_failures"), ("garbage", "parse_failures")])
def test_judge_failures_are_counted_not_fatal(server, tmp_path, mode, counter):
    server.mode = mode
    comp = judge_spec(tmp_path, server.base_url)
    assert comp(["q", "q"], ["抱歉", "好的"]) == [None, None]  # skipped: left out of the composite
    stats = judge_of(comp).stats
    assert stats[counter] == 2 and stats["scored"] == 0
    zero = judge_spec(tmp_path, server.base_url, on_failure="zero")
    assert zero(["q"], ["抱歉"]) == [0.0]
    if mode == "error":
        assert len(server.requests) == 2 * 3 + 3  # 1 try + 2 retries per sample


def test_judge_timeout_is_a_failed_sample(server, tmp_path):
    server.mode = "slow"
    comp = judge_spec(tmp_path, server.base_url, timeout=0.2, max_retries=1)
    started = time.time()
    assert comp(["q"], ["抱歉"]) == [None]
    assert judge_of(comp).stats["request_failures"] == 1 and time.time() - started < 5


def test_judge_with_a_wrong_key_stops_with_a_user_error(server, tmp_path):
    server.mode = "unauthorised"
    comp = judge_spec(tmp_path, server.base_url)
    with pytest.raises(UserError, match="HTTP 401"):
        comp(["q"], ["抱歉"])
    assert len(server.requests) == 1  # not retried


def test_judge_unreachable_server_stops_at_the_first_request(tmp_path):
    # a judge that never answered and refuses connections fails fast (test_a_refused_connection_stops_score_at_once)
    comp = judge_spec(tmp_path, "http://127.0.0.1:9/v1", max_retries=1, timeout=1)
    with pytest.raises(UserError, match="cannot reach"):
        comp(["q"], ["抱歉"])


def test_judge_messages_input_and_missing_field(server, tmp_path):
    comp = judge_spec(
        tmp_path,
        server.base_url,
        rubric=None,
        input=[{"role": "user", "content": "Label {{item.label}}. Reply: {{sample.output_text}}"}],
    )
    assert comp(["q", "q"], ["抱歉", "抱歉"], label=["辱骂", None]) == pytest.approx([8 / 9, None])
    assert len(server.requests) == 1  # the sample without a label is not applicable: no request


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 7}', 7.0),
        ('Reasoning... {"score": "3.5"}', 3.5),
        ("Score: 8/10", 8.0),
        ("6", 6.0),
        ("nice", None),
    ],
)
def test_parse_score(reply, score):
    assert parse_score(reply) == score


def test_score_reports_judge_failures(server, tmp_path, capsys):
    from ark_trainer.base.fileio import write_jsonl
    from ark_trainer.cli import main

    server.mode = "garbage"
    judge_spec(tmp_path, server.base_url)  # writes judge.yaml
    data = tmp_path / "d.jsonl"
    write_jsonl(data, [{"prompt": "q", "candidates": ["抱歉", "好的"]}])
    assert main(["score", "--reward_config", str(tmp_path / "judge.yaml"), "--data_path", str(data)]) == 0
    out = capsys.readouterr().out
    assert (
        "llm_judge politeness: requests 2, cache_hits 0, scored 0, request_failures 0, parse_failures 2"
        in out
    )
    assert "warning: llm_judge 'politeness': 2 failed samples" in out


JUDGE = (
    "graders:\n  - name: judge\n    type: llm_judge\n    model: m\n    base_url: http://127.0.0.1:9/v1\n"
    "    input: [{{role: user, content: 'score {{{{sample.output_text}}}}'}}]\n    range: [0, 10]\n    {extra}\n"
)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("timeout: 1e300", "timeout: expected a number in [0.001, 3600], got 1e+300"),
        ("max_retries: 1000000000000", "max_retries: expected a number in [0, 10], got 1000000000000"),
        ("backoff: 1e300", "backoff: expected a number in [0, 600], got 1e+300"),
        ("concurrency: 1000000000", "concurrency: expected a number in [1, 256], got 1000000000"),
        ("max_tokens: 100000000000", "max_tokens: expected a number in [1, 131072], got 100000000000"),
    ],
)
def test_judge_settings_are_bounded(assets, tmp_path, capsys, extra, says):
    spec = tmp_path / "judge.yaml"
    spec.write_text(JUDGE.format(extra=extra), encoding="utf-8")
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert lines == [f"error: {spec}:8: {says}"], lines


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_judge_cache_and_glance_prompts(tmp_path, sep):
    from ark_trainer.rewards.llm_judge import _Cache
    from ark_trainer.stages.report.glance import _prompts

    write_raw(tmp_path / "cache.jsonl", [{"key": f"k{i}", "reply": f"r{sep}{i}"} for i in range(3)])
    assert _Cache(tmp_path / "cache.jsonl").data == {f"k{i}": f"r{sep}{i}" for i in range(3)}
    write_raw(tmp_path / "data" / "eval.jsonl", [{"prompt": f"p{sep}{i}"} for i in range(3)])
    assert _prompts(tmp_path) == [f"p{sep}{i}" for i in range(3)]


def test_judge_does_not_follow_a_redirect_and_never_sends_the_key_elsewhere(
    servers, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("HARDEN_JUDGE_KEY", "sk-secret")
    other = servers()  # another origin (port): it must never see a request, let alone the key
    redirecting = servers("redirect", target=other.url + "/chat/completions")
    code, out, err = score(
        judge_yaml(tmp_path, redirecting.url), unlabelled_data(tmp_path, candidates=["好的"]), capsys
    )
    line = one_error_line(err)
    assert code == 2 and "HTTP 302" in line and other.url in line and "base_url" in line
    assert other.hits == [] and 1 <= len(redirecting.hits) <= 4  # 4: the judge's concurrency, not 8 rows
    assert "sk-secret" not in err + out


@pytest.mark.parametrize("status", [401, 403])
def test_a_judge_refusing_the_key_stops_train_not_just_score(servers, model, tmp_path, capsys, status):
    judge = servers(status)
    spec, data, out = (
        judge_yaml(tmp_path, judge.url, concurrency=1),
        unlabelled_data(tmp_path),
        tmp_path / "run",
    )
    assert main(train_flags(model, data, out, spec)) == 2
    line = one_error_line(capsys.readouterr().err, logs=True)
    assert f"HTTP {status}" in line and "api_key_env" in line
    assert len(judge.hits) == 1  # the first request stopped the run: not one per sample
    assert not (out / "model").exists()
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "failed"


def test_a_refused_connection_stops_score_at_once(tmp_path, capsys):
    spec = judge_yaml(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")  # default retries: 1+2+4 s per answer
    started = time.time()
    code, _, err = score(spec, unlabelled_data(tmp_path, candidates=["好的", "抱歉"]), capsys)
    assert code == 2 and time.time() - started < 3
    line = one_error_line(err)
    assert "cannot reach" in line and "Connection refused" in line and "judge.yaml:1" in line


def test_an_unknown_judge_host_stops_score_at_once(tmp_path, capsys, no_dns):
    spec = judge_yaml(tmp_path, "http://judge.nonexistent.invalid:8000/v1")
    started = time.time()
    code, _, err = score(spec, unlabelled_data(tmp_path, candidates=["好的", "抱歉"]), capsys)
    assert code == 2 and time.time() - started < 3
    assert "cannot reach" in one_error_line(err) and no_dns  # refused by the patched resolver


def test_an_unreachable_judge_stops_train_at_the_first_request(model, tmp_path, capsys):
    spec = judge_yaml(tmp_path, f"http://127.0.0.1:{closed_port()}/v1")
    out = tmp_path / "run"
    started = time.time()
    assert main(train_flags(model, unlabelled_data(tmp_path), out, spec)) == 2
    assert "cannot reach" in one_error_line(capsys.readouterr().err, logs=True)
    assert time.time() - started < 60 and not (out / "model").exists()


def test_a_judge_that_answered_once_is_retried_when_it_goes_away(servers, tmp_path):
    judge = servers()
    reward = CompositeReward.from_spec(
        judge_yaml(tmp_path, judge.url, max_retries=1, backoff=0.01, cache=False)
    )
    assert reward(["q"], ["好的"]) == pytest.approx([7 / 9])
    judge.shutdown()
    judge.server_close()  # a restart mid-run: that answer is a failed sample, the run goes on
    assert reward(["q"], ["抱歉"]) == [None]
    assert reward.components[0].fn.stats["request_failures"] == 1
