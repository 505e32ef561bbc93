"""Did a held-out metric move beyond the sampling noise of n prompts? The report's test, prompt by prompt.

Two models evaluated on the same n held-out prompts differ by a few prompts by chance: at n = 300 a move of
0.9 points is 3 prompts. Both answered the same prompts, so the comparison is paired (``core/stats.py``): the
exact McNemar test on the prompts gained and lost for a rate (pass rate, task accuracy, compliance, task
success), the sign test for preference alignment, Wilcoxon's signed-rank test on the per-prompt rewards for
the mean reward; two-sided, so a gain is tested as a fall is. An eval file without per-prompt outcomes (an
older one) is not tested, and nothing is reported from it.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.core.metrics import HEADLINE, TASK_SUCCESS
from ark_trainer.core.stats import ALPHA, Comparison, compare_evals

RULE = f"paired test, two-sided p < {ALPHA:g}"
TESTS = "exact McNemar on the prompts gained and lost for a rate, Wilcoxon signed-rank for the mean reward"
COMPARED = (*HEADLINE, TASK_SUCCESS)


def comparisons(before: dict[str, Any], after: dict[str, Any]) -> list[Comparison]:
    """Every headline metric (and an agent run's task success) from the eval ``before`` to ``after`` that
    both measured prompt by prompt."""
    found = (compare_evals(before, after, metric) for metric in COMPARED)
    return [c for c in found if c is not None]


def falls(before: dict[str, Any], after: dict[str, Any]) -> list[Comparison]:
    """The metrics that fell from ``before`` to ``after`` beyond the noise."""
    return [c for c in comparisons(before, after) if c.fell]


def rises(before: dict[str, Any], after: dict[str, Any]) -> list[Comparison]:
    """The metrics that rose from ``before`` to ``after`` beyond the noise."""
    return [c for c in comparisons(before, after) if c.rose]
