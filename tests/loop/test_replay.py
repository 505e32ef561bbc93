"""Replay in round data (``services/loop/replay.py``): each round trains on its new turns mixed with rows the served
model already learned (the starting model's training rows, earlier rounds' new turns), never a held-out
prompt; ``--replay_share 0`` trains on the new turns alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, read_jsonl, write_json, write_jsonl
from ark_trainer.data.loader import load_jsonl
from ark_trainer.services.loop import replay, rounds, serving
from ark_trainer.services.loop.supervisor import Loop, LoopSettings
from tests.conftest import refused, save_tiny_qwen
from tests.loop.heldout_rows import QC_ROWS


def _start_run(tmp_path: Path) -> Path:
    """A ``train`` run folder as the starting model came from: its plan, its model, its training rows (two
    of them the held-out set's own prompts, which must never be replayed)."""
    run = tmp_path / "start"
    save_tiny_qwen(run / "model")
    write_json(run / "plan.json", {"stages": [{"name": "rft", "steps": 2}]})
    learned = [
        {
            "prompt": [{"role": "user", "content": f"客服：旧案例 {i}，电话 1380013{i:04d}。"}],
            "candidates": ["违规：无"],
            "label": "无",
        }
        for i in range(40)
    ]
    held = [{"prompt": [{"role": "user", "content": r["question"]}], "candidates": ["违规：无"], "label": r["label"]}
            for r in QC_ROWS[:2]]  # fmt: skip
    write_jsonl(run / "data" / "train.jsonl", learned + held)
    return run


def _turns(n: int, tag: str) -> list[dict]:
    return [{"messages": [{"role": "user", "content": f"客服：新案例 {tag}{i}。"},
                          {"role": "assistant", "content": "违规：推诿"}], "feedback": -1,
             "reference": "违规：推诿", "label": "推诿"} for i in range(n)]  # fmt: skip


def _loop(tmp_path: Path, monkeypatch, share: float, said: list[str]) -> Loop:
    held = tmp_path / "held.jsonl"
    write_jsonl(held, QC_ROWS)
    monkeypatch.setattr(serving, "serve", lambda *a, **k: None)
    monkeypatch.setattr(rounds, "start_training", lambda folder, argv: 4242)
    monkeypatch.setattr("ark_trainer.services.loop.supervisor.process_start", lambda pid: None)
    flags = {"model_path": str(_start_run(tmp_path) / "model"), "eval_dataset": str(held)}
    loop = Loop(tmp_path / "loop", LoopSettings(replay_share=share, eval_newest=0), flags,
                log=lambda m, **k: said.append(m))  # fmt: skip
    loop.start()
    return loop


def _decide(loop: Loop) -> None:
    """Round started → decided (refused): its new turns join the pool of the next round."""
    loop.state["history"].append({"round": loop.state["training"]["round"], "promoted": False, "reasons": []})
    loop.state["training"] = None


def test_each_round_mixes_as_many_replayed_rows_as_new_ones_and_never_a_heldout_prompt(tmp_path, monkeypatch):
    said: list[str] = []
    loop = _loop(tmp_path, monkeypatch, replay.DEFAULT_SHARE, said)
    assert any("rounds replay the starting model's training rows" in m and "train.jsonl" in m for m in said)
    loop._start_round(_turns(10, "a"), 10)
    one = tmp_path / "loop" / "rounds" / "1"
    rows = read_jsonl(one / "data.jsonl")
    assert len(rows) == 20 and all(r["label"] == "推诿" for r in rows[:10])  # new first, then replayed
    replayed = rows[10:]
    assert all("旧案例" in r["messages"][0]["content"] for r in replayed)  # the starting rows, not held-out
    assert not any("1380013" in r["messages"][0]["content"] for r in replayed)  # scrubbed as turns are
    assert all(r["messages"][-1] == {"role": "assistant", "content": "违规：无"} for r in replayed)
    assert len(load_jsonl(one / "data.jsonl")) == 20  # train reads the mix
    record = read_json(one / "replay.json")
    assert record["n_new"] == 10 and record["n_replay"] == 10 and record["pool"] == {"start": 40}
    assert any(m.startswith("loop: round 1: replay: 10 new rows + 10 replayed") for m in said)
    assert loop.state["training"]["n_replay"] == 10
    # round 2: round 1's new turns join the pool, its replayed rows do not (they are the start's already)
    _decide(loop)
    loop._start_round(_turns(30, "b"), 40)
    record = read_json(tmp_path / "loop" / "rounds" / "2" / "replay.json")
    assert record["pool"] == {"start": 40, "round 1": 10} and record["n_replay"] == 30
    assert record["from"]["start"] + record["from"]["round 1"] == 30


def test_replay_share_0_trains_on_the_new_turns_alone(tmp_path, monkeypatch):
    said: list[str] = []
    loop = _loop(tmp_path, monkeypatch, 0.0, said)
    loop._start_round(_turns(10, "a"), 10)
    assert len(read_jsonl(tmp_path / "loop" / "rounds" / "1" / "data.jsonl")) == 10
    assert any("replay: off (--replay_share 0): 10 new rows only" in m for m in said)


@pytest.mark.parametrize("n_new,share,count", [(10, 0.5, 10), (10, 0.0, 0), (9, 0.25, 3), (0, 0.5, 0)])
def test_the_replay_count_makes_replayed_rows_that_share_of_the_round(n_new, share, count):
    assert replay.replay_count(n_new, share) == count


def test_a_replay_share_of_1_or_more_is_refused(tmp_path, capsys):
    argv = [
        "loop",
        "--output_dir",
        str(tmp_path / "loop"),
        "--model_path",
        str(tmp_path),
        "--replay_share",
        "1",
    ]
    lines = refused(capsys, argv)
    assert len(lines) == 1 and lines[0].startswith("error: --replay_share: expected a share in [0, 1)"), lines
