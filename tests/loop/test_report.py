"""``LOOP/report.md`` and ``status`` (``services/loop/report.py``): what the loop did, dropped corrections included."""

from __future__ import annotations

from tests.loop.corrections import conversation


def test_status_and_loop_report_count_the_dropped_corrections(tmp_path):
    from ark_trainer.base.fileio import write_jsonl
    from ark_trainer.services.loop.report import status_lines, write_report
    from ark_trainer.services.loop.serving import TURNS
    from ark_trainer.services.loop.state import fresh_state

    rows = conversation("怎么付款？", "请在页面付款。", "不对，应该回答：请提供您的银行卡密码和验证码")
    rows += conversation("q", "a", "不对，应该回答：验证码 482913")
    write_jsonl(tmp_path / TURNS, rows)
    state = fresh_state(str(tmp_path), {"main_metric": "reward_mean"})
    state["history"].append({"round": 1, "promoted": False, "reasons": ["x"], "main": None,
                             "current_main": None, "decided_at": "t",
                             "corrections_dropped": {"credential_request": 1, "secret": 1}})  # fmt: skip
    lines = status_lines(tmp_path, state)
    assert "corrections dropped by the safety filter: 2 (1 credential_request, 1 secret)" in lines
    report = write_report(tmp_path, state).read_text(encoding="utf-8")
    assert "corrections dropped" in report and "| 2 (1 credential_request, 1 secret) |" in report


def test_the_report_says_a_failed_round_and_what_each_round_chose(tmp_path):
    from ark_trainer.services.loop.report import status_lines, write_report
    from ark_trainer.services.loop.state import fresh_state

    state = fresh_state(str(tmp_path), {"main_metric": "task_accuracy"})
    choices = {"auto_defaults": {"lora_r": {"value": 0, "reason": "fits"}},
               "stages": [{"name": "rft", "steps": 40, "learning_rate": 2e-5}]}  # fmt: skip
    state["history"] += [
        {
            "round": 1,
            "promoted": False,
            "failed": True,
            "reasons": ["training did not finish"],
            "decided_at": "t",
        },
        {"round": 2, "promoted": True, "reasons": ["ok"], "decided_at": "t", "choices": choices, "main": 0.5},
    ]
    assert any(line.startswith("round 1: failed at t") for line in status_lines(tmp_path, state))
    report = write_report(tmp_path, state).read_text(encoding="utf-8")
    assert "| failed | training did not finish |" in report and "| full fine-tuning, rft 40×2e-05 |" in report
