"""``data/length.py``: under ``--env`` every prompt is checked with the environment's tool schemas in it, as
the model reads it, against the model's window (a server with many long tools made a prompt no model reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.errors import UserError
from tests.conftest import save_tiny_qwen


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from ark_trainer.agent.toolcall import AGENT_CHAT_TEMPLATE

    path = save_tiny_qwen(tmp_path_factory.mktemp("length") / "m")  # 256 positions
    tok = AutoTokenizer.from_pretrained(str(path))
    tok.chat_template = AGENT_CHAT_TEMPLATE
    tok.save_pretrained(str(path))
    return path


def _tools(n: int, words: int) -> list[dict]:
    return [
        {"type": "function", "function": {"name": f"t{i}", "description": "look up " * words,
                                          "parameters": {"type": "object", "properties": {}}}}
        for i in range(n)
    ]  # fmt: skip


ROWS = [{"_line": 1, "prompt": [{"role": "user", "content": "hi"}]}]


@pytest.mark.parametrize("n, words", [(40, 2), (2, 200)])
def test_tools_that_fill_the_window_are_refused_with_the_row(agent_model, tmp_path, n, words):
    from ark_trainer.data.length import check_prompt_lengths

    check_prompt_lengths(str(agent_model), 16, [(tmp_path / "d.jsonl", ROWS)])  # without tools: fits
    with pytest.raises(UserError) as err:
        check_prompt_lengths(str(agent_model), 16, [(tmp_path / "d.jsonl", ROWS)], tools=_tools(n, words))
    [line] = err.value.messages
    assert line.startswith(f"{tmp_path / 'd.jsonl'}:1: prompt: ") and f"with the {n} tools of --env" in line
    assert "show fewer tools (toolFilter)" in line, line


def test_a_few_short_tools_fit(agent_model, tmp_path):
    from ark_trainer.data.length import check_prompt_lengths

    check_prompt_lengths(str(agent_model), 16, [(tmp_path / "d.jsonl", ROWS)], tools=_tools(1, 2))
