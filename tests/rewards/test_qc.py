"""The customer-service quality-inspection graders (``rewards/qc.py``): the answer format parsed both ways,
``qc_verdict``, ``qc_compliance``, ``qc_satisfaction`` and ``qc_format``, in Chinese and in English.
"""

from __future__ import annotations

import pytest

from ark_trainer.rewards.qc import (
    VIOLATION_TYPES,
    compliance_breaches,
    format_answer,
    parse_answer,
    qc_compliance,
    qc_format,
    qc_satisfaction,
    qc_type,
    qc_verdict,
)
from tests.rewards.grading import GOOD_REPLY, one


def test_format_and_parse_round_trip():
    for kind in VIOLATION_TYPES:
        answer = parse_answer(format_answer(kind, GOOD_REPLY))
        assert answer.type == kind and answer.reply == GOOD_REPLY and answer.well_formed
        assert answer.verdict == ("合规" if kind == "无" else "违规")


def test_parse_answer_ascii_colon_and_missing_fields():
    answer = parse_answer("结论: 违规\n类型: 辱骂")
    assert (answer.verdict, answer.type, answer.reply) == ("违规", "辱骂", None)
    assert not answer.well_formed
    assert parse_answer("随便说点什么") == parse_answer("")


@pytest.mark.parametrize(
    ("completion", "label", "score"),
    [
        (format_answer("辱骂", GOOD_REPLY), "辱骂", 1.0),
        (format_answer("泄露隐私", GOOD_REPLY), "泄露隐私", 1.0),
        (format_answer("无", GOOD_REPLY), "无", 1.0),
        (format_answer("推诿", GOOD_REPLY), "辱骂", 0.5),  # right verdict, wrong type
        (format_answer("未致歉", GOOD_REPLY), "违规承诺", 0.5),
        (format_answer("无", GOOD_REPLY), "辱骂", 0.0),  # wrong verdict
        (format_answer("辱骂", GOOD_REPLY), "无", 0.0),
        (format_answer("辱骂", GOOD_REPLY), "abuse", 1.0),  # English label alias
        (format_answer("无", GOOD_REPLY), "clean", 1.0),
        (format_answer("推诿", GOOD_REPLY), "deflection", 1.0),
        (format_answer("推诿", GOOD_REPLY), "pii", 0.5),
        ("结论：违规\n类型：辱骂", "辱骂", 1.0),  # no reply line still grades the verdict
        ("类型：辱骂", "辱骂", 0.0),  # type without a verdict
        ("我不知道", "辱骂", 0.0),
        ("", "无", 0.0),
        (format_answer("辱骂", GOOD_REPLY), None, None),  # no label: not applicable
        (format_answer("辱骂", GOOD_REPLY), "free text answer", None),
    ],
)
def test_qc_verdict(completion, label, score):
    assert one(qc_verdict, completion, label=label) == score


@pytest.mark.parametrize(
    ("completion", "label", "score"),
    [
        (format_answer("辱骂", GOOD_REPLY), "辱骂", 1.0),
        (format_answer("无", GOOD_REPLY), "clean", 1.0),
        (format_answer("推诿", GOOD_REPLY), "辱骂", 0.0),  # right verdict, wrong type: no half credit
        (format_answer("无", GOOD_REPLY), "辱骂", 0.0),
        ("我不知道", "无", 0.0),
        (format_answer("辱骂", GOOD_REPLY), None, None),  # no label: not applicable
    ],
)
def test_qc_type_counts_only_the_exact_type(completion, label, score):
    assert one(qc_type, completion, label=label) == score


def test_qc_type_reads_the_decision_lines_as_qc_verdict_does():
    from ark_trainer.stages.grpo.auto import decision_reader

    answer = format_answer("推诿", GOOD_REPLY)
    assert decision_reader(qc_type)(answer) == decision_reader(qc_verdict)(answer) == "结论：违规\n类型：推诿"


def test_qc_verdict_without_label_column():
    assert qc_verdict(["p", "p"], ["a", "b"]) == [None, None]


def test_qc_verdict_chat_completion():
    completion = [{"role": "assistant", "content": format_answer("违规承诺", GOOD_REPLY)}]
    assert one(qc_verdict, completion, label="违规承诺") == 1.0


@pytest.mark.parametrize(
    ("reply", "breach"),
    [
        ("抱歉，你真是个白痴，我们会处理。", "abuse"),
        ("抱歉，滚吧。", "abuse"),
        ("抱歉，您可以联系张先生13812345678处理。", "personal_data"),
        ("抱歉，他的身份证号是11010519491231002X。", "personal_data"),
        ("抱歉，他的身份证号是110105194912310021。", "personal_data"),
        ("抱歉，请发邮件到 someone@example.com 处理。", "personal_data"),
        ("抱歉，我保证给您全额退款。", "unauthorised_promise"),
        ("抱歉，我们双倍赔偿。", "unauthorised_promise"),
        ("抱歉，这个不归我管。", "deflection"),
        ("抱歉，您自己去找快递公司吧。", "deflection"),
        ("我们会尽快为您处理。", "missing_apology"),
    ],
)
def test_each_compliance_breach(reply, breach):
    assert compliance_breaches(reply) == [breach]
    assert one(qc_compliance, format_answer("无", reply)) == pytest.approx(0.8)


