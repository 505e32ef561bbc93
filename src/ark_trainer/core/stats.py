"""Paired comparisons of two evaluations: the change, its 95% interval and an exact or rank test.

Two models of a run answer the *same* held-out prompts, so a comparison pairs them prompt by prompt: most
prompts are answered alike by both and say nothing about the difference; the prompts one model got and the
other lost carry it. A test that ignores the pairing (two proportions, as if each model had its own
prompts) misses consistent falls and flags noisy ones. Every comparison the report, the diagnosis, the
dashboard and the final-model line show comes from :func:`compare_evals`, built on scipy:

- a binary metric (pass rate, task accuracy, compliance, task success: per-prompt outcomes 1/0 in
  ``answers[i].outcomes``): the exact McNemar test, a binomial test of the prompts gained against those
  lost (``scipy.stats.binomtest``, p = 1/2), and Newcombe's hybrid score interval for the paired difference
  (his method 10, from the Wilson intervals of each rate that ``binomtest`` gives): it keeps its 95%
  coverage at the small n and rates near 0 or 1 of a held-out set where the Wald interval does not, and
  is one of the two that Fagerland, Lydersen and Laake (2014) recommend for paired proportions. The exact
  test is conservative, so at the edge the interval may just miss 0 while p is above 0.05; the verdict
  follows p.
- preference alignment (1, ½ or 0 a prompt against the base model's answer): the sign test (the same
  binomial test on the prompts that moved up against those that moved down) and a bootstrap interval.
- the mean reward (any per-prompt score): the Wilcoxon signed-rank test (``scipy.stats.wilcoxon``, Pratt's
  treatment of zero differences, as unchanged answers give many) and a BCa bootstrap interval of the mean
  paired difference (``scipy.stats.bootstrap``, seed fixed, so a report rebuilt says the same).

p is two-sided: gains and falls are both tested, and one rule (p < ``ALPHA``) says "significant"
everywhere; the one-sided p of a fall and of a gain are kept too (``p_fall``, ``p_rise``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ark_trainer.core.metrics import (
    COMPLIANCE_RATE,
    OUTCOMES,
    PASS_RATE,
    PERCENTS,
    PREFERENCE_ALIGNMENT,
    REWARD_MEAN,
    TASK_ACCURACY,
    TASK_SUCCESS,
    main_metric,
)

ALPHA = 0.05  # two-sided: a change is significant when chance alone gives one this large less often
BINARY = (PASS_RATE, TASK_ACCURACY, COMPLIANCE_RATE, TASK_SUCCESS)  # 1/0 a prompt: exact McNemar
TESTED = (REWARD_MEAN, *BINARY, PREFERENCE_ALIGNMENT)  # every metric compared prompt by prompt
BOOTSTRAP_RESAMPLES = 9999
SIGN_FLIPS_MAX_N = 13  # scipy's wilcoxon: an exact permutation test up to here when differences tie or are 0
BOOTSTRAP_SEED = 0
MCNEMAR = "exact McNemar"
SIGN = "sign test"
WILCOXON = "Wilcoxon signed-rank"
MINUS = "\u2212"


@dataclass(frozen=True)
class Comparison:
    """One metric of two evaluations of the same prompts, ``before`` → ``after``, paired prompt by prompt.

    ``before``/``after`` are the metric on the ``n`` prompts both have an outcome for; ``gained``/``lost``
    the prompts whose outcome rose/fell; ``delta`` = after − before with its 95% interval
    [``low``, ``high``]; ``p`` two-sided, ``p_fall``/``p_rise`` one-sided; ``test`` names the test."""

    metric: str
    before: float
    after: float
    n: int
    gained: int
    lost: int
    delta: float
    low: float
    high: float
    p: float
    p_fall: float
    p_rise: float
    test: str

    @property
    def significant(self) -> bool:
        return self.p < ALPHA

    @property
    def fell(self) -> bool:
        """A fall beyond the noise (two-sided p < ``ALPHA``)."""
        return self.significant and self.delta < 0

    @property
    def rose(self) -> bool:
        """A gain beyond the noise (two-sided p < ``ALPHA``)."""
        return self.significant and self.delta > 0

    def verdict(self) -> str:
        return "significant gain" if self.rose else "significant fall" if self.fell else "not significant"

    def change(self) -> str:
        """``+1.0 pts [−2.9, +4.9]`` for a rate, ``+0.012 [−0.010, +0.034]`` for a mean."""
        return f"{signed(self.metric, self.delta)} {self.interval()}"

    def interval(self) -> str:
        """``[−2.9, +4.9]``: the 95% interval of the change, in points for a rate."""
        return f"[{signed(self.metric, self.low, unit=False)}, {signed(self.metric, self.high, unit=False)}]"

    def stats(self) -> str:
        """``n = 200, p = 0.62, not significant``."""
        return f"n = {self.n}, {p_text(self.p)}, {self.verdict()}"

    def text(self, label: str = "", values: bool = False) -> str:
        """``GRPO vs RFT: task accuracy +1.0 pts [−2.9, +4.9], n = 200, p = 0.62, not significant``; with
        ``values`` the two values first (``task accuracy 50.0% → 51.0%, +1.0 pts [...]``)."""
        head = f"{label}: " if label else ""
        name = self.metric.replace("_", " ")
        moved = f" {value(self.metric, self.before)} → {value(self.metric, self.after)}," if values else ""
        return f"{head}{name}{moved} {self.change()}, {self.stats()}"

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__} | {"verdict": self.verdict()}


def signed(metric: str, number: float, unit: bool = True) -> str:
    """A change with its sign (a true minus): points for a share, a plain number for a mean."""
    text = f"{number:+.3f}" if metric not in PERCENTS else f"{number * 100:+.1f}" + (" pts" * unit)
    return text.replace("-", MINUS)


def value(metric: str, number: float) -> str:
    return f"{number * 100:.1f}%" if metric in PERCENTS else f"{number:.3f}"


def p_text(p: float) -> str:
    """``p = 0.62``, ``p = 0.0078``, ``p < 0.001``."""
    if p < 0.001:
        return "p < 0.001"
    return f"p = {p:.2f}" if p >= 0.1 else f"p = {p:.2g}"


def compare_evals(before: dict[str, Any], after: dict[str, Any], metric: str) -> Comparison | None:
    """``metric`` from the eval file ``before`` to ``after`` (``OUT/eval/<name>.json``), paired prompt by
    prompt; None when the two cannot be paired (:func:`untested` says why)."""
    pairs = paired_values(before, after, metric)
    if isinstance(pairs, str):
        return None
    first, second = pairs
    if metric in BINARY:
        return binary(metric, first, second)
    return scores(metric, first, second, SIGN if metric == PREFERENCE_ALIGNMENT else WILCOXON)


def untested(before: dict[str, Any], after: dict[str, Any], metric: str) -> str:
    """Why :func:`compare_evals` gives no comparison ("" when it gives one)."""
    pairs = paired_values(before, after, metric)
    return pairs if isinstance(pairs, str) else ""


def describe(before: dict[str, Any], after: dict[str, Any], metric: str, label: str = "") -> str:
    """The comparison's line, or the two values with the reason no paired test was made."""
    found = compare_evals(before, after, metric)
    if found is not None:
        return found.text(label, values=True)
    head, name = f"{label}: " if label else "", metric.replace("_", " ")
    a, b = _number(before.get(metric)), _number(after.get(metric))
    moved = f" {value(metric, a)} → {value(metric, b)}" if a is not None and b is not None else ""
    return f"{head}{name}{moved} (no paired test: {untested(before, after, metric)})"


