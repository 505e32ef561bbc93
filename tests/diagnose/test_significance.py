"""``eval_regression`` and ``reward_hacking`` tell the sampling noise of n held-out prompts from a real fall
(``stages/diagnose/significance.py``: the paired tests of ``core/stats.py``, which ``tests/test_stats.py`` checks).

A move of 0.9 points at n = 300 (preference alignment 92.2% → 91.3%: 3 prompts) is no finding; 66.7% →
50.0% at n = 60 (the agent demo's GRPO: 10 prompts lost, none gained) and a large fall at n = 300 are, with
the figures, interval, n and p-value in the evidence. The run folders are written by the test (no
training), as in ``test_training.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.core.metrics import OUTCOMES, PASS_RATE, PREFERENCE_ALIGNMENT, REWARD_MEAN, TASK_ACCURACY
from ark_trainer.stages.diagnose import diagnose, to_json
from ark_trainer.stages.diagnose.significance import comparisons, falls, rises
from tests.diagnose.test_training import CONFIG, sick_steps


def rewards(values: list[float]) -> dict:
    return {"answers": [{"completion": "", "reward": v} for v in values]}


def test_the_mean_reward_is_compared_prompt_by_prompt():
    rng = random.Random(0)
    before = [rng.random() for _ in range(300)]
    jitter = [v + rng.gauss(0, 0.05) for v in before]
    assert not falls(rewards(before), rewards([v - 0.003 for v in jitter]))  # a hair, in the noise
    assert [c.metric for c in falls(rewards(before), rewards([v - 0.03 for v in jitter]))] == [REWARD_MEAN]
    assert falls(rewards(before[:60]), rewards([v - 0.03 for v in jitter[:60]]))
    assert [c.metric for c in rises(rewards(before), rewards([v + 0.03 for v in jitter]))] == [REWARD_MEAN]
    assert comparisons({}, rewards(before)) == []  # an eval file without its answers: not tested
    assert comparisons(rewards(before), rewards(before[:10])) == []  # not the same prompts


def evaluation(n: int, accuracy: float, preference: float, reward: float | None = None) -> dict:
    """An eval file of ``n`` prompts: the first ``accuracy`` of them right (outcome 1, reward 1), the rest
    wrong; so a model that loses prompts loses them from the end, and the mean reward moves alike."""
    right, liked = round(accuracy * n), round(preference * n)
    answers = [
        {
            "completion": "",
            "reward": float(i < right),
            OUTCOMES: {PASS_RATE: float(i < right), TASK_ACCURACY: float(i < right),
                       PREFERENCE_ALIGNMENT: float(i < liked)},
        }
        for i in range(n)
    ]  # fmt: skip
    return {
        "n": n, REWARD_MEAN: right / n, PASS_RATE: accuracy, TASK_ACCURACY: accuracy,
        PREFERENCE_ALIGNMENT: preference, "answers": answers,
    }  # fmt: skip


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
            and f"pass rate {a} → {b}, \u2212{(rft[0] - grpo[0]) * 100:.1f} pts [" in regression
        )
        assert f"n = {n}, p " in regression and "significant fall" in regression
        assert "two-sided p < 0.05" in regression and "exact McNemar" in hacking
        assert f"task accuracy {a} → {b}," in hacking and "(rft → grpo)" in hacking


def paired_files(n: int, right: int, gained: int, lost: int) -> tuple[dict, dict]:
    """Two eval files of n prompts: ``right`` right before; ``lost`` of those wrong after, ``gained`` of the
    others right after."""
    before = [1.0] * right + [0.0] * (n - right)
    after = [0.0] * lost + [1.0] * (right - lost) + [1.0] * gained + [0.0] * (n - right - gained)
    files = []
    for column in (before, after):
        answers = [
            {"completion": "", "reward": 0.5, OUTCOMES: {PASS_RATE: v, TASK_ACCURACY: v}} for v in column
        ]
        files.append({"n": n, REWARD_MEAN: 0.5, PASS_RATE: sum(column) / n, TASK_ACCURACY: sum(column) / n,
                      "answers": answers})  # fmt: skip
    return files[0], files[1]


@pytest.mark.parametrize(
    ("n", "right", "gained", "lost", "found"),
    [
        (60, 30, 0, 8, True),  # 30 → 22: p = 0.0078 (one-sided 0.0039); the pooled z-test missed it
        (60, 30, 15, 24, False),  # 30 → 21: p = 0.20 (one-sided 0.10); the pooled z-test flagged it
        (300, 150, 1, 12, True),  # 150 → 139: p = 0.0034 (one-sided 0.0017); the pooled z-test missed it
    ],
)
def test_the_finding_follows_the_paired_test(tmp_path, n, right, gained, lost, found):
    rft, grpo = paired_files(n, right, gained, lost)
    evals = {"base": paired_files(n, 0, 0, 0)[0], "rft": rft, "grpo": grpo}
    got = findings(run_folder(tmp_path / "run", evals, RISING))
    assert ("eval_regression" in got) is found
    if found:
        assert "exact McNemar" in got["eval_regression"]["evidence"]


def test_a_gain_within_the_noise_is_said_and_still_deploys(tmp_path):
    base, final = paired_files(60, 30, 6, 3)  # 30 → 33 of 60: p = 0.51
    run = run_folder(tmp_path / "run", {"base": base, "rft": base, "grpo": final}, RISING)
    got = {f["code"]: f for f in to_json(diagnose(run))["findings"]}
    assert "no_improvement" not in got and got["gain_within_noise"]["severity"] == "info"
    evidence = got["gain_within_noise"]["evidence"]
    assert evidence.startswith("final model (grpo) vs base: task accuracy 50.0% → 55.0%, +5.0 pts [")
    assert "n = 60, p = 0.51, not significant" in evidence
    clear = run_folder(
        tmp_path / "clear", {"base": base, "rft": base, "grpo": paired_files(60, 30, 20, 0)[1]}, RISING
    )
    assert "gain_within_noise" not in {f["code"] for f in to_json(diagnose(clear))["findings"]}
