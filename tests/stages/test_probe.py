"""``--strategy auto`` on a weak and a strong demo base model, driven end to end by ``ark-trainer run --yes``.

The two models differ only in their warm-up targets (``build_base_model(strong=...)``): the weak one learned
the demo's deliberately flawed answers, the strong one the correct ones. The probe must choose RFT+GRPO for
the first and Only GRPO for the second, and plan.json, run.yaml and the report must say why. Among all
strategies, the data's shape comes first: pairs only -> DPO, thumbs labels only -> KTO, otherwise the
probe's rule, unchanged.

Run: PYTHONPATH=src python -m pytest tests/stages/test_probe.py -q
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.fileio import read_json, read_jsonl, write_jsonl
from ark_trainer.cli import main
from ark_trainer.core.config import TrainConfig
from ark_trainer.stages.probe import data_shape, decide, summarize
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen

# Small enough to build both models in seconds on CPU, trained enough for the strong one to answer with the
# right verdict and a compliant reply most of the time (measured on all 48 training prompts × 4 samples at
# composite ≥ 0.7: pass rate 0.56 strong vs 0.24 weak; at the default 0.8, which needs the exact type, both
# are low). The minimum pass rate sits halfway between.
MODEL = {
    "hidden_size": 32,
    "num_layers": 2,
    "warmup_steps": 100,
    "n_warmup_rows": 320,
    "vocab_size": 1000,
    "warmup_batch_size": 16,
}
# The tiny models rarely name the exact violation type, so "pass" here means a right verdict with a
# compliant, polite reply (composite ≥ 0.7) rather than the default 0.8 (exact type).
RUN_CONFIG = {
    "pass_threshold": 0.7,
    "auto_probe_prompts": 48,
    "auto_probe_samples": 4,
    "auto_min_pass_rate": 0.4,
    "num_generations": 4,
    "rft_num_samples": 2,
    "rft_min_reward": 0.0,
    "max_completion_length": 40,
    "rft_learning_rate": 1e-3,
    "grpo_learning_rate": 1e-3,
    "logging_steps": 1,
    "save_steps": 0,
    "beta": 0.0,
    "heartbeat_interval": 1.0,
}


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    import torch

    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: one thread is faster than two fighting on a busy CPU
    try:
        root = tmp_path_factory.mktemp("auto")
        train, eval_ = write_demo_data(root / "data", n_train=48, n_eval=6, seed=3)
        rows = read_jsonl(train)
        weak = build_base_model(root / "weak", rows, seed=3, progress=False, **MODEL)
        strong = build_base_model(root / "strong", rows, seed=3, progress=False, strong=True, **MODEL)
        config = root / "auto.yaml"
        config.write_text(yaml.safe_dump(RUN_CONFIG), encoding="utf-8")
        yield {"train": train, "eval": eval_, "weak": weak, "strong": strong, "config": config}
    finally:
        torch.set_num_threads(threads)


def _run(assets, model: str, out: Path, capsys) -> tuple[dict, dict, str]:
    request = (
        f"自动选择策略，训练3步，RFT 1步，batch size 8，模型 {assets[model]}，数据 {assets['train']}，"
        f"评估集 {assets['eval']}，输出到 {out}"
    )
    assert main(["run", request, "--yes", "--config", str(assets["config"])]) == 0
    shown = capsys.readouterr().out
    assert "ark-trainer-inner train --strategy auto" in shown  # the plan was shown before training
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    run = yaml.safe_load((out / "run.yaml").read_text(encoding="utf-8"))
    return plan, run, (out / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
def test_auto_picks_rft_grpo_for_weak_and_only_grpo_for_strong(assets, tmp_path, capsys):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        weak_plan, weak_run, weak_report = _run(assets, "weak", tmp_path / "weak", capsys)
        strong_plan, strong_run, strong_report = _run(assets, "strong", tmp_path / "strong", capsys)
    finally:
        torch.set_num_threads(threads)

    weak_probe, strong_probe = weak_plan["probe"], strong_plan["probe"]
    assert weak_probe["pass_rate"] < 0.4 <= strong_probe["pass_rate"], (weak_probe, strong_probe)
    assert weak_probe["prompts"] == strong_probe["prompts"] == 48 and weak_probe["samples_per_prompt"] == 4

    assert weak_plan["requested"] == strong_plan["requested"] == "auto"
    weak_steps = [(s["name"], s["steps"]) for s in weak_plan["stages"]]
    strong_steps = [(s["name"], s["steps"]) for s in strong_plan["stages"]]
    assert (weak_plan["strategy"], weak_steps) == ("RFT+GRPO", [("rft", 1), ("grpo", 2)])
    assert (strong_plan["strategy"], strong_steps) == ("GRPO", [("grpo", 3)])
    assert "below --auto_min_pass_rate" in weak_plan["reason"]
    assert "already passes often" in strong_plan["reason"]
    assert (
        weak_run["strategy"] == strong_run["strategy"] == "auto"
    )  # run.yaml: what was asked; plan.json: the choice

    # the probe's answers are kept, and its numbers are theirs
    scored = read_jsonl(tmp_path / "strong" / "data" / "probe_scored.jsonl")
    rewards = [a["reward"] for row in scored for a in row["answers"]]
    assert len(scored) == 48 and len(rewards) == 192
    assert sum(r >= 0.7 - 1e-9 for r in rewards) / len(rewards) == pytest.approx(
        strong_probe["pass_rate"], abs=1e-4
    )

    # the stages followed the decision
    assert (tmp_path / "weak" / "eval" / "rft.json").is_file()
    assert not (tmp_path / "strong" / "eval" / "rft.json").exists()
    assert (tmp_path / "strong" / "eval" / "grpo.json").is_file()
    events = read_jsonl(tmp_path / "strong" / "events.jsonl")
    decision = [e for e in events if e["event"] == "strategy"]
    assert (
        decision
        and decision[0]["strategy"] == "GRPO"
        and decision[0]["pass_rate"] == strong_probe["pass_rate"]
    )

    # the report says what was chosen and why
    assert (
        "Strategy: RFT+GRPO (requested: auto)" in weak_report and "below --auto_min_pass_rate" in weak_report
    )
    assert "Strategy: GRPO (requested: auto)" in strong_report and "already passes often" in strong_report
    assert "pass_rate" in strong_report


def _cfg(**kw) -> TrainConfig:
    return config_class()(**{"auto_probe_samples": 2, **kw})


def test_decision_rules():
    cfg = _cfg(pass_threshold=0.8, auto_min_pass_rate=0.3, auto_max_zero_std=0.5)
    limits = cfg.auto_probe_samples, cfg.pass_threshold, cfg.auto_min_pass_rate, cfg.auto_max_zero_std
    # mostly failing → RFT first
    result = summarize([[0.1, 0.2], [0.9, 0.3], [0.2, 0.4]], *limits)
    assert (result.pass_rate, result.zero_std_share) == (round(1 / 6, 4), 0.0)
    assert decide(result)[0] == "RFT+GRPO"
    # passes often but every group identical → GRPO would get no signal → RFT first
    result = summarize([[0.9, 0.9], [1.0, 1.0], [0.5, 0.5]], *limits)
    assert result.zero_std_share == 1.0 and result.pass_rate == round(4 / 6, 4)
    strategy, reason = decide(result)
    assert strategy == "RFT+GRPO" and "--auto_max_zero_std" in reason
    # passes often and groups differ → Only GRPO
    result = summarize([[0.9, 0.5], [1.0, 0.85], [0.3, 0.95]], *limits)
    assert decide(result)[0] == "GRPO"
    # None (reward not applicable) never passes
    assert summarize([[None, None]], *limits).pass_rate == 0.0


def test_auto_settings_are_validated(capsys):
    argv = ["train", "--model_path", "m", "--data_path", "d", "--output_dir", "o", "--strategy", "auto"]
    assert main([*argv, "--auto_probe_samples", "1", "--auto_min_pass_rate", "2"]) == 2
    err = capsys.readouterr().err
    assert "--auto_probe_samples: must be in [2, 256]: a group needs at least 2 answers" in err
    assert "--auto_min_pass_rate: must be in [0, 1], got 2.0" in err


@pytest.mark.parametrize("rate,threshold", [(0.297, 0.3), (0.3049, 0.3), (0.2999, 0.3), (0.6951, 0.7)])
def test_auto_reason_never_prints_equal_numbers_for_different_values(rate, threshold):
    from ark_trainer.stages.probe import ProbeResult, decide

    _, reason = decide(ProbeResult(8, 4, 0.8, rate, 0.2, 0.5, threshold, 0.9))
    shown = reason.split("pass rate ")[1].split(" ")[0]
    limit = reason.split("--auto_min_pass_rate ")[1].split(")")[0].split(",")[0].split(" ")[0]
    assert shown != limit, reason


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
    cfg = config_class()(
        auto_probe_samples=2, pass_threshold=0.8, auto_min_pass_rate=0.3, auto_max_zero_std=0.5
    )
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
