"""The composite reward (``rewards/composite.py``): the weighted mean of the graders that apply, per batch,
with the data's columns, from the QC preset or with extra components; weights that would make its total NaN
are refused, and so are scores that are not finite numbers or not a list (``score`` says how many, in one
line).
"""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.rewards.composite import Component, CompositeReward, preset_path
from ark_trainer.rewards.qc import format_answer, qc_verdict
from tests.rewards.attacks import one_error_line, rules_yaml, score, unlabelled_data
from tests.rewards.grading import GOOD_REPLY


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


class Counting:
    """A reward that counts its calls and returns fixed scores."""

    def __init__(self, scores):
        self.scores, self.calls = scores, 0

    def __call__(self, prompts, completions, **_):
        self.calls += 1
        return list(self.scores[: len(completions)])


def test_weighted_mean_skips_none():
    a, b = Counting([1.0, None, 0.0, None]), Counting([0.0, 0.5, 1.0, None])
    comp = CompositeReward([Component("a", a, 3.0), Component("b", b, 1.0)])
    totals = comp(["p"] * 4, ["w", "x", "y", "z"])
    assert totals[0] == pytest.approx(0.75)
    assert totals[1] == pytest.approx(0.5)
    assert totals[2] == pytest.approx(0.25)
    assert totals[3] is None


def test_composite_caches_per_batch():
    a, b = Counting([1.0, 0.0]), Counting([0.5, 0.5])
    comp = CompositeReward([Component("a", a, 1.0), Component("b", b, 1.0)])
    funcs, weights = comp.trl_reward_funcs()
    assert weights == [1.0, 0.0, 0.0]
    assert [f.__name__ for f in funcs] == ["total", "a", "b"]
    prompts, completions = ["p", "q"], ["x", "y"]
    results = [f(prompts=prompts, completions=completions) for f in funcs]
    assert results == [[0.75, 0.25], [1.0, 0.0], [0.5, 0.5]]
    assert (a.calls, b.calls) == (1, 1)
    comp(prompts, ["x", "z"])  # a new batch is scored again
    assert (a.calls, b.calls) == (2, 2)
    table = comp.score(prompts, ["x", "z"])
    assert set(table) == {"a", "b", "total"} and a.calls == 2


def test_composite_passes_columns():
    comp = CompositeReward([Component("qc_verdict", qc_verdict, 1.0)])
    assert comp(["p"], [format_answer("辱骂", GOOD_REPLY)], label=["辱骂"]) == [1.0]


def test_composite_wrong_length_is_an_error():
    comp = CompositeReward([Component("short", Counting([1.0]), 1.0)])
    with pytest.raises(RuntimeError, match="short"):
        comp(["p", "p"], ["a", "b"])


def test_composite_needs_a_positive_weight():
    with pytest.raises(UserError):
        CompositeReward([Component("a", Counting([1.0]), 0.0)])
    with pytest.raises(UserError):
        CompositeReward([])


def test_composite_from_qc_preset():
    comp = CompositeReward.from_spec(None)
    assert comp.names == ["qc_verdict", "qc_compliance", "qc_satisfaction", "qc_format", "qc_type"]
    good = format_answer("辱骂", GOOD_REPLY)
    bad = format_answer("无", "滚")
    totals = comp(["p", "p"], [good, bad], label=["辱骂", "辱骂"])
    assert totals[0] == pytest.approx(1.0)
    assert totals[1] < 0.5


def test_composite_with_extra_component():
    extra = Component("reward_model", Counting([0.0]), 1.0)
    comp = CompositeReward.from_spec(preset_path("reference"), [extra])
    assert comp.names == ["reference_match", "reward_model"]
    assert comp(["p"], ["Paris"], reference=["Paris"]) == [0.5]
