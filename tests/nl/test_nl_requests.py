"""The request table: ≥ 100 requests in varied styles, each checked field by field against its plan.

Two lists. ``HELD_OUT`` was written first, before the parser was extended for them, and was not looked at
while tuning the rules; it is checked as is, and a held-out request the rules still get wrong is marked
xfail with the reason (never dropped). ``TUNED`` is the set the rules were developed against.

Fields: strategy (as the config normalises it: RFT+GRPO, GRPO, auto), model_path, data_path,
output_dir, steps (--max_train_steps), rft_steps, lr (--grpo_learning_rate), rft_lr, batch, weights
(--reward_weights). A field not listed is not checked.

Run: PYTHONPATH=src python -m pytest tests/nl/test_nl_requests.py -q
"""

from __future__ import annotations

import pytest

from ark_trainer.nl.parse import parse_request
from ark_trainer.nl.plan import plan_request

FIELDS = {
    "steps": "max_train_steps",
    "lr": "grpo_learning_rate",
    "rft_lr": "rft_learning_rate",
    "batch": "batch_size",
    "weights": "reward_weights",
}

# --- held out: written first, checked last, not tuned against ---------------------------------------------
HELD_OUT = [
    (
        "两步走：先拒绝采样微调再强化学习，模型 /ckpt/qwen-1.5b，数据 /data/chats.jsonl",
        {"strategy": "RFT+GRPO", "model_path": "/ckpt/qwen-1.5b", "data_path": "/data/chats.jsonl"},
    ),
    ("just grpo pls, 2k steps, lr 3e-6", {"strategy": "GRPO", "steps": 2000, "lr": 3e-6}),
    (
        "Train ./models/base on ./data/qc_train.jsonl with RFT then GRPO for 1,500 steps, save to ./out/exp7",
        {
            "strategy": "RFT+GRPO",
            "model_path": "./models/base",
            "data_path": "./data/qc_train.jsonl",
            "steps": 1500,
            "output_dir": "./out/exp7",
        },
    ),
    ("奖励微调 3千步 + GRPO，总共一万步", {"strategy": "RFT+GRPO", "rft_steps": 3000, "steps": 10000}),
    ("单步GRPO，batch 4，训练八百步", {"strategy": "GRPO", "batch": 4, "steps": 800}),
    ("自动选择训练策略吧，数据在 /srv/qc/all.json", {"strategy": "auto", "data_path": "/srv/qc/all.json"}),
    (
        "optimise compliance only, RFT+GRPO, 12k steps",
        {"strategy": "RFT+GRPO", "weights": "qc_compliance=1", "steps": 12000},
    ),
    (
        "用户满意度优先，只做GRPO，保存到 /tmp/run_sat",
        {"strategy": "GRPO", "weights": "qc_satisfaction=1", "output_dir": "/tmp/run_sat"},
    ),
    (
        "stratgy: rft+grpo, max_train_step=5000, batchsize 16",
        {"strategy": "RFT+GRPO", "steps": 5000, "batch": 16},
    ),
    (
        "Please do a two-stage run (RFT first, then GRPO) on /models/qc-7b using /data/qc.jsonl; "
        "output to /runs/qc7b",
        {
            "strategy": "RFT+GRPO",
            "model_path": "/models/qc-7b",
            "data_path": "/data/qc.jsonl",
            "output_dir": "/runs/qc7b",
        },
    ),
    ("快速迭代，1.2万步，学习率1e-5", {"strategy": "GRPO", "steps": 12000, "lr": 1e-5}),
    ("仅GRPO 五百步 显存16G", {"strategy": "GRPO", "steps": 500, "batch": 8}),
    (
        "RFT 2000 steps then GRPO, total 6000 steps, rft lr 1e-4",
        {"strategy": "RFT+GRPO", "rft_steps": 2000, "steps": 6000, "rft_lr": 1e-4},
    ),
    ("对质检模型做两阶段训练，数据 qc_v3.jsonl", {"strategy": "RFT+GRPO", "data_path": "qc_v3.jsonl"}),
    ("reinforcement learning only (GRPO), 20k steps", {"strategy": "GRPO", "steps": 20000}),
    (
        "let the tool pick the strategy, 3000 steps, batch size 8",
        {"strategy": "auto", "steps": 3000, "batch": 8},
    ),
    (
        "训练 /models/qwen2 用 /data/d2.jsonl，两步走，输出到 runs/qw2",
        {
            "strategy": "RFT+GRPO",
            "model_path": "/models/qwen2",
            "data_path": "/data/d2.jsonl",
            "output_dir": "runs/qw2",
        },
    ),
    (
        "GRPO only; learning-rate 2e-6; 750 steps; bs=2",
        {"strategy": "GRPO", "lr": 2e-6, "steps": 750, "batch": 2},
    ),
    ("合规性权重2，满意度权重1，RFT+GRPO", {"weights": "qc_compliance=2,qc_satisfaction=1"}),
    ("RFT+GRPO 训 两千五百步", {"strategy": "RFT+GRPO", "steps": 2500}),
    (
        "Fine-tune model_path=/m/base data_path=/d/x.jsonl with auto strategy",
        {"strategy": "auto", "model_path": "/m/base", "data_path": "/d/x.jsonl"},
    ),
    (
        "先做奖励微调再做强化学习 共8000步 其中RFT 2000步",
        {"strategy": "RFT+GRPO", "steps": 8000, "rft_steps": 2000},
    ),
    (
        "only grpo, 32GB gpu, save it to ./ckpts/g1",
        {"strategy": "GRPO", "batch": 16, "output_dir": "./ckpts/g1"},
    ),
    ("RFT+GRPO on customer-service QC, 0.5万步", {"strategy": "RFT+GRPO", "steps": 5000}),
    ("仅做GRPO，不要RFT，2.5k步", {"strategy": "GRPO", "steps": 2500}),
    (
        "quick iteration on /data/new.jsonl, 400 steps",
        {"strategy": "GRPO", "data_path": "/data/new.jsonl", "steps": 400},
    ),
    (
        "Rejection-sampling fine-tuning followed by GRPO, lr 5e-6, 3k steps",
        {"strategy": "RFT+GRPO", "lr": 5e-6, "steps": 3000},
    ),
]

