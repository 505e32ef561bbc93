"""Tests for ark_trainer.rewards: registry, QC graders, generic graders, composite spec, reward model."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.errors import UserError
from ark_trainer.rewards import contract, registry
from ark_trainer.rewards.composite import (
    Component,
    CompositeReward,
    default_preset,
    load_spec,
    preset_path,
)
from ark_trainer.rewards.generic import reference_match
from ark_trainer.rewards.qc import (
    VIOLATION_TYPES,
    compliance_breaches,
    format_answer,
    normalize_label,
    parse_answer,
    qc_compliance,
    qc_format,
    qc_satisfaction,
    qc_verdict,
)
from ark_trainer.rewards.registry import (
    available_rewards,
    completion_text,
    get_reward,
    prompt_text,
    register_reward,
    register_reward_factory,
)
from tests.conftest import save_tiny_qwen

GOOD_REPLY = "非常抱歉给您带来不便，我们会尽快为您处理。"


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made in a test vanish after it."""
    registry._load_builtins()
    monkeypatch.setattr(contract, "REWARDS", dict(contract.REWARDS))
    monkeypatch.setattr(contract, "FACTORIES", dict(contract.FACTORIES))


def one(fn, completion, **columns):
    """Score a single completion; columns are given per sample and wrapped into one-element lists."""
    scores = fn(prompts=["p"], completions=[completion], **{k: [v] for k, v in columns.items()})
    assert len(scores) == 1
    return scores[0]


# --- registry ---


def test_builtins_registered():
    names = available_rewards()
    for name in (
        "qc_verdict",
        "qc_compliance",
        "qc_satisfaction",
        "qc_format",
        "reference_match",
        "keywords",
        "length",
    ):
        assert name in names


def test_registry_refuses_duplicates(scratch_registry):
    @register_reward("test_dup")
    def first(prompts, completions, **_):
        return [1.0] * len(completions)

    with pytest.raises(ValueError, match="test_dup"):

        @register_reward("test_dup")
        def second(prompts, completions, **_):
            return [0.0] * len(completions)

    with pytest.raises(ValueError, match="test_dup"):
        register_reward_factory("test_dup")(lambda: first)
    with pytest.raises(ValueError, match="qc_verdict"):
        register_reward("qc_verdict")(first)
    assert get_reward("test_dup") is first


def test_register_sets_name(scratch_registry):
    @register_reward("test_named")
    def some_function(prompts, completions, **_):
        return [None] * len(completions)

    assert some_function.__name__ == "test_named"


def test_unknown_name_lists_choices():
    with pytest.raises(UserError) as exc:
        get_reward("qc_verdictt", where="spec.yaml:3")
    message = exc.value.messages[0]
    assert message.startswith("spec.yaml:3: ") and "qc_verdictt" in message
    assert "qc_verdict" in message and "reference_match" in message and "module:function" in message


def test_plain_reward_refuses_params():
    with pytest.raises(UserError, match="no params"):
        get_reward("qc_verdict", {"x": 1})


def test_factories_keep_name_and_use_params():
    fn = get_reward("keywords", {"required": ["抱歉", "处理"], "forbidden": ["滚"]})
    assert fn.__name__ == "keywords"
    assert fn(["p"] * 3, ["抱歉，马上处理", "抱歉", "滚，抱歉处理"]) == [1.0, 0.5, 0.0]
    fn = get_reward("length", {"min_chars": 2, "max_chars": 4})
    assert fn.__name__ == "length"
    assert fn(["p"] * 4, ["a", "abc", "abcd", "abcdefgh"]) == [0.5, 1.0, 1.0, 0.0]


def test_factory_bad_params():
    with pytest.raises(UserError, match="bad params"):
        get_reward("keywords", {"requird": ["x"]}, "spec.yaml:2")


def test_keywords_without_required_is_one():
    assert get_reward("keywords", {})(["p"], ["anything"]) == [1.0]


