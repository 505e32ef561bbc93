"""The train/eval split and the data statistics (``data/split.py``): deterministic, disjoint by prompt."""

from __future__ import annotations

import pytest

from ark_trainer.data.split import (
    describe,
    divide_eval,
    drop_overlap,
    mde_points,
    prompt_key,
    small_test_warning,
    split_rows,
    split_three,
)


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


# --- train / dev / test ---


def keys(rows: list[dict]) -> set[str]:
    return {prompt_key(r) for r in rows}


def test_three_splits_are_disjoint_deterministic_and_follow_the_hash():
    rows = rows_for([f"q{i % 300}" for i in range(600)])  # every prompt twice
    splits = split_three(rows, 0.2)
    again = split_three(list(reversed(rows)), 0.2)
    assert keys(splits.dev) == keys(again.dev) and keys(splits.test) == keys(again.test)
    assert not keys(splits.train) & keys(splits.dev) and not keys(splits.dev) & keys(splits.test)
    assert len(splits.train) + len(splits.dev) + len(splits.test) == 600
    assert 10 < len(keys(splits.dev)) < 60 and 10 < len(keys(splits.test)) < 60  # about 10% each
    _, held = split_rows(rows, 0.2)
    assert keys(held) == keys(splits.dev) | keys(splits.test)  # the same held-out prompts as before


@pytest.mark.parametrize("n", [3, 4, 7])
def test_a_small_file_still_gets_a_dev_and_a_test_prompt(n):
    splits = split_three(rows_for([f"tiny{i}" for i in range(n)]), 0.1)
    assert splits.train and splits.dev and splits.test
    assert len(splits.train) + len(splits.dev) + len(splits.test) == n


def test_two_prompts_give_train_and_test_and_one_trains_only():
    two = split_three(rows_for(["a", "b"]), 0.1)
    assert (len(two.train), len(two.dev), len(two.test)) == (1, 0, 1)
    one = split_three(rows_for(["a", "a"]), 0.1)
    assert (len(one.train), one.dev, one.test) == (2, [], [])
    assert split_three(rows_for(["a", "b", "c"]), 0.0).train and not split_three(rows_for(["a"]), 0).dev


def test_a_users_eval_file_is_divided_half_and_half():
    rows = rows_for([f"e{i}" for i in range(200)])
    dev, test = divide_eval(rows)
    assert not keys(dev) & keys(test) and len(dev) + len(test) == 200 and 70 < len(dev) < 130
    assert keys(divide_eval(list(reversed(rows)))[0]) == keys(dev)  # order-free
    small_dev, small_test = divide_eval(rows_for(["x", "y"]))
    assert len(small_dev) == 1 and len(small_test) == 1
    assert divide_eval(rows_for(["only", "only"])) == (
        [],
        rows_for(["only", "only"]),
    )  # reported, not chosen on


def test_the_smallest_detectable_difference_and_its_warning():
    assert mde_points(100) == pytest.approx(14.0, abs=0.1)  # 2.8 × √(0.25 / 100)
    assert mde_points(400) == pytest.approx(7.0, abs=0.1)
    warning = small_test_warning(60)
    assert warning and "60 prompts" in warning and "about 18 points" in warning and "80% power" in warning
    assert small_test_warning(400) is None
