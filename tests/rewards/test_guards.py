"""Guards: rewards that raise or hang on one sample, and GRPO's no-learning-signal warning."""

from __future__ import annotations

import time

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.runtime.guards import guard_callbacks
from ark_trainer.core.runtime.monitor import Monitor
from ark_trainer.rewards.composite import Component, CompositeReward
from ark_trainer.rewards.guards import attach_monitor, guard_reward
from tests.rewards.attacks import CATASTROPHIC, regex_yaml, score, train_flags, unlabelled_data


def length_reward(prompts, completions, **kw):
    return [float(len(c)) for c in completions]


def fragile_reward(prompts, completions, **kw):
    if any("boom" in c for c in completions):
        raise ValueError("cannot parse")
    if any("sleep" in c for c in completions):
        time.sleep(30)
    return [1.0 for _ in completions]


def make_reward(tmp_path, timeout: float = 0.5):
    reward = CompositeReward(
        [Component("length", length_reward, 1.0), Component("fragile", fragile_reward, 1.0)]
    )
    stats = guard_reward(reward, timeout)
    monitor = Monitor(tmp_path, heartbeat=False)
    attach_monitor(reward, monitor)
    return reward, stats


def test_a_reward_that_raises_on_one_sample_skips_only_that_sample(tmp_path):
    reward, stats = make_reward(tmp_path)
    table = reward.score(["p"] * 3, ["ok", "boom", "fine"], label=["a", "b", "c"])
    assert table["fragile"] == [1.0, None, 1.0]
    assert table["length"] == [2.0, 4.0, 4.0]
    assert table["total"] == [1.5, 4.0, 2.5]  # the skipped score is left out of the mean, not a 0
    assert stats["fragile"] == 1
    event = read_jsonl(tmp_path / "events.jsonl")[0]
    assert (
        event["event"] == "reward_skipped" and event["reason"] == "error" and "cannot parse" in event["error"]
    )


def test_a_reward_that_hangs_on_one_sample_times_out_and_is_skipped(tmp_path):
    reward, stats = make_reward(tmp_path, timeout=0.5)
    t0 = time.time()
    table = reward.score(["p"] * 2, ["sleep", "ok"])
    assert time.time() - t0 < 5  # batch call + two single calls, each at most 0.5 s
    assert table["fragile"] == [None, 1.0] and stats["fragile"] == 1
    assert read_jsonl(tmp_path / "events.jsonl")[0]["reason"] == "timeout"


def test_a_sample_no_reward_can_score_has_no_total(tmp_path):
    reward = CompositeReward([Component("fragile", fragile_reward, 1.0)])
    guard_reward(reward, 1.0)
    assert reward(["p", "p"], ["boom", "ok"]) == [None, 1.0]


def test_guarding_twice_wraps_once(tmp_path):
    reward, _ = make_reward(tmp_path)
    fns = [c.fn for c in reward.components]
    guard_reward(reward, 2.0)
    assert [c.fn for c in reward.components] == fns


class _State:
    def __init__(self, step: int) -> None:
        self.global_step = step


def test_no_signal_warning_after_ten_steps_of_zero_variance(tmp_path):
    monitor = Monitor(tmp_path, heartbeat=False)
    guard = guard_callbacks(monitor, "GRPO")[0]
    for step in range(1, 10):
        guard.on_log(None, _State(step), None, logs={"frac_reward_zero_std": 1.0 if step != 5 else 0.5})
    assert not (tmp_path / "events.jsonl").exists()  # the streak was broken at step 5
    for step in range(10, 16):
        guard.on_log(None, _State(step), None, logs={"frac_reward_zero_std": 0.95})
    events = read_jsonl(tmp_path / "events.jsonl")
    assert len(events) == 1 and "no learning signal" in events[0]["message"]
    assert "up to step 15" in events[0]["message"]  # steps 6..15: ten in a row