def shipped_line(evals: dict[str, dict[str, Any]], shipped: str) -> str:
    """The shipped model against the model evaluated before it and against the base, on the run's main
    metric: ``grpo vs rft: task accuracy 82.0% → 83.0%, +1.0 pts [−2.9, +4.9], n = 200, p = 0.62, not
    significant; grpo vs base: ...`` ("" when there is nothing to compare)."""
    names = list(evals)
    if shipped not in names:
        return ""
    before = names[: names.index(shipped)]
    references = dict.fromkeys(r for r in (before[-1:] + ["base"]) if r in evals and r != shipped)
    metric = main_metric([evals[r] for r in (*references, shipped)])
    if metric is None:
        return ""
    return "; ".join(describe(evals[r], evals[shipped], metric, f"{shipped} vs {r}") for r in references)


def per_prompt(data: dict[str, Any], metric: str) -> list[float | None] | None:
    """The per-prompt values behind ``metric`` in one eval file: ``answers[i].reward`` for the mean reward,
    ``answers[i].outcomes[metric]`` for a rate; None when the file does not have them (an older file)."""
    answers = data.get("answers")
    if not isinstance(answers, list) or not answers or not all(isinstance(a, dict) for a in answers):
        return None
    if metric == REWARD_MEAN:
        return [_number(a.get("reward")) for a in answers]
    outcomes = [a.get(OUTCOMES) for a in answers]
    if not all(isinstance(o, dict) and metric in o for o in outcomes):
        return None
    return [_number(o[metric]) for o in outcomes]


