"""Paired comparisons (``core/stats.py``): the exact McNemar test on the prompts gained and lost, Newcombe's
interval, the signed-rank test and bootstrap interval of the mean reward, and what an older eval file
without per-prompt outcomes gives."""

from __future__ import annotations

import random

import pytest
from scipy.stats import binomtest

from ark_trainer.core.metrics import OUTCOMES, PREFERENCE_ALIGNMENT, REWARD_MEAN, TASK_ACCURACY
from ark_trainer.core.stats import (
    MCNEMAR,
    SIGN,
    WILCOXON,
    compare_evals,
    describe,
    newcombe,
    shipped_line,
    untested,
)


def outcomes(pattern: list[tuple[int, int]], metric: str = TASK_ACCURACY) -> tuple[dict, dict]:
    """Two eval files of the same prompts with these (before, after) outcomes on ``metric``."""
    files = []
    for side in (0, 1):
        answers = [
            {"completion": "", "reward": float(p[side] or 0), OUTCOMES: {metric: p[side]}} for p in pattern
        ]
        right = sum(p[side] or 0 for p in pattern)
        files.append({"n": len(pattern), metric: right / len(pattern), "answers": answers})
    return files[0], files[1]


def pairs(n: int, right_before: int, gained: int, lost: int) -> list[tuple[int, int]]:
    """n prompts, ``right_before`` right before; of those ``lost`` go wrong, and ``gained`` of the others
    go right."""
    kept, wrong = right_before - lost, n - right_before
    rows = [(1, 1)] * kept + [(1, 0)] * lost + [(0, 1)] * gained + [(0, 0)] * (wrong - gained)
    random.Random(n).shuffle(rows)
    return rows


@pytest.mark.parametrize(
    ("n", "right", "gained", "lost", "after", "two_sided", "one_sided"),
    [
        (60, 30, 0, 8, 22, 0.0078, 0.0039),  # a consistent fall: the pooled z-test said p = 0.070
        (60, 30, 15, 24, 21, 0.20, 0.10),  # a noisy one: the pooled z-test said p = 0.048
        (300, 150, 1, 12, 139, 0.0034, 0.0017),  # the pooled z-test said p = 0.18
    ],
)
def test_the_exact_mcnemar_test_on_the_prompts_gained_and_lost(
    n, right, gained, lost, after, two_sided, one_sided
):
    found = compare_evals(*outcomes(pairs(n, right, gained, lost)), TASK_ACCURACY)
    assert found is not None and found.test == MCNEMAR
    assert (found.n, found.gained, found.lost) == (n, gained, lost)
    assert round(found.after * n) == after and found.delta == pytest.approx((after - right) / n)
    assert found.p == binomtest(gained, gained + lost).pvalue == pytest.approx(two_sided, abs=5e-3)
    assert found.p_fall == binomtest(gained, gained + lost, alternative="less").pvalue
    assert found.p_fall == pytest.approx(one_sided, rel=0.05)
    assert found.p_rise == binomtest(gained, gained + lost, alternative="greater").pvalue
    assert found.fell is (two_sided < 0.05) and not found.rose


def test_a_gain_is_tested_as_a_fall_is():
    before, after = outcomes(pairs(60, 22, 8, 0))
    found = compare_evals(before, after, TASK_ACCURACY)
    assert found is not None and found.rose and found.p == pytest.approx(0.0078, abs=1e-4)
    assert found.verdict() == "significant gain" and found.low > 0
    back = compare_evals(after, before, TASK_ACCURACY)
    assert back is not None and back.fell and back.p == found.p and back.high < 0


def test_newcombes_interval_matches_the_published_one():
    # Fagerland, Lydersen & Laake, Statistical Analysis of Contingency Tables (2017), chapter 8: the paired
    # table [[59, 6], [16, 80]], Newcombe's square-and-add interval -0.0621 (-0.1186 to -0.0046) for the
    # first rate minus the second; here after - before, so the signs turn
    low, high = newcombe(both=59, lost=6, gained=16, neither=80)
    assert (round(low, 4), round(high, 4)) == (0.0046, 0.1186)


