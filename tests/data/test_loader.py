"""The data loader (``data/loader.py``): the JSONL shapes users bring, file:line validation.

Hostile data is ``test_loader_hostile.py``; the train/eval split ``test_split.py``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.data.loader import load_jsonl, resolve_eval_path

PROBLEM_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<field>[^:]+): (?P<message>.+)$")


def write_jsonl(path: Path, lines: list) -> Path:
    """Write ``lines`` (objects are dumped as JSON, strings written as they are) one per line."""
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def load_one(tmp_path: Path, obj: dict) -> dict:
    rows = load_jsonl(write_jsonl(tmp_path / "d.jsonl", [obj]))
    assert len(rows) == 1
    return rows[0]


def problems(tmp_path: Path, lines: list) -> list[dict]:
    """The parsed ``path:line: field: message`` problems of a file that must be refused."""
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    with pytest.raises(UserError) as exc:
        load_jsonl(path)
    out = []
    for message in exc.value.messages:
        match = PROBLEM_RE.match(message)
        assert match, f"not path:line: field: message -> {message!r}"
        assert match["path"] == str(path)
        out.append({**match.groupdict(), "line": int(match["line"])})
    return out


def only_problem(tmp_path: Path, lines: list) -> dict:
    found = problems(tmp_path, lines)
    assert len(found) == 1, found
    return found[0]


# --- accepted shapes ---


def test_prompt_text(tmp_path):
    row = load_one(tmp_path, {"prompt": "退货怎么办"})
    assert row["prompt"] == [{"role": "user", "content": "退货怎么办"}]
    assert row["candidates"] == []
    assert row["_line"] == 1


def test_prompt_as_chat_list(tmp_path):
    chat = [{"role": "system", "content": "你是质检员"}, {"role": "user", "content": "检查这段对话"}]
    row = load_one(tmp_path, {"prompt": chat})
    assert row["prompt"] == chat


def test_question(tmp_path):
    row = load_one(tmp_path, {"question": "这段对话合规吗"})
    assert row["prompt"] == [{"role": "user", "content": "这段对话合规吗"}]


def test_messages_trailing_assistant_becomes_candidate(tmp_path):
    row = load_one(
        tmp_path,
        {"messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]},
    )
    assert row["prompt"] == [{"role": "user", "content": "Q"}]
    assert row["candidates"] == ["A"]


def test_messages_without_trailing_assistant(tmp_path):
    msgs = [
        {"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "Q2"},
    ]
    row = load_one(tmp_path, {"messages": msgs})
    assert row["prompt"] == msgs and row["candidates"] == []


@pytest.mark.parametrize("key", ["candidates", "answers"])
def test_candidates_and_answers(tmp_path, key):
    row = load_one(tmp_path, {"question": "Q", key: ["a", "b"]})
    assert row["candidates"] == ["a", "b"]


def test_messages_candidate_plus_candidates_list(tmp_path):
    row = load_one(
        tmp_path,
        {
            "messages": [{"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}],
            "candidates": ["B"],
        },
    )
    assert row["candidates"] == ["A", "B"]


def test_chosen_rejected(tmp_path):
    row = load_one(tmp_path, {"prompt": "Q", "chosen": "good", "rejected": "bad"})
    assert row["chosen"] == "good" and row["rejected"] == "bad"


def test_chosen_as_chat_messages(tmp_path):
    row = load_one(tmp_path, {"prompt": "Q", "chosen": [{"role": "assistant", "content": "good"}]})
    assert row["chosen"] == "good"


def test_reference_and_label_and_extra_columns_kept(tmp_path):
    row = load_one(
        tmp_path,
        {"prompt": "Q", "reference": "R", "label": "辱骂", "scenario": "退款", "meta": {"a": 1}, "score": 3},
    )
    assert row["reference"] == "R" and row["label"] == "辱骂"
    assert row["scenario"] == "退款" and row["meta"] == {"a": 1} and row["score"] == 3


def test_blank_lines_skipped_and_line_numbers_kept(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}, "", "   ", {"prompt": "b"}])
    rows = load_jsonl(path)
    assert [r["_line"] for r in rows] == [1, 4]


def test_utf8_bom_accepted(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(
        b"\xef\xbb\xbf" + json.dumps({"prompt": "问"}, ensure_ascii=False).encode("utf-8") + b"\n"
    )
    assert load_jsonl(path)[0]["prompt"][0]["content"] == "问"


def test_crlf_line_endings(tmp_path):
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b'{"prompt": "a"}\r\n{"prompt": "b"}\r\n')
    assert len(load_jsonl(path)) == 2


def test_nulls_do_not_break_column_types(tmp_path):
    path = write_jsonl(
        tmp_path / "d.jsonl", [{"prompt": "a", "label": None}, {"prompt": "b", "label": "辱骂"}]
    )
    assert len(load_jsonl(path)) == 2


# --- malformed files: path:line: field: message ---


def test_bad_json(tmp_path):
    p = only_problem(tmp_path, ['{"prompt": "a"'])
    assert (p["line"], p["field"]) == (1, "json")


def test_non_object_line(tmp_path):
    p = only_problem(tmp_path, ['["prompt", "a"]'])
    assert (p["line"], p["field"]) == (1, "json") and "object" in p["message"]


def test_missing_prompt(tmp_path):
    p = only_problem(tmp_path, [{"text": "a"}])
    assert p["field"] == "prompt" and "missing" in p["message"]


def test_two_prompt_keys(tmp_path):
    p = only_problem(tmp_path, [{"prompt": "a", "question": "b"}])
    assert p["field"] == "question" and "only one" in p["message"]


@pytest.mark.parametrize("key", ["prompt", "question"])
def test_empty_text(tmp_path, key):
    p = only_problem(tmp_path, [{key: "  "}])
    assert p["field"] == key and "empty" in p["message"]


def test_empty_messages_list(tmp_path):
    assert only_problem(tmp_path, [{"messages": []}])["field"] == "messages"


def test_bad_role(tmp_path):
    p = only_problem(
        tmp_path, [{"messages": [{"role": "user", "content": "hi"}, {"role": "customer", "content": "x"}]}]
    )
    assert p["field"] == "messages[1].role" and "customer" in p["message"]


def test_message_without_content(tmp_path):
    p = only_problem(tmp_path, [{"messages": [{"role": "user", "content": "hi"}, {"role": "user"}]}])
    assert p["field"] == "messages[1]"


def test_message_content_not_text(tmp_path):
    p = only_problem(tmp_path, [{"messages": [{"role": "user", "content": 3}]}])
    assert p["field"] == "messages[0].content"


def test_no_user_turn(tmp_path):
    p = only_problem(tmp_path, [{"prompt": [{"role": "system", "content": "s"}]}])
    assert p["field"] == "prompt" and "user" in p["message"]


def test_only_assistant_turn(tmp_path):
    found = problems(tmp_path, [{"messages": [{"role": "assistant", "content": "A"}]}])
    assert any(p["field"] == "messages" for p in found)


def test_candidates_not_a_list(tmp_path):
    p = only_problem(tmp_path, [{"prompt": "a", "candidates": "one answer"}])
    assert p["field"] == "candidates" and "list" in p["message"]


def test_candidate_item_empty(tmp_path):
    p = only_problem(tmp_path, [{"prompt": "a", "answers": ["ok", ""]}])
    assert p["field"] == "answers[1]"


def test_chosen_empty(tmp_path):
    assert only_problem(tmp_path, [{"prompt": "a", "chosen": ""}])["field"] == "chosen"


def test_column_type_changes_between_lines(tmp_path):
    p = only_problem(tmp_path, [{"prompt": "a", "score": 1}, {"prompt": "b", "score": "high"}])
    assert (p["line"], p["field"]) == (2, "score") and "line 1" in p["message"]


def test_bool_and_number_are_different_types(tmp_path):
    p = only_problem(tmp_path, [{"prompt": "a", "flag": True}, {"prompt": "b", "flag": 1}])
    assert p["line"] == 2


@pytest.mark.parametrize("name", ["completions", "prompts", "trainer_state", "_line", "_private"])
def test_reserved_column_name(tmp_path, name):
    p = only_problem(tmp_path, [{"prompt": "a", name: "x"}])
    assert p["field"] == name and "reserved" in p["message"]


def test_non_utf8_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"prompt": "ok"}\n{"prompt": "\xff\xfe"}\n{"prompt": "ok2"}\n')
    with pytest.raises(UserError) as exc:
        load_jsonl(path)
    assert len(exc.value.messages) == 1
    assert exc.value.messages[0].startswith(f"{path}:2: ") and "UTF-8" in exc.value.messages[0]


def test_gbk_file_every_line_reported(tmp_path):
    path = tmp_path / "gbk.jsonl"
    path.write_bytes(
        "\n".join(json.dumps({"prompt": f"问题{i}"}, ensure_ascii=False) for i in range(3)).encode("gbk")
    )
    with pytest.raises(UserError) as exc:
        load_jsonl(path)
    assert [m.split(":")[1] for m in exc.value.messages] == ["1", "2", "3"]


def test_empty_file(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    with pytest.raises(UserError) as exc:
        load_jsonl(path)
    assert str(path) in exc.value.messages[0] and "empty" in exc.value.messages[0]


def test_blank_only_file_is_empty(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(UserError, match="empty"):
        load_jsonl(path)


def test_missing_file_names_flag(tmp_path):
    with pytest.raises(UserError) as exc:
        load_jsonl(tmp_path / "nope.jsonl", "--eval_dataset")
    assert exc.value.messages[0].startswith("--eval_dataset: ") and "nope.jsonl" in exc.value.messages[0]


def test_folder_is_not_a_file(tmp_path):
    with pytest.raises(UserError, match="--data_path"):
        load_jsonl(tmp_path)


def test_all_problems_of_a_file_in_one_pass(tmp_path):
    lines = [
        {"prompt": "fine", "score": 1},  # 1 ok
        "{not json",  # 2
        "42",  # 3
        {"text": "no prompt"},  # 4
        {"prompt": "a", "question": "b"},  # 5
        {"prompt": ""},  # 6
        {"messages": [{"role": "robot", "content": "x"}]},  # 7
        {"prompt": "c", "candidates": "x"},  # 8
        {"prompt": "d", "score": "one"},  # 9
        {"prompt": "e", "completions": []},  # 10
        {"prompt": "also fine", "score": 2},  # 11 ok
    ]
    found = problems(tmp_path, lines)
    assert sorted({p["line"] for p in found}) == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    pairs = {(p["line"], p["field"]) for p in found}
    assert {
        (2, "json"),
        (3, "json"),
        (4, "prompt"),
        (7, "messages[0].role"),
        (9, "score"),
        (10, "completions"),
    } <= pairs


def test_several_problems_on_one_line(tmp_path):
    found = problems(tmp_path, [{"messages": [{"role": "bot", "content": 1}, {"role": "x", "content": "y"}]}])
    assert {p["field"] for p in found} >= {"messages[0].role", "messages[0].content", "messages[1].role"}
    assert {p["line"] for p in found} == {1}


# --- eval path ---


def test_resolve_eval_path_file(tmp_path):
    path = write_jsonl(tmp_path / "e.jsonl", [{"prompt": "a"}])
    assert resolve_eval_path(str(path)) == path


@pytest.mark.parametrize("name", ["eval.jsonl", "test.jsonl"])
def test_resolve_eval_path_folder(tmp_path, name):
    write_jsonl(tmp_path / "train.jsonl", [{"prompt": "a"}])
    write_jsonl(tmp_path / name, [{"prompt": "b"}])
    assert resolve_eval_path(str(tmp_path)) == tmp_path / name


def test_resolve_eval_path_folder_with_one_jsonl(tmp_path):
    write_jsonl(tmp_path / "held.jsonl", [{"prompt": "b"}])
    assert resolve_eval_path(str(tmp_path)) == tmp_path / "held.jsonl"


def test_resolve_eval_path_ambiguous_folder(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"prompt": "a"}])
    write_jsonl(tmp_path / "b.jsonl", [{"prompt": "b"}])
    with pytest.raises(UserError, match="--eval_dataset"):
        resolve_eval_path(str(tmp_path))


def test_resolve_eval_path_missing(tmp_path):
    with pytest.raises(UserError, match="--eval_dataset"):
        resolve_eval_path(str(tmp_path / "nope"))


def test_prompt_completion_shape_gives_a_candidate(tmp_path):
    row = load_one(tmp_path, {"prompt": "q", "completion": "a"})
    assert row["candidates"] == ["a"] and "completion" not in row
