"""The diagnosis of sampled groups (``stages/diagnose/training.py``) asks the run which stages are online RL, instead
of naming GRPO.

A stage that logs a training reward (TRL's ``reward``: GRPO, RLOO, a plug-in's stage built on them) gets
the flat-reward, KL, entropy, truncation and reward-hacking checks, each finding naming that stage, its
label and its own learning-rate flag. The run folders are written by the test (no training): a finished
run's ``run.yaml``, ``plan.json``, heartbeat, ``events.jsonl`` and eval files.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.stages.diagnose import diagnose, to_json

CONFIG = {
    "grpo_learning_rate": 1e-6, "rloo_learning_rate": 3e-6, "rft_learning_rate": 2e-5, "beta": 0.04,
    "temperature": 1.0, "num_generations": 4, "max_completion_length": 32, "num_processes": 1,
    "dynamic_sampling_rounds": 0,
}  # fmt: skip


def sick_steps(stage: str, n: int = 12) -> list[dict]:
    """Metrics of an online-RL stage that is in every kind of trouble the group checks look for."""
    return [
        {
            "event": "metrics",
            "stage": stage,
            "step": s,
            "loss": 0.01,
            "learning_rate": 1e-6,
            "reward": 0.1 * s,
            "reward_std": 0.0,
            "frac_reward_zero_std": 0.95,
            "kl": 0.3 * s,
            "entropy": 2.0 / s**2,
            "completions/clipped_ratio": 0.5,
            "completions/mean_length": 31.0,
            "rewards/a/mean": 0.1 * s,
            "rewards/b/mean": 1 - 0.1 * s,
            "rewards/a/std": 0.1,
            "rewards/b/std": 0.1,
        }
        for s in range(1, n + 1)
    ]


def run_folder(out: Path, stage: str) -> Path:
    """A finished one-stage run of ``stage``: base, then ``stage`` worse on the held-out set."""
    out.mkdir()
    (out / "run.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    plan = {"strategy": "X", "stages": [{"name": stage, "steps": 12, "learning_rate": 1e-6, "last": True}]}
    (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    (out / "heartbeat.json").write_text(json.dumps({"state": "finished", "pid": 0}), encoding="utf-8")
    evals = {"base": 0.5, stage: 0.3}
    events = [
        {"event": "run_start"},
        *sick_steps(stage),
        *({"event": "eval", "model": name} for name in evals),
        {"event": "run_end", "status": "finished"},
    ]
    write_jsonl(out / "events.jsonl", events)
    (out / "eval").mkdir()
    for name, accuracy in evals.items():
        data = {
            "name": name,
            "n": 100,
            "reward_mean": accuracy,
            "pass_rate": accuracy,
            "task_accuracy": accuracy,
            "answers": [  # the first 50 (30) of 100 prompts right: what the paired tests read
                {
                    "completion": "",
                    "reward": float(i < accuracy * 100),
                    "outcomes": {"pass_rate": float(i < accuracy * 100)},
                }
                for i in range(100)
            ],
        }
        (out / "eval" / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    return out


GROUP_CODES = {"flat_reward", "kl_blowup", "entropy_collapse", "truncation", "reward_hacking"}


@pytest.mark.parametrize(
    ("stage", "label", "lr_flag"),
    [("grpo", "GRPO", "--grpo_learning_rate"), ("rloo", "RLOO", "--rloo_learning_rate")],
)
def test_every_online_rl_stage_gets_the_group_checks(tmp_path, stage, label, lr_flag):
    findings = to_json(diagnose(run_folder(tmp_path / "run", stage)))["findings"]
    found = {f["code"]: f for f in findings if f["code"] in GROUP_CODES}
    assert set(found) == GROUP_CODES
    assert {f["stage"] for f in found.values()} == {stage}
    assert f"of {label} groups had zero reward variance" in found["flat_reward"]["evidence"]
    assert found["kl_blowup"]["evidence"].startswith(f"{label} KL to the reference reached 3.6")
    assert f"lower --{lr_flag.removeprefix('--')} from" in found["kl_blowup"]["fix"]
    assert f"{lr_flag} to" in found["entropy_collapse"]["fix"]
    assert f"of {label} completions were cut" in found["truncation"]["evidence"]
    hacking = found["reward_hacking"]["evidence"]  # the first of its two findings: one per code and stage
    assert hacking.startswith(f"{label} training reward rose") and f"(base → {stage})" in hacking


def test_dynamic_sampling_is_offered_only_to_the_stage_it_wraps(tmp_path):
    # dynamic sampling is GRPO's (stages/grpo/stage.py: flat_reward_fix); RLOO's flat groups are not offered it
    fixes = {
        stage: {f["code"]: f for f in to_json(diagnose(run_folder(tmp_path / stage, stage)))["findings"]}
        for stage in ("grpo", "rloo")
    }
    assert "--dynamic_sampling_rounds 2" in fixes["grpo"]["flat_reward"]["fix"]
    assert "--dynamic_sampling_rounds" not in fixes["rloo"]["flat_reward"]["fix"]


def test_a_stage_this_install_does_not_know_is_diagnosed_by_its_name(tmp_path):
    # a plug-in's online-RL stage, diagnosed where the plug-in is not installed: its own name, no crash
    findings = to_json(diagnose(run_folder(tmp_path / "run", "toyrl")))["findings"]
    flat = next(f for f in findings if f["code"] == "flat_reward")
    assert flat["stage"] == "toyrl" and "of toyrl groups" in flat["evidence"]


def test_a_stage_that_logs_no_reward_gets_no_group_checks(tmp_path):
    out = run_folder(tmp_path / "run", "rft")
    lines = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    keep = ("event", "stage", "step", "loss", "learning_rate")
    write_jsonl(out / "events.jsonl", [{k: v for k, v in e.items() if k in keep} for e in lines])
    codes = {f["code"] for f in to_json(diagnose(out))["findings"]}
    assert not codes & GROUP_CODES


@pytest.mark.parametrize(
    ("basis", "value", "flag"),
    [
        ("decision", 32, None),  # sized to the decision lines its reward reads: cut there on purpose
        (None, 32, "--grpo_max_completion_length 32"),  # the user's own GRPO length: name it
        ("decision", 16, "--grpo_max_completion_length 32"),  # chosen, then changed by hand (a resume)
    ],
)
def test_grpo_cut_after_the_decision_it_is_scored_on_is_no_truncation(tmp_path, basis, value, flag):
    out = run_folder(tmp_path / "run", "grpo")
    (out / "run.yaml").write_text(
        yaml.safe_dump({**CONFIG, "max_completion_length": 96, "grpo_max_completion_length": 32}),
        encoding="utf-8",
    )
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    chosen = {"value": value, "reason": "...", **({"basis": basis} if basis else {})}
    plan["auto_defaults"] = {"model": "a real model", "grpo_max_completion_length": chosen}
    (out / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    found = {f["code"]: f for f in to_json(diagnose(out))["findings"]}
    if flag is None:
        assert "truncation" not in found and "flat_reward" in found  # the other checks still run
    else:
        assert (
            flag in found["truncation"]["evidence"]
            and "raise --grpo_max_completion_length" in found["truncation"]["fix"]
        )


def test_groups_flat_because_solved_are_no_fault(tmp_path):
    """A GRPO stage whose sampled reward (0..1) ends near 1: its flat groups and low entropy are convergence
    (info), not warnings; the same stage at a low reward still gets both warnings."""
    out = run_folder(tmp_path / "run", "grpo")
    lines = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]

    def with_reward(value):
        return [
            {**e, "reward": value(e["step"]), "reward_std": 0.1} if e["event"] == "metrics" else e
            for e in lines
        ]

    write_jsonl(out / "events.jsonl", with_reward(lambda step: min(0.95, 0.8 + 0.02 * step)))
    found = {f["code"]: f for f in to_json(diagnose(out))["findings"]}
    assert found["flat_reward"]["severity"] == "info" and "solved" in found["flat_reward"]["evidence"]
    assert found["entropy_collapse"]["severity"] == "info"
    assert "averaged 0.95 of 1" in found["entropy_collapse"]["evidence"]
    write_jsonl(out / "events.jsonl", with_reward(lambda step: 0.5))
    found = {f["code"]: f for f in to_json(diagnose(out))["findings"]}
    assert found["flat_reward"]["severity"] == "error" and found["entropy_collapse"]["severity"] == "warning"
    write_jsonl(out / "events.jsonl", [{**e, "reward": 1.0} if e["event"] == "metrics" else e for e in lines])
    found = {
        f["code"]: f for f in to_json(diagnose(out))["findings"]
    }  # 1.0 with no spread: a constant grader
    assert found["flat_reward"]["severity"] == "error" and found["entropy_collapse"]["severity"] == "warning"
