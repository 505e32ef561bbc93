"""The agent demo's ingredients: the customer-service environment, its tasks and trajectories, the base model.

Run: PYTHONPATH=src python -m pytest tests/demo/test_agent_demo.py -q
"""

from __future__ import annotations

import json
import random
import re

import pytest

from ark_trainer.agent.toolcall import AGENT_CHAT_TEMPLATE
from ark_trainer.chat.toolcall import parse_tool_calls
from ark_trainer.demo import agent_data, agent_env
from ark_trainer.demo.agent_data import Flaws, generate_tasks, gold_trajectories, play
from ark_trainer.demo.agent_env import CustomerServiceEnv, make_env
from tests.tiny_runs import TINY_AGENT


def _row(task: str, decoy: bool = False, refundable: bool | None = None) -> dict:
    """A task row of ``task`` (with a decoy order, or not; whose order is refundable, or not, if given)."""
    for row in generate_tasks(400, seed=5):
        if row["task"] != task or bool(row["decoy_id"]) != decoy:
            continue
        status = agent_env.order_status(row["order_id"], row["case_seed"])
        if refundable is None or agent_env.REFUNDABLE[status] == refundable:
            return row
    raise AssertionError("no such row")


def _env(row: dict) -> CustomerServiceEnv:
    env = make_env()
    assert (
        env.reset(**row) is None
    )  # nothing appended to the prompt; the whole row is accepted, as TRL passes it
    return env


def test_tools_are_the_public_methods_with_json_schemas():
    from transformers.utils import get_json_schema

    env = make_env()
    assert agent_env.tool_names(env) == ["create_ticket", "lookup_order", "refund_order", "reply"]
    schemas = {s["function"]["name"]: s["function"] for s in map(get_json_schema, agent_data.env_tools(env))}
    assert schemas["create_ticket"]["parameters"]["required"] == ["order_id", "issue"]
    assert schemas["lookup_order"]["description"] == "查订单状态"


def test_backend_is_deterministic_from_the_row():
    row = _row("refund", decoy=True)
    first, second = _env(row), _env(row)
    assert first.lookup_order(row["order_id"]) == second.lookup_order(row["order_id"])
    assert first.lookup_order(row["decoy_id"]).startswith(row["decoy_id"] + "：")
    assert first.lookup_order("Z9") == "无订单Z9"
    statuses = {agent_env.order_status(r["order_id"], r["case_seed"]) for r in generate_tasks(60, seed=1)}
    assert statuses == set(agent_env.STATUSES)


def test_gold_trajectories_solve_every_task():
    rows = generate_tasks(90, seed=3)
    assert {(r["task"], bool(r["decoy_id"])) for r in rows} == {
        (t, d) for t in agent_env.TASKS for d in (0, 1)
    }
    for row in rows:
        messages, env = play(row)
        assert env.get_reward() == 1.0, row
        assert sum(m["role"] == "assistant" for m in messages) <= 4  # within the default --max_turns


def test_status_needs_the_right_order_and_the_right_fact():
    row = _row("status", decoy=True)
    status = agent_env.order_status(row["order_id"], row["case_seed"])
    env = _env(row)
    env.lookup_order(row["decoy_id"])
    env.reply(f"状态：{status}")
    assert env.get_reward() == 0.0  # the decoy order was looked up, never the customer's
    env = _env(row)
    env.lookup_order(row["order_id"])
    env.reply("状态：" + next(s for s in agent_env.STATUSES if s != status))
    assert env.get_reward() == agent_env.PARTIAL  # right lookup, wrong fact
    env = _env(row)
    env.lookup_order(row["order_id"])
    assert env.get_reward() == agent_env.PARTIAL  # no reply yet
    env.reply(f"状态：{status}")
    assert env.get_reward() == 1.0
    env.refund_order(row["order_id"])
    assert env.get_reward() == 0.0 or not agent_env.REFUNDABLE[status]  # a refund nobody asked for


def test_refund_only_when_refundable():
    row = _row("refund", refundable=True)
    env = _env(row)
    assert "可退款" in env.lookup_order(row["order_id"])
    env.reply("已退款")
    assert env.get_reward() == pytest.approx(agent_env.PARTIAL / 2)  # looked up, refund missing
    assert env.refund_order(row["order_id"]) == f"{row['order_id']}已退款"
    assert env.get_reward() == 1.0
    env.create_ticket(row["order_id"], "破损")
    assert env.get_reward() == 0.0  # a ticket nobody asked for
    refused = _row("refund", refundable=False)
    env = _env(refused)
    assert env.lookup_order(refused["order_id"]).endswith("不可退款")
    assert env.refund_order(refused["order_id"]) == f"{refused['order_id']}不可退款"
    env.reply("已退款")
    assert env.get_reward() == agent_env.PARTIAL  # told the customer a refund that did not happen
    env = _env(refused)
    env.lookup_order(refused["order_id"])
    env.reply("抱歉，不可退款")
    assert env.get_reward() == 1.0


