"""``data/length.py``: under ``--env`` every prompt is checked with the environment's tool schemas in it, as
the model reads it, against the model's window (a server with many long tools made a prompt no model reads)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from tests.conftest import save_tiny_qwen
from tests.data.refusals import train, write_lines


@pytest.fixture(scope="module")
def agent_model(tmp_path_factory) -> Path:
    from transformers import AutoTokenizer

    from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE

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


@pytest.mark.slow
def test_cli_refuses_prompts_longer_than_the_window_all_in_one_pass(tmp_path, small_window_model):
    rows = [{"prompt": f"short {i}"} for i in range(6)]
    rows.insert(2, {"prompt": "hello world " * 2_000_000})  # 24 MB: checked without tokenizing it all
    rows.insert(5, {"messages": [{"role": "user", "content": "你好 " * 400}]})
    data = write_lines(tmp_path / "long.jsonl", rows)
    lines = train(small_window_model, data, tmp_path / "out")
    assert len(lines) == 2, lines
    for line, lineno in zip(lines, (3, 6), strict=True):
        assert line.startswith(f"error: {data}:{lineno}: prompt: ")
        assert "longer than the model's window of 192 tokens" in line and "--max_completion_length" in line


@pytest.mark.slow
def test_cli_window_follows_max_completion_length(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "hello world " * 30}, {"prompt": "ok"}])
    lines = train(small_window_model, data, tmp_path / "out", "--max_completion_length", "200")
    assert (
        len(lines) == 1 and lines[0].startswith(f"error: {data}:1: prompt: ") and "window of 56 " in lines[0]
    )


@pytest.mark.slow
def test_cli_completion_length_filling_the_window_is_a_flag_error(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": "ok"}])
    lines = train(small_window_model, data, tmp_path / "out", "--max_completion_length", "256")
    assert len(lines) == 1 and lines[0].startswith("error: --max_completion_length: ")


@pytest.mark.slow
def test_cli_eval_dataset_prompts_are_checked_too(tmp_path, small_window_model):
    data = write_lines(tmp_path / "d.jsonl", [{"prompt": f"q{i}"} for i in range(4)])
    held = write_lines(tmp_path / "eval.jsonl", [{"prompt": "ok"}, {"prompt": "hello world " * 500}])
    lines = train(small_window_model, data, tmp_path / "out", "--eval_dataset", str(held))
    assert len(lines) == 1 and lines[0].startswith(f"error: {held}:2: prompt: ")


def test_length_check_counts_a_surrogate_without_a_traceback():
    from ark_trainer.data.length import prompt_token_counts

    class Tok:
        chat_template = None

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": list(range(len(text)))}

    rows = [{"prompt": [{"role": "user", "content": "bad \ud800 text"}]}]
    assert prompt_token_counts(Tok(), rows, window=4)[0][0] > 4
