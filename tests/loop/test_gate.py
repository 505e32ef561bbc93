"""The promotion gate (``services/loop/gate.py``): a round is promoted only when it is better, never on nan settings.

The gate's main metric must be one the frozen held-out set measures: ``auto`` (the default) is
``task_accuracy`` on labelled rows, and a metric the rows cannot measure is refused when the loop starts,
before anything is written (a gate on it could never pass).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.services.loop import gate
from tests.conftest import refused, save_tiny_qwen
from tests.loop.heldout_rows import QC_ROWS


def test_a_gate_that_cannot_pass_is_refused_when_the_loop_starts(assets, tmp_path, capsys):
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"])]
    argv += ["--eval_dataset", str(assets["train"]), "--min_improvement", "1"]
    lines = refused(capsys, argv)
    assert len(lines) == 1 and lines[0].startswith("error: --min_improvement 1: task_accuracy is a share"), (
        lines
    )
    assert "no round could ever pass the gate" in lines[0]
    assert not loop.exists()


def test_nan_settings_can_never_promote_a_round():
    from ark_trainer.services.loop.gate import decide

    current = {"task_accuracy": 0.5, "reward_mean": 0.9}
    same, better_but_drifted = dict(current), {"task_accuracy": 0.6, "reward_mean": 0.1}
    assert not decide(current, same, "task_accuracy").promote
    assert not decide(current, better_but_drifted, "task_accuracy").promote
    assert not decide(current, same, "task_accuracy", min_improvement=float("nan")).promote
    assert not decide(current, better_but_drifted, "task_accuracy", max_regression=float("nan")).promote


UNLABELLED = [{"question": f"订单{i}什么时候发货？"} for i in range(6)]
REFERENCED = [{"question": f"订单{i}什么时候发货？", "reference": "明天发货。"} for i in range(6)]


def measures(rows, reward_config=None):
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.builder import build_reward

    def loaded(tmp):
        write_jsonl(tmp, rows)
        return load_jsonl(tmp)

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        held = loaded(Path(tmp) / "h.jsonl")
    flags = {"reward_config": reward_config} if reward_config else {}
    reward = build_reward(flags, held, "cpu")
    return gate.heldout_measures(held, reward, None if reward_config else [reward.components[0].name])


def test_auto_is_task_accuracy_on_labelled_rows_else_reward_mean():
    from ark_trainer.rewards.composite import preset_path

    qc, ref = measures(QC_ROWS), measures(REFERENCED)
    free = measures(UNLABELLED, reward_config=str(preset_path("conversations")))  # label-free graders
    assert qc["task_accuracy"] and ref["task_accuracy"] and not free["task_accuracy"]
    assert gate.resolve_main_metric("auto", qc, "H") == "task_accuracy"
    assert gate.resolve_main_metric("auto", ref, "H") == "task_accuracy"
    assert gate.resolve_main_metric("auto", free, "H") == "reward_mean"
    assert gate.resolve_main_metric("compliance_rate", free, "H") == "compliance_rate"
    with pytest.raises(
        UserError, match=r"--main_metric auto \(reward_mean: the held-out rows are not labelled\)"
    ):
        gate.resolve_main_metric("auto", measures(UNLABELLED), "H")  # the QC preset grades none of them


@pytest.mark.parametrize(
    ("metric", "rows", "words"),
    [
        ("task_accuracy", UNLABELLED, "needs rows with a label or reference"),
        ("reward_mean", UNLABELLED, "needs rows a grader of the loop's reward applies to"),
        ("pass_rate", UNLABELLED, "needs rows a grader of the loop's reward applies to"),
        ("accuracy", QC_ROWS, "unknown metric 'accuracy'"),
    ],
)
def test_a_main_metric_the_heldout_set_cannot_measure_is_refused(metric, rows, words):
    with pytest.raises(UserError) as err:
        gate.resolve_main_metric(metric, measures(rows), "LOOP/heldout.jsonl")
    message = str(err.value)
    assert words in message and "\n" not in message
    if metric != "accuracy":
        assert "no round could ever pass" in message and "--main_metric" in message


def test_the_loop_refuses_such_a_gate_at_start_and_writes_nothing(tmp_path, capsys):
    from ark_trainer.cli import main

    model = save_tiny_qwen(tmp_path / "model")
    held = tmp_path / "held.jsonl"
    write_jsonl(held, UNLABELLED)
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(model), "--eval_dataset", str(held)]
    assert main([*argv, "--main_metric", "task_accuracy"]) == 2
    err = capsys.readouterr().err
    assert "--main_metric task_accuracy" in err and "could ever pass" in err and "Traceback" not in err
    assert not loop.exists()


def test_gate_promotes_only_a_gain_without_regressions():
    cur = {"reward_mean": 0.5, "pass_rate": 0.4, "task_accuracy": 0.3, "compliance_rate": None}
    assert gate.decide(cur, {**cur, "reward_mean": 0.6}).promote
    same = gate.decide(cur, dict(cur))
    assert not same.promote and "does not improve" in same.reasons[0]
    worse = gate.decide(cur, {**cur, "reward_mean": 0.7, "pass_rate": 0.3}, max_regression=0.05)
    assert not worse.promote and any(r.startswith("pass_rate: regressed") for r in worse.reasons)
    assert gate.decide(cur, {**cur, "reward_mean": 0.7, "pass_rate": 0.38}, max_regression=0.05).promote
    assert not gate.decide(cur, {**cur, "reward_mean": 0.51}, min_improvement=0.05).promote
    assert not gate.decide(cur, {}).promote  # a missing evaluation never promotes


def _eval_with_outcomes(rewards: list[float], right: list[int]) -> dict:
    """An eval file's shape: the rates and each prompt's reward and task outcome."""
    answers = [
        {"completion": "", "reward": r, "outcomes": {"task_accuracy": float(o)}}
        for r, o in zip(rewards, right, strict=True)
    ]
    return {
        "reward_mean": round(sum(rewards) / len(rewards), 4),
        "task_accuracy": round(sum(right) / len(right), 4),
        "answers": answers,
    }


def test_a_fall_within_max_regression_but_beyond_the_noise_is_refused():
    """1.5 points of task accuracy lost on 600 prompts, every changed prompt lost (9 to 0): within the
    absolute --max_regression 0.02, but the paired exact test says it is no accident (p = 0.004)."""
    right = [1] * 300 + [0] * 300
    current = _eval_with_outcomes([0.5] * 600, right)
    lost = [0] * 9 + right[9:]
    candidate = _eval_with_outcomes([0.6] * 600, lost)
    decision = gate.decide(current, candidate, "reward_mean", max_regression=0.02)
    assert not decision.promote
    assert any("task_accuracy: fell beyond the noise" in r and "p = 0.0039" in r for r in decision.reasons)
    mixed = [0] * 9 + right[9:300] + [1] * 9 + right[309:]  # as many prompts gained as lost: noise
    decision = gate.decide(
        current, _eval_with_outcomes([0.6] * 600, mixed), "reward_mean", max_regression=0.02
    )
    assert decision.promote, decision.reasons


def _evals(labels: list[str], before: list[int], after: list[int]) -> tuple[dict, dict]:
    """The served model's and the candidate's dev evaluations: one task_accuracy outcome a row."""

    def ev(outcomes: list[int]) -> dict:
        answers = [{"outcomes": {"task_accuracy": float(o)}} for o in outcomes]
        return {"task_accuracy": sum(outcomes) / len(outcomes), "n": len(outcomes), "answers": answers}

    assert len(labels) == len(before) == len(after)
    return ev(before), ev(after)


# the demo's dev split: 20 rows of a new kind, 30 of five kinds the model knew (6 each: none tested alone)
NEW, OLD = ["推诿"] * 20, [kind for kind in ("辱骂", "未致歉", "敷衍", "泄露隐私", "无") for _ in range(6)]


def test_a_round_that_learns_a_new_kind_and_forgets_the_others_is_refused_naming_them():
    """Overall accuracy rises 18% -> 44% (the new kind is 40% of the rows), but the other kinds fall 9 -> 2
    of 30: 7 lost, none gained, one-sided exact p = 0.0078. The old gate promoted it; this one names them."""
    labels = NEW + OLD
    before = [0] * 20 + [1] * 9 + [0] * 21
    after = [1] * 20 + [1] * 2 + [0] * 28
    current, candidate = _evals(labels, before, after)
    assert gate.decide(current, candidate, "task_accuracy").promote  # without labels: what it did before
    decision = gate.decide(current, candidate, "task_accuracy", labels=labels)
    assert not decision.promote
    (line,) = decision.reasons
    assert line.startswith(
        "task_accuracy on the dev rows of all but '推诿' fell beyond the noise, paired on the same 30"
    )
    assert "30.0% → 6.7%" in line and "7 lost and 0 gained" in line and "one-sided exact p = 0.00781" in line
    assert [k["group"] for k in decision.kinds] == ["'推诿'", "all but '推诿'"]  # the small kinds: not alone


def test_a_fall_on_a_kind_within_the_noise_does_not_refuse_a_better_round():
    """4 of the other kinds' prompts lost, 1 gained: one-sided p = 0.19, noise; the round is promoted and
    says the groups it tested."""
    labels = NEW + OLD
    before = [0] * 20 + [1] * 9 + [0] * 21
    after = [1] * 20 + [1] * 5 + [0] * 4 + [1] + [0] * 20
    current, candidate = _evals(labels, before, after)
    decision = gate.decide(current, candidate, "task_accuracy", labels=labels)
    assert decision.promote, decision.reasons
    assert "on any of 2 groups of labels" in decision.reasons[0]


def test_every_label_with_enough_dev_rows_is_tested_alone_and_against_the_rest():
    labels = ["a"] * 12 + ["b"] * 10 + ["c"] * 9 + [None] * 5
    groups = gate.kind_groups(labels)
    assert set(groups) == {"'a'", "all but 'a'", "'b'", "all but 'b'"}  # c: 9 rows; unlabelled: none
    assert groups["all but 'a'"] == list(range(12, 31))
    assert gate.kind_groups(["a"] * 12 + ["b"] * 12) == {"'a'": list(range(12)), "'b'": list(range(12, 24))}
