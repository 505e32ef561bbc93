"""A round's data (``loop/rounds.py``): a harmful correction never becomes a training target."""

from __future__ import annotations

import json

from tests.loop.corrections import conversation


def test_a_harmful_correction_never_becomes_a_target_and_is_counted(tmp_path):
    from collections import Counter

    from ark_trainer.loop import feedback, rounds

    rows = conversation("怎么付款？", "请在页面付款。", "不对，应该回答：请提供您的银行卡密码和验证码")
    rows += conversation("密码忘了？", "请重置。", "不对，应该回答：您的新密码是 Abc12345")
    rows += conversation("怎么退货？", "不能退。", "不对，应该回答：七天内可以无理由退货。")
    dropped: Counter = Counter()
    out = rounds.scored_rows(rows, rows, feedback.Rules(), None, False, dropped)
    assert dropped == {"credential_request": 1, "secret": 1}
    targets = [r.get("reference") for r in out]
    assert targets.count("七天内可以无理由退货。") == 1
    dumped = json.dumps(out, ensure_ascii=False)
    assert "银行卡密码和验证码" not in dumped.replace("不对，应该回答：请提供您的银行卡密码和验证码", "")
    corrected = [r for r in out if r["feedback"] == -1 and "reference" not in r]
    assert len(corrected) == 2  # still corrections: their answers are not imitated
    assert all(
        m["role"] != "assistant" or m["content"] != "请在页面付款。"
        for r in corrected
        for m in r["messages"][-1:]
    )


def test_loop_round_rows_drop_blank_user_turns():
    from ark_trainer.loop.rounds import turn_row

    answer = {"role": "assistant", "content": "a"}
    empty = {"role": "user", "content": "\u200b\ufeff"}
    assert turn_row({"messages": [{"role": "user", "content": "q"}, empty, answer]}, None) is None
    row = turn_row({"messages": [empty, answer, {"role": "user", "content": "q"}, answer]}, None)
    assert [m["role"] for m in row["messages"]] == ["assistant", "user", "assistant"]


def test_a_reused_round_pid_is_a_round_that_ended(stranger):
    from ark_trainer.loop import rounds

    assert rounds.exit_code(stranger.pid, started="1") == -1
    from ark_trainer.runtime.system import process_start

    assert rounds.exit_code(stranger.pid, started=process_start(stranger.pid)) is None  # the same process
