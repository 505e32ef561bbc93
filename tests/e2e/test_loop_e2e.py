"""The live loop end to end with the real OpenClaw CLI: serve, record, feedback, a round promoted, a round
refused, rollback.

A tiny random model is served by ``ark-trainer loop`` (a subprocess, as a user runs it). Scripted users
talk to it through ``openclaw agent --local`` (OpenClaw's config, provider ``ark``), two sessions at a
time: each session asks a question, then corrects the answer with a hint ("不对，应该回答：好的。"); the
loop freezes those scored turns, recorded from OpenClaw's requests, as its held-out set. The rounds' own
turns are then sent straight to the loop's server in OpenClaw's request shape (its system prompt, date
prefix and runtime note, copied from the agent's recorded turns: same route and recording, far cheaper
than an agent turn, which costs 10-15 s of CPU here): round 1 learns the hinted answer, which is the
held-out set's reference, so round 1 is promoted and the next agent turn (a real one) is answered by it.
Then the users' hints teach a wrong answer: round 2 is worse on the held-out set and is refused, round 1
keeps serving. ``loop --rollback 0`` serves the starting model again. 5 agent turns or more: users stop
talking through the agent once the held-out set is in. A supervisor killed mid-round is
``test_loop_e2e_resume.py``'s (apart: the two long runs can go to the two pytest-xdist workers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, read_jsonl
from tests.conftest import run_cli, save_tiny_qwen

GOOD = "好的"
BAD = "错错"
QUESTIONS = [f"订单{i}什么时候发货？" for i in range(40)]


def _start_loop(tmp_path: Path, model: Path, heldout: Path | None, *extra: str) -> subprocess.Popen:
    """The loop as a user starts it; without ``heldout`` it freezes its first scored turns as held-out."""
    held = ["--eval_dataset", str(heldout)] if heldout else []
    argv = [sys.executable, "-m", "ark_trainer", "loop", "--output_dir", str(tmp_path / "loop"),
            "--model_path", str(model), *held, "--min_new_turns", "8",
            "--eval_newest", "2", "--poll", "0.5", "--max_rounds", "2",
            "--strategy", "RFT+GRPO", "--max_train_steps", "42", "--rft_steps", "40", "--batch_size", "4",
            "--num_generations", "2", "--rft_num_samples", "2", "--max_completion_length", "16", "--lora_r", "0",
            "--rft_learning_rate", "0.02", "--logging_steps", "1", "--save_steps", "100", *extra]  # fmt: skip
    log = open(tmp_path / "loop.log", "ab")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path, env={**os.environ})


def _wait(predicate, timeout: float, what: str, log: Path):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; loop log:\n{log.read_text()[-3000:]}")


def _deployment(loop: Path) -> dict | None:
    path = loop / "deploy" / "deploy.json"
    record = read_json(path) if path.is_file() else None
    return record if record and record.get("state") == "deployed" else None


def _chat(record: dict, messages: list[dict]) -> str:
    """One chat completion as OpenClaw sends it (streamed), straight to the loop's server."""
    key = Path(record["api_key_file"]).read_text().strip()
    body = {"model": record["name"], "stream": True, "messages": messages, "max_completion_tokens": 16}
    req = urllib.request.Request(
        f"http://127.0.0.1:{record['port']}/v1/chat/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )  # fmt: skip
    text = []
    with urllib.request.urlopen(req, timeout=120) as resp:
        for raw in resp:
            line = raw.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]":
                for choice in json.loads(line[5:]).get("choices") or []:
                    text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def _openclaw_shape(loop: Path) -> tuple[str, str, str]:
    """OpenClaw's request shape, from the first turn its agent sent to the loop's server: the system prompt,
    the date prefix of the user's messages and the runtime note under a session's first message."""
    for turn in read_jsonl(loop / "turns" / "turns.jsonl"):
        system, first = turn["messages"][0], turn["messages"][1]
        if system["role"] == "system" and first["role"] == "user" and "\n\nRuntime: " in first["content"]:
            date, rest = first["content"].split("] ", 1)
            return system["content"], date + "] ", "\n\nRuntime: " + rest.split("\n\nRuntime: ", 1)[1]
    raise AssertionError("no turn of OpenClaw's agent recorded")


