"""Preference data for DPO and KTO (``stages/preference.py``): sampled pairs and thumbs labels."""

from __future__ import annotations

import pytest

from ark_trainer.stages.preference import labelled_answers, pairs_from_scores, thumbs


def test_thumbs_labels_are_booleans_and_text_labels_keep_their_qc_meaning():
    assert thumbs({"label": True}) is True and thumbs({"label": False}) is False
    assert thumbs({"label": "辱骂"}) is None and thumbs({"label": 1}) is None
    row = {"label": False, "candidates": ["a"], "response": "b", "chosen": "c", "rejected": "d"}
    assert labelled_answers(row) == [("a", False), ("b", False), ("c", True), ("d", False)]
    assert labelled_answers({"label": "辱骂", "candidates": ["a"]}) == []  # a QC label is no thumbs label


def _scores(*totals):
    return [{"total": t, "scores": {}} for t in totals]


def test_sampled_pairs_drop_and_count_ties_and_small_margins():
    rows = [{"prompt": p} for p in ("a", "b", "c", "d")]
    answers = [[("x", "sample"), ("y", "sample")] for _ in rows] + []
    answers[3] = [("z", "sample")]
    scores = [_scores(0.9, 0.1), _scores(0.5, 0.5), _scores(0.55, 0.5), _scores(None)]
    pairs, stats = pairs_from_scores(rows, answers, scores, min_margin=0.1)
    assert pairs == [{"prompt": "a", "chosen": "x", "rejected": "y"}]
    assert (stats["n_pairs"], stats["n_ties"], stats["n_below_margin"], stats["n_unscored"]) == (1, 1, 1, 1)
    assert stats["mean_margin"] == pytest.approx(0.8)
    pairs, stats = pairs_from_scores(rows, answers, scores, min_margin=0.0)  # a margin of 0 keeps 0.05
    assert [p["prompt"] for p in pairs] == ["a", "c"] and stats["n_ties"] == 1
