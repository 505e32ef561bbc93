"""Every file the tool reads is a regular file read within a byte bound (``fileio.read_bounded``): a device
that never ends, a FIFO that never opens, a sparse file that is gigabytes of nothing are each one line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import (
    UnreadableFile,
    json_line,
    jsonl_byte_lines,
    jsonl_lines,
    read_bounded,
    read_json,
    read_jsonl,
    read_text_bounded,
    write_jsonl,
)
from tests.line_breakers import IDS, RAW_LEGAL, SEPARATORS, records, write_raw


def _sparse(path: Path, size: int = 3 << 30) -> Path:
    with path.open("wb") as fh:
        fh.truncate(size)
    return path


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda tmp: Path("/dev/zero"), "a character device, not a regular file"),
        (lambda tmp: Path("/dev/null"), "a character device, not a regular file"),
        (lambda tmp: _fifo(tmp / "pipe"), "a named pipe (FIFO), not a regular file"),
        (lambda tmp: tmp, "a folder, not a regular file"),
        (lambda tmp: _sparse(tmp / "big.json"), "bytes; a JSON file is at most"),
    ],
)
def test_what_is_not_a_small_regular_file_is_one_error(tmp_path, make, words):
    path = make(tmp_path)
    with pytest.raises(UnreadableFile, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_json(path, limit=1000)
    with pytest.raises(ValueError):  # the tolerant readers take it as a broken file
        read_text_bounded(path, 1000)


def test_the_bound_counts_what_is_read_not_st_size(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, 10) == b"x" * 10
    with pytest.raises(UnreadableFile, match="at most 9 bytes"):
        read_bounded(path, 9)
    with pytest.raises(FileNotFoundError):  # the caller words a missing file
        read_bounded(tmp_path / "missing", 9)


def _refused(capsys, argv: list[str]) -> str:
    from ark_trainer.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps({"question": f"q{i}", "label": "无"}) + "\n" for i in range(6)))
    return path


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "sparse"])
def test_config_that_is_not_a_small_file(tmp_path, capsys, kind):
    config = {"/dev/zero": lambda: Path("/dev/zero"), "fifo": lambda: _fifo(tmp_path / "c.yaml"),
              "sparse": lambda: _sparse(tmp_path / "c.yaml")}[kind]()  # fmt: skip
    line = _refused(capsys, ["train", "--config", str(config), "--output_dir", str(tmp_path / "OUT")])
    assert str(config) in line and ("not a regular file" in line or "at most" in line), line
    assert not (tmp_path / "OUT").exists()


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "sparse"])
def test_data_that_is_not_a_small_file(tmp_path, capsys, kind):
    data = {"/dev/zero": lambda: Path("/dev/zero"), "fifo": lambda: _fifo(tmp_path / "d.jsonl"),
            "sparse": lambda: _sparse(tmp_path / "d.jsonl", (1 << 30) + 1)}[kind]()  # fmt: skip
    out = tmp_path / "OUT"
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")  # (its own problem, reported after the data's)
    from ark_trainer.cli import main

    assert (
        main(["train", "--model_path", str(model), "--data_path", str(data), "--output_dir", str(out)]) == 2
    )
    err = capsys.readouterr().err
    [line] = [x for x in err.splitlines() if x.startswith("error: --data_path")]
    assert "Traceback" not in err, err
    assert line.startswith("error: --data_path: ") and str(data) in line, line
    assert not out.exists()


@pytest.mark.parametrize("name", ["mcp.json", "mcp.yaml"])
def test_mcp_servers_file_that_is_not_a_small_file(tmp_path, name):
    from ark_trainer.base.external.mcp_config import servers_from_source

    for path in (_sparse(tmp_path / name), _fifo(tmp_path / f"pipe-{name}")):
        with pytest.raises(UserError) as exc:
            servers_from_source(f"mcp:{path}")
        assert str(exc.value).startswith(f"--env: {path}") or "--env: no such file" in str(exc.value), (
            exc.value
        )


@pytest.mark.parametrize("sep", SEPARATORS, ids=IDS)
def test_writer_escapes_every_line_breaker_and_reads_back(tmp_path, sep):
    rows = records(sep) + [{"lone": "\ud800 and \udfff"}]
    write_jsonl(tmp_path / "a.jsonl", rows)
    text = (tmp_path / "a.jsonl").read_text(encoding="utf-8")
    assert len(text.splitlines()) == len(rows)  # even str.splitlines sees one record per line
    assert read_jsonl(tmp_path / "a.jsonl") == rows
    assert json_line(rows[0]).count("\n") == 1 and json.loads(json_line(rows[0])) == rows[0]


def test_line_splitters_break_at_newline_only():
    text = "a\u2028b\r\nc\x85d\x1c\ne\rf\x0b\x0cg"
    assert jsonl_lines(text) == ["a\u2028b", "c\x85d\x1c", "e\rf\x0b\x0cg"]
    assert jsonl_lines(text + "\n") == jsonl_lines(text)
    assert jsonl_byte_lines(text.encode()) == [x.encode() for x in jsonl_lines(text)]


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_read_jsonl_keeps_every_row(tmp_path, sep):
    write_raw(tmp_path / "a.jsonl", records(sep))
    assert read_jsonl(tmp_path / "a.jsonl") == records(sep)


def test_a_rename_that_fails_midway_puts_back_what_it_replaced(tmp_path, monkeypatch):
    from ark_trainer.base.fileio import replace_together, staged_path

    a, b = tmp_path / "a.gguf", tmp_path / "Modelfile"
    a.write_text("old a")
    b.write_text("old b")
    staged_path(a).write_text("new a")
    staged_path(b).write_text("new b")
    real = os.replace

    def fail_on_b(src, dst):
        if Path(src) == staged_path(b):
            raise OSError(13, "Permission denied", str(dst))
        return real(src, dst)

    monkeypatch.setattr(os, "replace", fail_on_b)
    with pytest.raises(OSError):
        replace_together([a, b])
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Modelfile", "a.gguf"]
