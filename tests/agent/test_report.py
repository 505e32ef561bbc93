"""The report's "Agent episodes" section (``stages/agent/report.py``): agent metrics, and episodes before and after."""

from __future__ import annotations

from ark_trainer.stages.agent.rollout import start, step
from tests.agent.calc_env import call, row


def test_the_report_shows_agent_metrics_and_episodes_before_and_after(calc, tmp_path):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.stages.report import build_report

    def played(answer: str, args: dict) -> dict:
        ep = start(row(target=5), calc)
        step(ep, call("add", **args), False)
        step(ep, answer, False)
        return ep.record()

    base = {"n": 2, "reward_mean": 0.0, "task_success": 0.0, "tool_call_validity": 0.5, "mean_turns": 2.0}
    base["episodes"] = [played("It is 4.", {"a": 1, "b": 3})]
    final = {"n": 2, "reward_mean": 1.0, "task_success": 1.0, "tool_call_validity": 1.0, "mean_turns": 2.0}
    final["episodes"] = [played("It is 5.", {"a": 2, "b": 3})]
    write_json(tmp_path / "eval" / "base.json", base)
    write_json(tmp_path / "eval" / "grpo.json", final)
    (tmp_path / "run.yaml").write_text("strategy: GRPO\n")
    md = build_report(tmp_path)[0].read_text()
    assert "| task_success | 0.0% | 100.0% (+100.0 pts" in md
    assert "| tool_call_validity | 50.0% | 100.0% (+50.0 pts" in md
    assert "Task success, final (GRPO) vs base: 0.0% → 100.0% (+100.0 pts)." in md
    section = md[md.index("## Agent episodes") :]
    assert section.index('→ add({"a": 1, "b": 3})') < section.index('→ add({"a": 2, "b": 3})')
    assert "← add: 4" in section and "assistant: It is 5." in section
    assert "GRPO: 2 turns, 1 tool calls, env reward 1" in section