def _conversation(record: dict, hint: str, turns: int, start: int, shape: tuple[str, str, str] | None = None):
    """A scripted user: a question, then a correction with ``hint`` after every answer; with ``shape``
    (:func:`_openclaw_shape`), each message wrapped as OpenClaw wraps it, under its system prompt."""
    system, date, note = shape or ("You are a personal assistant running inside OpenClaw.", "", "")
    messages = [{"role": "system", "content": system}]
    for i in range(turns):
        question = QUESTIONS[(start + i) % len(QUESTIONS)]
        user = f"{date}{question}{note}" if i == 0 else f"{date}不对，应该回答：{hint}"
        messages.append({"role": "user", "content": user})
        messages.append({"role": "assistant", "content": _chat(record, messages) or "…"})
    messages.append({"role": "user", "content": f"{date}不对，应该回答：{hint}"})
    _chat(record, messages)  # carries the feedback on the last answer


def _direct_until(loop: Path, done, hint: str, turns: int, first: int, pairs: int) -> int:
    """Like :func:`_users_until`, with each session sent straight to the loop's server in OpenClaw's request
    shape: every answer is corrected (one target a session: its first answer); the sessions sent."""
    shape = _openclaw_shape(loop)
    for k in range(first, first + 2 * pairs, 2):
        for question in (k, k + 1):
            _conversation(_deployment(loop), hint, turns, start=question, shape=shape)
        deadline = time.time() + 30  # the loop looks every 0.5 s; a round takes a few seconds to start
        while time.time() < deadline and not done():
            time.sleep(0.5)
        if done():
            return k + 2 - first
    raise AssertionError(f"{2 * pairs} sessions with hint {hint} and the loop still waits")


def _agent(openclaw, session: str, message: str, state_dir: Path | None = None) -> dict:
    env = {"OPENCLAW_STATE_DIR": str(state_dir)} if state_dir else None
    out = openclaw.run_json(
        ["agent", "--local", "--json", "--timeout", "200", "--session-id", session, "--message", message],
        timeout=260,
        env=env,
    )
    assert out["meta"]["executionTrace"]["winnerProvider"] == "ark", out["meta"]
    return out


