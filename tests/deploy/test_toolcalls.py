"""OpenAI ``tool_calls`` in and out of the model server (``services/deploy/toolcalls.py``), without a server: the
stream splitter holds back tool calls across chunks; the response and the stream carry them.
"""

from __future__ import annotations

import json

from ark_trainer.services.deploy.toolcalls import StreamSplitter


def test_stream_splitter_holds_back_tool_calls_across_chunks():
    split = StreamSplitter()
    out = [
        split.feed(c)
        for c in ["Let me look.", " <tool", '_call>\n{"name": "ls", ', '"arguments": {}}\n</tool_call>']
    ]
    assert "".join(out) == "Let me look. "
    rest, calls = split.finish()
    assert rest == "" and calls[0]["function"] == {"name": "ls", "arguments": "{}"}
    assert calls[0]["id"].startswith("call_") and calls[0]["type"] == "function"
    plain = StreamSplitter()
    assert plain.feed("a <tool") == "a " and plain.finish() == ("<tool", [])
    bad = StreamSplitter()
    bad.feed("<tool_call>not json</tool_call>")
    assert bad.finish() == ("<tool_call>not json</tool_call>", [])  # nothing callable: the text is the answer


def _handler():
    """transformers' own chat handler with our tool-call mixin (the response builders need no model)."""
    from transformers.cli.serving.chat_completion import ChatCompletionHandler

    from ark_trainer.services.deploy.toolcalls import ToolCallResponses

    class Handler(ToolCallResponses, ChatCompletionHandler):
        pass

    return Handler(None, None)  # type: ignore[arg-type]


def test_the_response_carries_openai_tool_calls():
    text = 'Looking. <tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>'
    body = _handler()._build_completion("req-1", text, "m", "stop")
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] == "Looking."
    (call,) = choice["message"]["tool_calls"]
    assert call["id"].startswith("call_") and call["type"] == "function"
    assert call["function"] == {"name": "ls", "arguments": '{"path": "."}'}
    plain = _handler()._build_completion("req-2", "<tool_call>oops</tool_call>", "m", "stop")
    assert (
        plain["choices"][0]["finish_reason"] == "stop" and "tool_calls" not in plain["choices"][0]["message"]
    )


def test_the_stream_carries_openai_tool_calls():
    handler = _handler()
    chunks = [handler._build_chunk_sse("r", role="assistant", model="m")]
    chunks += [
        handler._build_chunk_sse("r", content=c, model="m")
        for c in ["Hi", " <tool_", 'call>\n{"name": "ls", ']
    ]
    chunks += [handler._build_chunk_sse("r", content='"arguments": {}}\n</tool_call>', model="m")]
    chunks.append(handler._build_chunk_sse("r", model="m", finish_reason="stop"))
    events = [json.loads(line[6:]) for c in chunks for line in c.split("\n\n") if line.startswith("data: ")]
    deltas = [e["choices"][0]["delta"] for e in events]
    assert "".join(d.get("content") or "" for d in deltas) == "Hi "
    calls = [c for d in deltas for c in d.get("tool_calls") or []]
    assert [(c["index"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        (0, "ls", "{}")
    ]
    assert events[-1]["choices"][0]["finish_reason"] == "tool_calls" and not handler._splitters
