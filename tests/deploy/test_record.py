"""The recorder of the model server's turns (``deploy/record.py``): one line per turn whatever the turn holds,
and every turn read back after a line breaker or a raw control character.
"""

from __future__ import annotations

import json

import pytest

from ark_trainer.deploy.record import usage_of
from tests.line_breakers import CONTROLS, IDS, RAW_LEGAL, SEPARATORS, raw_line, write_raw


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


def test_recorded_turn_with_a_surrogate_or_a_blank_question(tmp_path):
    """The live recorder keeps a turn with a bad character (replaced), and skips an invisible question."""
    from ark_trainer.deploy.record import build_row

    row = build_row({"messages": [{"role": "user", "content": "问\ud800"}]}, "答", [], "t", 1)
    assert row["messages"][0]["content"] == "问\ufffd"
    json.dumps(row, ensure_ascii=False).encode("utf-8")
    assert build_row({"messages": [{"role": "user", "content": "\u200b\ufeff"}]}, "答", [], "t", 1) is None
    assert build_row({"messages": [{"role": "user", "content": "q"}]}, "\u200b", [], "t", 1) is None


def test_usage_of_a_streamed_and_a_plain_answer():
    sse = (
        b'data: {"choices": [{"delta": {"content": "hi"}, "finish_reason": null}]}\n\n'
        b'data: {"choices": [{"delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )
    assert usage_of(sse, True) == {"prompt_tokens": 9, "completion_tokens": 2, "finish_reason": "stop"}
    plain = json.dumps({"choices": [{"finish_reason": "length"}], "usage": {"completion_tokens": 5}}).encode()
    assert usage_of(plain, False) == {"completion_tokens": 5, "finish_reason": "length"}
