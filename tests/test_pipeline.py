"""End-to-end runs of `ark-trainer-inner train` on a tiny model and the demo's synthetic data."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.cli import main

TINY = {"hidden_size": 32, "num_layers": 2, "warmup_steps": 10, "n_warmup_rows": 64, "vocab_size": 600}


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    """Tiny demo data and a tiny base model, made once for this module."""
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.model import build_base_model

    root = tmp_path_factory.mktemp("assets")
    train, eval_ = write_demo_data(root / "data", n_train=48, n_eval=12, seed=3)
    model = build_base_model(root / "base_model", read_jsonl(train), seed=3, progress=False, **TINY)
    return {"train": train, "eval": eval_, "model": model, "root": root}


def _state_dict(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


# The reference templates, verbatim but for paths and step counts.
BASIC = (
    "train --strategy RFT+GRPO --task_name 客服质检_agent_training --model_path {model} --data_path {train} "
    "--output_dir {out} --openclaw_env True --eval_auto True --max_train_steps {steps} --batch_size 8 "
    "--log_dir {logs}"
)
ADVANCED = (
    "train --strategy RFT+GRPO --task_name 智能客服_RFT_GRPO_v2 --model_path {model} --data_path {train} "
    "--output_dir {out} --openclaw_env True --eval_auto True --eval_dataset {eval_dir} --max_train_steps 6 "
    "--rft_steps 2 --grpo_learning_rate 5e-6 --batch_size 8 --gradient_accumulation_steps 2 --warmup_ratio 0.1 "
    "--save_steps 2 --log_dir {logs} --device cuda:0 --fp16 True --auto_heartbeat True"
)


def _basic_template(a: dict, out: Path, logs: Path, steps: int = 6) -> list[str]:
    return shlex.split(BASIC.format(model=a["model"], train=a["train"], out=out, steps=steps, logs=logs))


# Small enough for a 2-layer, hidden-32 model to run the whole pipeline in seconds.
FAST = shlex.split(
    "--num_generations 4 --rft_num_samples 2 --max_completion_length 24 --rft_learning_rate 1e-3 "
    "--grpo_learning_rate 1e-3 --logging_steps 1 --rft_min_reward 0.0 --heartbeat_interval 1"
)


@pytest.mark.slow
def test_basic_template_end_to_end(assets, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no OpenClaw: a warning, never a crash
    out, logs = tmp_path / "out", tmp_path / "logs"
    assert main(_basic_template(assets, out, logs) + FAST) == 0

    for name in ("run.yaml", "plan.json", "heartbeat.json", "events.jsonl", "report.md", "report.html"):
        assert (out / name).is_file(), name
    for name in ("base", "rft", "grpo"):
        result = json.loads((out / "eval" / f"{name}.json").read_text(encoding="utf-8"))
        for key in (
            "reward_mean",
            "pass_rate",
            "task_accuracy",
            "compliance_rate",
            "preference_alignment",
            "n",
        ):
            assert key in result, (name, key)
        assert result["n"] > 0
    assert json.loads((out / "eval" / "base.json").read_text())["preference_alignment"] == 0.5

    # the final model loads with its tokenizer, and RFT+GRPO changed every weight tensor
    from transformers import AutoModelForCausalLM, AutoTokenizer

    AutoModelForCausalLM.from_pretrained(out / "model")
    AutoTokenizer.from_pretrained(out / "model")
    base, final = _state_dict(assets["model"]), _state_dict(out / "model")
    unchanged = [k for k in base if (base[k] - final[k]).abs().max() == 0]
    assert not unchanged, unchanged

    # RFT artefacts, the plan, the resolved config, logs
    assert read_jsonl(out / "data" / "rft_scored.jsonl")
    plan = json.loads((out / "plan.json").read_text())
    steps = [(s["name"], s["steps"]) for s in plan["stages"]]
    assert plan["strategy"] == "RFT+GRPO" and steps == [("rft", 2), ("grpo", 4)]
    run = yaml.safe_load((out / "run.yaml").read_text(encoding="utf-8"))
    assert run["task_name"] == "客服质检_agent_training" and run["max_train_steps"] == 6
    assert (logs / "train.log").is_file() and list((logs / "tensorboard").rglob("events.out.tfevents*"))
    said = (logs / "train.log").read_text(encoding="utf-8")  # chosen before logging was set up, said after
    assert "automatic choices for ark-trainer's demo toy model" in said
    assert "  --dpo_learning_rate 0.0005: presets/demo.yaml's" in said  # given flags are not choices:
    assert "  --rft_learning_rate " not in said and "  --max_completion_length " not in said
    assert (
        plan["auto_defaults"]["demo_toy"] is True and "Automatic choices" in (out / "report.md").read_text()
    )
    assert read_json(out / "model" / "ark_precision.json")["dtype"] == "float32"  # what its evaluation used
    events = read_jsonl(out / "events.jsonl")
    names = {e["event"] for e in events}
    assert {"run_start", "stage_start", "stage_end", "metrics", "rft_selection", "eval", "run_end"} <= names
    assert any(e["event"] == "warning" and "OpenClaw" in e["message"] for e in events)
    grpo_metrics = [e for e in events if e["event"] == "metrics" and e["stage"] == "grpo"]
    assert grpo_metrics and "rewards/qc_verdict/mean" in grpo_metrics[-1] and "kl" in grpo_metrics[-1]
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "finished"

    report = (out / "report.md").read_text(encoding="utf-8")
    assert "RFT" in report and "GRPO" in report and "preference_alignment" in report
    assert list((out / "plots").glob("*.png"))


@pytest.mark.slow
def test_advanced_template_runs_on_cpu_with_warnings(assets, tmp_path, capsys):
    out = tmp_path / "adv"
    args = shlex.split(
        ADVANCED.format(
            model=assets["model"],
            train=assets["train"],
            out=out,
            eval_dir=assets["eval"].parent,
            logs=tmp_path / "logs",
        )
    )
    args += [
        "--num_generations",
        "4",
        "--rft_num_samples",
        "2",
        "--max_completion_length",
        "16",
        "--rft_min_reward",
        "0.0",
    ]
    assert main(args) == 0
    warnings = [e["message"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "warning"]
    assert any("--device cuda:0" in w for w in warnings) and any("--fp16" in w for w in warnings)
    assert (out / "eval" / "grpo.json").is_file()
    stats = json.loads((out / "data" / "stats.json").read_text())
    assert stats["eval"]["n"] + stats["dev"]["n"] == 12 and "--eval_dataset" in stats["eval_source"]
    assert sorted(p.name for p in (out / "grpo").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-4",
    ]  # every 2 steps, 2 kept


@pytest.mark.slow
def test_only_grpo_skips_rft(assets, tmp_path):
    out = tmp_path / "grpo_only"
    args = _basic_template(assets, out, tmp_path / "logs", steps=3) + FAST
    args[args.index("RFT+GRPO")] = "Only GRPO"
    assert main(args) == 0
    assert not (out / "eval" / "rft.json").exists() and not (out / "rft").exists()
    assert [(s["name"], s["steps"]) for s in json.loads((out / "plan.json").read_text())["stages"]] == [
        ("grpo", 3)
    ]
    assert (out / "model" / "model.safetensors").is_file()


@pytest.mark.slow
def test_status_and_report_commands(assets, tmp_path, capsys):
    out = tmp_path / "run"
    assert (
        main(_basic_template(assets, out, tmp_path / "logs", steps=3) + FAST + ["--eval_auto", "False"]) == 0
    )
    capsys.readouterr()
    assert main(["status", str(out)]) == 0
    assert capsys.readouterr().out.startswith("finished")
    (out / "report.md").unlink()
    assert main(["report", str(out)]) == 0
    assert (out / "report.md").is_file()


@pytest.mark.slow
def test_existing_run_is_not_overwritten(assets, tmp_path, capsys):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "run.yaml").write_text("task_name: mine\n")
    assert main(_basic_template(assets, out, tmp_path / "logs") + FAST) == 2
    assert (out / "run.yaml").read_text() == "task_name: mine\n"
    assert "--output_dir" in capsys.readouterr().err


def test_grpo_warns_when_groups_have_no_reward_variance(tmp_path):
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.stages.grpo.stage import warn_if_no_signal

    monitor = Monitor(tmp_path, heartbeat=False)
    warn_if_no_signal(monitor, [{"frac_reward_zero_std": 0.5}])
    assert not (tmp_path / "events.jsonl").exists()
    # dynamic sampling replaced the flat groups: what GRPO trained on carried a signal, no warning
    warn_if_no_signal(monitor, [{"frac_reward_zero_std": 1.0, "dynamic_sampling/frac_informative": 0.5}] * 2)
    assert not (tmp_path / "events.jsonl").exists()
    warn_if_no_signal(monitor, [{"frac_reward_zero_std": 1.0}, {"frac_reward_zero_std": 0.9}])
    assert "no learning signal" in read_jsonl(tmp_path / "events.jsonl")[0]["message"]


@pytest.mark.slow
def test_a_missing_gpu_index_is_refused_before_anything_is_written(assets, tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    out = tmp_path / "never"
    assert main(_basic_template(assets, out, tmp_path / "logs") + ["--device", "cuda:7"]) == 2
    assert not out.exists()


def _rows(prefix: str, n: int) -> list[dict]:
    return [{"prompt": [{"role": "user", "content": f"{prefix}{i}"}]} for i in range(n)]


def test_the_rows_are_split_into_train_dev_and_test_and_the_run_says_where_from():
    from types import SimpleNamespace

    from ark_trainer.data.split import prompt_key
    from ark_trainer.services.planning import _splits

    cfg = SimpleNamespace(
        eval_dataset=None, eval_auto=True, eval_ratio=0.2, max_eval_samples=None, data_path="d.jsonl"
    )
    splits, source = _splits(cfg, _rows("q", 400), [])
    keys = [{prompt_key(r) for r in rows} for rows in (splits.train, splits.dev, splits.test)]
    assert not (keys[0] & keys[1] or keys[0] & keys[2] or keys[1] & keys[2])
    assert splits.dev and splits.test and "half dev and half test" in source
    given = SimpleNamespace(**{**vars(cfg), "eval_dataset": "e.jsonl", "max_eval_samples": 30})
    splits, source = _splits(given, _rows("q", 50) + _rows("e", 3), _rows("e", 100))
    assert len(splits.train) == 50  # the training rows that share a prompt with the eval file: dropped
    assert len(splits.dev) == 30 and len(splits.test) == 30  # each capped at --max_eval_samples
    assert source == "--eval_dataset e.jsonl, divided by prompt hash into dev and test"
    off = SimpleNamespace(**{**vars(cfg), "eval_auto": False})
    assert _splits(off, _rows("q", 5), [])[0].dev == []