def test_ticket_needs_the_right_issue_and_number():
    row = _row("ticket")
    env = _env(row)
    wrong = next(i for i in agent_env.ISSUES if i != row["issue"])
    assert env.create_ticket(row["order_id"], "坏了") == "问题须为破损、少件、错发"
    assert env.get_reward() == 0.0
    number = env.create_ticket(row["order_id"], row["issue"]).removeprefix("工单号")
    assert number in agent_env.TICKET_IDS
    env.reply(f"工单号：{number}")
    assert env.get_reward() == 1.0
    env.create_ticket(row["order_id"], wrong)
    assert env.get_reward() == 0.0
    assert env.reply("x") == "已回复" and env.get_reward() == 0.0


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="task"):
        make_env().reset(task="teleport", order_id="A100")
    assert make_env().get_reward() == 0.0


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
    from ark_trainer.demo.model import train_tokenizer

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


def test_warmup_episodes_are_deliberately_imperfect():
    from ark_trainer.demo.agent_model import WARMUP_FLAWS, warmup_episodes

    rows = generate_tasks(600, seed=0 + 7919)
    rng = random.Random(0)
    rewards = [play(row, WARMUP_FLAWS, rng)[1].get_reward() for row in rows]
    solved = sum(r == 1.0 for r in rewards) / len(rewards)
    assert 0.2 < solved < 0.6  # a careless agent, not a random one
    episodes = warmup_episodes(30, seed=0, exclude=[])
    assert all(json.dumps(e, ensure_ascii=False) for e in episodes) and len(episodes) == 30


def test_flawless_flaws_are_the_gold_agent():
    row = _row("refund", decoy=True, refundable=True)
    assert play(row, Flaws())[0] == play(row)[0]
    careless = Flaws(decoy_id=1.0)
    messages, env = play(row, careless)
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == {"order_id": row["decoy_id"]}
    assert env.get_reward() == 0.0


@pytest.fixture(scope="module")
def tiny_agent_model(tmp_path_factory):
    from ark_trainer.demo.agent_model import build_agent_model

    out = tmp_path_factory.mktemp("agent") / "base"
    return build_agent_model(out, generate_tasks(30, seed=0), progress=False, **TINY_AGENT)