def test_an_interval_contains_zero_when_nothing_changed_beyond_the_noise():
    found = compare_evals(*outcomes(pairs(200, 100, 6, 4)), TASK_ACCURACY)
    assert found is not None and found.low < 0 < found.high and not found.significant
    text = found.text("GRPO vs RFT")
    assert text.startswith("GRPO vs RFT: task accuracy +1.0 pts [\u2212") and "n = 200, p = 0.75" in text
    assert text.endswith("not significant")


def test_no_prompt_changed():
    found = compare_evals(*outcomes([(1, 1)] * 5 + [(0, 0)] * 5), TASK_ACCURACY)
    assert found is not None and (found.delta, found.p, found.gained, found.lost) == (0.0, 1.0, 0, 0)
    assert found.low < 0 < found.high  # ten prompts alike say little: the interval is wide, not [0, 0]


def rewards(values: list[float]) -> dict:
    return {"answers": [{"completion": "", "reward": v} for v in values]}


def test_the_mean_reward_is_compared_prompt_by_prompt_with_ties():
    rng = random.Random(0)
    before = [rng.choice([0.0, 0.5, 1.0]) for _ in range(300)]
    same = compare_evals(rewards(before), rewards(before), REWARD_MEAN)
    assert same is not None and same.test == WILCOXON and (same.p, same.low, same.high) == (1.0, 0.0, 0.0)
    worse = [max(0.0, v - 0.5) if i % 5 == 0 else v for i, v in enumerate(before)]  # a fifth a half lower
    found = compare_evals(rewards(before), rewards(worse), REWARD_MEAN)
    assert found is not None and found.fell and found.p < 0.001 and found.high < 0 < found.lost
    assert found.low <= found.delta <= found.high and found.gained == 0
    assert found.text().startswith(f"reward mean \u2212{-found.delta:.3f} [")
    noise = [v if rng.random() < 0.9 else rng.choice([0.0, 0.5, 1.0]) for v in before]
    within = compare_evals(rewards(before), rewards(noise), REWARD_MEAN)
    assert within is not None and within.low < 0 < within.high and not within.significant
    again = compare_evals(rewards(before), rewards(noise), REWARD_MEAN)
    assert again == within  # the bootstrap's seed is fixed: a report rebuilt says the same


def test_the_signed_rank_p_values_are_scipys_at_every_small_n_with_ties_zeros_or_neither():
    """:func:`signed_rank_ps` counts the sign flips itself where scipy would run its slow permutation loop
    (n <= 13, ties or zeros): the same three p-values as ``scipy.stats.wilcoxon`` (Pratt), to the bit."""
    from scipy.stats import wilcoxon

    from ark_trainer.core.stats import SIGN_FLIPS_MAX_N, signed_rank_ps

    def scipys(diffs: list[float], sides=("two-sided", "less", "greater")) -> tuple[float, ...]:
        return tuple(float(wilcoxon(diffs, zero_method="pratt", alternative=s).pvalue) for s in sides)

    rng = random.Random(0)
    cases = [[0.5, -0.5], [0.25, 0.0], [1.0, 1.0, 1.0], [0.1 + 0.2, -0.3, 0.3], [0.2, -0.7, 1.3, 0.4]]
    for n in range(1, 9):  # rewards in steps of 1/4 tie and hit 0; a few draws of every size
        for _ in range(4):
            cases.append([rng.choice([-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0]) for _ in range(n)])
    cases = [c for c in cases if any(c)]  # scores() tests only when some prompt moved
    for diffs in cases:
        assert signed_rank_ps(diffs) == scipys(diffs), diffs
    largest = [rng.choice([-0.5, 0.0, 0.25, 0.5, 1.0]) for _ in range(SIGN_FLIPS_MAX_N)]
    assert signed_rank_ps(largest)[2] == scipys(largest, ("greater",))[0]  # the last n scipy permutes
    beyond = [*largest, 0.25]  # one more: scipy's normal approximation, asked of scipy
    assert signed_rank_ps(beyond) == scipys(beyond)