# --- tuned: the rules were developed against these ---------------------------------------------------------
TUNED = [
    # requests the first rules got wrong
    ("32G显存，对质检模型做两阶段训练：先奖励微调，再GRPO强化学习", {"strategy": "RFT+GRPO", "batch": 16}),
    (
        "用 /data/qc.jsonl 训练 /models/qwen 的 RFT+GRPO，输出到 /out/v3",
        {
            "strategy": "RFT+GRPO",
            "data_path": "/data/qc.jsonl",
            "model_path": "/models/qwen",
            "output_dir": "/out/v3",
        },
    ),
    ("对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度", {"strategy": "RFT+GRPO"}),
    # strategy vocabulary
    ("奖励微调", {"strategy": "RFT+GRPO"}),
    ("先奖励微调再强化学习", {"strategy": "RFT+GRPO"}),
    ("拒绝采样微调加GRPO", {"strategy": "RFT+GRPO"}),
    ("两阶段训练", {"strategy": "RFT+GRPO"}),
    ("两步走", {"strategy": "RFT+GRPO"}),
    ("两步走，先RFT后GRPO", {"strategy": "RFT+GRPO"}),
    ("强化学习", {"strategy": "GRPO"}),
    ("用强化学习训练一下", {"strategy": "GRPO"}),
    ("单步训练", {"strategy": "GRPO"}),
    ("单步GRPO", {"strategy": "GRPO"}),
    ("只做强化学习", {"strategy": "GRPO"}),
    ("仅强化学习，3000步", {"strategy": "GRPO", "steps": 3000}),
    ("只做GRPO", {"strategy": "GRPO"}),
    ("仅GRPO", {"strategy": "GRPO"}),
    ("快速迭代", {"strategy": "GRPO"}),
    ("自动选择", {"strategy": "auto"}),
    ("自动选择策略", {"strategy": "auto"}),
    ("策略自动选", {"strategy": "auto"}),
    ("RFT+GRPO", {"strategy": "RFT+GRPO"}),
    ("rft + grpo", {"strategy": "RFT+GRPO"}),
    ("RFT→GRPO", {"strategy": "RFT+GRPO"}),
    ("two-stage RFT and GRPO", {"strategy": "RFT+GRPO"}),
    ("two stages please", {"strategy": "RFT+GRPO"}),
    ("rejection sampling fine-tuning then GRPO", {"strategy": "RFT+GRPO"}),
    ("reward fine-tuning, then reinforcement learning", {"strategy": "RFT+GRPO"}),
    ("only GRPO", {"strategy": "GRPO"}),
    ("GRPO only", {"strategy": "GRPO"}),
    ("just reinforcement learning", {"strategy": "GRPO"}),
    ("single-step GRPO", {"strategy": "GRPO"}),
    ("fast iteration", {"strategy": "GRPO"}),
    ("auto", {"strategy": "auto"}),
    ("pick the strategy automatically", {"strategy": "auto"}),
    ("you decide the strategy", {"strategy": "auto"}),
    ("strategy=auto", {"strategy": "auto"}),
    ("stratagy auto", {"strategy": "auto"}),
    ("GPRO only", {"strategy": "GRPO"}),
    ("RTF+GRPO", {"strategy": "RFT+GRPO"}),
    # numbers with units
    ("RFT+GRPO 1.5万步", {"steps": 15000}),
    ("RFT+GRPO 15k steps", {"steps": 15000}),
    ("RFT+GRPO 五千步", {"steps": 5000}),
    ("RFT+GRPO 2千步", {"steps": 2000}),
    ("RFT+GRPO 1,500 steps", {"steps": 1500}),
    ("RFT+GRPO 3w步", {"steps": 30000}),
    ("train for 10K steps", {"steps": 10000}),
    ("训练一万五千步", {"steps": 15000}),
    ("训练两万步，其中RFT五千步", {"steps": 20000, "rft_steps": 5000}),
    ("max_train_steps=1200 rft_steps=300", {"steps": 1200, "rft_steps": 300}),
    ("max-train-steps 1200", {"steps": 1200}),
    ("max_trian_steps 900", {"steps": 900}),
    ("1.5k steps total, 500 of RFT", {"steps": 1500, "rft_steps": 500}),
    ("learning rate 1e-5", {"lr": 1e-5}),
    ("lr=2e-6, batch_size=4", {"lr": 2e-6, "batch": 4}),
    ("学习率 3e-6 批大小 8", {"lr": 3e-6, "batch": 8}),
    ("learnig rate 5e-6", {"lr": 5e-6}),
    ("batchsize 16", {"batch": 16}),
    ("batch-size: 2", {"batch": 2}),
    ("RFT学习率1e-4", {"rft_lr": 1e-4}),
    ("显存16G", {"batch": 8}),
    ("24GB VRAM", {"batch": 8}),
    # paths by shape
    ("train /models/qwen on /data/qc.jsonl", {"model_path": "/models/qwen", "data_path": "/data/qc.jsonl"}),
    ("训练 ./base 用 ./d.jsonl", {"model_path": "./base", "data_path": "./d.jsonl"}),
    ("用 data/train.json 训练 models/m1", {"data_path": "data/train.json", "model_path": "models/m1"}),
    ("/data/qc.jsonl /models/qwen RFT+GRPO", {"data_path": "/data/qc.jsonl"}),
    ("train ~/ckpt/base", {"model_path": "~/ckpt/base"}),
    ("RFT+GRPO，保存到 /out/a", {"output_dir": "/out/a"}),
    ("GRPO, output to runs/x", {"output_dir": "runs/x"}),
    ("输出到 /tmp/r1 ，数据 /tmp/d.jsonl", {"output_dir": "/tmp/r1", "data_path": "/tmp/d.jsonl"}),
    (
        "save to ./out/b, model ./m, data ./d.jsonl",
        {"output_dir": "./out/b", "model_path": "./m", "data_path": "./d.jsonl"},
    ),
    (
        "fine-tune /models/qwen2.5-0.5b with /data/x.jsonl",
        {"model_path": "/models/qwen2.5-0.5b", "data_path": "/data/x.jsonl"},
    ),
    # objectives → weights
    ("优化合规性", {"weights": "qc_compliance=1"}),
    ("提升用户满意度", {"weights": "qc_satisfaction=1"}),
    ("compliance and satisfaction", {"weights": "qc_compliance=1,qc_satisfaction=1"}),
    ("合规性权重3", {"weights": "qc_compliance=3"}),
    # wordy and mixed
    (
        "我想用RFT+GRPO训练一下我们的客服质检模型，大概跑1万步，显存是24G，学习率用1e-5，输出到 runs/qc_v9",
        {"strategy": "RFT+GRPO", "steps": 10000, "batch": 8, "lr": 1e-5, "output_dir": "runs/qc_v9"},
    ),
    (
        "Hey, could you run a quick GRPO-only pass on /data/chat.jsonl with /models/small, 300 steps please?",
        {"strategy": "GRPO", "data_path": "/data/chat.jsonl", "model_path": "/models/small", "steps": 300},
    ),
    ("帮我两阶段训练 model ./m data ./d.jsonl 2k steps", {"strategy": "RFT+GRPO", "steps": 2000}),
    ("RFT then GRPO, 5k步, lr 1e-5", {"strategy": "RFT+GRPO", "steps": 5000, "lr": 1e-5}),
]


