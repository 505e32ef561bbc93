"""Tests for the synthetic QC data set (ark_trainer.demo.data): determinism, proportions, splits, answers.

Run: PYTHONPATH=src python -m pytest tests/test_demo_data.py -q
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ark_trainer.demo import data
from ark_trainer.rewards import qc


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def train_rows():
    return data.generate_rows(600, seed=0, split="train", with_candidates=True)


def _dialogue(row: dict) -> str:
    return row["question"].split("\n", 1)[1]


def test_same_seed_same_rows_other_seed_other_rows():
    first = data.generate_rows(50, seed=3, split="train", with_candidates=True)
    assert first == data.generate_rows(50, seed=3, split="train", with_candidates=True)
    assert first != data.generate_rows(50, seed=4, split="train", with_candidates=True)


def test_row_shape(train_rows):
    for row in train_rows:
        assert row["id"].startswith("qc-train-")
        instruction, *lines = row["question"].split("\n")
        assert instruction == data.INSTRUCTION
        assert 2 <= len(lines) <= 5 and all(line[:3] in ("顾客：", "客服：") for line in lines)
        assert row["label"] in qc.VIOLATION_TYPES
        assert row["scenario"] in data.SCENARIOS
        low, high = data.DIALOGUE_CHARS
        assert low <= len(_dialogue(row)) <= high


def test_proportions_follow_type_weights(train_rows):
    counts = Counter(row["label"] for row in train_rows)
    assert set(counts) == set(qc.VIOLATION_TYPES)
    assert sum(data.TYPE_WEIGHTS.values()) == pytest.approx(1.0)
    for label, weight in data.TYPE_WEIGHTS.items():
        assert counts[label] / len(train_rows) == pytest.approx(weight, abs=0.02)


def test_questions_are_distinct_and_varied(train_rows):
    questions = [row["question"] for row in train_rows]
    assert len(set(questions)) == len(questions)
    assert len({row["scenario"] for row in train_rows}) >= 6
    agent_lines = {line for q in questions for line in q.split("\n") if line.startswith("客服：")}
    assert len(agent_lines) > 200


def test_clean_dialogues_apologise_and_no_apology_ones_do_not(train_rows):
    for row in train_rows:
        agent = " ".join(line for line in row["question"].split("\n") if line.startswith("客服："))
        apologises = any(p in agent for p in qc.APOLOGY_PATTERNS)
        if row["label"] == qc.CLEAN:
            assert apologises
        elif row["label"] == "未致歉":
            assert not apologises


def test_candidates_only_on_some_train_rows(train_rows):
    share = sum("candidates" in row for row in train_rows) / len(train_rows)
    assert share == pytest.approx(data.CANDIDATE_SHARE, abs=0.06)
    eval_rows = data.generate_rows(100, seed=1, split="eval", with_candidates=False)
    assert not any("candidates" in row for row in eval_rows)


def test_candidates_parse_and_are_noisy(train_rows):
    answers, labels = [], []
    for row in train_rows:
        for answer in row.get("candidates", []):
            assert qc.parse_answer(answer).well_formed, answer
            answers.append(answer)
            labels.append(row["label"])
    assert {len(row["candidates"]) for row in train_rows if "candidates" in row} == {data.N_CANDIDATES}
    right_type = sum(s == 1.0 for s in qc.qc_verdict(None, answers, label=labels)) / len(answers)
    compliant = sum(s == 1.0 for s in qc.qc_compliance(None, answers)) / len(answers)
    assert right_type == pytest.approx(data.CANDIDATE_TYPE_ACCURACY, abs=0.07)
    assert compliant == pytest.approx(data.CANDIDATE_COMPLIANT_SHARE, abs=0.07)


def test_gold_answers_score_full_marks(train_rows):
    golds = [data.gold_answer(row) for row in train_rows]
    labels = [row["label"] for row in train_rows]
    assert qc.qc_verdict(None, golds, label=labels) == [1.0] * len(golds)
    assert qc.qc_compliance(None, golds) == [1.0] * len(golds)
    assert qc.qc_format(None, golds) == [1.0] * len(golds)
    replies = [qc.parse_answer(g).reply for g in golds]
    assert all(10 <= len(r) <= 30 for r in replies)
    assert len(set(replies)) > 30
    assert data.gold_answer(train_rows[0]) == golds[0]


@pytest.mark.parametrize("kind", data.FLAW_KINDS)
def test_flawed_replies_break_a_rule(kind):
    import random

    rng = random.Random(kind)
    for scenario in data.SCENARIOS:
        reply = data.flawed_reply(rng, scenario, "顾客：我电话13812345678。", kind=kind)
        assert qc.compliance_breaches(reply), reply


def test_write_demo_data_splits_without_overlap(tmp_path):
    train_path, eval_path = data.write_demo_data(tmp_path / "d", n_train=200, n_eval=80, seed=5)
    train = [json.loads(line) for line in train_path.read_text(encoding="utf-8").splitlines()]
    eval_rows = [json.loads(line) for line in eval_path.read_text(encoding="utf-8").splitlines()]
    assert (len(train), len(eval_rows)) == (200, 80)
    assert not {r["question"] for r in train} & {r["question"] for r in eval_rows}
    assert {r["label"] for r in eval_rows} == set(qc.VIOLATION_TYPES)
    assert not any("candidates" in r for r in eval_rows)
    assert "顾客" in train_path.read_text(encoding="utf-8")  # written as UTF-8, not \\u escapes


def test_exclude_is_respected():
    first = data.generate_rows(30, seed=0, split="eval", with_candidates=False)
    taken = {row["question"] for row in first[:10]}
    again = data.generate_rows(30, seed=0, split="eval", with_candidates=False, exclude=taken)
    assert not taken & {row["question"] for row in again}