def test_preference_is_a_sign_test_on_the_prompts_that_moved():
    before, after = outcomes([(0.5, 1.0)] * 9 + [(0.5, 0.0)] + [(0.5, 0.5)] * 20, PREFERENCE_ALIGNMENT)
    found = compare_evals(before, after, PREFERENCE_ALIGNMENT)
    assert found is not None and found.test == SIGN and (found.gained, found.lost) == (9, 1)
    assert found.p == binomtest(9, 10).pvalue and found.low <= found.delta <= found.high


def test_an_older_eval_file_without_outcomes_is_not_tested():
    before, after = outcomes(pairs(60, 30, 0, 8))
    for answer in before["answers"]:
        del answer[OUTCOMES]
    assert compare_evals(before, after, TASK_ACCURACY) is None
    assert untested(before, after, TASK_ACCURACY) == "per-prompt outcomes missing"
    line = describe(before, after, TASK_ACCURACY, "GRPO vs RFT")
    assert line == "GRPO vs RFT: task accuracy 50.0% → 36.7% (no paired test: per-prompt outcomes missing)"
    assert compare_evals(before, after, REWARD_MEAN) is not None  # its rewards still pair
    assert "different prompts (60 and 10)" in untested(rewards([1.0] * 60), rewards([1.0] * 10), REWARD_MEAN)
    assert untested({}, after, TASK_ACCURACY) == "per-prompt outcomes missing"


def test_unlabelled_prompts_are_left_out_of_the_pairs():
    before, after = outcomes(pairs(20, 10, 2, 0) + [(None, None)] * 5)  # type: ignore[list-item]
    found = compare_evals(before, after, TASK_ACCURACY)
    assert found is not None and found.n == 20 and found.after == 0.6


def test_the_final_model_line_compares_the_shipped_stage_with_the_one_before_and_the_base():
    base, rft = outcomes(pairs(60, 30, 8, 0))  # 30 → 38
    grpo = outcomes([(a, b) for a, b in pairs(60, 30, 9, 0)])[1]  # 39 of 60
    line = shipped_line({"base": base, "rft": rft, "grpo": grpo}, "grpo")
    first, second = line.split("; ")
    assert first.startswith("grpo vs rft: task accuracy 63.3% → 65.0%, +1.7 pts [") and "n = 60" in first
    assert second.startswith("grpo vs base: task accuracy 50.0% → 65.0%, +15.0 pts [")
    assert second.endswith(", significant gain")
    assert shipped_line({"base": base, "rft": rft}, "rft").count("vs") == 1  # the stage before is the base
    assert shipped_line({"base": base}, "base") == "" and shipped_line({}, "grpo") == ""


def test_the_interval_covers_and_the_test_holds_its_level_in_seeded_simulations():
    """400 seeded draws of 100 paired prompts (55% right by both, 30% by neither): Newcombe's interval
    covers a true change of +5 points about 95% of the time, and with no true change the exact McNemar
    test rejects at most 5% of the time (it is conservative)."""
    import numpy as np

    rng = np.random.default_rng(1)
    covered = sum(
        low <= 0.05 <= high
        for low, high in (newcombe(*rng.multinomial(100, [0.55, 0.05, 0.10, 0.30])) for _ in range(400))
    )
    assert 0.92 <= covered / 400 <= 0.985
    null = [rng.multinomial(100, [0.55, 0.075, 0.075, 0.30]) for _ in range(400)]
    rejected = sum(
        binomtest(int(gained), int(gained + lost)).pvalue < 0.05
        for _, lost, gained, _ in null
        if gained + lost
    )
    assert rejected / 400 <= 0.05