def paired_values(before: dict[str, Any], after: dict[str, Any], metric: str) -> tuple[list, list] | str:
    """The values of the prompts both files have one for, in order; or why there are none."""
    if metric not in TESTED:
        return f"{metric} has no per-prompt values"
    first, second = per_prompt(before, metric), per_prompt(after, metric)
    if first is None or second is None:
        return "per-prompt outcomes missing"
    if len(first) != len(second):
        return f"the two evaluations answered different prompts ({len(first)} and {len(second)})"
    kept = [(a, b) for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    if not kept:
        return "no prompt has an outcome in both"
    return [a for a, _ in kept], [b for _, b in kept]


def binary(metric: str, before: list[float], after: list[float]) -> Comparison:
    """Exact McNemar test and Newcombe's hybrid score interval on 1/0 outcomes of the same prompts."""
    from scipy.stats import binomtest

    n = len(before)
    both = sum(1 for a, b in zip(before, after, strict=True) if a and b)
    gained = sum(1 for a, b in zip(before, after, strict=True) if b and not a)
    lost = sum(1 for a, b in zip(before, after, strict=True) if a and not b)
    low, high = newcombe(both, lost, gained, n - both - lost - gained)
    p, p_fall, p_rise = 1.0, 1.0, 1.0
    if gained + lost:
        p, p_fall, p_rise = (
            float(binomtest(gained, gained + lost, 0.5, alternative=side).pvalue)
            for side in ("two-sided", "less", "greater")
        )
    first, second = (both + lost) / n, (both + gained) / n
    return Comparison(
        metric, first, second, n, gained, lost, second - first, low, high, p, p_fall, p_rise, MCNEMAR
    )


def wilson(k: int, n: int) -> tuple[float, float]:
    """95% Wilson score interval of a rate of ``k`` in ``n`` (the interval :func:`newcombe` combines)."""
    from scipy.stats import binomtest

    if n <= 0:
        return 0.0, 1.0
    low, high = binomtest(k, n).proportion_ci(0.95, "wilson")
    return float(low), float(high)


def newcombe(both: int, lost: int, gained: int, neither: int) -> tuple[float, float]:
    """95% interval of after − before for paired 1/0 outcomes: Newcombe's (1998) method 10, the Wilson
    score interval of each rate combined with the correlation of the pairs (phi, corrected for continuity
    as in his paper)."""
    from scipy.stats import binomtest

    n = both + lost + gained + neither
    k1, k2 = both + lost, both + gained  # right before, right after
    p1, p2 = k1 / n, k2 / n
    l1, u1 = map(float, binomtest(k1, n).proportion_ci(0.95, "wilson"))
    l2, u2 = map(float, binomtest(k2, n).proportion_ci(0.95, "wilson"))
    spread = k1 * (n - k1) * k2 * (n - k2)
    agree = float(both * neither - lost * gained)
    if agree > 0:  # Newcombe's correction of phi for continuity: a positive correlation is shrunk by n/2
        agree = max(0.0, agree - n / 2)
    phi = agree / math.sqrt(spread) if spread else 0.0
    delta = p2 - p1
    down = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    up = math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return max(-1.0, delta - down), min(1.0, delta + up)


def scores(metric: str, before: list[float], after: list[float], test: str) -> Comparison:
    """Per-prompt scores: the sign test (``SIGN``) or Wilcoxon's signed-rank test, and a bootstrap interval."""
    from scipy.stats import binomtest

    diffs = [b - a for a, b in zip(before, after, strict=True)]
    gained = sum(1 for d in diffs if d > 1e-12)
    lost = sum(1 for d in diffs if d < -1e-12)
    n = len(diffs)
    p, p_fall, p_rise = 1.0, 1.0, 1.0
    if gained + lost and test == SIGN:
        p, p_fall, p_rise = (
            float(binomtest(gained, gained + lost, 0.5, alternative=side).pvalue)
            for side in ("two-sided", "less", "greater")
        )
    elif gained + lost:
        p, p_fall, p_rise = signed_rank_ps(diffs)
    delta = sum(diffs) / n
    low, high = mean_interval(diffs)
    first, second = sum(before) / n, sum(after) / n
    return Comparison(metric, first, second, n, gained, lost, delta, low, high, p, p_fall, p_rise, test)


def signed_rank_ps(diffs: list[float]) -> tuple[float, float, float]:
    """Wilcoxon's signed-rank test of ``diffs`` with Pratt's treatment of zeros: the two-sided p, the p of a
    fall and of a rise, as ``scipy.stats.wilcoxon(diffs, zero_method="pratt", alternative=...)`` gives them.

    Where scipy runs an exact permutation test (at most :data:`SIGN_FLIPS_MAX_N` differences, some tied or
    zero: the usual case here, unchanged answers giving zeros) its generic loop ranks each of the 2**n sign
    flips again, seconds a call at n = 12 or 13 (reports and gate decisions make dozens). The ranks do not
    change under a flip, so the null distribution of the rank sum is one product of the flip table with
    them: the same counts over the same 2**n flips, the same p-values. Elsewhere scipy answers."""
    import numpy as np
    from scipy.stats import rankdata, wilcoxon

    d = np.asarray(diffs, dtype=float)
    n = len(d)
    size = np.abs(d)
    if n > SIGN_FLIPS_MAX_N or (len(np.unique(size)) == n and not np.any(d == 0)):
        p, p_fall, p_rise = (
            float(wilcoxon(d, zero_method="pratt", alternative=side).pvalue)
            for side in ("two-sided", "less", "greater")
        )
        return p, p_fall, p_rise
    ranks = rankdata(size)  # average ranks of |d|, the zeros among them (Pratt)
    observed = float(ranks[d > 0].sum())
    flipped = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)  # every sign flip, once
    null = np.where(flipped, d < 0, d > 0).astype(float) @ ranks  # each flip's sum of positive ranks
    slack = abs(np.finfo(float).eps * 100 * observed)  # scipy's tolerance for equal sums
    p_fall = float(np.count_nonzero(null <= observed + slack)) / 2**n
    p_rise = float(np.count_nonzero(null >= observed - slack)) / 2**n
    return min(1.0, 2 * min(p_fall, p_rise)), p_fall, p_rise


def mean_interval(diffs: list[float]) -> tuple[float, float]:
    """95% BCa bootstrap interval of the mean of ``diffs`` (seed fixed; the mean itself when all are equal
    or there is only one)."""
    import numpy as np
    from scipy.stats import bootstrap

    data = np.asarray(diffs, dtype=float)
    if len(data) < 2 or np.ptp(data) == 0:
        return float(data.mean()), float(data.mean())
    for method in ("BCa", "percentile"):  # BCa can be undefined on very lumpy data
        result = bootstrap(
            (data,),
            np.mean,
            n_resamples=BOOTSTRAP_RESAMPLES,
            method=method,
            rng=np.random.default_rng(BOOTSTRAP_SEED),
        )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if math.isfinite(low) and math.isfinite(high):
            return low, high
    return float(data.mean()), float(data.mean())


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)
