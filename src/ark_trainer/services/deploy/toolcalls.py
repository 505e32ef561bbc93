"""OpenAI ``tool_calls`` in and out of the model server, in ark-trainer's one ``<tool_call>`` text format.

Out: the model writes ``<tool_call>{"name": …, "arguments": {…}}</tool_call>`` blocks
(:mod:`ark_trainer.stages.agent.toolcall`); the chat-completions response carries them as
``message.tool_calls`` (ids ``call_…``, ``arguments`` a JSON string, ``finish_reason: "tool_calls"``)
and the content without the blocks, streamed or not, so that a client such as OpenClaw executes them.
transformers' own parser for this format raises on a malformed block (a tiny model writes some); ours
counts it and passes the text through as content instead, so a bad call is an answer, not a 500.

In: a request's assistant ``tool_calls`` and ``tool`` results are rendered by the chat template when it
knows them (``AGENT_CHAT_TEMPLATE``, Qwen's); for a template that does not (the QC demo's), they are
rewritten as text the model can read: the calls as ``<tool_call>`` blocks in the assistant's content,
each result as a user turn ``<tool_response>\\n…\\n</tool_response>`` (as Qwen's template shows them).
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable
from typing import Any

from ark_trainer.base.chat.toolcall import format_tool_calls, parse_tool_calls

OPEN = "<tool_call>"
_PROBE = "ark_probe_tool"


def openai_tool_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parsed calls (arguments as dicts) as OpenAI ``tool_calls``: ids ``call_…``, arguments a JSON string."""
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": call["function"]["name"],
                "arguments": json.dumps(call["function"]["arguments"], ensure_ascii=False),
            },
        }
        for call in calls
    ]


def template_support(render: Callable[..., str]) -> tuple[bool, bool]:
    """(renders ``tools=``, renders assistant ``tool_calls`` and ``tool`` results) for a template.

    ``render(messages, tools=None)`` returns the template's text. Probed once per model with a made-up
    tool name that can only appear in the output if the template rendered it.
    """
    user = [{"role": "user", "content": "hi"}]
    probe = {"type": "function", "function": {"name": _PROBE, "description": "", "parameters": {}}}
    call = {"type": "function", "function": {"name": _PROBE, "arguments": {}}}
    turn = user + [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "ark_probe_result"},
    ]
    try:
        tools_ok = _PROBE in render(user, tools=[probe])
    except Exception:  # a template that chokes on tools does not support them
        tools_ok = False
    try:
        text = render(turn)
        calls_ok = _PROBE in text and "ark_probe_result" in text
    except Exception:
        calls_ok = False
    return tools_ok, calls_ok


def as_plain_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant ``tool_calls`` and ``tool`` results as plain text turns, for a template without tools."""
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            calls = copy.deepcopy(message["tool_calls"])
            text = "\n".join(t for t in (message.get("content") or "", format_tool_calls(calls)) if t)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            out.append(
                {
                    "role": "user",
                    "content": f"<tool_response>\n{message.get('content') or ''}\n</tool_response>",
                }
            )
        else:
            out.append(message)
    return out


class StreamSplitter:
    """Streams content but holds back everything from the first ``<tool_call>`` on, parsed at the end.

    A chunk's end that could be the start of ``<tool_call>`` waits for the next chunk.
    """

    def __init__(self) -> None:
        self.held = ""
        self.in_call = False

    def feed(self, text: str) -> str:
        """The part of ``text`` that is surely content (may be empty)."""
        self.held += text
        if self.in_call:
            return ""
        at = self.held.find(OPEN)
        if at >= 0:
            self.in_call = True
            out, self.held = self.held[:at], self.held[at:]
            return out
        keep = max((k for k in range(1, len(OPEN)) if self.held.endswith(OPEN[:k])), default=0)
        out = self.held[: len(self.held) - keep]
        self.held = self.held[len(out) :]
        return out

    def finish(self) -> tuple[str, list[dict[str, Any]]]:
        """(the rest of the content, OpenAI tool calls) once generation ended."""
        text, self.held = self.held, ""
        if not self.in_call:
            return text, []
        content, calls, _ = parse_tool_calls(text)
        if not calls:  # nothing callable: what the model wrote is its answer
            return text, []
        return content, openai_tool_calls(calls)


def _ours(field: Any) -> bool:
    """A response template's ``tool_calls`` field that parses our format (JSON in ``<tool_call>``)."""
    if not isinstance(field, dict) or field.get("content") != "json":
        return False
    return OPEN in str(field.get("open") or field.get("open_pattern") or "")


def use_own_parser(processor: Any, model: Any) -> None:
    """Leave ``<tool_call>`` blocks in the text transformers hands back; :class:`ToolCallResponses` parses them.

    Only a template whose tool calls are our format loses its ``tool_calls`` field; any other (Qwen3.5's
    XML calls, Gemma's) keeps transformers' parser.
    """
    from transformers.cli.serving.utils import get_response_template

    tokenizer = getattr(processor, "tokenizer", processor)
    template = get_response_template(processor, model)
    if template is not None and _ours(template.get("fields", {}).get("tool_calls")):
        template = copy.deepcopy(template)
        template["fields"].pop("tool_calls")
        tokenizer.response_template = template


class ToolCallResponses:
    """Mixin for transformers' ChatCompletionHandler: ``<tool_call>`` blocks become OpenAI ``tool_calls``."""

    _splitters: dict[str, StreamSplitter]

    def _build_completion(
        self, request_id, content, model_id, finish_reason, usage=None, tool_calls=None, **kw
    ):
        if tool_calls is None and content and OPEN in content:
            text, calls, _ = parse_tool_calls(content)
            if calls:
                content, tool_calls, finish_reason = text, openai_tool_calls(calls), "tool_calls"
        return super()._build_completion(  # type: ignore[misc]  # the handler's, after this mixin
            request_id, content, model_id, finish_reason, usage=usage, tool_calls=tool_calls, **kw
        )

    def _build_chunk_sse(self, request_id="", content=None, model=None, finish_reason=None, **kw):
        build = super()._build_chunk_sse  # type: ignore[misc]  # the handler's, after this mixin
        splitters = self.__dict__.setdefault("_splitters", {})
        split = splitters.setdefault(request_id, StreamSplitter())
        if finish_reason is None:
            if content is None:
                return build(request_id, model=model, **kw)
            content = split.feed(content)
            return build(request_id, content=content, model=model, **kw) if content else ""
        splitters.pop(request_id, None)
        rest, calls = split.finish()
        parts = [build(request_id, content=rest, model=model)] if rest else []
        if calls:
            deltas = [{"index": i, **call} for i, call in enumerate(calls)]
            parts.append(build(request_id, model=model, tool_calls=deltas))
            finish_reason = "tool_calls"
        return "".join(parts) + build(
            request_id, content=content, model=model, finish_reason=finish_reason, **kw
        )
