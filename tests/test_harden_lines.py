"""JSON Lines are read by ``"\\n"`` only, everywhere, and written so that any line splitter sees one record.

``str.splitlines`` also breaks at U+2028, U+2029, U+0085 (legal raw inside a JSON string), ``\\r``,
``\\v``, ``\\f`` and ``\\x1c``-``\\x1e`` (which ``json.dumps`` escapes, but a hand-written file may hold); one
such character in a recorded turn once hid every later turn from the live loop. Every reader of a JSONL
file is checked here with each of them inside a value, in the raw form an older writer (or another
program) leaves on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.fileio import json_line, jsonl_byte_lines, jsonl_lines, read_jsonl, write_jsonl

# raw-legal inside a JSON string (json.dumps(ensure_ascii=False) leaves them raw)
RAW_LEGAL = ["\u2028", "\u2029", "\x85"]
# control characters: json.dumps escapes them; raw, they make a line invalid JSON (but must not split it)
CONTROLS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e"]
SEPARATORS = RAW_LEGAL + CONTROLS
IDS = [f"U+{ord(c):04X}" for c in SEPARATORS]


def raw_line(value: dict) -> str:
    """What an older writer (``json.dumps(ensure_ascii=False)``) put on disk: U+2028 and co. left raw."""
    return json.dumps(value, ensure_ascii=False) + "\n"


def records(sep: str, n: int = 5) -> list[dict]:
    return [{"event": "x", "i": i, "text": f"before{sep}after {i}"} for i in range(n)]


def write_raw(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(raw_line(r) for r in rows).encode("utf-8"))


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


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_recorded_turns_after_a_line_breaker_are_all_read(tmp_path, sep):
    """The loop's recorder: 34 lines on disk must be 34 turns, not 27."""
    from ark_trainer.deploy.record import read_turns

    rows = [{"messages": [{"role": "user", "content": f"第{i}问{sep}续"}]} for i in range(34)]
    path = tmp_path / "turns.jsonl"
    write_raw(path, rows)
    assert read_turns(path) == rows
    assert read_turns(path, start=30) == rows[30:]
    with path.open("ab") as fh:  # a write in flight: left for later
        fh.write(raw_line(rows[0])[:-3].encode())
    assert len(read_turns(path)) == 34


@pytest.mark.parametrize("sep", SEPARATORS, ids=IDS)
def test_the_recorder_writes_one_line_per_turn(tmp_path, sep):
    import asyncio

    from ark_trainer.deploy.record import Recorder, read_turns

    reply = {"choices": [{"message": {"content": f"答{sep}复"}}]}

    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps(reply).encode()})

    recorder = Recorder(app, tmp_path / "turns.jsonl", log=lambda *a, **k: None)
    body = json.dumps({"messages": [{"role": "user", "content": f"问{sep}题\ud800"}]}).encode()

    async def one():
        sent = iter([{"type": "http.request", "body": body}])

        async def receive():
            return next(sent)

        async def send(_):
            return None

        await recorder({"type": "http", "method": "POST", "path": "/v1/chat/completions"}, receive, send)

    for _ in range(3):
        asyncio.run(one())
    text = (tmp_path / "turns.jsonl").read_text(encoding="utf-8")
    assert len(text.splitlines()) == 3
    turns = read_turns(tmp_path / "turns.jsonl")
    assert [t["messages"][-1]["content"] for t in turns] == [f"答{sep}复"] * 3


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_streamed_reply_with_a_line_breaker_is_recorded_whole(sep):
    from ark_trainer.deploy.record import reply_of

    chunks = [{"choices": [{"delta": {"content": part}}]} for part in ("一", f"二{sep}三", "四")]
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\r\n\r\n" for c in chunks) + "data: [DONE]\n\n"
    assert reply_of(body.encode(), stream=True)[0] == f"一二{sep}三四"
    from ark_trainer.deploy.record import usage_of

    last = {
        "choices": [{"delta": {"content": f"末{sep}"}, "finish_reason": "stop"}],
        "usage": {"completion_tokens": 4},
    }
    body += f"data: {json.dumps(last, ensure_ascii=False)}\n\n"
    assert usage_of(body.encode(), stream=True) == {"completion_tokens": 4, "finish_reason": "stop"}


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


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_collected_session_lines(tmp_path, sep):
    from ark_trainer.data.collect import read_jsonl_objects

    write_raw(tmp_path / "s.jsonl", records(sep))
    assert read_jsonl_objects(tmp_path / "s.jsonl") == (records(sep), 0)


