"""The dashboard's evaluation payload (``services/dashboard/payload.py``): each stage against the one before it, and the
final model against the base, paired prompt by prompt with the interval, n and p the report shows."""

from __future__ import annotations

import json

from ark_trainer.services.dashboard.payload import eval_tables
from tests.diagnose.test_significance import RISING, paired_files, run_folder


def test_stage_changes_carry_interval_n_and_p(tmp_path):
    base, rft = paired_files(60, 30, 0, 8)  # 30 → 22 of 60: 8 lost, none gained
    grpo = paired_files(60, 30, 2, 0)[1]  # the final model: 32 of 60
    run = run_folder(tmp_path / "run", {"base": base, "rft": rft, "grpo": grpo}, RISING)
    changes = eval_tables(run)["changes"]
    assert json.loads(json.dumps(changes, allow_nan=False)) == changes  # what the server sends, as it is
    fall = next(c for c in changes if c["models"] == "rft vs base" and c["metric"] == "task_accuracy")
    assert (fall["gained"], fall["lost"], fall["n"], fall["test"]) == (0, 8, 60, "exact McNemar")
    assert round(fall["p"], 4) == 0.0078 and fall["verdict"] == "significant fall"
    assert fall["low"] < fall["delta"] < fall["high"] < 0 and fall["change"].startswith("\u221213.3 pts [")
    assert (
        fall["text"].startswith("task accuracy 50.0% → 36.7%, \u221213.3 pts [") and "n = 60" in fall["text"]
    )
    assert {c["models"] for c in changes} == {"rft vs base", "grpo vs rft", "grpo vs base"}  # the final too
    final = next(c for c in changes if c["models"] == "grpo vs base" and c["metric"] == "task_accuracy")
    assert (final["gained"], final["lost"], final["verdict"]) == (2, 0, "not significant")
    reward = next(c for c in changes if c["metric"] == "reward_mean")
    assert reward["test"] == "Wilcoxon signed-rank" and reward["p"] == 1.0  # every answer's reward is 0.5


def test_an_older_eval_file_says_why_it_is_not_tested(tmp_path):
    base, rft = paired_files(60, 30, 0, 8)
    for answer in rft["answers"]:
        del answer["outcomes"]
    run = run_folder(tmp_path / "run", {"base": base, "rft": rft, "grpo": rft}, RISING)
    changes = eval_tables(run)["changes"]
    old = next(c for c in changes if c["models"] == "rft vs base" and c["metric"] == "task_accuracy")
    assert old == {
        "models": "rft vs base",
        "metric": "task_accuracy",
        "untested": "per-prompt outcomes missing",
    }


def test_the_changes_follow_an_eval_file_rewritten_while_the_page_polls(tmp_path):
    base, rft = paired_files(60, 30, 0, 8)
    run = run_folder(tmp_path / "run", {"base": base, "rft": rft}, RISING)
    first = eval_tables(run)["changes"]
    assert eval_tables(run)["changes"] is first  # the same files: not tested again
    better = paired_files(60, 30, 20, 0)[1]
    (run / "eval" / "rft.json").write_text(json.dumps({"name": "rft", **better}), encoding="utf-8")
    again = next(c for c in eval_tables(run)["changes"] if c["metric"] == "task_accuracy")
    assert again["verdict"] == "significant gain" and again["gained"] == 20