def test_module_function_import(tmp_path, monkeypatch):
    (tmp_path / "my_rewards_mod.py").write_text(
        "def politeness(prompts, completions, **kw):\n"
        "    return [1.0 if '请' in c else 0.0 for c in completions]\n"
        "NOT_CALLABLE = 3\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = get_reward("my_rewards_mod:politeness")
    assert fn(["p", "p"], ["请稍等", "等着"]) == [1.0, 0.0]
    with pytest.raises(UserError, match="cannot import"):
        get_reward("my_rewards_mod:missing")
    with pytest.raises(UserError, match="cannot import"):
        get_reward("no_such_module_xyz:fn")
    with pytest.raises(UserError, match="not callable"):
        get_reward("my_rewards_mod:NOT_CALLABLE")
    with pytest.raises(UserError, match="no params"):
        get_reward("my_rewards_mod:politeness", {"x": 1})


def test_completion_and_prompt_text():
    assert completion_text("abc") == "abc"
    assert (
        completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}])
        == "ab"
    )
    assert completion_text({"content": "x"}) == "x"
    assert (
        prompt_text(
            [
                {"role": "user", "content": "1"},
                {"role": "assistant", "content": "2"},
                {"role": "user", "content": "3"},
            ]
        )
        == "3"
    )
    assert prompt_text("q") == "q"
    assert prompt_text([{"role": "system", "content": "s"}]) == ""


# --- QC parsing and labels ---


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
    ("raw", "expected"),
    [
        ("辱骂", "辱骂"),
        (" 泄露隐私 ", "泄露隐私"),
        ("无", "无"),
        ("abuse", "辱骂"),
        ("Abuse", "辱骂"),
        ("PII", "泄露隐私"),
        ("privacy_leak", "泄露隐私"),
        ("privacy", "泄露隐私"),
        ("promise", "违规承诺"),
        ("unauthorized_promise", "违规承诺"),
        ("no_apology", "未致歉"),
        ("missing_apology", "未致歉"),
        ("deflection", "推诿"),
        ("clean", "无"),
        ("none", "无"),
        ("合规", "无"),
        ({"type": "辱骂"}, "辱骂"),
        ({"violation": "deflect"}, "推诿"),
        ("the customer was happy", None),
        (None, None),
        (3, None),
    ],
)
def test_normalize_label(raw, expected):
    assert normalize_label(raw) == expected


# --- qc_verdict ---


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


def test_qc_verdict_without_label_column():
    assert qc_verdict(["p", "p"], ["a", "b"]) == [None, None]


def test_qc_verdict_chat_completion():
    completion = [{"role": "assistant", "content": format_answer("违规承诺", GOOD_REPLY)}]
    assert one(qc_verdict, completion, label="违规承诺") == 1.0


# --- qc_compliance ---


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


# --- qc_satisfaction ---


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


# --- qc_format ---


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


# --- English answers (format_answer(..., lang="en")) ---

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


# --- reference_match ---


@pytest.mark.parametrize(
    ("completion", "reference", "score"),
    [
        ("Paris", "Paris", 1.0),
        ("  paris \n", "PARIS", 1.0),
        ("The capital is Paris.", "paris", 0.5),
        ("London", "Paris", 0.0),
        ("anything", None, None),
        ("anything", "  ", None),
        ([{"role": "assistant", "content": "Paris"}], "Paris", 1.0),
    ],
)
def test_reference_match(completion, reference, score):
    assert one(reference_match, completion, reference=reference) == score


def test_reference_match_falls_back_to_free_text_label():
    assert one(reference_match, "42", label="42") == 1.0
    assert one(reference_match, "辱骂", label="辱骂") is None  # a QC label is not a reference answer
    assert reference_match(["p"], ["x"]) == [None]


# --- CompositeReward ---


class Counting:
    """A reward that counts its calls and returns fixed scores."""

    def __init__(self, scores):
        self.scores, self.calls = scores, 0

    def __call__(self, prompts, completions, **_):
        self.calls += 1
        return list(self.scores[: len(completions)])


def test_weighted_mean_skips_none():
    a, b = Counting([1.0, None, 0.0, None]), Counting([0.0, 0.5, 1.0, None])
    comp = CompositeReward([Component("a", a, 3.0), Component("b", b, 1.0)])
    totals = comp(["p"] * 4, ["w", "x", "y", "z"])
    assert totals[0] == pytest.approx(0.75)
    assert totals[1] == pytest.approx(0.5)
    assert totals[2] == pytest.approx(0.25)
    assert totals[3] is None


