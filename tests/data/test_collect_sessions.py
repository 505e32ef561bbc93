"""OpenClaw sessions as rows (``data/collect.py``): the current branch followed, tool calls kept, ``--since``
honoured. (A module of its own: its ``_entries`` is not ``test_collect.py``'s.)
"""

from __future__ import annotations

import json

from ark_trainer.data.collect import Session, parse_since, session_rows
from ark_trainer.data.scrub import Scrubber


def _entries():
    def msg(i, parent, role, content, ts, **extra):
        return {
            "type": "message",
            "id": f"e{i}",
            "parentId": parent,
            "message": {"role": role, "content": content, "timestamp": ts, **extra},
        }

    return [
        {"type": "model_change", "id": "e0", "parentId": None, "provider": "p", "modelId": "m"},
        msg(1, "e0", "user", "hi, I am bob@corp.com", 1767225600000),  # 2026-01-01
        msg(
            2,
            "e1",
            "assistant",
            [{"type": "text", "text": "old answer"}],
            1767225601000,
            provider="p",
            model="m",
        ),
        msg(3, "e2", "user", [{"type": "text", "text": "list files"}], 1780000000000),  # 2026-05
        msg(
            4,
            "e3",
            "assistant",
            [{"type": "toolCall", "id": "c", "name": "ls", "arguments": {"path": "."}}],
            1780000001000,
        ),
        msg(5, "e4", "toolResult", [{"type": "text", "text": "a.txt"}], 1780000002000, toolCallId="c"),
        msg(
            6,
            "e5",
            "assistant",
            [{"type": "thinking", "thinking": "hidden"}, {"type": "text", "text": "a.txt is there"}],
            1780000003000,
        ),
        msg(7, "e1", "assistant", [{"type": "text", "text": "an abandoned branch"}], 1767225602000),
    ]


def test_session_rows_follow_the_branch_keep_tool_calls_and_honour_since():
    session = Session("k", "s1", "main", _entries()[:-1])  # the current branch ends at e6
    rows = session_rows(session, None, Scrubber())
    assert (
        [r["messages"][-1]["content"] for r in rows]
        == [
            "old answer",
            '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>',  # as the chat template writes it
            "a.txt is there",
        ]
    )
    assert rows[0]["messages"][0]["content"] == "hi, I am [EMAIL]" and rows[0]["model"] == "p/m"
    assert rows[1]["tool_calls"] == [{"name": "ls", "arguments": '{"path": "."}'}]
    assert [m["role"] for m in rows[2]["messages"]] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    later = session_rows(session, parse_since("2026-03-01"), Scrubber())
    assert [r["turn"] for r in later] == [3, 5]
    branch = session_rows(Session("k", "s1", "main", _entries()), None, Scrubber())
    assert [r["messages"][-1]["content"] for r in branch] == ["an abandoned branch"]  # leaf e7's branch
    json.dumps(rows)  # plain JSON