def test_compliant_reply_scores_one():
    assert compliance_breaches(GOOD_REPLY) == []
    assert one(qc_compliance, format_answer("辱骂", GOOD_REPLY)) == 1.0
    for apology in ("对不起", "不好意思", "向您致歉", "深表歉意"):
        assert compliance_breaches(f"{apology}，马上处理。") == []


def test_many_breaches_add_up():
    reply = "滚，13812345678，我保证，不归我管"
    assert set(compliance_breaches(reply)) == {
        "abuse",
        "personal_data",
        "unauthorised_promise",
        "deflection",
        "missing_apology",
    }
    assert one(qc_compliance, format_answer("无", reply)) == pytest.approx(0.0)


def test_compliance_reads_only_the_reply_line():
    # The verdict lines do not apologise; only the 回复 line is checked.
    assert one(qc_compliance, format_answer("辱骂", GOOD_REPLY)) == 1.0
    # Without a 回复 line the whole text is the reply.
    assert one(qc_compliance, "抱歉，马上处理") == 1.0
    assert one(qc_compliance, "马上处理") == pytest.approx(0.8)


def test_compliance_chat_completion():
    completion = [{"role": "assistant", "content": format_answer("无", "滚")}]
    assert one(qc_compliance, completion) == pytest.approx(0.6)


def test_compliance_ignores_short_numbers():
    assert compliance_breaches("抱歉，订单12345已为您处理。") == []


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        (GOOD_REPLY, 1.0),  # apology + service + concise
        ("非常抱歉给您带来不便。", 0.6),  # no concrete help
        ("我们会尽快为您处理这个问题。", 0.6),  # no apology
        ("好的好的好的。", 0.2),  # only concise
        ("嗯", 0.0),  # too short
        ("抱歉" + "我们会尽快处理" * 10, 0.8),  # too long
        ("抱歉，蠢货，马上处理。", 0.8),  # abuse loses the politeness point
    ],
)
def test_qc_satisfaction(reply, score):
    assert one(qc_satisfaction, format_answer("无", reply)) == pytest.approx(score)


def test_qc_satisfaction_chat_completion():
    completion = [{"role": "assistant", "content": format_answer("无", GOOD_REPLY)}]
    assert one(qc_satisfaction, completion) == 1.0


@pytest.mark.parametrize(
    ("completion", "score"),
    [
        (format_answer("辱骂", GOOD_REPLY), 1.0),
        (format_answer("无", GOOD_REPLY), 1.0),
        ("结论：合规\n类型：辱骂\n回复：抱歉", 0.75),  # verdict and type disagree
        ("结论：违规\n类型：无\n回复：抱歉", 0.75),
        ("结论：违规\n类型：骂人\n回复：抱歉", 0.5),  # type outside the list
        ("结论：违规\n类型：辱骂", 0.5),
        ("结论：违规", 0.25),
        ("回复：抱歉", 0.25),
        ("完全不相关的回答", 0.0),
        ("", 0.0),
    ],
)
def test_qc_format(completion, score):
    assert one(qc_format, completion) == score


def test_qc_format_chat_completion():
    assert one(qc_format, [{"role": "assistant", "content": format_answer("推诿", GOOD_REPLY)}]) == 1.0


def test_qc_graders_return_one_score_per_completion():
    completions = [format_answer(t, GOOD_REPLY) for t in VIOLATION_TYPES]
    for fn in (qc_compliance, qc_satisfaction, qc_format):
        assert len(fn(["p"] * len(completions), completions)) == len(completions)
    scores = qc_verdict(["p"] * len(completions), completions, label=list(VIOLATION_TYPES))
    assert scores == [1.0] * len(completions)


GOOD_REPLY_EN = "We are very sorry for the inconvenience, we will process your refund as soon as possible."


def test_english_format_and_parse_round_trip():
    names = {"辱骂": "abuse", "泄露隐私": "privacy_leak", "违规承诺": "unauthorised_promise"}
    names.update({"未致歉": "no_apology", "推诿": "deflection", "无": "none"})
    for kind in VIOLATION_TYPES:
        text = format_answer(kind, GOOD_REPLY_EN, lang="en")
        verdict = "compliant" if kind == "无" else "violation"
        assert text == f"Verdict: {verdict}\nType: {names[kind]}\nReply: {GOOD_REPLY_EN}"
        answer = parse_answer(text)
        assert (answer.type, answer.reply, answer.well_formed) == (kind, GOOD_REPLY_EN, True)
        assert answer.verdict == ("合规" if kind == "无" else "违规")
        assert format_answer(names[kind], GOOD_REPLY_EN, lang="en") == text  # English type names too
    with pytest.raises(ValueError, match="lang 'fr'"):
        format_answer("无", GOOD_REPLY_EN, lang="fr")


