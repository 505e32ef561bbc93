"""The agent demo's tasks and trajectories (``app/demo/agent_data.py``): the gold trajectories solve every task,
render in the chat template and round-trip; the data files load with the trainer's loader.
"""

from __future__ import annotations

import re

from ark_trainer.app.demo import agent_data, agent_env
from ark_trainer.app.demo.agent_data import Flaws, generate_tasks, gold_trajectories, play
from ark_trainer.app.demo.agent_env import make_env
from ark_trainer.base.chat.toolcall import parse_tool_calls
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.demo.agent_rows import _row


def test_gold_trajectories_solve_every_task():
    rows = generate_tasks(90, seed=3)
    assert {(r["task"], bool(r["decoy_id"])) for r in rows} == {
        (t, d) for t in agent_env.TASKS for d in (0, 1)
    }
    for row in rows:
        messages, env = play(row)
        assert env.get_reward() == 1.0, row
        assert sum(m["role"] == "assistant" for m in messages) <= 4  # within the default --max_turns


def test_data_files_load_with_the_trainers_loader(tmp_path):
    from ark_trainer.data.loader import load_jsonl

    train_path, eval_path = agent_data.write_agent_data(tmp_path, n_train=60)
    train, held_out = load_jsonl(train_path), load_jsonl(eval_path)
    assert len(held_out) >= 200 and len(train) == 60
    assert not {agent_data.task_key(r) for r in train} & {agent_data.task_key(r) for r in held_out}
    for row in held_out[:30]:
        assert row["prompt"][0]["role"] == "user" and row["task"] in agent_env.TASKS
        env = make_env()
        env.reset(**row)  # the loader's row, columns and all, starts an episode
        assert env.orders and row["order_id"] in env.orders


def _assistant_turns(text: str) -> list[str]:
    return re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", text, re.DOTALL)


def test_gold_trajectories_render_and_round_trip(tmp_path):
    from ark_trainer.app.demo.model import train_tokenizer

    tokenizer = train_tokenizer(["订单"] * 3, vocab_size=300)
    tokenizer.chat_template = AGENT_CHAT_TEMPLATE
    tools = agent_data.env_tools(make_env())
    for messages in gold_trajectories(generate_tasks(30, seed=2)):
        text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)
        assert "- lookup_order(order_id): 查订单状态" in text
        wanted = [m for m in messages if m["role"] == "assistant"]
        turns = _assistant_turns(text)
        assert len(turns) == len(wanted)
        for turn, message in zip(turns, wanted, strict=True):
            content, calls, invalid = parse_tool_calls(turn)
            assert invalid == 0 and calls == message.get("tool_calls", []) and content == message["content"]
        for result in (m for m in messages if m["role"] == "tool"):
            assert f"<tool_response>\n{result['content']}\n</tool_response>" in text


def test_flawless_flaws_are_the_gold_agent():
    row = _row("refund", decoy=True, refundable=True)
    assert play(row, Flaws())[0] == play(row)[0]
    careless = Flaws(decoy_id=1.0)
    messages, env = play(row, careless)
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"order_id": row["decoy_id"]}
    assert env.get_reward() == 0.0
