"""The live loop's supervisor killed during a round: the same command resumes it, with the real loop process
and server of ``test_loop_e2e.py`` (its helpers); every turn is sent straight to the loop's server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, read_jsonl, write_jsonl
from tests.conftest import run_cli, save_tiny_qwen
from tests.e2e.test_loop_e2e import (
    BAD,
    GOOD,
    QUESTIONS,
    _chat,
    _conversation,
    _deployment,
    _start_loop,
    _wait,
)


@pytest.mark.slow
def test_a_supervisor_killed_during_a_round_resumes_and_the_agent_never_sees_a_half_model(openclaw, tmp_path):
    """kill -9 the supervisor while round 1 trains; the same command resumes: the server it left keeps
    serving round 0, the round is decided and promoted, and the loop serves it.

    The round is the same on every run, so its gate decision is too: the tiny model's random init is seeded
    (with an unlucky init the round never learns to end its answer after 好的: it answers "好的\n好的\n…",
    which the reference matches only in part, so task_accuracy stays 0 and the round is refused), and the
    round starts only once every user's corrections are in (``--min_new_turns`` = all the targets), so
    what it trains on does not depend on how far the users had got when the supervisor looked."""
    import torch

    torch.manual_seed(0)  # the random init too: the same model every run
    model = save_tiny_qwen(
        tmp_path / "base", texts=[GOOD, BAD, *QUESTIONS, "不对，应该回答："], hidden_size=64,
        intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
    )  # fmt: skip
    heldout = tmp_path / "heldout.jsonl"
    write_jsonl(heldout, [{"question": q, "reference": GOOD} for q in QUESTIONS[30:34]])
    loop, log = tmp_path / "loop", tmp_path / "loop.log"
    users, turns = (
        12,
        1,
    )  # each user's question is corrected: one target each (a reply to a correction is none)
    every_turn = ("--max_rounds", "1", "--min_new_turns", str(users * turns))
    proc = _start_loop(tmp_path, model, heldout, *every_turn)
    try:
        record = _wait(lambda: _deployment(loop), 240, "the loop's deployment", log)
        for c in range(users):
            _conversation(record, GOOD, turns, start=c * turns)
        _wait(lambda: read_json(loop / "state.json")["training"], 300, "round 1 to start", log)
        assert len(read_jsonl(loop / "rounds" / "1" / "data.jsonl")) == users * turns - 2  # --eval_newest 2
        proc.kill()  # the supervisor dies; its round and the server live on in their own sessions
        proc.wait(timeout=30)
        assert os.path.realpath(loop / "model") == str(model.resolve())  # still the complete starting model
        assert _chat(record, [{"role": "user", "content": QUESTIONS[3]}]) is not None  # still answering
        proc = _start_loop(tmp_path, model, heldout, *every_turn)
        proc.wait(timeout=600)
        state = read_json(loop / "state.json")
        decision = loop / "rounds" / "1" / "decision.json"
        why = read_json(decision) if decision.is_file() else "no decision.json"
        assert [h["round"] for h in state["history"]] == [1] and state["serving"] == 1, (state, why)
        assert "resuming" in log.read_text() and _deployment(loop)["pid"] == record["pid"]  # same server
        assert "[ark serve] serving round-1 (reloaded)" in Path(record["log"]).read_text()
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=60)
        run_cli("loop", "--output_dir", str(loop), "--stop", cwd=tmp_path)