def test_english_keys_and_values_are_case_insensitive():
    answer = parse_answer("VERDICT: Violation.\ntype : Privacy_Leak\nreply：Sorry, we will check.")
    assert (answer.verdict, answer.type, answer.reply) == ("违规", "泄露隐私", "Sorry, we will check.")
    assert parse_answer("Verdict: violation\nType: rude\nReply: sorry").type == "rude"  # not a type
    assert not parse_answer("Verdict: violation\nType: rude\nReply: sorry").well_formed
    # Chinese keys win where both are present
    assert parse_answer("结论：合规\nVerdict: violation").verdict == "合规"


@pytest.mark.parametrize(
    ("completion", "label", "score"),
    [
        (format_answer("辱骂", GOOD_REPLY_EN, lang="en"), "辱骂", 1.0),
        (format_answer("辱骂", GOOD_REPLY_EN, lang="en"), "abuse", 1.0),
        (format_answer("泄露隐私", GOOD_REPLY_EN, lang="en"), "privacy_leak", 1.0),
        (format_answer("无", GOOD_REPLY_EN, lang="en"), "无", 1.0),
        (format_answer("推诿", GOOD_REPLY_EN, lang="en"), "辱骂", 0.5),
        (format_answer("无", GOOD_REPLY_EN, lang="en"), "辱骂", 0.0),
        ("Verdict: violation", "violation", 1.0),  # a verdict-only label
        ("Verdict: compliant\nType: none", "无", 1.0),
    ],
)
def test_qc_verdict_english(completion, label, score):
    assert one(qc_verdict, completion, label=label) == score


@pytest.mark.parametrize(
    ("reply", "breach"),
    [
        ("Sorry, you idiot, we will check.", "abuse"),
        ("Sorry, just SHUT UP and wait.", "abuse"),
        ("Sorry, call Mr Smith on 13812345678.", "personal_data"),
        ("Sorry, his ID number is 11010519491231002X.", "personal_data"),
        ("Sorry, we guarantee a full refund.", "unauthorised_promise"),
        ("Sorry, a full refund for sure.", "unauthorised_promise"),
        ("Sorry, it is 100% solved.", "unauthorised_promise"),
        ("Sorry, you will get double compensation.", "unauthorised_promise"),
        ("Sorry, that's not my problem.", "deflection"),
        ("Sorry, ask someone else.", "deflection"),
        ("Sorry, go find the courier.", "deflection"),
        ("We will check it right away.", "missing_apology"),
    ],
)
def test_each_english_compliance_breach(reply, breach):
    assert compliance_breaches(reply) == [breach]
    assert one(qc_compliance, format_answer("无", reply, lang="en")) == pytest.approx(0.8)


def test_english_compliant_replies():
    assert compliance_breaches(GOOD_REPLY_EN) == []
    for apology in ("Sorry", "We apologise", "Our apologies", "Apologies", "We regret the delay"):
        assert compliance_breaches(f"{apology}, we will handle it.") == []
    assert compliance_breaches("Sorry, your parcel got lost, we will find it.") == []  # lost, not "get lost"
    assert one(qc_compliance, format_answer("无", "Shut up, 13812345678, I promise, not my job")) == 0.0


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        (GOOD_REPLY_EN, 1.0),  # apology + service + concise: as the Chinese GOOD_REPLY
        ("We are very sorry for the inconvenience.", 0.6),  # no concrete help
        ("We will process your refund as soon as possible.", 0.6),  # no apology
        ("Okay okay okay okay.", 0.2),  # only concise
        ("Hm", 0.0),  # too short
        ("Sorry " + "we will check it " * 13, 0.8),  # too long
        ("Sorry you moron, we will check right away.", 0.8),  # abuse loses the politeness point
    ],
)
def test_qc_satisfaction_english(reply, score):
    assert one(qc_satisfaction, format_answer("无", reply, lang="en")) == pytest.approx(score)


@pytest.mark.parametrize(
    ("completion", "score"),
    [
        (format_answer("辱骂", GOOD_REPLY_EN, lang="en"), 1.0),
        ("Verdict: compliant\nType: abuse\nReply: sorry", 0.75),  # verdict and type disagree
        ("Verdict: violation\nType: rude\nReply: sorry", 0.5),  # type outside the list
        ("Verdict: violation\nType: abuse", 0.5),
        ("Verdict: guilty", 0.0),
        ("Reply: sorry", 0.25),
    ],
)
def test_qc_format_english(completion, score):
    assert one(qc_format, completion) == score


def test_qc_verdict_with_verdict_only_label_and_trailing_punctuation():
    good, bad = "结论：违规。\n类型：辱骂。\n回复：抱歉", "结论：合规\n类型：无\n回复：抱歉"
    assert qc_verdict(None, [good, bad], label=["违规", "violation"]) == [1.0, 0.0]
    assert qc_verdict(None, [good], label=["辱骂"]) == [1.0]
