"""Rewards under attack: a judge that redirects, refuses the key or cannot be reached; a regex that backtracks
for ever; scores that are not finite; rules that are not reward functions; a reward that grades nothing.

Every server here is a stdlib ``http.server`` on 127.0.0.1; the unresolvable host is answered by a patched
``socket.getaddrinfo``, so no packet leaves the machine.
"""

from __future__ import annotations

import json
import logging
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.fileio import read_jsonl, write_jsonl
from ark_trainer.rewards.composite import Component, CompositeReward
from tests.conftest import save_tiny_qwen

CATASTROPHIC = "a" * 5000 + "!"  # `(a+)+$` backtracks exponentially on it under `re`


@pytest.fixture(autouse=True)
def _restore_logging():
    """A train run in-process points the ``ark_trainer`` logger at that test's captured stderr: undo it."""
    logger = logging.getLogger("ark_trainer")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    for handler in list(logger.handlers):
        if handler not in handlers:
            logger.removeHandler(handler)
            handler.close()
    logger.setLevel(level)
    logger.propagate = propagate


# --- servers ---


class _QuietServer(ThreadingHTTPServer):
    """A client the judge cancelled hangs up mid-reply: that BrokenPipe must not print into a later test."""

    def handle_error(self, request, client_address) -> None:
        pass


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        srv = self.server
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        srv.hits.append(self.headers.get("Authorization"))
        if srv.mode == "redirect":
            self.send_response(302)
            self.send_header("Location", srv.target)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        status, reply = (srv.mode, {"error": "no"}) if isinstance(srv.mode, int) else (200, None)
        reply = reply or {"choices": [{"message": {"role": "assistant", "content": '{"score": 8}'}}]}
        data = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def _serve(mode="ok", target=""):
    srv = _QuietServer(("127.0.0.1", 0), _Handler)
    srv.daemon_threads, srv.mode, srv.target, srv.hits = True, mode, target, []
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
    return srv


@pytest.fixture
def servers():
    made = []

    def make(mode="ok", target=""):
        made.append(_serve(mode, target))
        return made[-1]

    yield make
    for srv in made:
        srv.shutdown()
        srv.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens there once the socket is closed


@pytest.fixture
def no_dns(monkeypatch):
    """``*.invalid`` does not resolve (as RFC 6761 promises), without asking any resolver."""
    asked, real = [], socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if str(host).endswith(".invalid"):
            asked.append(host)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


# --- helpers ---
def judge_yaml(tmp_path: Path, base_url: str, **extra) -> Path:
    entry = {
        "name": "judge",
        "type": "llm_judge",
        "base_url": base_url,
        "model": "m",
        "api_key_env": "HARDEN_JUDGE_KEY",
        "rubric": "Rate 1-10: {{sample.output_text}}",
        "range": [1, 10],
        **extra,
    }
    path = tmp_path / "judge.yaml"
    path.write_text(json.dumps({"graders": [entry]}), encoding="utf-8")
    return path


def unlabelled_data(tmp_path: Path, n: int = 8, **extra) -> Path:
    path = tmp_path / "chats.jsonl"
    write_jsonl(path, [{"prompt": f"你好，订单 {i} 在哪？", **extra} for i in range(n)])
    return path


def score(spec: Path, data: Path, capsys) -> tuple[int, str, str]:
    code = main(["score", "--reward_config", str(spec), "--data_path", str(data)])
    out = capsys.readouterr()
    return code, out.out, out.err


def one_error_line(err: str, logs: bool = False) -> str:
    """The one ``error:`` line; with ``logs`` (a train run), log lines may come before it."""
    lines = [line for line in err.splitlines() if line.strip() and (not logs or line.startswith("error: "))]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_tiny_qwen(tmp_path_factory.mktemp("harden_model") / "model")


def train_flags(model: Path, data: Path, out: Path, spec: Path | None, strategy: str = "GRPO") -> list[str]:
    flags = [
        "train", "--strategy", strategy, "--model_path", str(model), "--data_path", str(data),
        "--output_dir", str(out), "--max_train_steps", "2", "--rft_steps", "1" if strategy != "GRPO" else "0",
        "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "2", "--max_completion_length", "6",
        "--rft_min_reward", "0", "--logging_steps", "1", "--save_steps", "100", "--eval_auto", "False",
        "--device", "cpu", "--heartbeat_interval", "1", "--seed", "3", "--reward_timeout", "30",
        "--stall_timeout", "120",
    ]  # fmt: skip
    return flags + (["--reward_config", str(spec)] if spec else [])


# --- 4: redirects and a refused key ---
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


# --- 14: an unreachable judge fails at the first request ---
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


# --- 5: a regex that backtracks for ever ---
def regex_yaml(tmp_path: Path) -> Path:
    spec = tmp_path / "regex.yaml"
    spec.write_text(
        "graders:\n  - name: ends_in_a\n    type: regex\n    pattern: '(a+)+$'\n"  # timeout: 1 s by default
        "  - name: short\n    type: rule\n    rule: length\n    params: {max_chars: 50}\n",
        encoding="utf-8",
    )
    return spec


