"""The train/eval split and the data statistics (``data/split.py``): deterministic, disjoint by prompt."""

from __future__ import annotations

import pytest

from ark_trainer.data.split import describe, drop_overlap, prompt_key, split_rows


def rows_for(prompts: list[str]) -> list[dict]:
    return [
        {"prompt": [{"role": "user", "content": p}], "candidates": [], "i": i} for i, p in enumerate(prompts)
    ]


def test_split_deterministic_and_order_free():
    rows = rows_for([f"q{i}" for i in range(200)])
    train1, eval1 = split_rows(rows, 0.2)
    train2, eval2 = split_rows(list(reversed(rows)), 0.2)
    assert {r["i"] for r in eval1} == {r["i"] for r in eval2}
    assert {r["i"] for r in train1} == {r["i"] for r in train2}
    assert 10 < len(eval1) < 70
    assert len(train1) + len(eval1) == 200


def test_split_disjoint_by_prompt_and_duplicates_together():
    rows = rows_for([f"q{i % 40}" for i in range(200)])  # every prompt five times
    train, held = split_rows(rows, 0.25)
    train_keys, held_keys = {prompt_key(r) for r in train}, {prompt_key(r) for r in held}
    assert not train_keys & held_keys
    assert held and train
    for key in held_keys:
        assert sum(prompt_key(r) == key for r in held) == 5


@pytest.mark.parametrize("n", [2, 3, 5])
def test_tiny_files_still_get_an_eval_row(n):
    train, held = split_rows(rows_for([f"tiny{i}" for i in range(n)]), 0.1)
    assert len(held) >= 1 and len(train) >= 1
    assert len(train) + len(held) == n


def test_tiny_file_fallback_keeps_duplicates_together():
    rows = rows_for(["x", "x", "y", "y"])
    train, held = split_rows(rows, 0.01)
    assert len(held) in (2, 4) and {prompt_key(r) for r in train}.isdisjoint({prompt_key(r) for r in held})


def test_single_prompt_goes_to_train():
    train, held = split_rows(rows_for(["only"] * 3), 0.1)
    assert len(train) == 3 and held == []


def test_drop_overlap():
    train, dropped = drop_overlap(rows_for(["a", "b", "c", "a"]), rows_for(["a"]))
    assert dropped == 2 and [r["prompt"][0]["content"] for r in train] == ["b", "c"]


def test_describe():
    rows = rows_for(["a", "b", "c"])
    rows[0].update(label="abuse", candidates=["x"])
    rows[1].update(label="辱骂", chosen="c", rejected="r")
    rows[2].update(label="free text")
    stats = describe(rows)
    assert stats["n"] == 3 and stats["with_candidates"] == 1 and stats["with_pairs"] == 1
    assert stats["labels"] == {"辱骂": 2, "free text": 1}


def test_eval_ratio_zero_holds_out_nothing():
    rows = [{"prompt": [{"role": "user", "content": str(i)}]} for i in range(5)]
    assert split_rows(rows, 0.0) == (rows, [])
