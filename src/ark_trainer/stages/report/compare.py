"""The report's comparisons of two models: each change with its 95% interval, n and p.

Every model of a run answers the same held-out prompts, so a change is tested prompt by prompt
(``core/stats.py``: exact McNemar and Newcombe's interval for a rate, the sign test for preference, Wilcoxon's
signed-rank test and a bootstrap interval for the mean reward). The Results table gives each stage's change
against the base model with its interval and p; "Stage to stage" each stage against the one before it. A
metric without per-prompt values (a grader's mean, an older eval file) shows its change untested, and the
report says so.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.core.stats import TESTED, Comparison, compare_evals, p_text, untested, value
from ark_trainer.stages.report.render import Block, Heading, Table

TESTS_NOTE = (
    "Changes are paired prompt by prompt (both models answered the same held-out prompts), two-sided, "
    "significant at p < 0.05: a rate by the exact McNemar test on the prompts gained and lost, with "
    "Newcombe's hybrid score interval (95%); preference alignment by the sign test and the mean reward by "
    "Wilcoxon's signed-rank test, each with a bootstrap interval (95%, seed fixed)."
)


def change_cell(metric: str, base: dict[str, Any], data: dict[str, Any]) -> str | None:
    """`` (+18.0 pts [+11.2, +24.6], p < 0.001)``: the change from ``base`` with its interval and p; None
    when it cannot be tested (the caller shows the plain change)."""
    found = compare_evals(base, data, metric) if metric in TESTED else None
    return f" ({found.change()}, {p_text(found.p)})" if found else None


def untested_note(evals: dict[str, dict[str, Any]]) -> str:
    """Which changes against the base model the Results table could not test, and why ("" when none)."""
    base = evals.get("base")
    if base is None:
        return ""
    reasons = {
        untested(base, data, metric)
        for name, data in evals.items()
        if name != "base"
        for metric in TESTED
        if _both(base, data, metric) and untested(base, data, metric)
    }
    if not reasons:
        return ""
    return f"Some changes are shown without a test (no paired test: {'; '.join(sorted(reasons))})."


def _both(before: dict[str, Any], after: dict[str, Any], metric: str) -> bool:
    return all(isinstance(e.get(metric), int | float) for e in (before, after))


def stage_rows(evals: dict[str, dict[str, Any]], labels: dict[str, str]) -> list[list[str]]:
    """One row per tested metric of each model against the one evaluated before it."""
    names, rows = list(evals), []
    for prev, cur in zip(names, names[1:], strict=False):
        pair = f"{labels.get(cur, cur)} vs {labels.get(prev, prev)}"
        for metric in TESTED:
            if not _both(evals[prev], evals[cur], metric):
                continue
            found = compare_evals(evals[prev], evals[cur], metric)
            rows.append(
                _row(pair, metric, found) if found else _untested_row(pair, metric, evals[prev], evals[cur])
            )
    return rows


def _row(pair: str, metric: str, c: Comparison) -> list[str]:
    moved = f"{value(metric, c.before)} → {value(metric, c.after)}"
    p = p_text(c.p).removeprefix("p = ").removeprefix("p ")
    return [pair, metric, moved, c.change(), str(c.n), p, c.test, c.verdict()]


def _untested_row(pair: str, metric: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    moved = f"{value(metric, float(before[metric]))} → {value(metric, float(after[metric]))}"
    reason = f"no paired test: {untested(before, after, metric)}"
    return [pair, metric, moved, "—", str(after.get("n", "?")), "—", reason, "—"]


def stage_blocks(evals: dict[str, dict[str, Any]], labels: dict[str, str]) -> list[Block]:
    """ "Stage to stage": each model against the one before it, every tested metric, interval, n and p."""
    rows = stage_rows(evals, labels)
    if not rows:
        return []
    header = ["models", "metric", "before → after", "change [95% interval]", "n", "p", "test", "verdict"]
    return [Heading("Stage to stage"), Table(header, rows)]  # the tests: TESTS_NOTE, under Results


def headline_text(metric: str, base: dict[str, Any], data: dict[str, Any]) -> str | None:
    """``44.0% → 62.0% (+18.0 pts [+11.2, +24.6], n = 100, p < 0.001, significant gain)``; None untested."""
    found = compare_evals(base, data, metric) if metric in TESTED else None
    if found is None:
        return None
    return f"{value(metric, found.before)} → {value(metric, found.after)} ({found.change()}, {found.stats()})"
