"""The recorder of the model server's turns (``services/deploy/record.py``): one line per answered completion whatever
the turn holds, scrubbed and read by the loader; every turn read back after a line breaker or a raw
control character; streamed replies and tool-call pieces joined, and their usage read.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.data.loader import load_jsonl
from ark_trainer.services.deploy.record import Recorder, build_row, read_turns, reply_of, usage_of
from tests.line_breakers import CONTROLS, IDS, RAW_LEGAL, SEPARATORS, raw_line, write_raw


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_recorded_turns_after_a_line_breaker_are_all_read(tmp_path, sep):
    """The loop's recorder: 34 lines on disk must be 34 turns, not 27."""
    from ark_trainer.services.deploy.record import read_turns

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

    from ark_trainer.services.deploy.record import Recorder, read_turns

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
    from ark_trainer.services.deploy.record import reply_of

    chunks = [{"choices": [{"delta": {"content": part}}]} for part in ("一", f"二{sep}三", "四")]
    body = "".join(f"data: {json.dumps(c, ensure_ascii=False)}\r\n\r\n" for c in chunks) + "data: [DONE]\n\n"
    assert reply_of(body.encode(), stream=True)[0] == f"一二{sep}三四"
    from ark_trainer.services.deploy.record import usage_of

    last = {
        "choices": [{"delta": {"content": f"末{sep}"}, "finish_reason": "stop"}],
        "usage": {"completion_tokens": 4},
    }
    body += f"data: {json.dumps(last, ensure_ascii=False)}\n\n"
    assert usage_of(body.encode(), stream=True) == {"completion_tokens": 4, "finish_reason": "stop"}


@pytest.mark.parametrize("sep", CONTROLS, ids=IDS[3:])
def test_a_raw_control_character_costs_one_line_not_two(tmp_path, sep):
    """Raw inside a string it makes that record invalid JSON; line counts and later records stay right."""
    from ark_trainer.base.fileio import jsonl_file_lines
    from ark_trainer.services.deploy.record import read_turns

    good = [raw_line({"messages": [{"role": "user", "content": f"q{i}"}]}) for i in range(4)]
    good[1] = '{"messages": [{"role": "user", "content": "a' + sep + 'b"}]}\n'
    (tmp_path / "turns.jsonl").write_bytes("".join(good).encode())
    turns = read_turns(tmp_path / "turns.jsonl")
    assert len(turns) == 4 and turns[1] == {"_torn": True}
    assert turns[3]["messages"][0]["content"] == "q3"
    assert len(jsonl_file_lines(tmp_path / "turns.jsonl")) == 4


def test_recorded_turn_with_a_surrogate_or_a_blank_question(tmp_path):
    """The live recorder keeps a turn with a bad character (replaced) and one with a blank answer, and skips an
    invisible question."""
    from ark_trainer.services.deploy.record import build_row

    row = build_row({"messages": [{"role": "user", "content": "问\ud800"}]}, "答", [], "t", 1)
    assert row["messages"][0]["content"] == "问\ufffd"
    json.dumps(row, ensure_ascii=False).encode("utf-8")
    assert build_row({"messages": [{"role": "user", "content": "\u200b\ufeff"}]}, "答", [], "t", 1) is None
    blank = build_row({"messages": [{"role": "user", "content": "q"}]}, "\u200b", [], "t", 1)
    assert blank["messages"][-1] == {"role": "assistant", "content": "\u200b"}  # its correction follows it


def test_usage_of_a_streamed_and_a_plain_answer():
    sse = (
        b'data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert usage_of(sse, True) == {"prompt_tokens": 9, "completion_tokens": 2, "finish_reason": "stop"}
    plain = json.dumps({"choices": [{"finish_reason": "length"}], "usage": {"completion_tokens": 5}}).encode()
    assert usage_of(plain, False) == {"completion_tokens": 5, "finish_reason": "length"}


SSE = (
    b'data: {"choices": [{"delta": {"content": "\\u60a8\\u597d"}}]}\n\n'
    b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "read", "arguments": "{\\"pa"}}]}}]}\n\n'
    b'data: {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"arguments": "th\\": \\"a\\"}"}}]}}]}\n\n'
    b"data: [DONE]\n\n"
)


def test_reply_of_joins_streamed_text_and_tool_call_pieces():
    text, calls = reply_of(SSE, stream=True)
    assert text == "您好" and calls == [{"name": "read", "arguments": '{"path": "a"}'}]
    body = json.dumps({"choices": [{"message": {"content": [{"type": "text", "text": "hi"}]}}]}).encode()
    assert reply_of(body, stream=False) == ("hi", [])


def test_recorded_row_is_scrubbed_and_read_by_the_loader(tmp_path):
    request = {"model": "m", "stream": True, "messages": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "mail bob@corp.com, key sk-abcdefghijklmnopqrstuvwx"}]},
    ]}  # fmt: skip
    row = build_row(request, "call 13812345678", [], "round-2", 1)
    text = json.dumps(row, ensure_ascii=False)
    assert "bob@corp.com" not in text and "13812345678" not in text and "sk-abc" not in text
    assert "[EMAIL]" in text and "[PHONE]" in text and row["served_by"] == "round-2"
    write_jsonl(tmp_path / "t.jsonl", [row])
    loaded = load_jsonl(tmp_path / "t.jsonl")
    assert loaded[0]["candidates"] == ["call [PHONE]"] and loaded[0]["prompt"][-1]["role"] == "user"
    assert (
        build_row({"messages": [{"role": "system", "content": "x"}]}, "a", [], "", 2) is None
    )  # no user turn


def test_recorder_writes_one_line_per_answered_completion_only(tmp_path):
    async def app(scope, receive, send):
        await receive()
        status = 200 if scope["path"] == "/v1/chat/completions" else 404
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": SSE, "more_body": False})

    path = tmp_path / "turns" / "turns.jsonl"
    rec = Recorder(app, path, "round-0", log=lambda *a, **k: None)
    body = json.dumps({"stream": True, "messages": [{"role": "user", "content": "hi"}]}).encode()

    async def call(path_, headers=()):
        msgs = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive():
            return next(msgs)

        async def send(_):
            return None

        scope = {"type": "http", "method": "POST", "path": path_, "headers": list(headers)}
        await rec(scope, receive, send)

    asyncio.run(call("/v1/chat/completions"))
    asyncio.run(call("/v1/other"))
    asyncio.run(call("/v1/chat/completions", [(b"x-ark-smoke", b"1")]))  # the deploy's smoke request
    rows = read_turns(path)
    assert len(rows) == 1 and rows[0]["messages"][-1]["content"].startswith("您好\n<tool_call>")
    with open(path, "a") as f:
        f.write('{"torn": ')  # a write in flight is not read
    assert len(read_turns(path)) == 1
