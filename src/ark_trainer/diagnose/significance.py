"""Is a held-out metric's fall larger than the sampling noise of n prompts? One-sided tests at ``ALPHA``.

Two models evaluated on the same n held-out prompts differ by a few prompts by chance: at n = 300 a move of
0.9 points is 3 prompts. A rate (pass rate, task accuracy, compliance, preference, task success) is
compared with a two-proportion z-test (pooled); the mean reward with a paired z-test on the per-prompt
rewards of the two eval files (``answers[i].reward``), which it needs: without them a fall of the mean
reward is not tested and not reported. Both are normal approximations, stated with the p-value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ark_trainer.diagnose.rundata import num
from ark_trainer.metrics import HEADLINE, REWARD_MEAN, TASK_SUCCESS, shown

ALPHA = 0.05  # one-sided: a fall is reported when chance alone gives one this large less often than this
RULE = f"one-sided p < {ALPHA:g}"


@dataclass(frozen=True)
class Fall:
    """A metric that fell from one model to the next by more than the noise of ``n`` prompts."""

    metric: str
    before: float
    after: float
    n: int
    p_value: float

    def text(self) -> str:
        p = "p<0.001" if self.p_value < 0.001 else f"p={self.p_value:.2g}"
        return f"{self.metric} {shown(self.metric, self.before)} → {shown(self.metric, self.after)} (n={self.n}, {p})"


def falls(before: dict[str, Any], after: dict[str, Any]) -> list[Fall]:
    """The headline metrics (and an agent run's task success) that fell from the eval ``before`` to
    ``after`` beyond the noise."""
    found = []
    for metric in (*HEADLINE, TASK_SUCCESS):
        a, b = num(before.get(metric)), num(after.get(metric))
        if a is None or b is None or b >= a - 1e-9:
            continue
        n_a, n_b = int(num(before.get("n")) or 0), int(num(after.get("n")) or 0)
        p = paired_p(before, after) if metric == REWARD_MEAN else two_proportion_p(a, n_a, b, n_b)
        if p is not None and p < ALPHA:
            found.append(Fall(metric, a, b, n_b, p))
    return found


def two_proportion_p(a: float, n_a: int, b: float, n_b: int) -> float | None:
    """One-sided p-value of "the rate fell from ``a`` (of ``n_a``) to ``b`` (of ``n_b``)": pooled z-test."""
    if n_a <= 0 or n_b <= 0:
        return None
    pooled = (a * n_a + b * n_b) / (n_a + n_b)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    return _below(b - a, spread)


def paired_p(before: dict[str, Any], after: dict[str, Any]) -> float | None:
    """One-sided p-value of "the per-prompt rewards fell": a paired z-test on their differences; None
    without the answers of both on the same prompts."""
    first, second = _rewards(before), _rewards(after)
    if len(first) != len(second):
        return None
    diffs = [b - a for a, b in zip(first, second, strict=True) if a is not None and b is not None]
    if len(diffs) < 2:
        return None
    mean = sum(diffs) / len(diffs)
    variance = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return _below(mean, math.sqrt(variance / len(diffs)))


def _rewards(data: dict[str, Any]) -> list[float | None]:
    answers = data.get("answers")
    if not isinstance(answers, list):
        return []
    return [num(a.get("reward")) if isinstance(a, dict) else None for a in answers]


def _below(change: float, spread: float) -> float:
    """P(a change this low or lower | no change), for a normal change with standard deviation ``spread``."""
    if spread <= 0:
        return 0.0 if change < 0 else 1.0
    return 0.5 * math.erfc(-change / spread / math.sqrt(2))
