"""Every change the report shows between two models carries its 95% interval, n and p, from the paired
tests of ``core/stats.py`` (``stages/report/compare.py``); an older eval file without per-prompt outcomes is shown
untested and the report says why."""

from __future__ import annotations

import json
from pathlib import Path

from ark_trainer.stages.report import build_report
from tests.report.test_report import make_run


def outcomes(right: list[int]) -> dict:
    """An eval file of 100 prompts: ``right`` lists the prompts answered right (reward 1, the rest 0)."""
    answers = [
        {"completion": "", "reward": float(i in right), "outcomes": {"task_accuracy": float(i in right)}}
        for i in range(100)
    ]
    return {"n": 100, "reward_mean": len(right) / 100, "task_accuracy": len(right) / 100, "answers": answers}


def paired_run(root: Path) -> Path:
    run = make_run(root)
    base = list(range(50))
    rft = base + list(range(50, 60))  # 10 prompts gained, none lost: p = 0.002
    grpo = [i for i in rft if i not in (0, 1)] + [60, 61, 62]  # 3 gained, 2 lost: p = 1.00
    for name, right in (("base", base), ("rft", rft), ("grpo", grpo)):
        (run / "eval" / f"{name}.json").write_text(
            json.dumps({"name": name, **outcomes(right)}), encoding="utf-8"
        )
    return run


def test_each_change_has_its_interval_n_and_p(tmp_path):
    md_path, html_path = build_report(paired_run(tmp_path / "out"))
    md, page = md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")
    # the Results table: each stage against the base model, interval and p in the cell
    glance = next(line for line in md.splitlines() if line.startswith("| task_accuracy |"))
    assert glance.startswith("| task_accuracy | 50.0% | 61.0% | +11.0 pts | +22.0% | [+")
    assert glance.endswith(
        ", n = 100, p = 0.0074, significant gain |"
    )  # 13 gained, 2 lost  # the final model against the base
    row = next(line for line in md.splitlines() if line.startswith("| task_accuracy |") and "(" in line)
    assert (
        row.startswith("| task_accuracy | 50.0% | 60.0% (+10.0 pts [+")
        and ", p = 0.002) | 61.0% (+11.0" in row
    )
    assert "exact McNemar test on the prompts gained and lost" in md
    # the headline: the final model against the base, with n and the verdict
    assert "Task accuracy, final (GRPO) vs base: 50.0% → 61.0% (+11.0 pts [+" in md
    assert "n = 100, p = 0.0074, significant gain)." in md
    # stage to stage: GRPO against RFT, a change within the noise
    grpo = next(line for line in md.splitlines() if line.startswith("| GRPO vs RFT | task_accuracy |"))
    cells = [c.strip() for c in grpo.strip("|").split("|")]
    assert cells[2:] == [cells[2], cells[3], "100", "1.00", "exact McNemar", "not significant"]
    low, high = (float(x.replace("\u2212", "-")) for x in cells[3].split("[")[1].rstrip("]").split(","))
    assert cells[2] == "60.0% → 61.0%" and cells[3].startswith("+1.0 pts [") and low < 0 < high
    reward = next(line for line in md.splitlines() if line.startswith("| RFT vs base | reward_mean |"))
    assert "Wilcoxon signed-rank" in reward and "significant gain" in reward
    assert "GRPO vs RFT" in page and "exact McNemar" in page  # the HTML says the same


def test_the_final_model_section_compares_the_shipped_stage(tmp_path):
    run = paired_run(tmp_path / "out")
    (run / "model").mkdir()
    record = {"stage": "grpo", "reason": "the best stage on the held-out set by task_accuracy"}
    (run / "model" / "ark_final_model.json").write_text(json.dumps(record), encoding="utf-8")
    md = build_report(run)[0].read_text(encoding="utf-8")
    final = md[md.index("## Final model") : md.index("## At a glance")]
    assert "Paired on the held-out prompts: grpo vs rft: task accuracy 60.0% → 61.0%, +1.0 pts [" in final
    assert "n = 100, p = 1.00, not significant; grpo vs base: task accuracy 50.0% → 61.0%" in final


def test_an_older_eval_file_is_shown_untested(tmp_path):
    run = make_run(tmp_path / "out")  # eval files without per-prompt answers
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "| preference_alignment | 44.0% | 62.0% (+18.0 pts, +40.9%) |" in md  # the plain change, as before
    assert "no paired test: per-prompt outcomes missing" in md
    assert "| GRPO vs RFT | task_accuracy | 60.0% → 75.0% | — |" in md