def run_events(out: Path, sep: str) -> list[dict]:
    """An ``events.jsonl`` whose every event carries ``sep`` raw, ending in a failed run."""
    events = [
        {"event": "run_start", "time": 1.0},
        {"event": "stage_end", "stage": "rft", "status": "ok", "note": f"a{sep}b", "time": 2.0},
        {"event": "error", "message": f"boom{sep}bang", "time": 3.0},
        {"event": "run_end", "status": "failed", "note": f"c{sep}d", "time": 4.0},
    ]
    write_raw(out / "events.jsonl", events)
    return events


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_run_event_readers(tmp_path, sep):
    from ark_trainer.diagnose.rundata import load
    from ark_trainer.runfolder import EventLog, RunFolder, read_events, run_end_status
    from ark_trainer.runtime.resume import Progress
    from ark_trainer.runtime.supervisor import last_error

    events = run_events(tmp_path, sep)
    path = tmp_path / "events.jsonl"
    assert run_end_status(RunFolder(tmp_path).events()) == "failed"
    assert RunFolder(tmp_path).n_event_lines() == 4
    assert last_error(tmp_path, since=1)["message"] == f"boom{sep}bang"
    assert Progress(tmp_path).stage_ok("rft") and len(Progress(tmp_path).events) == 4
    problems: list[str] = []
    assert read_events(path, problems) == events and not problems
    assert load(tmp_path).events == events
    assert EventLog(path).read() == events


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_the_monitor_writes_one_line_per_event(tmp_path, sep):
    from ark_trainer.runtime.monitor import Monitor

    monitor = Monitor(tmp_path)
    for i in range(3):
        monitor.event("note", text=f"x{sep}{i}")
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["text"] for line in lines if '"note"' in line] == [
        f"x{sep}{i}" for i in range(3)
    ]


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_judge_cache_and_glance_prompts(tmp_path, sep):
    from ark_trainer.report.glance import _prompts
    from ark_trainer.rewards.llm_judge import _Cache

    write_raw(tmp_path / "cache.jsonl", [{"key": f"k{i}", "reply": f"r{sep}{i}"} for i in range(3)])
    assert _Cache(tmp_path / "cache.jsonl").data == {f"k{i}": f"r{sep}{i}" for i in range(3)}
    write_raw(tmp_path / "data" / "eval.jsonl", [{"prompt": f"p{sep}{i}"} for i in range(3)])
    assert _prompts(tmp_path) == [f"p{sep}{i}" for i in range(3)]


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_openclaw_json_after_log_lines(sep):
    from ark_trainer.external.openclaw_cli import parse_json

    value = {"sessions": [{"title": f"a{sep}b"}]}
    assert parse_json("log line\n" + json.dumps(value, ensure_ascii=False, indent=2)) == value


@pytest.mark.parametrize("sep", CONTROLS, ids=IDS[3:])
def test_a_raw_control_character_costs_one_line_not_two(tmp_path, sep):
    """Raw inside a string it makes that record invalid JSON; line counts and later records stay right."""
    from ark_trainer.deploy.record import read_turns
    from ark_trainer.fileio import jsonl_file_lines

    good = [raw_line({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(4)]
    good[1] = '{"messages": [{"role": "user", "content": "a' + sep + 'b"}]}\n'
    (tmp_path / "turns.jsonl").write_bytes("".join(good).encode())
    turns = read_turns(tmp_path / "turns.jsonl")
    assert len(turns) == 4 and turns[1] == {"_torn": True}
    assert turns[3]["messages"][0]["content"] == "q3"
    assert len(jsonl_file_lines(tmp_path / "turns.jsonl")) == 4
