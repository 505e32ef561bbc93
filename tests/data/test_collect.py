"""Collected OpenClaw sessions train as episodes: tool calls in the chat template's own
format, tool results as ``tool`` turns, and the loss on the assistant turn only."""

from __future__ import annotations

import pytest

from ark_trainer.agent.toolcall import AGENT_CHAT_TEMPLATE
from ark_trainer.chat.toolcall import parse_tool_calls
from ark_trainer.data.collect import Session, session_rows
from ark_trainer.data.loader import load_jsonl
from ark_trainer.data.scrub import Scrubber
from ark_trainer.fileio import write_jsonl
from tests.conftest import save_tiny_qwen
from tests.line_breakers import IDS, RAW_LEGAL, records, write_raw

CALL = {"type": "toolCall", "id": "call_1", "name": "ls", "arguments": {"path": "."}}


def _entries() -> list[dict]:
    """A session branch as OpenClaw 2026.9.6 exports it: request, tool call, tool result, answer."""
    msgs = [
        {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Looking."}, CALL]},
        {"role": "toolResult", "toolCallId": "call_1", "content": [{"type": "text", "text": "a.txt\nb.txt"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Two files: a.txt and b.txt."}]},
    ]
    return [
        {"type": "message", "id": str(i), "parentId": str(i - 1) if i else None, "message": m}
        for i, m in enumerate(msgs)
    ]


def _rows() -> list[dict]:
    return session_rows(Session("agent:main:explicit:t", "t", "main", _entries()), None, Scrubber())


def test_tool_calls_are_written_as_the_chat_template_writes_them(tmp_path):
    from transformers import AutoTokenizer

    rows = _rows()
    assert len(rows) == 2 and rows[0]["tool_calls"] == [{"name": "ls", "arguments": '{"path": "."}'}]
    text = rows[0]["messages"][-1]["content"]
    assert parse_tool_calls(text)[:2] == (
        "Looking.",
        [{"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}],
    )
    tok = AutoTokenizer.from_pretrained(save_tiny_qwen(tmp_path / "m"))
    tok.chat_template = AGENT_CHAT_TEMPLATE
    as_text = rows[1]["messages"][:-1]  # the second row's history holds the call and its result
    call = {"type": "function", "function": {"name": "ls", "arguments": {"path": "."}}}
    native = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [call]},
        {"role": "tool", "content": "a.txt\nb.txt"},
    ]
    assert as_text[-1] == {"role": "tool", "content": "a.txt\nb.txt"}
    assert tok.apply_chat_template(as_text, tokenize=False) == tok.apply_chat_template(native, tokenize=False)


def test_a_collected_row_puts_the_loss_on_its_assistant_turn_only(tmp_path):
    """RFT's SFT rows (prompt = the history, completion = the assistant turn) through TRL's own tokenisation."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    path = tmp_path / "rows.jsonl"
    write_jsonl(path, _rows())
    rows = load_jsonl(path)  # train's own reader: the last assistant message becomes the candidate
    model = save_tiny_qwen(tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = AGENT_CHAT_TEMPLATE
    sft = [
        {"prompt": r["prompt"], "completion": [{"role": "assistant", "content": r["candidates"][0]}]}
        for r in rows
    ]
    args = SFTConfig(
        output_dir=str(tmp_path / "o"),
        completion_only_loss=True,
        max_length=None,
        report_to=[],
        bf16=False,
        use_cpu=True,
    )
    trainer = SFTTrainer(
        model=str(model), args=args, train_dataset=Dataset.from_list(sft), processing_class=tok
    )
    for row, example in zip(rows, trainer.train_dataset, strict=True):
        trained = tok.decode([t for t in example["labels"] if t != -100])  # the tokens with a loss
        assert trained == row["candidates"][0] + "<|im_end|>\n"  # the assistant turn, nothing of the history
    assert "<tool_call>" in rows[0]["candidates"][0] and "<tool_response>" in tok.decode(
        trainer.train_dataset[1]["input_ids"]
    )


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_collected_session_lines(tmp_path, sep):
    from ark_trainer.data.collect import read_jsonl_objects

    write_raw(tmp_path / "s.jsonl", records(sep))
    assert read_jsonl_objects(tmp_path / "s.jsonl") == (records(sep), 0)
