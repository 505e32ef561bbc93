"""``--strategy auto`` among all strategies (data of pairs only → DPO, thumbs labels only → KTO, otherwise
the probe's rule, unchanged), and the natural-language planner's DPO/KTO/RLOO/PPO requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.config import TrainConfig
from ark_trainer.errors import UserError
from ark_trainer.fileio import read_json, write_jsonl
from ark_trainer.nl.parse import parse_request
from ark_trainer.stages.probe import data_shape, decide, summarize
from tests.conftest import save_tiny_qwen

PAIR = {"prompt": [{"role": "user", "content": "q"}], "candidates": [], "chosen": "good", "rejected": "bad"}
THUMB = {"prompt": [{"role": "user", "content": "q"}], "candidates": ["an answer"], "label": True}
QC = {"prompt": [{"role": "user", "content": "q"}], "candidates": ["结论：合规"], "label": "无"}


def test_data_shapes():
    assert data_shape([PAIR, {**PAIR, "label": False}]) == "pairs"
    assert data_shape([THUMB, {**THUMB, "label": False}]) == "labels"
    assert data_shape([QC, QC]) == "prompts"  # the QC data of today: the probe decides, as before
    assert data_shape([PAIR, QC]) == "prompts" and data_shape([{**PAIR, "label": "辱骂"}]) == "prompts"
    assert data_shape([{**PAIR, "reference": "x"}]) == "prompts"  # a checkable answer: the rewards can verify
    assert data_shape([{**THUMB, "candidates": []}]) == "prompts"  # a thumb with no answer to judge
    assert data_shape([]) == "prompts"


def test_decide_prefers_the_data_shape_then_the_probe_rules():
    cfg = TrainConfig(auto_probe_samples=2, pass_threshold=0.8, auto_min_pass_rate=0.3, auto_max_zero_std=0.5)
    limits = cfg.auto_probe_samples, cfg.pass_threshold, cfg.auto_min_pass_rate, cfg.auto_max_zero_std
    strong = summarize([[0.9, 0.5], [1.0, 0.85], [0.3, 0.95]], *limits)
    weak = summarize([[0.1, 0.2], [0.9, 0.3], [0.2, 0.4]], *limits)
    flat = summarize([[0.9, 0.9], [1.0, 1.0], [0.5, 0.5]], *limits)
    assert [decide(r)[0] for r in (strong, weak, flat)] == ["GRPO", "RFT+GRPO", "RFT+GRPO"]  # unchanged
    strong.data = "pairs"
    strategy, reason = decide(strong)
    assert strategy == "DPO" and "preference pair" in reason and "pass rate" in reason
    weak.data = "labels"
    strategy, reason = decide(weak)
    assert strategy == "KTO" and "thumbs-up/down" in reason


def test_auto_on_pairs_only_data_runs_dpo_and_says_why(tmp_path):
    model = save_tiny_qwen(tmp_path / "model")
    rows = [
        {"question": f"顾客：包裹{i}丢了。", "chosen": "结论：合规", "rejected": "好的"} for i in range(8)
    ]
    write_jsonl(tmp_path / "pairs.jsonl", rows)
    reward = tmp_path / "reward.yaml"  # pairs carry no QC label: a label-free grader scores probe and eval
    reward.write_text(
        "graders:\n  - name: verdict\n    type: string_check\n    reference: 结论\n    operation: like\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    argv = [
        "train", "--strategy", "auto", "--model_path", str(model), "--data_path", str(tmp_path / "pairs.jsonl"),
        "--reward_config", str(reward), "--output_dir", str(out), "--max_train_steps", "2", "--batch_size", "4",
        "--num_generations", "2", "--auto_probe_prompts", "4", "--auto_probe_samples", "2",
        "--max_completion_length", "4", "--dpo_learning_rate", "1e-2", "--save_steps", "0", "--eval_auto", "False",
        "--device", "cpu",
    ]  # fmt: skip
    assert main(argv) == 0
    plan = read_json(out / "plan.json")
    assert plan["strategy"] == "DPO" and plan["requested"] == "auto" and plan["probe"]["data"] == "pairs"
    assert "preference pair" in plan["reason"] and [s["name"] for s in plan["stages"]] == ["dpo"]
    assert (out / "model" / "model.safetensors").is_file()


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


def test_the_skill_and_the_docs_name_every_strategy():
    from ark_trainer.strategies import STRATEGIES

    root = Path(__file__).resolve().parents[1]
    skill = (root / "src" / "ark_trainer" / "openclaw" / "skill" / "SKILL.md").read_text(encoding="utf-8")
    guide = (root / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for name in STRATEGIES:
        assert name in skill and f"`{name}`" in guide, name
    assert "PPO" in skill and "PPO" in guide
