"""Evaluation during GRPO keeps the best step (``stages/grpo/grpo_eval.py``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from ark_trainer.stages.grpo import grpo_eval


class Events:
    def __init__(self):
        self.seen = []

    def event(self, kind, **fields):
        self.seen.append((kind, fields))


ROWS = [{"prompt": [{"role": "user", "content": "p"}]}]


def _run(monkeypatch, values, every=2, max_steps=6, record=None, first=0, bf16=False):
    """Train a one-weight "model" whose weight is its step, from step ``first`` (> 0: resumed from a
    checkpoint); the dev scores are ``values`` in turn."""
    model = torch.nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(float(first))
    scores = iter(values)
    monkeypatch.setattr(grpo_eval, "held_out_score", lambda *a, **k: ("task_accuracy", next(scores)))
    events = Events()
    cb = grpo_eval.best_policy_callback(ROWS, None, None, every, 8, bf16, events, record=record)
    state = SimpleNamespace(global_step=first, max_steps=max_steps)
    cb.on_train_begin(None, state, None, model=model)
    for step in range(first + 1, max_steps + 1):
        with torch.no_grad():
            model.weight.fill_(float(step))
        state.global_step = step
        cb.on_step_end(None, state, None, model=model)
    cb.on_train_end(None, state, None, model=model)
    return model.weight.item(), events.seen


def test_the_stage_ends_on_its_best_evaluated_step(monkeypatch):
    weight, events = _run(monkeypatch, [0.50, 0.60, 0.80, 0.70])  # steps 0, 2, 4, 6
    assert weight == 4.0
    evals = [f for kind, f in events if kind == "grpo_eval"]
    assert [e["step"] for e in evals] == [0, 2, 4, 6] and [e["best"] for e in evals] == [
        True,
        True,
        True,
        False,
    ]
    assert ("grpo_best", {"step": 4, "value": 0.8, "last_step": 6}) in events


def test_the_last_step_stays_when_it_is_best_or_nothing_beat_the_start(monkeypatch):
    assert _run(monkeypatch, [0.5, 0.6, 0.7, 0.8])[0] == 6.0
    weight, events = _run(monkeypatch, [0.9, 0.6, 0.7, 0.8])  # the starting model stays the best
    assert weight == 6.0 and not any(kind == "grpo_best" for kind, _ in events)


def test_step_zero_is_measured_like_every_other_step(monkeypatch):
    calls = []

    def score(model, tok, rows, reward, max_new_tokens, bf16):
        calls.append((rows, max_new_tokens, bf16))
        return "task_accuracy", 0.5

    monkeypatch.setattr(grpo_eval, "held_out_score", score)
    cb = grpo_eval.best_policy_callback(ROWS, None, None, 2, 8, True, Events())
    state = SimpleNamespace(global_step=0, max_steps=2)
    model = torch.nn.Linear(1, 1, bias=False)
    cb.on_train_begin(None, state, None, model=model)
    state.global_step = 2
    cb.on_step_end(None, state, None, model=model)
    assert calls == [(ROWS, 8, True), (ROWS, 8, True)]  # the starting model: the same function and settings
    assert not hasattr(grpo_eval, "starting_score")  # no figure read from an eval file measured otherwise


def test_the_best_step_survives_a_resume(monkeypatch, tmp_path):
    record = tmp_path / "grpo" / "best_step.json"
    killed = _run(monkeypatch, [0.5, 0.9, 0.6], max_steps=4, record=record)  # steps 0, 2, 4: then killed
    assert killed[0] == 2.0 and (tmp_path / "grpo" / "best_step.safetensors").is_file()
    weight, events = _run(monkeypatch, [0.7, 0.8], max_steps=8, record=record, first=4)  # steps 6, 8
    assert weight == 2.0  # step 2 of the first attempt, restored from the run folder
    assert ("grpo_best", {"step": 2, "value": 0.9, "last_step": 8}) in events


def test_a_best_step_measured_otherwise_or_of_another_attempt_is_dropped(monkeypatch, tmp_path):
    record = tmp_path / "grpo" / "best_step.json"
    _run(monkeypatch, [0.5, 0.9, 0.6], max_steps=4, record=record)
    weight, _ = _run(monkeypatch, [0.7, 0.8], max_steps=8, record=record, first=4, bf16=True)
    assert weight == 8.0  # the precision changed: the earlier 0.9 is not compared with these figures
    _run(monkeypatch, [0.5, 0.9, 0.6], max_steps=4, record=record)
    weight, _ = _run(monkeypatch, [0.1, 0.2, 0.3], max_steps=4, record=record)  # a fresh start: its own steps
    assert weight == 4.0


@pytest.mark.parametrize(("every", "max_steps", "steps"), [(3, 7, [0, 3, 6, 7]), (10, 4, [0, 4])])
def test_it_evaluates_every_n_steps_and_after_the_last(monkeypatch, every, max_steps, steps):
    _, events = _run(monkeypatch, [0.1] * 10, every=every, max_steps=max_steps)
    assert [f["step"] for kind, f in events if kind == "grpo_eval"] == steps


def test_a_grpo_run_records_its_choices_evaluates_as_it_trains_and_trains_on_its_own_reward(tmp_path):
    from ark_trainer.base.fileio import read_json, read_jsonl
    from ark_trainer.cli import main
    from tests.conftest import tiny_qc_assets

    a = tiny_qc_assets(tmp_path)
    out = tmp_path / "run"
    args = [
        "train", "--strategy", "GRPO", "--model_path", str(a["model"]), "--data_path", str(a["train"]),
        "--eval_dataset", str(a["eval"]), "--output_dir", str(out), "--max_train_steps", "2", "--batch_size", "4",
        "--num_generations", "2", "--max_completion_length", "6", "--logging_steps", "1", "--device", "cpu",
        "--save_steps", "0", "--seed", "7", "--grpo_eval_steps", "1", "--scale_rewards", "none",
        "--grpo_reward_weights", "qc_verdict=1,qc_compliance=0,qc_satisfaction=0,qc_format=0",
    ]  # fmt: skip
    assert main(args) == 0
    auto = read_json(out / "plan.json")["auto_defaults"]
    assert "grpo_reward_weights" not in auto  # set by the flag
    assert auto["grpo_prompts_per_step"]["value"] == 2  # a toy: --batch_size / --num_generations
    assert 1 <= auto["grpo_max_completion_length"]["value"] <= 6
    events = read_jsonl(out / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "grpo_eval"] == [0, 1, 2]
    logged = [e for e in events if e["event"] == "metrics" and e.get("stage") == "grpo" and "reward" in e]
    assert logged and all(e["reward"] == e["rewards/qc_verdict/mean"] for e in logged)  # the verdict alone
