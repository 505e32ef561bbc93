"""The request parser (``services/nl/parse.py``): it knows every strategy by name, refuses PPO in one line, and reads
which OpenClaw agent a request names.
"""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.services.nl.parse import parse_request


@pytest.mark.parametrize(
    ("request_text", "strategy"),
    [
        ("用DPO训练我的质检agent", "DPO"),
        ("train my agent with KTO", "KTO"),
        ("用KTO训练，数据是用户的点赞点踩", "KTO"),
        ("train with RLOO on my QC data, 500 steps", "RLOO"),
        ("用RLOO训练客服模型", "RLOO"),
        ("先RFT再DPO训练质检模型", "RFT+DPO"),
        ("RFT+DPO on my QC data", "RFT+DPO"),
        ("only DPO please", "DPO"),
        ("对当前客服质检Agent执行RFT+GRPO训练", "RFT+GRPO"),  # unchanged
    ],
)
def test_planner_knows_the_strategies(request_text, strategy):
    assert parse_request(request_text).flags["strategy"] == strategy


@pytest.mark.parametrize("request_text", ["用PPO训练我的质检agent", "train my agent with PPO"])
def test_planner_refuses_ppo_in_one_line(request_text):
    with pytest.raises(UserError) as err:
        parse_request(request_text)
    (line,) = err.value.messages
    assert "no longer ships PPO" in line and "GRPO or RLOO" in line


AGENTS = [  # which OpenClaw agent a request names
    ("对当前客服质检Agent执行RFT+GRPO训练", "current"),
    ("train my current agent with GRPO", "current"),
    ("优化我们的客服智能体", "current"),
    ("agent qc-bot, only GRPO", "qc-bot"),
    ("--agent ops2 RFT+GRPO", "ops2"),
    ("agent_id: sales", "sales"),
    ("agent main 两阶段训练", "main"),
    ("RFT+GRPO, model ./m, data ./d.jsonl", None),
    ("agent training with GRPO", None),
]


@pytest.mark.parametrize(("text", "agent"), AGENTS)
def test_named_agent(text, agent):
    assert parse_request(text).agent == agent


def test_the_strategy_registry_supplies_the_phrases(monkeypatch):
    """Each registered strategy carries how a request names it (``Strategy.phrases`` and ``words``); the
    parser names none: a strategy a plug-in registers is understood as the built-in ones are."""
    from ark_trainer.base import strategies
    from ark_trainer.base.strategies import Strategy, strategy_table
    from ark_trainer.services.nl.parse import strategy_phrases

    table = {**strategy_table()}
    table["ECHO"] = Strategy(
        ("grpo",), "a plug-in's", phrases=(r"echo\s+twice",), words=(r"(?<![a-z_])echo(?![a-z_])",)
    )
    monkeypatch.setattr(strategies, "_STRATEGIES", table)
    first, _ = strategy_phrases()
    assert (r"echo\s+twice", "ECHO") in first
    assert parse_request("train with echo twice on ./d.jsonl").flags["strategy"] == "ECHO"
    assert parse_request("train with echo on ./d.jsonl").flags["strategy"] == "ECHO"
    assert parse_request("只用GRPO训练 ./d.jsonl").flags["strategy"] == "GRPO"  # the built-ins' own phrases