def test_composite_caches_per_batch():
    a, b = Counting([1.0, 0.0]), Counting([0.5, 0.5])
    comp = CompositeReward([Component("a", a, 1.0), Component("b", b, 1.0)])
    funcs, weights = comp.trl_reward_funcs()
    assert weights == [1.0, 0.0, 0.0]
    assert [f.__name__ for f in funcs] == ["total", "a", "b"]
    prompts, completions = ["p", "q"], ["x", "y"]
    results = [f(prompts=prompts, completions=completions) for f in funcs]
    assert results == [[0.75, 0.25], [1.0, 0.0], [0.5, 0.5]]
    assert (a.calls, b.calls) == (1, 1)
    comp(prompts, ["x", "z"])  # a new batch is scored again
    assert (a.calls, b.calls) == (2, 2)
    table = comp.score(prompts, ["x", "z"])
    assert set(table) == {"a", "b", "total"} and a.calls == 2


def test_composite_passes_columns():
    comp = CompositeReward([Component("qc_verdict", qc_verdict, 1.0)])
    assert comp(["p"], [format_answer("辱骂", GOOD_REPLY)], label=["辱骂"]) == [1.0]


def test_composite_wrong_length_is_an_error():
    comp = CompositeReward([Component("short", Counting([1.0]), 1.0)])
    with pytest.raises(RuntimeError, match="short"):
        comp(["p", "p"], ["a", "b"])


def test_composite_needs_a_positive_weight():
    with pytest.raises(UserError):
        CompositeReward([Component("a", Counting([1.0]), 0.0)])
    with pytest.raises(UserError):
        CompositeReward([])


def test_composite_from_qc_preset():
    comp = CompositeReward.from_spec(None)
    assert comp.names == ["qc_verdict", "qc_compliance", "qc_satisfaction", "qc_format"]
    good = format_answer("辱骂", GOOD_REPLY)
    bad = format_answer("无", "滚")
    totals = comp(["p", "p"], [good, bad], label=["辱骂", "辱骂"])
    assert totals[0] == pytest.approx(1.0)
    assert totals[1] < 0.5


def test_composite_with_extra_component():
    extra = Component("reward_model", Counting([0.0]), 1.0)
    comp = CompositeReward.from_spec(preset_path("reference"), [extra])
    assert comp.names == ["reference_match", "reward_model"]
    assert comp(["p"], ["Paris"], reference=["Paris"]) == [0.5]


# --- reward spec YAML ---


def spec_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rewards.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_spec_loads_with_params(tmp_path):
    path = spec_file(
        tmp_path,
        "rewards:\n  - name: qc_verdict\n    weight: 1\n  - name: keywords\n    weight: 0.2\n"
        "    params: {required: ['抱歉']}\n",
    )
    specs = load_spec(path)
    assert [s.name for s in specs] == ["qc_verdict", "keywords"]
    assert specs[1].params == {"params": {"required": ["抱歉"]}} and specs[1].weight == 0.2
    assert specs[1].where == f"{path}:4" and specs[1].kind == "rule"
    comp = CompositeReward.from_spec(path)
    assert comp.names == ["qc_verdict", "keywords"]


