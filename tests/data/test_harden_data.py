"""Hostile data files: each is one ``file:line`` refusal, never a traceback or a
silent reinterpretation, and a prompt longer than the model's window is refused before anything runs.

The loader is tested directly for each kind of problem; the command line (``python -m ark_trainer train``)
for the ones a user meets first, with exit 2, one line and nothing written.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ark_trainer.data.loader import MAX_DEPTH, load_jsonl, resolve_eval_path
from ark_trainer.errors import UserError
from tests.conftest import run_cli as cli
from tests.conftest import save_tiny_qwen

PROBLEM_RE = re.compile(r"^(?P<path>.+):(?P<line>\d+): (?P<field>[^:]+): (?P<message>.+)$")


def write_lines(path: Path, lines: list) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path, flag: str = "--data_path") -> list[str]:
    with pytest.raises(UserError) as exc:
        load_jsonl(path, flag)
    return exc.value.messages


def problems(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for message in refusal(path):
        match = PROBLEM_RE.match(message)
        assert match, f"not path:line: field: message -> {message!r}"
        assert match["path"] == str(path)
        out.append((int(match["line"]), match["field"], match["message"]))
    return out


# --- every known field is checked for its JSON type ---

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


# --- JSON that parses badly or ambiguously ---


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


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_one_line_not_one_per_line(tmp_path, encoding):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps({"prompt": f"问题 {i}"}, ensure_ascii=False) for i in range(300)]
    path.write_bytes("\n".join(lines).encode(encoding))
    [message] = refusal(path)
    assert message == f"{path}:1: encoding: not UTF-8 (looks like UTF-16); re-save the file as UTF-8"


# --- paths that are not a regular file ---


def test_a_folder_is_named_as_a_folder(tmp_path):
    [message] = refusal(tmp_path)
    assert message.startswith("--data_path: ") and "is a folder" in message


def test_a_fifo_is_named_and_never_opened(tmp_path):
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    [message] = refusal(fifo)  # opening it would block forever: this returning is the test
    assert "named pipe (FIFO)" in message


def test_a_symlink_loop_is_named(tmp_path):
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    [message] = refusal(loop)
    assert "symlink loop" in message


def test_a_dangling_symlink_names_its_target(tmp_path):
    link = tmp_path / "link.jsonl"
    link.symlink_to(tmp_path / "gone.jsonl")
    [message] = refusal(link)
    assert "missing file" in message and "gone.jsonl" in message


def test_a_300_character_name_is_named_too_long(tmp_path):
    [message] = refusal(tmp_path / ("x" * 300 + ".jsonl"))
    assert message.startswith("--data_path: file name too long") and "rename" in message


def test_eval_dataset_paths_get_the_same_checks(tmp_path):
    with pytest.raises(UserError, match="file name too long"):
        resolve_eval_path(str(tmp_path / ("e" * 300)))
    fifo = tmp_path / "eval.fifo"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"^--eval_dataset: .*named pipe"):
        resolve_eval_path(str(fifo))


# --- through the command line: exit 2, one line, nothing written ---


@pytest.fixture(scope="module")
def small_window_model(tmp_path_factory) -> Path:
    """A tiny real model whose window is 256 positions (192 prompt tokens with 64 completion tokens)."""
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny_model"), max_position_embeddings=256)


def train(model: Path, data: Path | str, out: Path, *extra: str) -> list[str]:
    """``train`` that must be refused: exit 2, no traceback, nothing under ``out``; returns stderr lines."""
    args = ["train", "--strategy", "RFT+GRPO", "--model_path", str(model), "--data_path", str(data)]
    args += [
        "--output_dir",
        str(out),
        "--max_train_steps",
        "2",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
    ]
    result = cli(*args, *extra, cwd=out.parent)
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists(), "a refused run writes nothing"
    return result.stderr.strip().splitlines()


@pytest.mark.slow
def test_cli_refuses_prompts_longer_than_the_window_all_in_one_pass(tmp_path, small_window_model):
    rows = [{"prompt": f"short {i}"} for i in range(6)]
    rows.insert(2, {"prompt": "hello world " * 2_000_000})  # 24 MB: checked without tokenizing it all
    rows.insert(5, {"messages": [{"role": "user", "content": "你好 " * 400}]})
    data = write_lines(tmp_path / "long.jsonl", rows)
    lines = train(small_window_model, data, tmp_path / "out")
    assert len(lines) == 2, lines
    for line, lineno in zip(lines, (3, 6), strict=True):
        assert line.startswith(f"error: {data}:{lineno}: prompt: ")
        assert "longer than the model's window of 192 tokens" in line and "--max_completion_length" in line


@pytest.mark.slow
def test_cli_window_follows_max_completion_length(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "hello world " * 30}, {"prompt": "ok"}])
    lines = train(small_window_model, data, tmp_path / "out", "--max_completion_length", "200")
    assert (
        len(lines) == 1 and lines[0].startswith(f"error: {data}:1: prompt: ") and "window of 56 " in lines[0]
    )


@pytest.mark.slow
def test_cli_completion_length_filling_the_window_is_a_flag_error(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "ok"}])
    lines = train(small_window_model, data, tmp_path / "out", "--max_completion_length", "256")
    assert len(lines) == 1 and lines[0].startswith("error: --max_completion_length: ")


@pytest.mark.slow
def test_cli_eval_dataset_prompts_are_checked_too(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": f"q{i}"} for i in range(4)])
    held = write_lines(tmp_path / "eval.jsonl", [{"prompt": "ok"}, {"prompt": "hello world " * 500}])
    lines = train(small_window_model, data, tmp_path / "out", "--eval_dataset", str(held))
    assert len(lines) == 1 and lines[0].startswith(f"error: {held}:2: prompt: ")


@pytest.mark.slow
def test_cli_messages_as_a_string_is_refused(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "ok"}, {"messages": "hello"}])
    lines = train(small_window_model, data, tmp_path / "out")
    assert lines == [
        f"error: {data}:2: messages: expected a non-empty list of {{role, content}} messages, got string"
    ]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["folder", "fifo", "loop", "long", "utf16", "nested"])
def test_cli_data_path_problems_are_one_line(tmp_path, small_window_model, kind):
    path = tmp_path / "d.jsonl"
    if kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "long":
        path = tmp_path / ("d" * 300 + ".jsonl")
    elif kind == "utf16":
        path.write_text('{"prompt": "q"}\n' * 341, encoding="utf-16")
    else:
        path.write_text('{"prompt": "q", "x": ' + "[" * 50_000 + "]" * 50_000 + "}\n", encoding="utf-8")
    lines = train(small_window_model, path, tmp_path / "out")
    expected = {
        "folder": "is a folder",
        "fifo": "named pipe",
        "loop": "symlink loop",
        "long": "file name too long",
        "utf16": "looks like UTF-16",
        "nested": "nested too deeply",
    }[kind]
    assert len(lines) == 1 and expected in lines[0], lines
