"""The data loader (``data/loader.py``): every row read, and the right line named, whatever breaks a line."""

from __future__ import annotations

import pytest

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
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.errors import UserError

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
