"""The metrics of a run are named in one place (``metrics.py``), and what computes them uses those names."""

from __future__ import annotations

from ark_trainer.agent.episode import agent_metrics
from ark_trainer.metrics import AGENT_METRICS, HEADLINE, compute_metrics, preference, share
from ark_trainer.rewards.contract import TOTAL


def test_an_evaluation_has_the_headline_metrics():
    table = {
        TOTAL: [1.0, 0.2, None, 0.8],
        "qc_verdict": [1.0, 0.0, None, 1.0],
        "reference_match": [None, None, None, None],
        "qc_compliance": [1.0, 1.0, 0.0, None],
    }
    metrics = compute_metrics(table, base_totals=[0.5, 0.2, 0.1, 0.9], pass_threshold=0.8)
    assert set(metrics) == {"n", *HEADLINE, "components"}
    assert metrics["task_accuracy"] == round(2 / 3, 4)  # the first accuracy grader that applies
    assert metrics["pass_rate"] == round(2 / 3, 4) and metrics["compliance_rate"] == round(2 / 3, 4)
    assert metrics["preference_alignment"] == 0.5  # a win, a tie (one half), a loss; None left out
    assert metrics["components"] == {"qc_verdict": round(2 / 3, 4), "qc_compliance": round(2 / 3, 4)}


def test_shares_and_preference_skip_what_does_not_apply():
    assert share([None, None]) is None and share([1.0, 0.5, None]) == 0.5
    assert preference([None, 1.0], [0.0, None]) is None
    assert preference([1.0, 0.0], [1.0, 0.0]) == 0.5  # the base model against itself


def test_agent_episodes_report_the_agent_metrics():
    assert set(agent_metrics([], [])) == {*AGENT_METRICS, "n"}
