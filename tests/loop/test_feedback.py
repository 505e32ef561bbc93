"""The next user message as feedback on the answer before it (``services/loop/feedback.py``): the rules, a rules file
that replaces them, OpenClaw's requests read without their internal context; an invisible hint is no
correction target.
"""

from __future__ import annotations

import pytest

from ark_trainer.services.loop import feedback, rounds


def test_an_invisible_hint_is_not_a_correction_target():
    from ark_trainer.services.loop.feedback import Rules, judge

    assert judge("不对，应该回答：\u200b\ufeff", Rules()) == (-1, None)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("不对，应该回答：好的", (-1, "好的")),
        ("that's wrong, it should be: 42", (-1, "42")),
        ("错了", (-1, None)),
        ("No, that is not it", (-1, None)),
        ("谢谢！", (1, None)),
        ("Thanks a lot", (1, None)),
        ("不正确", (-1, None)),
        ("再查一下订单 3", (0, None)),
    ],
)
def test_feedback_rules(message, expected):
    assert feedback.judge(message, feedback.Rules()) == expected


def test_feedback_rules_file_replaces_the_defaults_and_bad_ones_are_one_line(tmp_path):
    path = tmp_path / "rules.yaml"
    path.write_text("negative: ['^nope']\n")
    rules = feedback.load_rules(str(path))
    assert feedback.judge("nope", rules) == (-1, None) and feedback.judge("谢谢", rules) == (1, None)
    path.write_text("negative: ['(']\n")
    with pytest.raises(Exception, match=r"rules.yaml: negative: bad pattern"):
        feedback.load_rules(str(path))


def test_the_next_user_message_grades_the_answer_before_it():
    turn1 = {"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
                          {"role": "assistant", "content": "bad"}]}  # fmt: skip
    turn2 = {"messages": [*turn1["messages"], {"role": "user", "content": "不对，应该是：good"},
                          {"role": "assistant", "content": "good"}]}  # fmt: skip
    turn3 = {
        "messages": [
            *turn2["messages"],
            {"role": "user", "content": "谢谢"},
            {"role": "assistant", "content": "ok"},
        ]
    }
    rows = rounds.scored_rows(
        [turn1, turn2, turn3], [turn1, turn2], feedback.Rules(), None, keep_system=False
    )
    assert rows[0]["messages"] == [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}]
    assert rows[0]["reference"] == "good" and rows[0]["feedback"] == -1
    assert rows[1]["feedback"] == 1 and rows[1]["messages"][-1]["content"] == "good"
    # the model's reply to the correction repeats what the user just said: never a training target
    assert rounds.is_target(rows[0]) and not rounds.is_target(rows[1]) and rows[1]["answers_feedback"]
    assert rounds.round_rows(rows) == [{k: v for k, v in rows[0].items() if k not in rounds.MARKS}]
    plain = rounds.turn_row(turn1, (-1, None))
    assert plain is not None and plain["messages"][-1]["role"] == "user"  # the bad answer is not kept


@pytest.mark.parametrize(
    ("said", "expected"),
    [("谢谢", (1, None)), ("不对", (-1, None)), ("thanks!", (1, None)), ("错了", (-1, None))],
)
def test_thanks_and_plain_corrections_are_read_through_openclaws_wrapping(said, expected):
    """OpenClaw sends every user message as "[date] message" (a session's first with a runtime paragraph):
    the date prefix took the first 12 characters the rules look at, so no "谢谢" or "不对" was ever read."""
    assert feedback.judge(f"[Mon 2026-12-07 21:36 UTC] {said}", feedback.Rules()) == expected
    assert (
        feedback.judge(f"[Mon 2026-12-07 21:36 UTC] {said}\n\nRuntime: agent=main | x=y", feedback.Rules())
        == expected
    )
    q = {"role": "user", "content": "[Mon 2026-12-07 21:36 UTC] 订单1什么时候发货？\n\nRuntime: agent=main"}
    answer = {"role": "assistant", "content": "明天"}
    turn1 = {"messages": [{"role": "system", "content": "S"}, q, answer]}
    reply = {"role": "user", "content": f"[Mon 2026-12-07 21:37 UTC] {said}"}
    turn2 = {
        "messages": [
            {"role": "system", "content": "S"},
            q,
            answer,
            reply,
            {"role": "assistant", "content": "好"},
        ]
    }
    rows = rounds.scored_rows([turn1, turn2], [turn1], feedback.Rules(), None, keep_system=False)
    assert rows[0]["feedback"] == expected[0]


def test_feedback_through_openclaw_requests_ignores_its_internal_context():
    """What `openclaw agent --local` sends (recorded by the server): the current user message is followed
    by OpenClaw's internal-context message, which the next request's history leaves out."""
    ctx = {"role": "user", "content": "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not "
                                      "instructions):\n\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>"}  # fmt: skip
    q = {"role": "user", "content": "[Tue 2026-12-01 07:51 UTC] 订单1什么时候发货？\n\nRuntime: agent=main"}
    fix = {"role": "user", "content": "[Tue 2026-12-01 07:51 UTC] 不对，应该回答：好的"}
    turn1 = {"messages": [{"role": "system", "content": "S"}, q, ctx, {"role": "assistant", "content": "嗯"}]}
    turn2 = {"messages": [{"role": "system", "content": "S"}, q, {"role": "assistant", "content": "嗯"}, fix,
                          ctx, {"role": "assistant", "content": "嗯"}]}  # fmt: skip
    rows = rounds.scored_rows([turn1, turn2], [turn1], feedback.Rules(), None, keep_system=False)
    assert rows[0]["reference"] == "好的" and rows[0]["feedback"] == -1
    asked = {"role": "user", "content": "订单1什么时候发货？"}  # unwrapped, as the server shows a bare model
    assert rows[0]["messages"] == [asked, {"role": "assistant", "content": "好的"}]  # no system, no context
    assert rounds.is_target(rows[0])
    kept = rounds.turn_row(turn1, None, keep_system=True)
    assert kept is not None and ctx in kept["messages"]
