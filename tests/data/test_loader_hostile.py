"""The data loader (``data/loader.py``) on hostile data: each problem is one ``file:line`` refusal, never a
traceback or a silent reinterpretation.

A field of the wrong type, nesting too deep, a key given twice, a number JSON does not have; every row read,
and the right line named, whatever breaks a line; a prompt, user turn or answer made only of whitespace or
invisible characters (zero-width space, BOM, joiners, bidi marks, fillers) refused like plain whitespace;
a lone surrogate (a legal JSON escape that UTF-8 cannot encode) refused with ``file:line``. The shapes
users bring and the loader's own validation: ``test_loader.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.data.loader import MAX_DEPTH, load_jsonl
from tests.data.blank_text import BLANKS, VISIBLE
from tests.data.refusals import refusal, train, write_lines
from tests.line_breakers import CONTROLS, IDS, RAW_LEGAL, raw_line, write_raw


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_data_loader_reads_every_row(tmp_path, sep):
    from ark_trainer.data.loader import load_jsonl

    rows = [{"question": f"问题{i}{sep}第二行", "label": "clean"} for i in range(6)]
    write_raw(tmp_path / "d.jsonl", rows)
    loaded = load_jsonl(tmp_path / "d.jsonl")
    assert [r["_line"] for r in loaded] == [1, 2, 3, 4, 5, 6]
    assert loaded[2]["prompt"][0]["content"] == f"问题2{sep}第二行"


@pytest.mark.parametrize("sep", CONTROLS, ids=IDS[3:])
def test_data_loader_names_the_right_line_of_a_raw_control_character(tmp_path, sep):
    from ark_trainer.base.errors import UserError
    from ark_trainer.data.loader import load_jsonl

    lines = [raw_line({"question": f"q{i}"}) for i in range(4)]
    lines[1] = '{"question": "a' + sep + 'b"}\n'  # raw inside the string: not valid JSON
    lines[3] = '{"question": "x", "answers": 3}\n'  # a second problem, two lines on
    (tmp_path / "d.jsonl").write_bytes("".join(lines).encode())
    with pytest.raises(UserError) as err:
        load_jsonl(tmp_path / "d.jsonl")
    problems = err.value.messages
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{tmp_path / 'd.jsonl'}:2: json: not valid JSON")
    assert problems[1].startswith(f"{tmp_path / 'd.jsonl'}:4: answers:")


def test_data_loader_reads_crlf_files(tmp_path):
    from ark_trainer.data.loader import load_jsonl

    (tmp_path / "d.jsonl").write_bytes(b'{"question": "a"}\r\n\r\n{"question": "b"}\r\n')
    assert [r["_line"] for r in load_jsonl(tmp_path / "d.jsonl")] == [1, 3]


PROBLEM_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<field>[^:]+): (?P<message>.+)$")


def problems(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for message in refusal(path):
        match = PROBLEM_RE.match(message)
        assert match, f"not path:line: field: message -> {message!r}"
        assert match["path"] == str(path)
        out.append((int(match["line"]), match["field"], match["message"]))
    return out


WRONG_TYPES = [
    ({"messages": "hello"}, "messages", "got string"),
    ({"messages": {"role": "user", "content": "q"}}, "messages", "got object"),
    ({"question": ["q"]}, "question", "expected text, got list"),
    ({"question": 5}, "question", "expected text, got number"),
    ({"prompt": 5}, "prompt", "got number"),
    ({"prompt": {"role": "user", "content": "q"}}, "prompt", "got object"),
    ({"prompt": ["q"]}, "prompt[0]", "got string"),
    ({"messages": [{"role": ["user"], "content": "q"}]}, "messages[0].role", "unknown role"),
    ({"messages": [{"role": "user", "content": 7}]}, "messages[0].content", "got number"),
    ({"messages": [{"role": "user", "content": None}]}, "messages[0].content", "got null"),
    ({"prompt": "q", "candidates": "a"}, "candidates", "got string"),
    ({"prompt": "q", "candidates": ["a", 2]}, "candidates[1]", "got number"),
    ({"prompt": "q", "answers": [{"role": "assistant", "content": "a"}]}, "answers[0]", "got object"),
    ({"prompt": "q", "chosen": 1, "rejected": "b"}, "chosen", "got number"),
    ({"prompt": "q", "chosen": "a", "rejected": {"text": "b"}}, "rejected", "got object"),
    ({"prompt": "q", "chosen": [{"content": "a"}]}, "chosen[0]", "'role' and 'content'"),
    ({"prompt": "q", "chosen": [{"role": "assistant", "content": ["a"]}]}, "chosen[0].content", "got list"),
    ({"prompt": "q", "completion": 3}, "completion", "got number"),
    ({"prompt": "q", "reference": ["a", "b"]}, "reference", "got list"),
    ({"prompt": "q", "reference": {"a": 1}}, "reference", "got object"),
    ({"prompt": "q", "label": ["辱骂"]}, "label", "got list"),
]


@pytest.mark.parametrize(("row", "field", "message"), WRONG_TYPES)
def test_a_field_of_the_wrong_type_is_refused_not_reinterpreted(tmp_path, row, field, message):
    path = write_lines(tmp_path / "d.jsonl", [{"prompt": "fine"}, row])
    [(line, got_field, got_message)] = problems(path)
    assert (line, got_field) == (2, field)
    assert message in got_message


@pytest.mark.parametrize(
    "row",
    [
        {"prompt": "q", "reference": 42},
        {"prompt": "q", "reference": True},
        {"prompt": "q", "label": {"type": "辱骂"}},
        {"prompt": "q", "label": None, "reference": None},
        {"prompt": "q", "chosen": [{"role": "assistant", "content": "a"}], "rejected": "b"},
    ],
)
def test_right_types_still_load(tmp_path, row):
    assert len(load_jsonl(write_lines(tmp_path / "d.jsonl", [row]))) == 1


def test_deeply_nested_row_is_one_line_not_a_recursion_error(tmp_path):
    deep = '{"prompt": "q", "x": ' + "[" * 50_000 + "]" * 50_000 + "}"
    path = write_lines(tmp_path / "d.jsonl", [{"prompt": "ok"}, deep])
    [(line, field, message)] = problems(path)
    assert (line, field) == (2, "json") and "nested too deeply" in message


def test_nesting_beyond_the_limit_but_parseable_is_refused(tmp_path):
    deep = '{"prompt": "q", "x": ' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}"
    [(line, field, _)] = problems(write_lines(tmp_path / "d.jsonl", [deep]))
    assert (line, field) == (1, "json")


def test_duplicate_keys_are_refused_naming_the_key(tmp_path):
    path = write_lines(
        tmp_path / "d.jsonl",
        [
            '{"prompt": "q", "label": "辱骂", "label": "无"}',
            '{"prompt": "q", "chosen": [{"role": "assistant", "content": "a", "content": "b"}]}',
        ],
    )
    found = problems(path)
    assert [(line, field) for line, field, _ in found] == [(1, "label"), (2, "content")]
    assert all("twice" in message for _, _, message in found)


@pytest.mark.parametrize("number", ["NaN", "Infinity", "1" * 5000])
def test_non_json_numbers_are_refused(tmp_path, number):
    path = write_lines(tmp_path / "d.jsonl", ['{"prompt": "q", "reference": ' + number + "}"])
    [(line, field, _)] = problems(path)
    assert (line, field) == (1, "json")


@pytest.mark.slow
def test_cli_messages_as_a_string_is_refused(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "ok"}, {"messages": "hello"}])
    lines = train(small_window_model, data, tmp_path / "out")
    assert lines == [
        f"error: {data}:2: messages: expected a non-empty list of {{role, content}} messages, got string"
    ]


def write(path: Path, rows: list) -> Path:
    path.write_text(
        "".join(r if isinstance(r, str) else json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def refusals(path: Path) -> list[str]:
    with pytest.raises(UserError) as err:
        load_jsonl(path)
    return err.value.messages


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
