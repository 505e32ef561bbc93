"""Episodes with a model that really calls tools: our loop (eval) and TRL's GRPO tool loop, same wrapper.

The tiny model is first taught, in a few seconds, to call ``lookup_order`` with the order id of the
request and then to answer from the result (the shop example of docs/agents.md), so the tool path of both
loops runs: tools executed, results shown, rewards from the environment's state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.fileio import write_jsonl
from ark_trainer.stages.agent.env import Limits, limited_env_class, load_env
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE
from tests.conftest import run_cli, save_tiny_qwen

ROOT = Path(__file__).resolve().parents[2]
SHOP = f"{ROOT / 'examples' / 'agent_env' / 'shop_env.py'}:make_env"
STATUS = {"A1": "shipped", "B2": "pending", "C3": "delivered", "D4": "cancelled"}
IDS = list(STATUS)


def prompt(i: int, order: str) -> list[dict]:
    return [{"role": "user", "content": f"Hi {i}, where is order {order}?"}]


def episode(i: int, order: str) -> list[dict]:
    call = {"type": "function", "function": {"name": "lookup_order", "arguments": {"order_id": order}}}
    return [
        *prompt(i, order),
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "name": "lookup_order", "content": f"order {order}: {STATUS[order]}"},
        {"role": "assistant", "content": f"It is {STATUS[order]}."},
    ]


@pytest.fixture(scope="module")
def tool_model(tmp_path_factory) -> Path:
    """A tiny model taught to look the order up, then answer (150 full-batch Adam steps)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = tmp_path_factory.mktemp("agent") / "model"
    texts = [
        "Tools:\n- lookup_order(order_id): Look up an order's status.",
        '<tool_call>\n{"name": "lookup_order", "arguments": {"order_id": "A1"}}\n</tool_call>',
        "<tool_response>\norder A1: shipped\n</tool_response> It is shipped. pending delivered cancelled B2 C3 D4",
    ]
    torch.manual_seed(0)  # the random init too: the same model every run
    small = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2}
    save_tiny_qwen(path, texts=texts, num_hidden_layers=2, max_position_embeddings=512, **small)
    tok = AutoTokenizer.from_pretrained(path)
    tok.chat_template = AGENT_CHAT_TEMPLATE
    tok.save_pretrained(path)
    schemas = load_env(SHOP).schemas
    enc = [
        tok.apply_chat_template(
            episode(i, IDS[i % 4]), tools=schemas, return_dict=True, return_assistant_tokens_mask=True
        )
        for i in range(8)
    ]
    width = max(len(e["input_ids"]) for e in enc)
    ids = torch.tensor([e["input_ids"] + [tok.pad_token_id] * (width - len(e["input_ids"])) for e in enc])
    mask = torch.tensor([[1] * len(e["input_ids"]) + [0] * (width - len(e["input_ids"])) for e in enc])
    keep = torch.tensor([e["assistant_masks"] + [0] * (width - len(e["input_ids"])) for e in enc])
    labels = ids.masked_fill(keep == 0, -100)
    model = AutoModelForCausalLM.from_pretrained(path)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    for _ in range(150):
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.save_pretrained(path)
    return path


@pytest.mark.slow
def test_greedy_eval_runs_the_tools_and_scores_the_episodes(tool_model, tmp_path):
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.rewards.builder import build_reward
    from ark_trainer.stages.evaluate import evaluate_model

    rows = [{"prompt": prompt(20 + i, o), "order_id": o} for i, o in enumerate(IDS)]
    spec = tmp_path / "graders.yaml"
    spec.write_text(
        "graders:\n  - name: looked_up\n    type: tool_called\n    tool: lookup_order\n"
        "    args_from: {order_id: order_id}\n    weight: 0\n"
    )
    reward = build_reward({"env": SHOP, "reward_config": str(spec)}, rows, "cpu")
    assert reward.names == ["looked_up", "env_reward"]
    limits = Limits(max_turns=3)
    env = (limited_env_class(load_env(SHOP), limits), limits)
    rt = Runtime("cpu", False, False, [])
    result = evaluate_model(
        tool_model,
        "base",
        rows,
        reward,
        rt,
        tmp_path / "base.json",
        max_new_tokens=90,
        pass_threshold=1.0,
        env=env,
    )
    assert result["tool_call_validity"] > 0 and result["mean_tool_calls"] >= 1.0  # it learnt to call
    assert result["task_success"] == result["components"]["looked_up"]  # the grader and the env agree
    written = json.loads((tmp_path / "base.json").read_text())
    success = [a["outcomes"]["task_success"] for a in written["answers"]]  # task by task, for paired tests
    assert result["task_success"] == round(sum(success) / len(success), 4)
    assert "preference_alignment" not in written["answers"][0]["outcomes"]  # no grader measures it here
    episodes = written["episodes"]
    called = [e for e in episodes if e["tool_calls"] and e["tool_calls"][0]["ok"]]
    assert called, episodes
    asked = called[0]["tool_calls"][0]["arguments"]["order_id"]
    assert called[0]["tool_calls"][0]["result"] == f"order {asked}: {STATUS[asked]}"  # the tool really ran
    assert called[0]["turns"] >= 2 and called[0]["messages"][2]["role"] == "tool"


@pytest.mark.slow
def test_grpo_runs_the_tools_through_trls_loop(tool_model, tmp_path):
    write_jsonl(
        tmp_path / "train.jsonl",
        [{"prompt": prompt(i, IDS[i % 4]), "order_id": IDS[i % 4]} for i in range(4)],
    )
    out = tmp_path / "run"
    result = run_cli(
        "train", "--model_path", str(tool_model), "--data_path", str(tmp_path / "train.jsonl"),
        "--output_dir", str(out), "--eval_auto", "False", "--env", SHOP, "--strategy", "GRPO",
        "--max_train_steps", "2", "--batch_size", "4", "--num_generations", "2", "--temperature", "0.7",
        "--max_completion_length", "128", "--max_turns", "3", "--logging_steps", "1", "--save_steps", "0",
        "--report_to", "none", "--device", "cpu",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    logs = [e for e in events if e.get("event") == "metrics" and e.get("stage") == "grpo" and "loss" in e]
    assert logs and max(e["tools/call_frequency"] for e in logs) > 0  # TRL ran the model's tool calls
    assert max(e["rewards/env_reward/mean"] for e in logs) > 0  # through our env: the reward saw the lookups
    assert max(e["rewards/agent_turns/mean"] for e in logs) >= 2
    assert "turns" in result.stdout + result.stderr and "tool calls" in result.stdout + result.stderr
