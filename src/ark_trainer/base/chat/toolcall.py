"""Tool-call blocks in text: Qwen2.5/Hermes ``<tool_call>`` JSON blocks read from and written into a turn.

The one format ark-trainer reads and writes (see :mod:`ark_trainer.stages.agent.toolcall` for the chat templates
that render it)::

    <tool_call>
    {"name": "lookup_order", "arguments": {"order_id": "A1234"}}
    </tool_call>
"""

from __future__ import annotations

import json
import re
from typing import Any

TOOL_CALL_RE = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)


def parse_tool_calls(text: str) -> tuple[str, list[dict[str, Any]], int]:
    """Split an assistant turn's text into (content, OpenAI-style tool calls, count of unparseable blocks).

    A block whose body is not a JSON object with a string ``name`` is not a call: it is counted as invalid
    (agents see it as a malformed call; graders count it) and left out of the calls. ``arguments`` is always
    a dict in the result (a JSON string of an object is decoded; anything else makes the block invalid).
    """
    calls: list[dict[str, Any]] = []
    invalid = 0
    for body in TOOL_CALL_RE.findall(text):
        try:
            obj = json.loads(body)
        except json.JSONDecodeError:
            invalid += 1
            continue
        args = obj.get("arguments", {}) if isinstance(obj, dict) else None
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                args = None
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str) or not isinstance(args, dict):
            invalid += 1
            continue
        calls.append({"type": "function", "function": {"name": obj["name"], "arguments": args}})
    content = TOOL_CALL_RE.sub("", text)
    # An unclosed <tool_call> (cut by max tokens) is not content either.
    content = content.split("<tool_call>", 1)[0] if "<tool_call>" in content else content
    if "<tool_call>" in text and text.count("<tool_call>") > text.count("</tool_call>"):
        invalid += 1
    return content.strip(), calls, invalid


def format_tool_calls(calls: list[dict[str, Any]]) -> str:
    """The text of ``calls`` (OpenAI-style, arguments as dict or JSON string) in the ``<tool_call>`` format."""
    blocks = []
    for call in calls:
        fn = call.get("function", call)
        args = fn.get("arguments", {})
        if isinstance(args, str):
            args = json.loads(args) if args.strip() else {}
        body = json.dumps({"name": fn["name"], "arguments": args}, ensure_ascii=False)
        blocks.append(f"<tool_call>\n{body}\n</tool_call>")
    return "\n".join(blocks)