def test_no_signal_guard_judges_the_groups_dynamic_sampling_trained_on(tmp_path):
    monitor = Monitor(tmp_path, heartbeat=False)
    guard = guard_callbacks(monitor, "GRPO")[0]
    flat_first = {"frac_reward_zero_std": 1.0, "dynamic_sampling/frac_informative": 0.6}
    for step in range(1, 16):
        guard.on_log(None, _State(step), None, logs=flat_first)
    assert not (tmp_path / "events.jsonl").exists()  # 40% of the groups trained on were flat
    for step in range(16, 26):
        guard.on_log(None, _State(step), None, logs={**flat_first, "dynamic_sampling/frac_informative": 0.05})
    assert "no learning signal" in read_jsonl(tmp_path / "events.jsonl")[0]["message"]


def test_skipped_samples_are_summed_up_in_one_warning_per_reward(tmp_path):
    from ark_trainer.rewards.guards import warn_skipped

    reward, _ = make_reward(tmp_path)
    reward.score(["p"] * 2, ["boom", "ok"])
    reward.score(["q"] * 2, ["boom", "boom"])
    warn_skipped(reward, Monitor(tmp_path, heartbeat=False))
    warnings = [e["message"] for e in read_jsonl(tmp_path / "events.jsonl") if e["event"] == "warning"]
    assert len(warnings) == 1 and "'fragile'" in warnings[0] and "on 3 samples" in warnings[0]


def test_reward_calls_share_one_worker_thread_until_one_hangs(tmp_path):
    import threading

    seen = []

    def where(prompts, completions, **kw):
        seen.append(threading.current_thread())  # kept alive, so two threads never share an id()
        return fragile_reward(prompts, completions)

    reward = CompositeReward([Component("fragile", where, 1.0)])
    guard_reward(reward, 0.5)
    for i in range(20):
        reward.score(["p"], [f"ok {i}"])  # distinct batches: the composite caches a batch it has scored
    assert (
        len(seen) == 20 and len({id(t) for t in seen}) == 1 and seen[0] is not threading.current_thread()
    )  # not one per call
    assert reward(["p"] * 2, ["sleep", "ok"]) == [None, 1.0]  # that worker hangs and is abandoned
    seen.clear()
    assert reward(["p"], ["fine"]) == [1.0]  # a fresh worker serves on
    assert len({id(t) for t in seen}) == 1


def test_a_python_grader_returning_a_huge_int_is_one_line(user_rules, tmp_path, capsys):
    spec = tmp_path / "py.yaml"
    spec.write_text(
        "graders:\n  - name: py\n    type: python\n    function: harden_rules:grade\n", encoding="utf-8"
    )
    code, out, _ = score(spec, unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys)
    # score's reward is train's (rewards/builder.py): guarded, so the sample is skipped and named in one line
    (line,) = [
        line for line in out.splitlines() if line.startswith("warning: grader 'py'") and "skipped" in line
    ]
    assert code == 0 and "py.yaml:4" in line and "finite number" in line and "characters" in line


@pytest.mark.slow
def test_label_free_rules_train_and_bad_scores_never_reach_training(user_rules, model, tmp_path):
    """Unlabelled rows train with label-free graders (13); the catastrophic regex is bounded in RFT's
    scoring (5); inf/nan/1e308/10**400 from a rule are refused, evented, and training stays finite (10)."""
    spec = tmp_path / "free.yaml"
    spec.write_text(
        regex_yaml(tmp_path).read_text(encoding="utf-8")
        + "  - name: wild\n    type: rule\n    rule: 'harden_rules:bad'\n    weight: 0.5\n",
        encoding="utf-8",
    )
    data = unlabelled_data(tmp_path, n=8, candidates=[CATASTROPHIC, "好的"])
    out = tmp_path / "run"
    started = time.time()
    assert main(train_flags(model, data, out, spec, strategy="RFT+GRPO")) == 0
    assert time.time() - started < 300 and (out / "model" / "model.safetensors").is_file()
    events = read_jsonl(out / "events.jsonl")
    skipped = {(e["reward"], e["reason"]) for e in events if e["event"] == "reward_skipped"}
    assert ("ends_in_a", "failed") in skipped and ("wild", "invalid") in skipped
    assert not [e for e in events if e["event"] == "stalled"]
    rewards = [
        e["reward"] for e in events if e["event"] == "metrics" and e.get("stage") == "grpo" and "reward" in e
    ]
    assert rewards and all(abs(r) <= 1.0 for r in rewards)
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Rewards: ends_in_a (weight 1), short (weight 1), wild (weight 0.5)" in report
