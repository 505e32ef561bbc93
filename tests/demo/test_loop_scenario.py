"""The live-loop demo's world: its data, its users' words, its sizing, and its flags."""

from __future__ import annotations

import random

import pytest

from ark_trainer.app.demo import loop_scenario as sc
from ark_trainer.app.demo.data import gold_answer
from ark_trainer.data.split import mde_points, rows_for_mde
from ark_trainer.services.loop.feedback import Rules, judge
from ark_trainer.services.loop.safety import correction_problem


def test_the_starting_rows_lack_the_new_kind_and_the_traffic_carries_it(tmp_path):
    paths = sc.write_scenario_data(tmp_path, seed=0, n_start=200, n_heldout=50, n_pool=60)
    from ark_trainer.base.fileio import read_jsonl

    start, heldout, pool = (read_jsonl(paths[k]) for k in ("start", "heldout", "pool"))
    assert start and not [r for r in start if r["label"] == sc.NEW_KIND]
    assert all(r["candidates"] == [gold_answer(r)] for r in start)
    assert sum(r["label"] == sc.NEW_KIND for r in heldout) == 20 and len(heldout) == 50
    assert sum(r["label"] == sc.NEW_KIND for r in pool) == 24 and len(pool) == 60
    questions = [{r["question"] for r in rows} for rows in (start, heldout, pool)]
    assert not (questions[0] & questions[1] or questions[0] & questions[2] or questions[1] & questions[2])
    assert len({r["label"] for r in heldout}) == 6  # the old kinds are measured too


def test_users_thank_right_answers_and_correct_wrong_ones_with_the_gold_answer():
    row = {"question": "q", "label": sc.NEW_KIND, "scenario": "退款"}
    rng = random.Random(0)
    right = "结论：违规\n类型：推诿\n回复：非常抱歉，我们会尽快为您处理退款。"
    assert sc.feedback(row, right, None, rng) == (sc.THANKS, "thanks")
    said, why = sc.feedback(row, "结论：合规\n类型：无\n回复：好的。", None, rng)
    assert why == "correction" and said == sc.CORRECTION + gold_answer(row)
    assert judge(said, Rules()) == (-1, gold_answer(row))  # the loop reads the hint as the answer


def test_each_poison_is_what_it_says_and_the_filter_drops_all_but_the_wrong_type():
    row = {"question": "q", "label": sc.NEW_KIND, "scenario": "退款"}
    rng = random.Random(1)
    hints = {kind: judge(sc.feedback(row, "x", kind, rng)[0], Rules())[1] for kind in sc.POISON_KINDS}
    assert (
        not sc.is_right(hints["wrong_label"], row["label"])
        and correction_problem(hints["wrong_label"]) is None
    )
    assert correction_problem(hints["credential_request"])[0] == "credential_request"
    assert sc.SECRET_PREFIX in hints["secret"] and correction_problem(hints["secret"])[0] == "secret"


@pytest.mark.parametrize("points", [5.0, 10.0, 19.8, 40.0])
def test_rows_for_mde_is_the_fewest_rows_that_detect_the_difference(points):
    n = rows_for_mde(points)
    assert mde_points(n) <= points < mde_points(n - 1)
    assert sc.heldout_size(points) == 2 * n
