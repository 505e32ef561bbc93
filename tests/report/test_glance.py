"""The report at a glance (ark_trainer/stages/report/glance.py): on the fake run folder of tests/report/test_report.py.

Its examples show which held-out dialogue was judged, in every data shape: the QC demo's held-out file has
``question`` rows (reading only ``prompt`` once left the prompt columns empty), rows with ``messages`` show
their last user turn, and a ``--max_eval_samples`` run matches its answers to the first rows of the file.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import pytest

from ark_trainer.app.demo.data import generate_rows
from ark_trainer.stages.report import build_report
from ark_trainer.stages.report.glance import _clip, changes, page_lang, prompt_text, reward_range
from ark_trainer.stages.report.render import _md_cell
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


REWARDS = [0.1, 0.9, 0.5, 0.2, 0.95, 0.0]


def qc_rows(n: int) -> list[dict]:
    return generate_rows(n, seed=3, split="eval", with_candidates=False)


def chat_rows(n: int) -> list[dict]:
    return [
        {"messages": [{"role": "system", "content": "你是质检员"}, {"role": "user", "content": f"对话 {i}：客服说了什么"},
                      {"role": "assistant", "content": "结论：合规"}]}
        for i in range(n)
    ]  # fmt: skip


def with_rows(root: Path, rows: list[dict], n_answers: int) -> Path:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (root / "data" / "eval.jsonl").write_text(text.replace("\n", "\n\n", 1), encoding="utf-8")  # a blank line
    grpo = json.loads((root / "eval" / "grpo.json").read_text())
    grpo["answers"] = [{"completion": f"answer {i}", "reward": REWARDS[i]} for i in range(n_answers)]
    (root / "eval" / "grpo.json").write_text(json.dumps(grpo, ensure_ascii=False))
    return root


@pytest.mark.parametrize(
    ("shape", "extra"), [("qc", 0), ("chat", 0), ("qc", 4)], ids=["question", "messages", "max_eval_samples"]
)
def test_prompt_columns_name_the_dialogue_in_md_and_html(tmp_path, shape, extra):
    rows = (qc_rows if shape == "qc" else chat_rows)(len(REWARDS) + extra)
    run = with_rows(make_run(tmp_path / "run"), rows, len(REWARDS))
    md_path, html_path = build_report(run)[:2]
    md, page = md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")
    best, worst = _clip(prompt_text(rows[4])), _clip(prompt_text(rows[5]))
    assert best and worst
    assert f"| 0.950 | {_md_cell(best)} | answer 4 | 0.000 | {_md_cell(worst)} | answer 5 |" in md
    assert html.escape(best) in page and html.escape(worst) in page


def test_prompt_text_of_each_shape():
    assert prompt_text({"question": "q"}) == "q"
    assert prompt_text({"prompt": "p"}) == "p"
    assert prompt_text({"prompt": [{"role": "user", "content": "u"}]}) == "u"
    assert prompt_text(chat_rows(1)[0]) == "对话 0：客服说了什么"
    assert prompt_text({"label": "x"}) == ""


def test_the_dialogues_turns_stay_on_their_own_lines(tmp_path):
    rows = qc_rows(len(REWARDS))
    run = with_rows(make_run(tmp_path / "run"), rows, len(REWARDS))
    md, page = (p.read_text(encoding="utf-8") for p in build_report(run)[:2])
    dialogue = prompt_text(rows[4])
    first, second = dialogue.splitlines()[:2]  # the instruction, then the customer's first turn
    assert f"{first}<br>{second}" in md  # a Markdown row is one line: the turns broken with <br>
    assert f"{html.escape(first)}\n{html.escape(second)}" in page and "white-space:pre-line" in page
    assert _clip("a  b\n\n  c ") == "a b\nc"