def _second_openclaw(tmp_path: Path) -> Path:
    """A second OpenClaw state folder with the loop's config: two users' agents on the same model server
    (one OpenClaw state serves one ``agent --local`` at a time: "failed to acquire gateway state
    ownership")."""
    state = tmp_path / "openclaw-2"
    state.mkdir(exist_ok=True)
    shutil.copyfile(Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json", state / "openclaw.json")
    return state


def _agent_users(openclaw, tmp_path: Path, sessions: dict[str, str], hint: str, turns: int) -> int:
    """Scripted users through ``openclaw agent --local``, two at a time (each with its own OpenClaw
    state): in each session a question, then ``turns - 1`` corrections with ``hint``; the turns sent."""
    states = [None, _second_openclaw(tmp_path)]
    items = list(sessions.items())

    def user(k: int) -> int:  # the sessions of one OpenClaw state, one after the other
        for session, question in items[k::2]:
            for i in range(turns):
                _agent(openclaw, session, question if i == 0 else f"不对，应该回答：{hint}", states[k])
        return turns * len(items[k::2])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return sum(pool.map(user, range(2)))


def _users_until(openclaw, tmp_path: Path, done, hint: str, turns: int, first: int, pairs: int) -> int:
    """Two sessions at a time (one per user, questions ``first``, ``first + 1``, ...) of ``turns`` turns each,
    until ``done()``, at most ``pairs`` times; the turns sent. The loop counts a turn only once its
    correction is recorded and matched to the answer, which a random model's answer does not always allow
    (OpenClaw keeps a cleaned copy of a garbled answer in its history), so users talk until it has enough."""
    sent = 0
    for k in range(first, first + 2 * pairs, 2):
        sessions = {f"{hint}-{i}": QUESTIONS[i] for i in (k, k + 1)}
        sent += _agent_users(openclaw, tmp_path, sessions, hint, turns)
        deadline = time.time() + 30  # the loop looks every 0.5 s; a round takes a few seconds to start
        while time.time() < deadline and not done():
            time.sleep(0.5)
        if done():
            return sent
    raise AssertionError(f"{sent} agent turns with hint {hint} and the loop still waits")


def _round_started(loop: Path, n: int) -> bool:
    state = read_json(loop / "state.json")
    return len(state["history"]) >= n or (state["training"] or {}).get("round") == n


@pytest.mark.slow
def test_loop_promotes_a_better_round_refuses_a_worse_one_and_rolls_back(openclaw, tmp_path):
    import torch

    torch.manual_seed(0)  # the second test's starting model, whose rounds are known to learn
    model = save_tiny_qwen(
        tmp_path / "base",
        texts=[GOOD, BAD, *QUESTIONS, "不对，应该回答："],
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    loop = tmp_path / "loop"
    # The held-out set is the first 2 scored agent turns, frozen before round 1: questions in OpenClaw's
    # own shape (date, runtime line), recorded from the agent's requests like the turns the rounds train on.
    proc = _start_loop(tmp_path, model, None, "--heldout_size", "2", "--min_new_turns", "6")
    log = tmp_path / "loop.log"
    try:
        record = _wait(lambda: _deployment(loop), 240, "the loop's deployment", log)
        server_log = Path(record["log"])
        # 1. scripted users talk to the agent; their hints teach the held-out answer. Sessions of 2 turns until
        # 2 are targets (a session's first answer, once its correction is matched; the model's reply to a
        # correction is never one): the held-out set (usually one pair)
        sent = _users_until(openclaw, tmp_path, (loop / "heldout.jsonl").is_file, GOOD, 2, first=0, pairs=3)
        assert len(read_jsonl(loop / "heldout.jsonl")) == 2
        # then sessions of one corrected question each, straight to the server in OpenClaw's shape, until
        # the 6 new targets round 1 waits for are in (three pairs)
        sessions = _direct_until(loop, lambda: _round_started(loop, 1), GOOD, 1, first=6, pairs=5)
        state = _wait(lambda: (s := read_json(loop / "state.json"))["history"] and s, 900, "round 1", log)
        decision = read_json(loop / "rounds" / "1" / "decision.json")
        assert decision["promoted"], decision
        assert decision["candidate"]["reward_mean"] > decision["current"]["reward_mean"]
        _wait(lambda: read_json(loop / "state.json")["serving"] == 1, 120, "round 1 served", log)
        assert _deployment(loop)["pid"] == record["pid"]  # hot-swapped: the same server process, no restart
        assert "[ark serve] serving round-1 (reloaded)" in server_log.read_text()
        # 2. the next agent turn is answered by round 1
        n_before = server_log.read_text().count("answered by round-1")
        _agent(openclaw, "after-1", QUESTIONS[20])
        sent += 1
        assert server_log.read_text().count("answered by round-1") == n_before + 1
        status = run_cli("status", str(loop), cwd=tmp_path)
        assert (
            status.returncode == 0
            and "serving round 1" in status.stdout
            and "round 1: promoted" in status.stdout
        )
        # 3. a round taught the wrong answer is refused; round 1 keeps serving
        sessions += _direct_until(loop, lambda: _round_started(loop, 2), BAD, 1, first=16, pairs=5)
        assert sent >= 5 and sessions >= 12  # the fewest that fill the held-out set and both rounds
        state = _wait(
            lambda: len((s := read_json(loop / "state.json"))["history"]) == 2 and s, 900, "round 2", log
        )
        refused = read_json(loop / "rounds" / "2" / "decision.json")
        assert not refused["promoted"], refused
        # refused on the held-out rows: worse there, or (when the round's wrong answers had not yet moved the
        # 2 held-out answers, as the users' timing decides how many fall in the round) no better
        assert any(
            r.startswith("heldout_reward_mean: regressed") or "does not improve" in r
            for r in refused["reasons"]
        ), refused
        assert refused["candidate"]["heldout_reward_mean"] <= refused["current"]["heldout_reward_mean"], (
            refused
        )
        assert state["serving"] == 1 and os.path.realpath(loop / "model") == str(
            (loop / "rounds" / "1" / "model").resolve()
        )
        assert "round-2" not in server_log.read_text()
        proc.wait(timeout=60)  # --max_rounds 2: the supervisor ends, the server keeps serving
        assert _chat(_deployment(loop), [{"role": "user", "content": QUESTIONS[5]}])
        # 4. rollback to the starting model; a never-promoted round is refused
        bad = run_cli("loop", "--output_dir", str(loop), "--rollback", "2", cwd=tmp_path)
        assert bad.returncode == 2 and "never promoted" in bad.stderr
        back = run_cli("loop", "--output_dir", str(loop), "--rollback", "0", cwd=tmp_path)
        assert back.returncode == 0, back.stderr
        assert read_json(loop / "state.json")["serving"] == 0
        assert "serving round-0" in server_log.read_text()
        assert (loop / "report.md").is_file() and (loop / "plots" / "loop_metric.png").is_file()
        turns = (loop / "turns" / "turns.jsonl").read_text()
        assert GOOD in turns and "ark-serve" in turns
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        run_cli("loop", "--output_dir", str(loop), "--stop", cwd=tmp_path)
