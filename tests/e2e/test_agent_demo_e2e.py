"""``ark-trainer demo --task agent`` end to end through the CLI, on tiny settings: base model, RFT+GRPO over
episodes of the demo's environment, the three evaluations and the report (the real run takes minutes)."""

from __future__ import annotations

import json

import pytest

from tests.tiny_runs import TINY_AGENT

AGENT_KEYS = ("task_success", "tool_call_validity", "mean_turns", "mean_tool_calls", "n")


@pytest.mark.slow
def test_agent_demo_runs_end_to_end_through_the_cli(tmp_path, monkeypatch, capsys):
    from ark_trainer.app.demo import agent_model
    from ark_trainer.cli import main

    real = agent_model.build_agent_model
    monkeypatch.setattr(
        agent_model,
        "build_agent_model",
        lambda out, rows, **kw: real(out, rows, **{**kw, **TINY_AGENT, "progress": False}),
    )
    out = tmp_path / "agent-demo"
    argv = ["demo", "--task", "agent", "--output_dir", str(out), "--n_train", "6", "--n_eval", "4"]
    assert main([*argv, "--max_train_steps", "2"]) == 0
    assert "demo done" in capsys.readouterr().out
    for name in ("base", "grpo"):  # (a tiny model may solve no task: then RFT keeps nothing and is skipped)
        metrics = json.loads((out / "eval" / f"{name}.json").read_text(encoding="utf-8"))
        assert set(AGENT_KEYS) <= metrics.keys(), metrics
        assert (
            metrics["n"] == len((out / "data" / "test.jsonl").read_text().splitlines())
            and 0.0 <= metrics["task_success"] <= 1.0
        )
        assert 1 <= metrics["mean_turns"] <= 4 and metrics["episodes"]
    assert "task_success" in (out / "report.md").read_text(encoding="utf-8")