def test_spec_bare_list(tmp_path):
    assert [s.name for s in load_spec(spec_file(tmp_path, "- name: qc_format\n"))] == ["qc_format"]


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("rewards:\n  - name: qc_verdict\n  - name: qc_format\n    wieght: 1\n", 4, "wieght"),
        ("rewards:\n  - name: qc_verdict\n    weight: -1\n", 3, "weight"),
        ("rewards:\n  - name: qc_verdict\n    weight: heavy\n", 3, "weight"),
        ("rewards:\n  - name: qc_verdict\n  - weight: 1\n", 3, "name"),
        ("rewards:\n  - name: keywords\n    params: [1, 2]\n", 3, "params"),
    ],
)
def test_spec_errors_name_file_line_and_field(tmp_path, text, line, field):
    path = spec_file(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:{line}: {field}: ")


def test_spec_bad_yaml_names_line(tmp_path):
    path = spec_file(tmp_path, "rewards:\n  - name: qc_verdict\n    weight: [1\n")
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:") and "YAML" in exc.value.messages[0]


@pytest.mark.parametrize("text", ["", "rewards: []\n", "rewards: qc_verdict\n", "other: 1\n"])
def test_spec_empty_or_wrong_shape(tmp_path, text):
    path = spec_file(tmp_path, text)
    with pytest.raises(UserError) as exc:
        load_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:1: graders: ")


def test_spec_all_problems_at_once(tmp_path):
    path = spec_file(
        tmp_path, "rewards:\n  - name: a\n    weight: -1\n  - nme: b\n  - name: c\n    extra: 1\n"
    )
    with pytest.raises(UserError) as exc:
        load_spec(path)
    where = [m.split(": ")[0] for m in exc.value.messages]
    assert where[:2] == [f"{path}:3", f"{path}:4"] and f"{path}:6" in where  # 5: no reward named c


def test_spec_unknown_reward_names_line(tmp_path):
    path = spec_file(tmp_path, "rewards:\n  - name: qc_verdict\n  - name: nope_reward\n")
    with pytest.raises(UserError) as exc:
        CompositeReward.from_spec(path)
    assert exc.value.messages[0].startswith(f"{path}:3: name: ") and "qc_verdict" in exc.value.messages[0]


def test_spec_missing_file(tmp_path):
    with pytest.raises(UserError, match="--reward_config"):
        load_spec(tmp_path / "nope.yaml")


@pytest.mark.parametrize("name", ["qc", "reference"])
def test_shipped_reward_presets_parse(name):
    comp = CompositeReward.from_spec(preset_path(name))
    assert comp.names and all(callable(c.fn) for c in comp.components)


@pytest.mark.parametrize(
    ("rows", "preset"),
    [
        ([{"label": "辱骂"}, {"label": "无"}], "qc"),
        ([{"label": "abuse"}], "qc"),
        ([{"label": "Paris"}], "reference"),
        ([{"reference": "Paris"}], "reference"),
        ([{"prompt": "x"}], "qc"),
        ([], "qc"),
        ([{"label": None}, {"reference": None}], "qc"),
    ],
)
def test_default_preset(rows, preset):
    assert default_preset(rows) == preset


# --- reward model ---


def make_reward_model(path: Path, num_labels: int = 1) -> Path:
    """A tiny random Qwen2 sequence classifier and tokenizer, saved as safetensors."""
    return save_tiny_qwen(path, "Qwen2ForSequenceClassification", texts=[GOOD_REPLY], num_labels=num_labels)


@pytest.mark.parametrize("num_labels", [1, 2])
def test_reward_model_scores_in_unit_interval(tmp_path, num_labels):
    from ark_trainer.rewards.reward_model import RewardModelScorer

    path = make_reward_model(tmp_path / "rm", num_labels)
    scorer = RewardModelScorer(str(path), batch_size=2)
    prompts = ["问题一", [{"role": "user", "content": "问题二"}], "q3"]
    completions = ["抱歉", [{"role": "assistant", "content": GOOD_REPLY}], "hello world " * 5]
    scores = scorer(prompts, completions)
    assert len(scores) == 3
    assert all(isinstance(s, float) and 0.0 < s < 1.0 for s in scores)
    assert scorer(prompts, completions) == pytest.approx(scores)  # deterministic (eval mode)
    comp = CompositeReward([Component("reward_model", scorer, 1.0)])
    assert comp.trl_reward_funcs()[0][1].__name__ == "reward_model"


def test_check_model_dir_refuses_pickle_only(tmp_path):
    from ark_trainer.models.loading import check_model_dir

    folder = tmp_path / "rm"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / "pytorch_model.bin").write_bytes(b"not really a pickle")
    with pytest.raises(UserError) as exc:
        check_model_dir(str(folder), "--rm_model_path")
    message = exc.value.messages[0]
    assert message.startswith("--rm_model_path: ") and "safetensors" in message


def test_check_model_dir_missing_and_no_config(tmp_path):
    from ark_trainer.models.loading import check_model_dir

    with pytest.raises(UserError, match="no such folder"):
        check_model_dir(str(tmp_path / "nope"), "--rm_model_path")
    with pytest.raises(UserError, match="config.json"):
        check_model_dir(str(tmp_path), "--rm_model_path")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(UserError, match="model_type: missing"):  # the files are read, not only found
        check_model_dir(str(tmp_path), "--rm_model_path")


def test_qc_verdict_with_verdict_only_label_and_trailing_punctuation():
    good, bad = "结论：违规。\n类型：辱骂。\n回复：抱歉", "结论：合规\n类型：无\n回复：抱歉"
    assert qc_verdict(None, [good, bad], label=["违规", "violation"]) == [1.0, 0.0]
    assert qc_verdict(None, [good], label=["辱骂"]) == [1.0]


def test_a_causal_lm_is_refused_as_reward_model(tmp_path):
    from ark_trainer.rewards.reward_model import check_reward_model_dir

    save_tiny_qwen(tmp_path)  # a real causal LM folder
    with pytest.raises(UserError, match="not a sequence-classification reward model"):
        check_reward_model_dir(str(tmp_path))