@pytest.mark.slow
def test_score_bounds_a_catastrophic_regex(tmp_path, capsys):
    data = unlabelled_data(tmp_path, n=1, candidates=[CATASTROPHIC, "aaa"])
    started = time.time()
    code, out, _ = score(regex_yaml(tmp_path), data, capsys)
    assert code == 0 and time.time() - started < 20
    warning = [line for line in out.splitlines() if "'ends_in_a'" in line and "not graded" in line]
    assert len(warning) == 1 and "took over 1s" in warning[0], out
    assert "1/2" in next(line for line in out.splitlines() if line.startswith("ends_in_a"))


@pytest.mark.slow
def test_the_train_reward_bounds_a_catastrophic_regex_and_the_heartbeat_runs_on(tmp_path):
    from ark_trainer.config import TrainConfig
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.guards import attach_monitor
    from ark_trainer.runtime.monitor import Monitor

    cfg = TrainConfig(reward_config=str(regex_yaml(tmp_path)), reward_timeout=60.0)
    reward = build_reward(cfg, [], "cpu")
    attach_monitor(reward, Monitor(tmp_path, heartbeat=False))
    ticks, stop = [], threading.Event()
    ticker = threading.Thread(
        target=lambda: [ticks.append(1) or time.sleep(0.05) for _ in iter(stop.is_set, True)]
    )
    ticker.start()
    started = time.time()
    table = reward.score(["p", "p"], [CATASTROPHIC, "aaa"])
    elapsed = time.time() - started
    stop.set()
    ticker.join()
    assert elapsed < 20 and table["ends_in_a"] == [None, 1.0] and table["total"][0] is not None
    assert len(ticks) >= 10  # the interpreter was not held: another thread ran all along
    (event,) = [e for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "reward_skipped"]
    assert event["reward"] == "ends_in_a" and event["reason"] == "failed" and "took over 1s" in event["error"]


# --- 10: scores that are not finite numbers; rules that are not reward functions ---
BAD_SCORES = [float("inf"), float("-inf"), float("nan"), 1e308, 10**400, 0.5]


def bad_scores(prompts, completions, **kwargs):
    return BAD_SCORES[: len(completions)]


def test_the_composite_refuses_non_finite_and_huge_scores():
    reward = CompositeReward(
        [Component("bad", bad_scores, 1.0), Component("one", lambda **kw: [1.0] * 6, 1.0)]
    )
    seen = []
    reward.on_reject = lambda **kw: seen.append(kw)
    table = reward.score(["p"] * 6, [str(i) for i in range(6)])
    assert table["bad"] == [None] * 5 + [0.5]
    assert table["total"] == [1.0] * 5 + [0.75]  # left out of the mean, never a number trained on
    assert reward.rejected == {"bad": 5} and seen[0]["n"] == 5


