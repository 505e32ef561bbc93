"""The request table: ≥ 100 requests in varied styles, each checked field by field against its plan.

Two lists. ``HELD_OUT`` was written first, before any parser change for issue 20, and was not looked at
while tuning the rules; it is checked as is, and a held-out request the rules still get wrong is marked
xfail with the reason (never dropped). ``TUNED`` is the set the rules were developed against.

Fields: strategy (as the config normalises it: RFT+GRPO, GRPO, auto), model_path, data_path,
output_dir, steps (--max_train_steps), rft_steps, lr (--grpo_learning_rate), rft_lr, batch, weights
(--reward_weights). A field not listed is not checked.

Run: PYTHONPATH=src python -m pytest tests/test_nl_requests.py -q
"""

from __future__ import annotations

import pytest

from ark_trainer.nl.plan import make_plan

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
    ("let the tool pick the strategy, 3000 steps, batch size 8", {"strategy": "auto", "steps": 3000, "batch": 8}),
    (
        "训练 /models/qwen2 用 /data/d2.jsonl，两步走，输出到 runs/qw2",
        {
            "strategy": "RFT+GRPO",
            "model_path": "/models/qwen2",
            "data_path": "/data/d2.jsonl",
            "output_dir": "runs/qw2",
        },
    ),
    ("GRPO only; learning-rate 2e-6; 750 steps; bs=2", {"strategy": "GRPO", "lr": 2e-6, "steps": 750, "batch": 2}),
    ("合规性权重2，满意度权重1，RFT+GRPO", {"weights": "qc_compliance=2,qc_satisfaction=1"}),
    ("RFT+GRPO 训 两千五百步", {"strategy": "RFT+GRPO", "steps": 2500}),
    (
        "Fine-tune model_path=/m/base data_path=/d/x.jsonl with auto strategy",
        {"strategy": "auto", "model_path": "/m/base", "data_path": "/d/x.jsonl"},
    ),
    ("先做奖励微调再做强化学习 共8000步 其中RFT 2000步", {"strategy": "RFT+GRPO", "steps": 8000, "rft_steps": 2000}),
    ("only grpo, 32GB gpu, save it to ./ckpts/g1", {"strategy": "GRPO", "batch": 16, "output_dir": "./ckpts/g1"}),
    ("RFT+GRPO on customer-service QC, 0.5万步", {"strategy": "RFT+GRPO", "steps": 5000}),
    ("仅做GRPO，不要RFT，2.5k步", {"strategy": "GRPO", "steps": 2500}),
    ("quick iteration on /data/new.jsonl, 400 steps", {"strategy": "GRPO", "data_path": "/data/new.jsonl", "steps": 400}),
    (
        "Rejection-sampling fine-tuning followed by GRPO, lr 5e-6, 3k steps",
        {"strategy": "RFT+GRPO", "lr": 5e-6, "steps": 3000},
    ),
]
