"""Scoring for RFT (``rewards/scoring.py``): RFT samples only the prompts its steps train on, in rounds sized by the keep rate."""

from __future__ import annotations

import json

import pytest

from ark_trainer.rewards.scoring import KEEP_RATE_GUESS, MAX_ROUNDS, next_round, rft_budget
from ark_trainer.stages.registry import config_class


def test_budget_is_steps_times_examples_per_step():
    assert rft_budget(2, 4, 2, 1) == 16
    assert rft_budget(5, 8, 1, 2) == 80


def test_rounds_start_at_twice_the_need_then_follow_the_measured_keep_rate():
    assert next_round(4, 0, 0, 800, 0) == round(4 / KEEP_RATE_GUESS)
    assert next_round(4, 4, 8, 800, 1) == 0  # enough kept: stop
    assert next_round(10, 2, 8, 800, 1) == 40  # 8 missing at a keep rate of 1/4 (32 prompts), plus 25%
    assert next_round(10, 0, 8, 800, 1) == 125  # nothing kept: the floor rate 0.1, plus 25%
    assert next_round(10, 0, 8, 20, 1) == 12  # never past the file
    assert next_round(10, 0, 8, 800, MAX_ROUNDS) == 0  # rounds used up


@pytest.fixture
def qc_file(tmp_path):
    """800 demo QC rows, each with one candidate: its gold answer (``good``) or a wrong verdict (``bad``)."""
    from ark_trainer.app.demo.data import generate_rows, gold_answer
    from ark_trainer.rewards.qc import format_answer

    def make(kind: str):
        rows = generate_rows(800, 0, "train", with_candidates=False)
        for r in rows:
            wrong = "辱骂" if r["label"] != "辱骂" else "无"
            r["candidates"] = [gold_answer(r) if kind == "good" else format_answer(wrong, "好的。")]
        path = tmp_path / f"{kind}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return path

    return make


def _select(tmp_path, data_path, steps: int, batch: int):
    from ark_trainer.core.config import resolve_config
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.rewards.scoring import sample_and_select
    from ark_trainer.stages.common import rft_sampling
    from ark_trainer.stages.rft.options import RFTOptions
    from tests.conftest import save_tiny_qwen

    model = save_tiny_qwen(tmp_path / "model")
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    flags = {"model_path": str(model), "data_path": str(data_path), "output_dir": str(out)}
    cfg = resolve_config(
        config_class(), {**flags, "rft_num_samples": 1, "max_completion_length": 4, "rft_min_reward": 0.9}
    )
    rows = load_jsonl(data_path)
    reward = build_reward(cfg, rows, "cpu")
    monitor = Monitor(out, heartbeat=False)
    monitor.start()
    needed = rft_budget(steps, batch, 1, 1)
    rt = Runtime("cpu", False, False, [])
    rft = cfg.options(RFTOptions)
    sampling = rft_sampling(cfg.run_flags(), rft.rft_num_samples, rft.rft_temperature)
    sel = sample_and_select(
        sampling, rt, monitor, str(model), rows, reward, out / "data", needed, min_reward=cfg.rft_min_reward
    )
    scored = (out / "data" / "rft_scored.jsonl").read_text(encoding="utf-8").splitlines()
    return sel, scored, needed


def test_rft_samples_only_what_a_two_step_budget_needs(tmp_path, qc_file):
    sel, scored, needed = _select(tmp_path, qc_file("good"), steps=2, batch=2)
    assert needed == 4
    assert len(scored) == sel.stats["n_prompts"] == 8  # one round: twice the need, not 800
    assert sel.stats["n_selected"] >= needed and sel.stats["rounds"] == 1
    assert sel.stats["n_rows"] == 800


def test_rft_samples_more_in_rounds_when_too_few_pass(tmp_path, qc_file):
    sel, scored, needed = _select(tmp_path, qc_file("bad"), steps=2, batch=2)
    expected, kept, sampled = 0, 0, 0
    for r in range(MAX_ROUNDS):  # nothing passes: every round follows the floor keep rate
        size = next_round(needed, kept, sampled, 800, r)
        sampled += size
    assert sel.stats["n_selected"] == 0 and sel.stats["rounds"] == MAX_ROUNDS
    assert len(scored) == sel.stats["n_prompts"] == sampled < 800
    del expected
