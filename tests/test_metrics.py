"""The metrics of a run are named in one place (``core/metrics.py``), and what computes them uses those names."""

from __future__ import annotations

from ark_trainer.core.metrics import (
    AGENT_METRICS,
    HEADLINE,
    TOTAL,
    agent_metrics,
    compute_metrics,
    preference,
    prompt_outcomes,
    reference_task,
    share,
    task_outcomes,
)


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


def test_each_answer_keeps_its_outcomes_and_each_rate_is_their_mean():
    table = {
        TOTAL: [1.0, 0.2, None, 0.8],
        "qc_verdict": [1.0, 0.0, None, 1.0],
        "qc_compliance": [1.0, 1.0, 0.0, None],
    }
    base = [0.5, 0.2, 0.1, 0.9]
    outcomes = prompt_outcomes(table, base, pass_threshold=0.8)
    assert outcomes == [
        {"pass_rate": 1.0, "task_accuracy": 1.0, "compliance_rate": 1.0, "preference_alignment": 1.0},
        {"pass_rate": 0.0, "task_accuracy": 0.0, "compliance_rate": 1.0, "preference_alignment": 0.5},
        {"pass_rate": None, "task_accuracy": None, "compliance_rate": 0.0, "preference_alignment": None},
        {"pass_rate": 1.0, "task_accuracy": 1.0, "compliance_rate": None, "preference_alignment": 0.0},
    ]  # None: the prompt is not scored on it (no total, no label, no reply to check)
    metrics = compute_metrics(table, base, pass_threshold=0.8)
    for rate, column in ((r, [o[r] for o in outcomes]) for r in outcomes[0]):
        applicable = [v for v in column if v is not None]
        assert metrics[rate] == round(sum(applicable) / len(applicable), 4)
    assert task_outcomes([1.0, 0.99, None]) == [1.0, 0.0, None]


def test_the_qc_reply_rules_are_not_reported_on_a_reference_task():
    """A reference task's answers ("Compliant.") are no QC verdicts with a reply: the reply rules would
    measure nothing there (87.5% for a base model, 16.7% after RFT, in the report as if it meant something)."""
    from ark_trainer.rewards.composite import Component, CompositeReward
    from ark_trainer.rewards.registry import get_reward
    from ark_trainer.rewards.scoring import metric_scores

    reward = CompositeReward([Component("reference_match", get_reward("reference_match"), 1.0)])
    rows = [
        {"prompt": [{"role": "user", "content": f"ticket {i}"}], "reference": "compliant"} for i in range(3)
    ]
    table = metric_scores(reward, rows, ["compliant", "Compliant.", "violation"])
    metrics = compute_metrics(table, base_totals=table[TOTAL], pass_threshold=0.8)
    assert metrics["compliance_rate"] is None and "qc_compliance" not in metrics["components"]
    assert metrics["task_accuracy"] == round(1 / 3, 4)  # reference_match: 1 equal, 0.5 contains
    qc_rows = [{**row, "label": "无"} for row in rows]  # the same answers on QC data: the rules apply
    assert "qc_compliance" in metric_scores(reward, qc_rows, ["compliant", "Compliant.", "violation"])
    assert not reference_task({"qc_verdict": [None], "reference_match": [None]})  # unlabelled QC answers


def test_shares_and_preference_skip_what_does_not_apply():
    assert share([None, None]) is None and share([1.0, 0.5, None]) == 0.5
    assert preference([None, 1.0], [0.0, None]) is None
    assert preference([1.0, 0.0], [1.0, 0.0]) == 0.5  # the base model against itself


def test_agent_episodes_report_the_agent_metrics():
    assert set(agent_metrics([], [])) == {*AGENT_METRICS, "n"}


def test_only_metrics_py_spells_the_metric_names():
    """A metric name written as a string anywhere else is a second place to keep in step (docstrings,
    messages and f-strings that mention one aside: only a constant that is exactly the name counts)."""
    import ast
    from pathlib import Path

    from ark_trainer.core.metrics import HELDOUT_REWARD_MEAN

    src = Path(__file__).resolve().parent.parent / "src" / "ark_trainer"
    names = {*HEADLINE, *AGENT_METRICS, HELDOUT_REWARD_MEAN}
    # the agent demo's check of a scripted policy prints its own summary (with sample_success, mean_reward)
    foreign = {"core/metrics.py", "app/demo/agent_check.py"}
    found = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel in foreign:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not found, "take these names from ark_trainer.core.metrics: " + "; ".join(found)


def test_the_flat_share_of_a_grpo_step_is_of_the_groups_it_trained_on():
    from ark_trainer.core.metrics import flat_group_share

    assert flat_group_share({"frac_reward_zero_std": 0.64}) == 0.64  # TRL's, without dynamic sampling
    # dynamic sampling replaced flat groups: 77% of those trained on carried a signal, whatever TRL first sampled
    assert (
        abs(
            flat_group_share({"frac_reward_zero_std": 0.95, "dynamic_sampling/frac_informative": 0.77}) - 0.23
        )
        < 1e-9
    )
    assert flat_group_share({"loss": 0.1}) is None
