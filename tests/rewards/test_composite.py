"""The composite reward (``rewards/composite.py``): weights that would make its total NaN are refused."""

from __future__ import annotations

import pytest

from ark_trainer.errors import UserError


def test_a_composite_refuses_weights_that_would_make_nan():
    from ark_trainer.rewards.composite import Component, CompositeReward

    with pytest.raises(UserError, match=r"'a': weight inf is not a number in \[0, 1e\+06\]"):
        CompositeReward([Component("a", len, float("inf")), Component("b", len, 1.0)])
    big = CompositeReward([Component("a", lambda **k: [1e6], 1e6), Component("b", lambda **k: [1e6], 1e6)])
    assert big(["q"], ["x"]) == [1e6]  # the bounds keep the largest total finite
