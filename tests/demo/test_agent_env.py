"""The agent demo's environment (``app/demo/agent_env.py``): a tiny customer-service backend whose tools are its
public methods, deterministic from the row, rewarding the right lookups, refunds, tickets and replies only.
"""

from __future__ import annotations

import pytest

from ark_trainer.app.demo import agent_data, agent_env
from ark_trainer.app.demo.agent_data import generate_tasks
from ark_trainer.app.demo.agent_env import CustomerServiceEnv, make_env
from tests.demo.agent_rows import _row


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
