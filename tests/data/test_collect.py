"""Collected OpenClaw sessions train as episodes: tool calls in the chat template's own
format, tool results as ``tool`` turns, and the loss on the assistant turn only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ark_trainer.base.chat.toolcall import parse_tool_calls
from ark_trainer.base.fileio import write_jsonl
from ark_trainer.data.collect import Session, session_rows
from ark_trainer.data.loader import load_jsonl
from ark_trainer.data.scrub import Scrubber
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.conftest import save_tiny_qwen
from tests.data.scrub_forms import CARD_19, group
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


SECRETS = {
    "phone": "138-1234-5678",
    "phone_key": "+8613912345678",
    "email": "张三@例子.中国",
    "email_key": "alice@corp.com",
    "id": "110105 19491231 002X",
    "card": group(CARD_19, [4, 4, 4, 4, 3]),
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "ali": "LTAI5tRqvXg9bKzP8wY3mN2c",
    "password": "hunter2x",
    "api_value": "abcd1234efgh5678",
    "agent": "carol@corp.com",
}


def _transcript(path: Path, session_id: str) -> None:
    s = SECRETS
    user = (
        f"我的手机 {s['phone']}，邮箱 {s['email']}，身份证 {s['id']}，卡号 {s['card']}，密码：{s['password']}"
    )
    call = {
        "type": "toolCall",
        "name": "deploy",
        "arguments": {"api_key": s["api_value"], "env": json.dumps({"AWS_KEY": s["aws"], "ali": s["ali"]})},
    }
    entries = [
        {"type": "session", "id": session_id, "version": 3},
        {"type": "message", "message": {"role": "system", "content": f"owner {s['email_key']}"}},
        {"type": "message", "message": {"role": "user", "content": user}},
        {"type": "message", "message": {"role": "assistant", "content": [call]}},
        {"type": "message", "message": {"role": "toolResult", "content": f"password: {s['password']}"}},
        {"type": "message", "message": {"role": "assistant", "content": f"已通知 {s['phone']}"}},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")


def collect(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "ARK_OPENCLAW_BIN": str(tmp_path / "no-openclaw"), "PYTHONWARNINGS": "ignore"}
    out = tmp_path / "collected.jsonl"
    return subprocess.run(
        [sys.executable, "-m", "ark_trainer", "data", "collect", "--openclaw", "-o", str(out), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_collect_leaves_no_secret_in_any_column(tmp_path):
    state = Path(os.environ["OPENCLAW_STATE_DIR"])
    # A channel session: its key and id carry the peer's phone number and e-mail.
    key = f"whatsapp:{SECRETS['phone_key']}:{SECRETS['email_key']}"
    _transcript(state / "agents" / "main" / "sessions" / f"{key}.jsonl", f"sess-{SECRETS['phone_key']}")
    _transcript(state / "agents" / SECRETS["agent"] / "sessions" / "s2.jsonl", "s2")  # an agent named by mail
    result = collect(tmp_path)
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "collected.jsonl").read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.splitlines()]
    assert len(rows) == 4
    dumped = text + json.dumps(rows, ensure_ascii=False)  # raw, and with escapes undone
    for name, secret in SECRETS.items():
        assert secret not in dumped, f"{name} leaked"
        assert secret.replace(" ", "") not in dumped.replace(" ", ""), f"{name} leaked (spaces)"
    assert "13912345678" not in dumped and "alice" not in dumped
    by_agent = {r["agent_id"]: r for r in rows}
    assert by_agent["main"]["session_key"] == "legacy:main:whatsapp:[PHONE]:[EMAIL]"
    assert by_agent["main"]["session_id"] == "sess-[PHONE]"
    assert by_agent["[EMAIL]"]["session_key"] == "legacy:[EMAIL]:s2"


def test_collect_skips_a_torn_last_line_with_a_warning(tmp_path):
    state = Path(os.environ["OPENCLAW_STATE_DIR"])
    path = state / "agents" / "main" / "sessions" / "live.jsonl"
    _transcript(path, "live")
    torn = json.dumps(
        {"type": "message", "message": {"role": "user", "content": "写到一半的消息"}}, ensure_ascii=False
    )
    with path.open("ab") as f:
        f.write(
            torn.encode("utf-8")[:-7]
        )  # cut mid-object and mid-character, no newline: still being written
    result = collect(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and str(path) in warnings[0] and "1 unreadable line" in warnings[0]
    rows = [
        json.loads(line) for line in (tmp_path / "collected.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(rows) == 2  # the rest of the session is kept
