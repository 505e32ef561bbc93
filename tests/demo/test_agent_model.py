"""The agent demo's tiny base model (``app/demo/agent_model.py``): deliberately imperfect warm-up episodes, a
builder that runs on a tiny setting, the loss on the assistant turns only, and the check loop on it
(``app/demo/agent_check.py``, kept here to build the module's tiny model once).
"""

from __future__ import annotations

import json
import random

import pytest

from ark_trainer.app.demo import agent_data
from ark_trainer.app.demo.agent_data import generate_tasks, gold_trajectories, play
from ark_trainer.app.demo.agent_env import make_env
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.tiny_runs import TINY_AGENT


def test_warmup_episodes_are_deliberately_imperfect():
    from ark_trainer.app.demo.agent_model import WARMUP_FLAWS, warmup_episodes

    rows = generate_tasks(600, seed=0 + 7919)
    rng = random.Random(0)
    rewards = [play(row, WARMUP_FLAWS, rng)[1].get_reward() for row in rows]
    solved = sum(r == 1.0 for r in rewards) / len(rewards)
    assert 0.2 < solved < 0.6  # a careless agent, not a random one
    episodes = warmup_episodes(30, seed=0, exclude=[])
    assert all(json.dumps(e, ensure_ascii=False) for e in episodes) and len(episodes) == 30


@pytest.fixture(scope="module")
def tiny_agent_model(tmp_path_factory):
    from ark_trainer.app.demo.agent_model import build_agent_model

    out = tmp_path_factory.mktemp("agent") / "base"
    return build_agent_model(out, generate_tasks(30, seed=0), progress=False, **TINY_AGENT)


def test_base_model_builder_runs_on_a_tiny_setting(tiny_agent_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.app.demo.agent_model import FORMAT_TOKENS
    from ark_trainer.app.demo.model import MODEL_CARD

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

    from ark_trainer.app.demo.agent_model import tokenized_episode

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

    from ark_trainer.app.demo import agent_check
    from ark_trainer.base.chat.toolcall import format_tool_calls

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
