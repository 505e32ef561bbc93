"""Resource exhaustion and numbers that turn into NaN: each refused in one line, or bounded.

- YAML (``--config``, ``--reward_config`` and a grader's ``params:``, ``--feedback_rules``, an accelerate
  config): alias bombs, self-referencing aliases, 20,000 levels of nesting and oversized files are refused
  before anything is built (``yamlsafe.py``), naming the file and line.
- A judge or planning model that sends its headers and then one byte a second is cut off at its total
  deadline (``httpclient.py``); an answer larger than the limit is refused.
- Counts that multiply memory (``--rft_num_samples 1000000000``) have ranges.
- Grader weights are finite and at most 1e6 (``1.0e+308`` twice made every total NaN); ``1.0e308``, which
  YAML 1.1 reads as text, gets the same clear message; a ``multi`` formula that yields a complex number skips
  the sample and names the grader and its line.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.errors import UserError
from tests.conftest import refused, tiny_qc_assets, train_argv


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    return tiny_qc_assets(tmp_path_factory.mktemp("limits_assets"))


def alias_bomb(levels: int = 24, indent: str = "") -> str:
    """``a0: &a0 [x, x]``, ``a1: &a1 [*a0, *a0]``, …: 2**levels values once expanded, a few hundred bytes."""
    lines = [f"{indent}a0: &a0 [x, x]"]
    lines += [f"{indent}a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMB_IN_PARAMS = "graders:\n  - name: qc_format\n    weight: 1\n    params:\n" + alias_bomb(indent="      ")
DEEP_FLOW = "graders: " + "[" * 20000 + "]" * 20000 + "\n"
DEEP_BLOCK = "".join(f"{'  ' * i}k{i}:\n" for i in range(80)) + "  " * 80 + "v: 1\n"
SELF_ALIAS = "graders: &g [*g]\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (BOMB_IN_PARAMS, "expand to more than 100000 values (an alias bomb?)"),
        (DEEP_FLOW, ":1: nested deeper than 64 levels"),
        (DEEP_BLOCK, ":65: nested deeper than 64 levels"),
        (SELF_ALIAS, "*g refers to a value that contains it"),
    ],
)
def test_hostile_reward_yaml_is_refused_at_once(assets, tmp_path, capsys, text, says):
    spec = tmp_path / "rewards.yaml"
    spec.write_text(text, encoding="utf-8")
    started = time.monotonic()
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--reward_config", str(spec)))
    assert time.monotonic() - started < 30  # it was a MemoryError after 54 s
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}:") and says in lines[0], lines
    assert not (tmp_path / "out").exists()
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert says in lines[0]


@pytest.mark.parametrize("text", [alias_bomb(), DEEP_FLOW.replace("graders", "tags"), "x: " * 600_000])
def test_hostile_config_yaml_is_refused_at_once(assets, tmp_path, capsys, text):
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--config", str(config)))
    assert lines[0].startswith(f"error: {config}"), lines
    assert any(w in lines[0] for w in ("alias bomb", "nested deeper", "bytes; a YAML config is at most")), (
        lines
    )


def test_the_other_yaml_readers_are_bounded_too(tmp_path):
    from ark_trainer.loop.feedback import load_rules
    from ark_trainer.runtime.launch import check_engine

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(), encoding="utf-8")
    with pytest.raises(UserError, match=r"--feedback_rules: .*alias bomb"):
        load_rules(str(bomb))
    with pytest.raises(UserError, match=r"--accelerate_config: .*alias bomb"):
        check_engine(str(bomb), use_cpu=True)


def test_a_few_aliases_are_fine(tmp_path):
    from ark_trainer.yamlsafe import safe_load

    text = "base: &b {lr: 1, steps: 2}\nrun1: *b\nrun2: *b\n" + alias_bomb(10)
    assert safe_load(text, "ok.yaml")["run2"] == {"lr": 1, "steps": 2}


# --- a total deadline per request --------------------------------------------------------------------------


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
    import ark_trainer.nl.llm as llm

    url, state = trickle_server
    monkeypatch.setattr(llm, "TIMEOUT_S", 1.0)
    started = time.monotonic()
    lines = refused(capsys, ["plan", "only GRPO", "--llm-base-url", url, "--llm-model", "m"])
    assert time.monotonic() - started < 3.5
    assert lines == [f"error: --llm-base-url: {url}/chat/completions gave no complete answer within 1.0s"]
    state["mode"] = "huge"
    lines = refused(capsys, ["plan", "only GRPO", "--llm-base-url", url, "--llm-model", "m"])
    assert lines == [f"error: --llm-base-url: {url}/chat/completions answered more than 1000000 bytes"]


# --- counts that multiply memory -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("rft_num_samples", "1000000000", "--rft_num_samples: must be in [0, 256]"),
        ("num_generations", "100000", "--num_generations: must be in [2, 256]"),
        ("auto_probe_samples", "5000", "--auto_probe_samples: must be in [2, 256]"),
        ("max_completion_length", "1000000000", "--max_completion_length: must be in [1, 131072]"),
        ("batch_size", "1000000000", "--batch_size: must be in [1, 8192]"),
        ("rollout_steps", "100000", "--rollout_steps: must be in [1, 64]"),
        ("lora_r", "1000000", "--lora_r: must be in [0, 4096]"),
        ("rm_weight", "1e308", "--rm_weight: must be in [0, 1e+06]"),
    ],
)
def test_counts_that_multiply_memory_have_ranges(assets, tmp_path, capsys, flag, value, says):
    lines = refused(capsys, train_argv(assets, tmp_path / "out", f"--{flag}", value))
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}"), lines


def test_score_counts_have_ranges(assets, capsys):
    base = ["score", "--data_path", str(assets["train"])]
    assert (
        "[1, 256]"
        in refused(capsys, [*base, "--model_path", str(assets["model"]), "--num_samples", "1000000000"])[0]
    )
    assert "[1, 131072]" in refused(capsys, [*base, "--max_new_tokens", "999999999"])[0]


# --- numbers that turn into NaN ------------------------------------------------------------------------------


def grader_spec(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "rewards.yaml"
    spec.write_text("graders:\n" + body, encoding="utf-8")
    return spec


TWO = (
    "  - name: a\n    type: string_check\n    reference: x\n    operation: like\n    weight: {w}\n"
    "  - name: b\n    type: string_check\n    reference: y\n    operation: like\n    weight: {w}\n"
)


@pytest.mark.parametrize(
    ("weight", "says"),
    [
        ("1.0e+308", "weight: expected a number in [0, 1e+06], got 1e+308"),
        ("1.0e308", "weight: expected a number in [0, 1e+06], got 1e+308"),  # text to YAML 1.1
        (".inf", "weight: expected a finite number, got inf"),
        (".nan", "weight: expected a finite number, got nan"),
        ("'lots'", "weight: expected an integer or a number, got 'lots'"),
    ],
)
def test_grader_weights_are_finite_and_bounded(assets, tmp_path, capsys, weight, says):
    spec = grader_spec(tmp_path, TWO.format(w=weight))
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert len(lines) == 2 and all(says in line for line in lines), lines
    assert lines[0].startswith(f"error: {spec}:6: weight")


def test_weights_written_as_yaml_text_still_count(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = grader_spec(tmp_path, TWO.format(w="1e3"))  # YAML 1.1 text, 1000 to a user
    assert [g.weight for g in load_graders(spec)] == [1000.0, 1000.0]


def test_multi_weights_and_reward_weights_are_bounded(assets, tmp_path, capsys):
    spec = grader_spec(
        tmp_path,
        "  - name: m\n    type: multi\n    weights: {a: 1.0e+308, b: 1}\n    graders:\n"
        "      a: {type: string_check, reference: x, operation: like}\n"
        "      b: {type: string_check, reference: y, operation: like}\n",
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert "weights: a: expected a number in [0, 1e+06], got 1e+308" in lines[0]
    for bad in ("qc_verdict=1e308", "qc_verdict=nan", "qc_verdict=inf"):
        lines = refused(capsys, train_argv(assets, tmp_path / "out", "--reward_weights", bad))
        assert any("expected name=weight with a weight in [0, 1e+06]" in line for line in lines), lines


def test_a_composite_refuses_weights_that_would_make_nan():
    from ark_trainer.rewards.composite import Component, CompositeReward

    with pytest.raises(UserError, match=r"'a': weight inf is not a number in \[0, 1e\+06\]"):
        CompositeReward([Component("a", len, float("inf")), Component("b", len, 1.0)])
    big = CompositeReward([Component("a", lambda **k: [1e6], 1e6), Component("b", lambda **k: [1e6], 1e6)])
    assert big(["q"], ["x"]) == [1e6]  # the bounds keep the largest total finite


def test_a_complex_formula_names_the_grader_and_its_line(assets, tmp_path, capsys):
    spec = grader_spec(
        tmp_path,
        "  - name: qc_verdict\n  - name: combined\n    type: multi\n"
        "    calculate_output: '(a - 2) ** 0.5'\n    graders:\n"
        "      a: {type: string_check, reference: 结论, operation: like}\n",
    )
    from ark_trainer.rewards.composite import CompositeReward

    reward = CompositeReward.from_spec(spec)
    scores = reward.score(["q", "q"], ["结论：违规", "no"], label=["无", "无"])
    assert scores["combined"] == [None, None]
    multi = reward.components[1].fn
    assert multi.failed == 2 and multi.failure.startswith(
        f"{spec}:5: multi grader 'combined': calculate_output"
    )
    assert main(["score", "--reward_config", str(spec), "--data_path", str(assets["train"])]) == 0
    out = capsys.readouterr()
    assert f"{spec}:5: multi grader 'combined'" in out.out + out.err


def test_a_deeply_nested_llm_answer_is_one_line(capsys):
    from ark_trainer.nl.llm import extract_object

    with pytest.raises(UserError, match="the answer is not a JSON object"):
        extract_object("[" * 100_000 + "]" * 100_000, "--llm-model m")