def test_base_model_builder_runs_on_a_tiny_setting(tiny_agent_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.demo.agent_model import FORMAT_TOKENS
    from ark_trainer.demo.model import MODEL_CARD

    model = AutoModelForCausalLM.from_pretrained(tiny_agent_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_agent_model)
    assert model.config.hidden_size == 16 and model.config.vocab_size == len(tokenizer)
    assert tokenizer.chat_template == AGENT_CHAT_TEMPLATE
    for token in (*FORMAT_TOKENS, "lookup_order", "create_ticket", "A1", "H2", "K9"):
        assert len(tokenizer(token, add_special_tokens=False)["input_ids"]) == 1, token
    card = (tiny_agent_model / MODEL_CARD).read_text(encoding="utf-8")
    assert "a toy, not a real model" in card and '"n_warmup_episodes": 40' in card


def test_assistant_mask_covers_the_assistant_turns_only(tiny_agent_model):
    from transformers import AutoTokenizer

    from ark_trainer.demo.agent_model import tokenized_episode

    tokenizer = AutoTokenizer.from_pretrained(tiny_agent_model)
    messages = gold_trajectories(generate_tasks(3, seed=9))[1]  # a refund: lookup, refund, reply, final
    out = tokenized_episode(tokenizer, messages, agent_data.env_tools(make_env()))
    trained = tokenizer.decode(
        [i for i, m in zip(out["input_ids"], out["assistant_masks"], strict=True) if m]
    )
    assert trained.count("<tool_call>") == 3 and agent_data.FINAL_TEXT in trained
    assert "<tool_response>" not in trained and messages[0]["content"] not in trained


def test_check_loop_plays_episodes_with_the_model(tiny_agent_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.chat.toolcall import format_tool_calls
    from ark_trainer.demo import agent_check

    model = AutoModelForCausalLM.from_pretrained(tiny_agent_model)
    tokenizer = AutoTokenizer.from_pretrained(tiny_agent_model)
    rows = generate_tasks(3, seed=4)
    episodes = agent_check.run_episodes(model, tokenizer, rows, samples=2, temperature=1.0, max_new_tokens=6)
    assert len(episodes) == 6 and all(1 <= e.turns <= 4 for e in episodes)
    stats = agent_check.summary(episodes, samples=2)
    assert stats["n"] == 3 and 0.0 <= stats["task_success"] <= 1.0
    # the loop itself: a scripted turn runs its calls; an unknown tool is counted and answered with an error
    episode = agent_check.start(rows[0])
    call = {
        "type": "function",
        "function": {"name": "lookup_order", "arguments": {"order_id": rows[0]["order_id"]}},
    }
    bad = {"type": "function", "function": {"name": "teleport", "arguments": {}}}
    agent_check.execute(episode, format_tool_calls([call, bad]))
    assert episode.messages[-2]["content"].startswith(rows[0]["order_id"] + "：")
    assert episode.messages[-1]["content"].startswith("error:") and episode.invalid == 1 and not episode.done
    agent_check.execute(episode, "好的")
    assert episode.done and episode.turns == 2 and episode.calls == 2


def _tiny_builder(monkeypatch):
    from ark_trainer.demo import agent_model

    real = agent_model.build_agent_model
    monkeypatch.setattr(
        agent_model,
        "build_agent_model",
        lambda out, rows, **kw: real(out, rows, **{**kw, **TINY_AGENT, "progress": False}),
    )


def test_demo_task_agent_trains_over_episodes_with_the_demo_env(tmp_path, monkeypatch, capsys):
    from ark_trainer.cli import main
    from ark_trainer.demo import run

    _tiny_builder(monkeypatch)
    seen = {}
    monkeypatch.setattr(run, "train_agent", lambda flags: seen.update(flags) or tmp_path / "o")
    out = tmp_path / "agent-demo"
    assert (
        main(
            ["demo", "--task", "agent", "--output_dir", str(out), "--n_train", "12", "--max_train_steps", "9"]
        )
        == 0
    )
    assert seen["env"] == "ark_trainer.demo.agent_env:make_env" and seen["max_turns"] == 4
    assert seen["eval_dataset"] == str(out / "data" / "eval.jsonl") and seen["model_path"] == str(
        out / "base_model"
    )
    assert (seen["max_train_steps"], seen["rft_steps"]) == (9, 3)
    from ark_trainer.config import load_yaml_config

    preset = load_yaml_config(seen["config"])  # the demo's preset is valid train config today
    assert preset["strategy"] == "RFT+GRPO" and preset["rft_min_reward"] == 1.0


def test_demo_default_task_is_still_qc(tmp_path, monkeypatch):
    from ark_trainer.cli import main
    from ark_trainer.demo import run

    calls = []
    monkeypatch.setattr(run, "run_demo", lambda out, **kw: calls.append(out) or out)
    monkeypatch.setattr(run, "run_agent_demo", lambda *a, **kw: pytest.fail("the agent demo ran"))
    assert main(["demo", "--output_dir", str(tmp_path / "d")]) == 0
    assert calls == [tmp_path / "d"]


def test_demo_task_is_checked(capsys):
    from ark_trainer.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["demo", "--task", "chess"])
    assert exc.value.code == 2 and "--task" in capsys.readouterr().err


def test_demo_tools_mcp_trains_on_the_backend_served_over_mcp(tmp_path, monkeypatch, capsys):
    from ark_trainer.cli import main
    from ark_trainer.demo import run

    _tiny_builder(monkeypatch)
    seen = {}
    monkeypatch.setattr(run, "train_agent", lambda flags: seen.update(flags) or tmp_path / "o")
    out = tmp_path / "agent-demo"
    args = ["demo", "--task", "agent", "--tools", "mcp", "--output_dir", str(out), "--n_train", "12"]
    assert main([*args, "--max_train_steps", "9"]) == 0
    server = seen["env"]["mcp_servers"]["shop"]
    assert server["args"] == ["-m", "ark_trainer.demo.agent_mcp_server"] and server["env"]["PYTHONPATH"]
    assert main(["demo", "--tools", "mcp", "--output_dir", str(tmp_path / "qc")]) == 2
    assert "--tools: only with --task agent" in capsys.readouterr().err