def test_a_multi_grader_refuses_a_sub_score_too_large_for_a_float(tmp_path, monkeypatch):
    module = tmp_path / "huge_mod.py"
    module.write_text("def huge(prompts, completions, **kw):\n    return [10**400 for _ in completions]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "multi.yaml"
    spec.write_text(
        "graders:\n  - name: both\n    type: multi\n    graders:\n"
        "      a: {type: rule, rule: 'huge_mod:huge'}\n      b: {type: regex, pattern: 'x'}\n",
        encoding="utf-8",
    )
    reward = CompositeReward.from_spec(spec)
    assert reward(["p", "p"], ["x", "y"]) == [1.0, 0.0]  # a is refused, b alone decides
    from ark_trainer.rewards.graders import failures

    count, reason = failures(reward.components[0].fn)
    assert count == 2 and "sub-grader 'a'" in reason


@pytest.fixture
def user_rules(tmp_path, monkeypatch):
    (tmp_path / "harden_rules.py").write_text(
        "BAD = [float('inf'), float('nan'), 1e308, 10**400]\n"
        "def bad(prompts, completions, **kw):\n    return [BAD[i % 4] for i in range(len(completions))]\n"
        "def fine(prompts, completions, **kw):\n    return [0.5 for _ in completions]\n"
        "def scalar(prompts, completions, **kw):\n    return 0.5\n"
        "def positional(prompts, completions):\n    return [1.0 for _ in completions]\n"
        "def grade(sample, item):\n    return 10**400\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("harden_rules", None)


def rules_yaml(tmp_path: Path, *rules: str) -> Path:
    spec = tmp_path / "rules.yaml"
    lines = ["graders:"]
    for i, rule in enumerate(rules):
        lines += [f"  - name: r{i}", "    type: rule", f"    rule: '{rule}'"]
    spec.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return spec


def test_score_refuses_inf_nan_and_huge_scores_with_a_warning(user_rules, tmp_path, capsys):
    spec = rules_yaml(tmp_path, "harden_rules:bad", "harden_rules:fine")
    code, out, err = score(spec, unlabelled_data(tmp_path, n=2, candidates=["a", "b"]), capsys)
    assert code == 0 and "Traceback" not in err
    assert "grader 'r0': 4 scores refused (not a finite number within ±1e+06)" in out
    assert "inf" not in next(line for line in out.splitlines() if line.startswith("total"))


def test_a_python_grader_returning_a_huge_int_is_one_line(user_rules, tmp_path, capsys):
    spec = tmp_path / "py.yaml"
    spec.write_text(
        "graders:\n  - name: py\n    type: python\n    function: harden_rules:grade\n", encoding="utf-8"
    )
    code, out, _ = score(spec, unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys)
    # score's reward is train's (rewards/builder.py): guarded, so the sample is skipped and named in one line
    (line,) = [
        line for line in out.splitlines() if line.startswith("warning: grader 'py'") and "skipped" in line
    ]
    assert code == 0 and "py.yaml:4" in line and "finite number" in line and "characters" in line


@pytest.mark.parametrize(
    "rule", ["os:getcwd", "json:dumps", "builtins:len", "harden_rules:positional", "os:sep"]
)
def test_a_rule_that_is_not_a_reward_function_is_refused_when_the_spec_is_read(
    user_rules, tmp_path, capsys, rule
):
    spec = rules_yaml(tmp_path, rule)
    code, _, err = score(spec, unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys)
    line = one_error_line(err)
    assert code == 2 and f"rules.yaml:4: rule: {rule!r}" in line
    assert "reward(prompts, completions, **kwargs)" in line


def test_a_rule_returning_a_scalar_is_one_line_not_a_traceback(user_rules, tmp_path, capsys):
    code, _, err = score(
        rules_yaml(tmp_path, "harden_rules:scalar"), unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys
    )
    assert code == 2 and "'r0' returned float, not a list" in one_error_line(err)


def test_os_getcwd_as_a_rule_stops_train_before_anything_is_written(user_rules, model, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, rules_yaml(tmp_path, "os:getcwd"))) == 2
    assert "not a reward function" in one_error_line(capsys.readouterr().err) and not out.exists()


# --- 13: a reward that grades nothing ---
def test_unlabelled_data_with_the_default_qc_reward_is_refused_before_anything_is_written(
    model, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, None)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "grades nothing" in line and "'qc_verdict'" in line and "qc preset" in line
    assert "llm_judge" in line and "--rm_model_path" in line and "label-free rules" in line
    assert not out.exists()


def test_a_spec_whose_graders_all_need_a_reference_is_refused(model, tmp_path, capsys):
    spec = tmp_path / "ref.yaml"
    spec.write_text(
        "graders:\n  - name: exact\n    type: string_check\n    reference: '{{item.reference}}'\n    operation: eq\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, spec)) == 2
    assert "'exact' is not applicable to any of the 8 rows" in one_error_line(capsys.readouterr().err)
    assert not out.exists()


def test_a_judge_applies_without_a_request(tmp_path):
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.applies import check_applies

    reward = CompositeReward.from_spec(judge_yaml(tmp_path, f"http://127.0.0.1:{closed_port()}/v1"))
    assert check_applies(reward, load_jsonl(unlabelled_data(tmp_path)), "--data_path") == ["judge"]


@pytest.mark.slow
def test_label_free_rules_train_and_bad_scores_never_reach_training(user_rules, model, tmp_path):
    """Unlabelled rows train with label-free graders (13); the catastrophic regex is bounded in RFT's
    scoring (5); inf/nan/1e308/10**400 from a rule are refused, evented, and training stays finite (10)."""
    spec = tmp_path / "free.yaml"
    spec.write_text(
        regex_yaml(tmp_path).read_text(encoding="utf-8")
        + "  - name: wild\n    type: rule\n    rule: 'harden_rules:bad'\n    weight: 0.5\n",
        encoding="utf-8",
    )
    data = unlabelled_data(tmp_path, n=8, candidates=[CATASTROPHIC, "好的"])
    out = tmp_path / "run"
    started = time.time()
    assert main(train_flags(model, data, out, spec, strategy="RFT+GRPO")) == 0
    assert time.time() - started < 300 and (out / "model" / "model.safetensors").is_file()
    events = read_jsonl(out / "events.jsonl")
    skipped = {(e["reward"], e["reason"]) for e in events if e["event"] == "reward_skipped"}
    assert ("ends_in_a", "failed") in skipped and ("wild", "invalid") in skipped
    assert not [e for e in events if e["event"] == "stalled"]
    rewards = [
        e["reward"] for e in events if e["event"] == "metrics" and e.get("stage") == "grpo" and "reward" in e
    ]
    assert rewards and all(abs(r) <= 1.0 for r in rewards)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Rewards: ends_in_a (weight 1), short (weight 1), wild (weight 0.5)" in report
