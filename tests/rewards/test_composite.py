"""The composite reward (``rewards/composite.py``): weights that would make its total NaN are refused, and so
are scores that are not finite numbers or not a list (``score`` says how many, in one line).
"""

from __future__ import annotations

import pytest

from ark_trainer.errors import UserError
from ark_trainer.rewards.composite import Component, CompositeReward
from tests.rewards.attacks import one_error_line, rules_yaml, score, unlabelled_data


def test_a_composite_refuses_weights_that_would_make_nan():
    from ark_trainer.rewards.composite import Component, CompositeReward

    with pytest.raises(UserError, match=r"'a': weight inf is not a number in \[0, 1e\+06\]"):
        CompositeReward([Component("a", len, float("inf")), Component("b", len, 1.0)])
    big = CompositeReward([Component("a", lambda **k: [1e6], 1e6), Component("b", lambda **k: [1e6], 1e6)])
    assert big(["q"], ["x"]) == [1e6]  # the bounds keep the largest total finite


BAD_SCORES = [float("inf"), float("-inf"), float("nan"), 1e308, 10**400, 0.5]


def bad_scores(prompts, completions, **kwargs):
    return BAD_SCORES[: len(completions)]


def test_the_composite_refuses_non_finite_and_huge_scores():
    reward = CompositeReward(
        [Component("bad", bad_scores, 1.0), Component("one", lambda **kw: [1.0] * 6, 1.0)]
    )
    seen = []
    reward.on_reject = lambda **kw: seen.append(kw)
    table = reward.score(["p"] * 6, [str(i) for i in range(6)])
    assert table["bad"] == [None] * 5 + [0.5]
    assert table["total"] == [1.0] * 5 + [0.75]  # left out of the mean, never a number trained on
    assert reward.rejected == {"bad": 5} and seen[0]["n"] == 5


def test_a_rule_returning_a_scalar_is_one_line_not_a_traceback(user_rules, tmp_path, capsys):
    code, _, err = score(
        rules_yaml(tmp_path, "harden_rules:scalar"), unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys
    )
    assert code == 2 and "'r0' returned float, not a list" in one_error_line(err)


def test_score_refuses_inf_nan_and_huge_scores_with_a_warning(user_rules, tmp_path, capsys):
    spec = rules_yaml(tmp_path, "harden_rules:bad", "harden_rules:fine")
    code, out, err = score(spec, unlabelled_data(tmp_path, n=2, candidates=["a", "b"]), capsys)
    assert code == 0 and "Traceback" not in err
    assert "grader 'r0': 4 scores refused (not a finite number within ±1e+06)" in out
    assert "inf" not in next(line for line in out.splitlines() if line.startswith("total"))
