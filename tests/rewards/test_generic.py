"""General-purpose graders (``rewards/generic.py``): ``reference_match``, with a free-text label to fall back on."""

from __future__ import annotations

import pytest

from ark_trainer.rewards.generic import reference_match
from tests.rewards.grading import one


@pytest.mark.parametrize(
    ("completion", "reference", "score"),
    [
        ("Paris", "Paris", 1.0),
        ("  paris \n", "PARIS", 1.0),
        ("The capital is Paris.", "paris", 0.5),
        ("London", "Paris", 0.0),
        ("anything", None, None),
        ("anything", "  ", None),
        ([{"role": "assistant", "content": "Paris"}], "Paris", 1.0),
    ],
)
def test_reference_match(completion, reference, score):
    assert one(reference_match, completion, reference=reference) == score


def test_reference_match_falls_back_to_free_text_label():
    assert one(reference_match, "42", label="42") == 1.0
    assert one(reference_match, "辱骂", label="辱骂") is None  # a QC label is not a reference answer
    assert reference_match(["p"], ["x"]) == [None]
