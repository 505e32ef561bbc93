"""Prompt fitting in the model server (``services/deploy/fit.py``), without a server: the pure parts. (The tool calls
in and out: ``test_toolcalls.py``.)
"""

from __future__ import annotations

import json

from ark_trainer.services.deploy.fit import (
    CUT_MARK,
    PromptFitter,
    compact_tools,
    current_turn_start,
    fit_messages,
)
from ark_trainer.services.deploy.toolcalls import as_plain_messages, template_support
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.conftest import save_tiny_qwen

SYSTEM = "You are a personal assistant running inside OpenClaw. " * 400
NOTE = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> Active exec sessions: none <<<END_OPENCLAW_INTERNAL_CONTEXT>>>"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "ls",
            "description": "List directories. Long explanation follows here.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Dir."}},
            },
        },
    }
]


def _openclaw(question: str) -> list[dict]:
    """The shape of a real OpenClaw 2026.9.6 request (measured): system, the question + notes, a note."""
    return [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"[Tue 2026-12-01 03:45 UTC] {question}\n\nRuntime: agent=main | host=vm",
        },
        {"role": "user", "content": NOTE},
    ]


def chars(messages, tools) -> int:
    """A counter for the pure rule: characters of the contents (+ 10 per message, + the tools' JSON)."""
    return sum(len(str(m.get("content") or "")) + 10 for m in messages) + len(json.dumps(tools or []))


def test_a_prompt_that_fits_is_left_alone():
    messages = _openclaw("Q?")[1:]
    assert fit_messages(chars, messages, None, 10_000) == (messages, None, None)


def test_the_question_survives_and_the_system_prompt_keeps_its_head():
    fitted, tools, report = fit_messages(chars, _openclaw("What is 2+2?"), TOOLS, 600)
    assert "What is 2+2?" in fitted[1]["content"] and fitted[-1]["content"] == NOTE
    assert fitted[0]["content"].startswith("You are a personal") and fitted[0]["content"].endswith(CUT_MARK)
    assert tools == TOOLS and chars(fitted, tools) <= 600
    assert report.total > 600 and report.tools == "all 1" and report.turn == (2, 2)
    assert "fitted into 600" in report.line()


def test_tools_go_compact_then_away_before_the_question():
    _, tools, report = fit_messages(chars, _openclaw("Q?"), TOOLS, 380)
    assert report.tools == "compact 1" and tools == compact_tools(TOOLS)
    assert tools[0]["function"]["description"] == "List directories"
    fitted, tools, report = fit_messages(chars, _openclaw("Q?"), TOOLS, 250)
    assert tools is None and report.tools == "dropped 1" and "Q?" in fitted[-2]["content"]


def test_older_turns_newest_first_and_a_tool_exchange_is_not_a_final_answer():
    old = [{"role": "user", "content": f"old question {i}"} for i in range(3)]
    old = [m for q in old for m in (q, {"role": "assistant", "content": "old answer " + "x" * 40})]
    call = {"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
    turn = [
        {"role": "user", "content": "list the folder"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "a.txt"},
    ]
    messages = [{"role": "system", "content": SYSTEM}, *old, *turn]
    assert current_turn_start(messages[1:]) == len(old)
    fitted, _, report = fit_messages(chars, messages, None, 300)
    assert fitted[-3:] == turn  # the whole current turn
    assert report.older[0] < len(old) and fitted[-4] == old[-1]  # the newest older turns kept


def test_a_request_that_alone_overflows_keeps_its_head_and_end():
    text = "QUESTION-HEAD " + "filler " * 200 + " TAIL-END"
    fitted, _, report = fit_messages(chars, [{"role": "user", "content": text}], None, 120)
    kept = fitted[0]["content"]
    assert kept.startswith("QUESTION-HEAD") and kept.endswith("TAIL-END") and CUT_MARK in kept
    assert report.request_cut and chars(fitted, None) <= 120


def _fitter(tmp_path, template=None):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(save_tiny_qwen(tmp_path / "m"))
    if template:
        tok.chat_template = template

    def render(messages, tools=None):
        return tok.apply_chat_template(messages, tools=tools, add_generation_prompt=True, tokenize=False)

    lines: list[str] = []
    fitter = PromptFitter(
        render, lambda s: tok(s, add_special_tokens=False)["input_ids"], 200, log=lines.append
    )
    return fitter, render, lines


def test_fitter_on_a_real_template_says_so_once(tmp_path):
    fitter, render, lines = _fitter(tmp_path)
    assert (fitter.tools_ok, fitter.calls_ok) == (False, False)  # the QC demo's template knows no tools
    for question in ("first question", "second question"):
        messages, tools = fitter(_openclaw(question), TOOLS)
        assert question in render(messages, tools) and fitter.count(messages, tools) <= 200
    assert len(lines) == 1 and lines[0].startswith("[ark serve] prompt of") and "fitted into 200" in lines[0]


def test_a_template_without_tools_reads_calls_and_results_as_text(tmp_path):
    call = {"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
    messages = [
        {"role": "user", "content": "list"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "a.txt"},
    ]
    plain = as_plain_messages(messages)
    assert plain[1] == {
        "role": "assistant",
        "content": '<tool_call>\n{"name": "ls", "arguments": {"path": "."}}\n</tool_call>',
    }
    assert plain[2] == {"role": "user", "content": "<tool_response>\na.txt\n</tool_response>"}
    fitter, render, _ = _fitter(tmp_path, AGENT_CHAT_TEMPLATE)
    assert (fitter.tools_ok, fitter.calls_ok) == (True, True)
    assert template_support(lambda m, tools=None: "no tools here") == (False, False)


def test_a_long_request_leaves_room_for_the_tool_result():
    call = {"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
    request = {"role": "user", "content": "list the files " + "runtime notes " * 60}
    turn = [
        request,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "a.txt"},
    ]
    fitted, _, report = fit_messages(chars, [{"role": "system", "content": SYSTEM}, *turn], None, 300)
    assert fitted[-1] == turn[-1] and fitted[-2] == turn[-2]  # the tool exchange is kept whole
    assert fitted[0]["content"].startswith("list the files") and report.request_cut
    assert chars(fitted, None) <= 300
