"""A data file the user named (``data/files.py``): a folder, a FIFO, a symlink loop, a dangling symlink, a
300-character name or a UTF-16 file is one line saying what it is, never a traceback or a hang.
"""

from __future__ import annotations

import json
import os

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.data.loader import resolve_eval_path
from tests.data.refusals import refusal, train


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_file_is_one_line_not_one_per_line(tmp_path, encoding):
    path = tmp_path / "d.jsonl"
    lines = [json.dumps({"prompt": f"问题 {i}"}, ensure_ascii=False) for i in range(300)]
    path.write_bytes("\n".join(lines).encode(encoding))
    [message] = refusal(path)
    assert message == f"{path}:1: encoding: not UTF-8 (looks like UTF-16); re-save the file as UTF-8"


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
