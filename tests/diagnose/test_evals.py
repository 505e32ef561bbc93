"""``no_learning`` (``stages/diagnose/evals.py``) on the full agent demo's own eval files: GRPO changed what the
episodes did.

The fixture ``tests/fixtures/agent_demo_evals.json`` holds the held-out answers (final text, reward, environment
reward, tool calls with arguments and results) and headline metrics of ``eval/rft.json`` and
``eval/grpo.json`` of a full ``ark-trainer demo --task agent`` run (seed 0, n = 240, 2026-12-01). Almost
every episode ends with the same sign-off ("完成"), so a comparison of final texts calls the two models the
same; the finding used to compare that text and the *number* of tool calls, and so fired on this run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.stages.diagnose.evals import _answer_key, check_same_answers
from ark_trainer.stages.diagnose.rundata import load

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "agent_demo_evals.json"


@pytest.fixture
def demo_run(tmp_path) -> Path:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    (run / "run.yaml").write_text("strategy: RFT+GRPO\ngrpo_learning_rate: 0.0005\n", encoding="utf-8")
    for name in ("rft", "grpo"):
        (run / "eval" / f"{name}.json").write_text(
            json.dumps(data[name], ensure_ascii=False), encoding="utf-8"
        )
    return run


def test_the_full_agent_demo_raises_no_no_learning(demo_run):
    run = load(demo_run)
    rft, grpo = (run.evals[k]["answers"] for k in ("rft", "grpo"))
    assert len(rft) == len(grpo) == 240
    texts = sum(a["completion"] == b["completion"] for a, b in zip(rft, grpo, strict=True)) / 240
    counts = sum(len(a["tool_calls"]) == len(b["tool_calls"]) for a, b in zip(rft, grpo, strict=True)) / 240
    assert texts >= 0.95 and counts >= 0.95  # what the finding used to compare: "the same answers"
    episodes = sum(_answer_key(a) == _answer_key(b) for a, b in zip(rft, grpo, strict=True)) / 240
    assert episodes < 0.95  # the calls, their arguments and results tell the models apart (62% alike)
    assert run.evals["grpo"]["task_success"] != run.evals["rft"]["task_success"]
    assert check_same_answers(run) == []


def test_the_same_episodes_still_raise_no_learning(demo_run):
    run = load(demo_run)
    run.evals["grpo"] = run.evals["rft"]  # a GRPO that changed nothing
    finding = check_same_answers(run)[0]
    assert finding.code == "no_learning" and "on 100% of 240 held-out prompts" in finding.evidence
