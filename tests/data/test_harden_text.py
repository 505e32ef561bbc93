"""Text that is not text: a lone surrogate, and strings that are blank but do not look it.

A lone surrogate (``"\\ud800"``) is a legal JSON escape that UTF-8 cannot encode: the loader refuses it with
``file:line`` (it once reached the length check as a UnicodeEncodeError traceback), the live recorder
replaces it. A prompt, user turn or answer made only of whitespace or invisible characters (zero-width
space, BOM, joiners, bidi marks, fillers) is refused like plain whitespace is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.data.loader import load_jsonl
from ark_trainer.data.text import first_lone_surrogate, is_blank, replace_lone_surrogates
from ark_trainer.errors import UserError

BLANKS = {
    "zwsp+bom": "\u200b\ufeff",
    "zwsp": "\u200b",
    "joiners": "\u200c\u200d\u2060",
    "bom": "\ufeff",
    "soft hyphen": "\u00ad",
    "bidi marks": "\u200e\u200f\u202a\u202c\u2066\u2069",
    "ideographic space": "\u3000",
    "nbsp": "\u00a0 \u2007\u202f",
    "line separators": "\u2028\u2029\x85",
    "hangul fillers": "\u3164\u115f\u1160\uffa0",
    "braille blank": "\u2800",
    "variation selectors": "\ufe0f\U000e0100",
    "grapheme joiner": "\u034f",
    "tags": "\U000e0020\U000e007f",
    "mongolian vowel separator": "\u180e",
    "controls": " \t\r\n\x0b\x0c\x1c\x1d\x1e",
}
VISIBLE = ["a\u200b", "😀", "表情\ufe0f", "\ue000", "。", "-", "0"]


def write(path: Path, rows: list) -> Path:
    path.write_text(
        "".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def refusals(path: Path) -> list[str]:
    with pytest.raises(UserError) as err:
        load_jsonl(path)
    return err.value.messages


@pytest.mark.parametrize("text", BLANKS.values(), ids=BLANKS.keys())
def test_is_blank(text):
    assert is_blank(text)


@pytest.mark.parametrize("text", VISIBLE)
def test_visible_text_is_not_blank(text):
    assert not is_blank(text)


def blank_rows(b: str) -> list[tuple[dict, str, str]]:
    """(row, field named, words in the message) for each place a blank string is refused."""
    user = {"role": "user", "content": "问题"}
    return [
        ({"question": b}, "question", "empty text"),
        ({"prompt": b}, "prompt", "empty text"),
        ({"messages": [{"role": "user", "content": b}]}, "messages[0].content", "empty user turn"),
        (
            {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": b}]},
            "messages[1].content",
            "empty user turn",
        ),
        (
            {"messages": [user, {"role": "assistant", "content": "a"}, {"role": "user", "content": b}]},
            "messages[2].content",
            "empty user turn",
        ),
        ({"messages": [user, {"role": "assistant", "content": b}]}, "messages[1].content", "empty answer"),
        ({"prompt": [{"role": "user", "content": b}]}, "prompt[0].content", "empty user turn"),
        ({"question": "q", "candidates": ["ok", b]}, "candidates[1]", "non-empty text"),
        ({"question": "q", "answers": [b]}, "answers[0]", "non-empty text"),
        ({"question": "q", "chosen": b, "rejected": "r"}, "chosen", "non-empty text"),
        ({"question": "q", "completion": b}, "completion", "non-empty text"),
    ]


@pytest.mark.parametrize("blank", BLANKS.values(), ids=BLANKS.keys())
def test_blank_text_is_refused_with_file_line_and_field(tmp_path, blank):
    cases = blank_rows(blank)
    path = write(tmp_path / "d.jsonl", [{"question": "fine"}] + [row for row, _, _ in cases])
    got = refusals(path)
    assert len(got) == len(cases), got
    for i, (message, (_, field, words)) in enumerate(zip(got, cases, strict=True), start=2):
        assert message.startswith(f"{path}:{i}: {field}: "), message
        assert words in message and "invisible" in message, message


@pytest.mark.parametrize("text", VISIBLE)
def test_visible_text_with_invisible_characters_still_loads(tmp_path, text):
    path = write(
        tmp_path / "d.jsonl", [{"messages": [{"role": "user", "content": text}]}, {"question": text}]
    )
    assert len(load_jsonl(path)) == 2


SURROGATES = [
    ({"question": "a\ud800b"}, "question"),
    ({"question": "\udfff"}, "question"),
    ({"messages": [{"role": "user", "content": "hi \udc00"}]}, "messages[0].content"),
    ({"question": "q", "candidates": ["ok", "x\ud83d"]}, "candidates[1]"),
    ({"question": "q", "meta": {"note": ["a", "b\ud800"]}}, "meta.note[1]"),
    ({"question": "q", "k\ud800": 1}, "k\\ud800"),
]


def test_lone_surrogates_are_refused_naming_line_and_field(tmp_path):
    # json.dumps writes them as \\udXXX escapes, the form a user's file holds them in
    path = write(tmp_path / "d.jsonl", [{"question": "ok"}] + [row for row, _ in SURROGATES])
    got = refusals(path)
    assert len(got) == len(SURROGATES), got
    for i, (message, (_, field)) in enumerate(zip(got, SURROGATES, strict=True), start=2):
        assert message.startswith(f"{path}:{i}: {field}: holds a lone surrogate (\\u"), message
        message.encode("utf-8")  # the message itself can be printed


def test_a_surrogate_pair_is_one_character_and_loads(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "smile \\ud83d\\ude00"}\n', encoding="utf-8")
    assert load_jsonl(path)[0]["prompt"][0]["content"] == "smile 😀"


def test_length_check_counts_a_surrogate_without_a_traceback():
    from ark_trainer.data.length import prompt_token_counts

    class Tok:
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text)))}

    rows = [{"prompt": [{"role": "user", "content": "bad \ud800 text"}]}]
    assert prompt_token_counts(Tok(), rows, window=4)[0][0] > 4


def test_surrogate_helpers():
    assert first_lone_surrogate({"a": [1, {"b": "x\udabc"}]}) == ("a[1].b", "\\udabc")
    assert first_lone_surrogate({"a": "😀"}) is None
    assert replace_lone_surrogates({"k\ud800": ["x\udfff"]}) == {"k\ufffd": ["x\ufffd"]}


def test_recorded_turn_with_a_surrogate_or_a_blank_question(tmp_path):
    """The live recorder keeps a turn with a bad character (replaced), and skips an invisible question."""
    from ark_trainer.deploy.record import build_row

    row = build_row({"messages": [{"role": "user", "content": "问\ud800"}]}, "答", [], "t", 1)
    assert row["messages"][0]["content"] == "问\ufffd"
    json.dumps(row, ensure_ascii=False).encode("utf-8")
    assert build_row({"messages": [{"role": "user", "content": "\u200b\ufeff"}]}, "答", [], "t", 1) is None
    assert build_row({"messages": [{"role": "user", "content": "q"}]}, "\u200b", [], "t", 1) is None


def test_loop_round_rows_drop_blank_user_turns():
    from ark_trainer.loop.rounds import turn_row

    answer = {"role": "assistant", "content": "a"}
    empty = {"role": "user", "content": "\u200b\ufeff"}
    assert turn_row({"messages": [{"role": "user", "content": "q"}, empty, answer]}, None) is None
    row = turn_row({"messages": [empty, answer, {"role": "user", "content": "q"}, answer]}, None)
    assert [m["role"] for m in row["messages"]] == ["assistant", "user", "assistant"]


def test_an_invisible_hint_is_not_a_correction_target():
    from ark_trainer.loop.feedback import Rules, judge

    assert judge("不对，应该回答：\u200b\ufeff", Rules()) == (-1, None)


@pytest.mark.parametrize("field", ["label", "reference"])
@pytest.mark.parametrize("blank", ["\u200b\ufeff", "  ", "\u3164", ""])
def test_a_blank_label_or_reference_is_refused(tmp_path, field, blank):
    """A label nobody can read would grade every answer against nothing; null says "no label"."""
    path = tmp_path / "rows.jsonl"
    rows = [
        {"question": "客服：您好", field: "无"},
        {"question": "客服：您好", field: blank},
        {"question": "q", field: None},
    ]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(UserError) as info:
        load_jsonl(path)
    assert info.value.messages == [
        f"{path}:2: {field}: empty text (only whitespace or invisible characters); write it, or null for none"
    ]
