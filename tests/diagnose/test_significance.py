"""``eval_regression`` and ``reward_hacking`` tell the sampling noise of n held-out prompts from a real fall
(``diagnose/significance.py``).

A move of 0.9 points at n = 300 (preference alignment 92.2% → 91.3%: 3 prompts) is no finding; 66.7% →
50.0% at n = 60 (the agent demo's GRPO) and a large fall at n = 300 are, with the figures, n and p-value in
the evidence. The run folders are written by the test (no training), as in ``test_training.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from ark_trainer.diagnose import diagnose, to_json
from ark_trainer.diagnose.significance import ALPHA, paired_p, two_proportion_p
from ark_trainer.fileio import write_jsonl
from ark_trainer.metrics import PASS_RATE, PREFERENCE_ALIGNMENT, REWARD_MEAN, TASK_ACCURACY
from tests.diagnose.test_training import CONFIG, sick_steps


def test_two_proportions_at_two_sample_sizes():
    assert two_proportion_p(0.922, 300, 0.913, 300) > 0.3  # 3 prompts of 300
    assert two_proportion_p(0.922, 300, 0.85, 300) < 0.01  # 22 prompts of 300
    assert two_proportion_p(0.667, 60, 0.5, 60) < ALPHA  # 10 prompts of 60 (p = 0.032)
    assert two_proportion_p(0.667, 60, 0.633, 60) > 0.3  # 2 prompts of 60
    assert two_proportion_p(0.5, 60, 0.6, 60) > 0.5  # a rise is never a fall
    assert two_proportion_p(0.5, 0, 0.4, 60) is None


def rewards(values: list[float]) -> dict:
    return {"answers": [{"completion": "", "reward": v} for v in values]}


def test_the_mean_reward_is_compared_prompt_by_prompt():
    rng = random.Random(0)
    before = [rng.random() for _ in range(300)]
    jitter = [v + rng.gauss(0, 0.05) for v in before]
    assert paired_p(rewards(before), rewards([v - 0.003 for v in jitter])) > ALPHA  # a hair, in the noise
    assert paired_p(rewards(before), rewards([v - 0.03 for v in jitter])) < 0.001  # every prompt a bit lower
    assert paired_p(rewards(before[:60]), rewards([v - 0.03 for v in jitter[:60]])) < ALPHA
    assert paired_p({}, rewards(before)) is None  # an eval file without its answers: not tested
    assert paired_p(rewards(before), rewards(before[:10])) is None  # not the same prompts


def evaluation(n: int, accuracy: float, preference: float, reward: float | None = None) -> dict:
    """An eval file of ``n`` prompts; per-prompt rewards 0/1 at the accuracy, so the mean reward moves alike."""
    right = round(accuracy * n)
    data = {
        "n": n, REWARD_MEAN: right / n, PASS_RATE: accuracy, TASK_ACCURACY: accuracy,
        PREFERENCE_ALIGNMENT: preference, **rewards([1.0] * right + [0.0] * (n - right)),
    }  # fmt: skip
    return data


def run_folder(out: Path, evals: dict[str, dict], steps: list[dict]) -> Path:
    """A finished run of base → rft → grpo with these eval files and GRPO metrics."""
    out.mkdir()
    (out / "run.yaml").write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    stages = [{"name": s, "steps": 12, "learning_rate": 1e-6, "last": s == "grpo"} for s in ("rft", "grpo")]
    (out / "plan.json").write_text(json.dumps({"strategy": "RFT+GRPO", "stages": stages}), encoding="utf-8")
    (out / "heartbeat.json").write_text(json.dumps({"state": "finished", "pid": 0}), encoding="utf-8")
    write_jsonl(
        out / "events.jsonl",
        [
            {"event": "run_start"},
            *steps,
            *({"event": "eval", "model": name} for name in evals),
            {"event": "run_end", "status": "finished"},
        ],
    )
    (out / "eval").mkdir()
    for name, data in evals.items():
        (out / "eval" / f"{name}.json").write_text(json.dumps({"name": name, **data}), encoding="utf-8")
    return out


def findings(out: Path) -> dict[str, dict]:
    return {
        f["code"]: f
        for f in to_json(diagnose(out))["findings"]
        if f["code"] in ("eval_regression", "reward_hacking")
    }


RISING = [{**step, "frac_reward_zero_std": 0.0, "rewards/b/mean": 0.5} for step in sick_steps("grpo")]


@pytest.mark.parametrize(
    ("n", "rft", "grpo", "found"),
    [
        (300, (0.9, 0.922), (0.9, 0.913), False),  # preference 92.2% → 91.3%: 3 prompts of 300
        (300, (0.9, 0.922), (0.8, 0.85), True),  # 30 prompts of 300 fewer right
        (60, (0.667, 0.7), (0.633, 0.7), False),  # 2 prompts of 60
        (60, (0.667, 0.7), (0.5, 0.7), True),  # the agent demo's GRPO: 10 prompts of 60
    ],
)
def test_a_fall_is_a_finding_only_beyond_the_noise(tmp_path, n, rft, grpo, found):
    evals = {"base": evaluation(n, 0.3, 0.5), "rft": evaluation(n, *rft), "grpo": evaluation(n, *grpo)}
    got = findings(run_folder(tmp_path / "run", evals, RISING))
    assert set(got) == ({"eval_regression", "reward_hacking"} if found else set())
    if found:
        regression, hacking = got["eval_regression"]["evidence"], got["reward_hacking"]["evidence"]
        a, b = (f"{v * 100:.1f}%" for v in (rft[0], grpo[0]))
        assert (
            regression.startswith("grpo ends worse than rft: ")
            and f"pass_rate {a} → {b} (n={n}, p" in regression
        )
        assert "one-sided p < 0.05" in regression and "one-sided p < 0.05" in hacking
        assert f"task_accuracy {a} → {b} (n={n}, p" in hacking and "(rft → grpo)" in hacking
