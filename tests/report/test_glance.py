"""The report at a glance (ark_trainer/report/glance.py): on the fake run folder of tests/report/test_report.py."""

from __future__ import annotations

import json
from pathlib import Path

from ark_trainer.report import build_report
from ark_trainer.report.glance import changes, page_lang, reward_range
from tests.report.test_report import make_run


def with_answers(root: Path, rewards: list[float]) -> Path:
    """Held-out prompts in data/eval.jsonl and the final model's answers to them, in the same order."""
    prompts = [{"prompt": [{"role": "user", "content": f"对话 {i}"}]} for i in range(len(rewards))]
    (root / "data" / "eval.jsonl").write_text(
        "\n".join(json.dumps(p, ensure_ascii=False) for p in prompts) + "\n"
    )
    grpo = json.loads((root / "eval" / "grpo.json").read_text())
    grpo["answers"] = [{"completion": f"answer {i}", "reward": r} for i, r in enumerate(rewards)]
    (root / "eval" / "grpo.json").write_text(json.dumps(grpo, ensure_ascii=False))
    return root


def test_the_report_opens_with_a_chart_and_points_kept_apart_from_relative_change(tmp_path):
    run = with_answers(make_run(tmp_path / "run"), [0.1, 0.9, 0.5, 0.2, 0.95, 0.0])
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert md.index("## At a glance") < md.index("## Diagnosis") < md.index("## Strategy")
    assert (
        "![Headline metrics per model](plots/headline.png)" in md
        and (run / "plots" / "headline.png").is_file()
    )
    assert "| task_accuracy | 50.0% | 75.0% | +25.0 pts | +50.0% |" in md
    assert "| reward_mean | 0.200 | 0.500 | +0.300 | +150.0% |" in md


def test_successes_are_shown_next_to_failures(tmp_path):
    run = with_answers(make_run(tmp_path / "run"), [0.1, 0.9, 0.5, 0.2, 0.95, 0.0])
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "| 0.950 | 对话 4 | answer 4 | 0.000 | 对话 5 | answer 5 |" in md
    assert "| 0.500 | 对话 2 | answer 2 | 0.200 | 对话 3 | answer 3 |" in md


def test_equal_pass_rate_and_task_accuracy_are_explained(tmp_path):
    run = make_run(tmp_path / "run")
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "are equal here" not in md
    for name in ("base", "rft", "grpo"):
        data = json.loads((run / "eval" / f"{name}.json").read_text())
        (run / "eval" / f"{name}.json").write_text(json.dumps({**data, "pass_rate": data["task_accuracy"]}))
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "pass_rate and task_accuracy are equal here, and that is not a mistake" in md


def test_the_page_language_follows_the_task(tmp_path):
    run = with_answers(make_run(tmp_path / "run"), [0.1, 0.9])
    assert '<html lang="zh">' in build_report(run)[1].read_text(encoding="utf-8")
    assert page_lang("support_triage", tmp_path / "nowhere") == "en"


def test_changes_and_the_reward_band_range():
    assert changes("pass_rate", 0.5, 0.4) == ("+10.0 pts", "+25.0%")
    assert changes("pass_rate", 0.5, 0.0) == ("+50.0 pts", "— (base is 0)")
    assert reward_range([{"reward": 0.9, "rewards/a/mean": 1.0}]) == (0.0, 1.0)
    assert reward_range([{"reward": 3.2}]) is None  # a reward model's score: no known range