def _fields(text: str, expected: dict) -> dict:
    plan = plan_request(text)
    return {k: getattr(plan.cfg, FIELDS.get(k, k)) for k in expected}


def test_table_size_and_split():
    assert len(TUNED) + len(HELD_OUT) >= 100 and len(HELD_OUT) * 4 >= len(TUNED) + len(HELD_OUT)


@pytest.mark.parametrize(("text", "expected"), TUNED, ids=[r[:40] for r, _ in TUNED])
def test_tuned(text, expected):
    assert _fields(text, expected) == expected


# Held-out requests the rules get wrong, found when the held-out set was first checked (26 of 27 right);
# kept as strict xfails with the reason, not tuned away.
HELD_OUT_WRONG = {
    "Please do a two-stage run (RFT first, then GRPO) on /models/qc-7b using /data/qc.jsonl; "
    "output to /runs/qc7b": "a folder after 'run … on' is not read as the model (only after 训练/train/用/with)",
}


def _held_out_cases() -> list:
    return [
        pytest.param(text, expected, marks=pytest.mark.xfail(reason=HELD_OUT_WRONG[text], strict=True))
        if text in HELD_OUT_WRONG
        else (text, expected)
        for text, expected in HELD_OUT
    ]


@pytest.mark.parametrize(("text", "expected"), _held_out_cases(), ids=[r[:40] for r, _ in HELD_OUT])
def test_held_out(text, expected):
    assert _fields(text, expected) == expected


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
