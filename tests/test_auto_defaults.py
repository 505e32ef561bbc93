"""Defaults chosen from the model and the data (``core/auto_defaults.py``), recorded in ``plan.json``."""

from __future__ import annotations

import json

import pytest

from ark_trainer.core import auto_defaults as ad
from ark_trainer.core.auto_defaults import ModelFacts, completion_length, lora_rank, model_facts
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return save_tiny_qwen(
        tmp_path_factory.mktemp("m") / "model", texts=["结论：违规\n类型：辱骂\n回复：抱歉"]
    )


def test_a_tiny_model_is_a_toy_and_the_demo_card_marks_one(tiny, tmp_path):
    facts = model_facts(tiny)
    assert facts.toy and facts.params and facts.params < ad.REAL_MODEL_PARAMS
    assert "toy" in facts.why


def test_completion_length_follows_the_answers_in_this_tokenizer(tiny):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny)
    short = [{"candidates": ["结论：违规"]}] * 20
    long = [{"candidates": ["结论：违规\n类型：辱骂\n回复：抱歉" * 30]}] * 20
    a, b = completion_length(tok, short), completion_length(tok, long)
    assert a.value == ad.LENGTH_BOUNDS[0]  # short answers: the floor
    n = len(tok("结论：违规\n类型：辱骂\n回复：抱歉" * 30, add_special_tokens=False)["input_ids"]) + 1
    assert b.value >= n * (1 + ad.LENGTH_MARGIN) and b.value % 8 == 0 and "95%" in b.reason
    none = completion_length(tok, [{"label": "无"}])
    assert none.value == ad.LENGTH_FALLBACK and "no answer" in none.reason


def test_lora_only_when_full_fine_tuning_does_not_fit(monkeypatch):
    monkeypatch.setattr(ad, "device_memory", lambda device: (24 * 1024**3, "RAM"))
    small = lora_rank(ModelFacts(135_000_000, False, "real"), "cpu")
    big = lora_rank(ModelFacts(1_500_000_000, False, "real"), "cpu")
    assert small.value == 0 and "full fine-tuning" in small.reason
    assert big.value == ad.AUTO_LORA_R and "LoRA" in big.reason


def _cfg(tiny, tmp_path, **flags):
    from ark_trainer.core.config import resolve_config

    rows = [
        {
            "question": f"客服：您好{i}",
            "label": "无",
            "candidates": ["结论：合规\n类型：无\n回复：抱歉，已为您处理。"],
        }
        for i in range(4)
    ]
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    cfg = resolve_config(
        config_class(),
        {"model_path": str(tiny), "data_path": str(data), "output_dir": str(tmp_path / "o"), **flags},
    )
    from ark_trainer.data.loader import load_jsonl

    return cfg, load_jsonl(data)


def test_a_real_model_gets_chosen_defaults_a_toy_the_fixed_ones(tiny, tmp_path, monkeypatch):
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.services.planning import with_auto_defaults

    rt = Runtime("cpu", False, False, [])
    cfg, rows = _cfg(tiny, tmp_path)
    assert cfg.max_completion_length is None and cfg.lora_r is None  # unset: automatic
    toy, record, _ = with_auto_defaults(cfg, rows, rt)
    assert (toy.max_completion_length, toy.lora_r) == (ad.LENGTH_FALLBACK, 0)
    assert "fixed default" in record["max_completion_length"]["reason"]
    monkeypatch.setattr(ad, "REAL_MODEL_PARAMS", 1)  # count the tiny model as real
    monkeypatch.setattr(ad, "device_memory", lambda device: (1024, "RAM"))  # and the machine as tiny
    real, record, _ = with_auto_defaults(cfg, rows, rt)
    from transformers import AutoTokenizer

    measured = completion_length(AutoTokenizer.from_pretrained(tiny), rows)
    assert real.max_completion_length == measured.value and "95%" in measured.reason
    assert record["max_completion_length"] == {"value": measured.value, "reason": measured.reason}
    assert real.lora_r == ad.AUTO_LORA_R  # full fine-tuning does not fit: LoRA, and LoRA's learning rates
    assert real.rft_learning_rate == pytest.approx(10 * cfg.rft_learning_rate)
    assert record["rft_learning_rate"]["value"] == pytest.approx(real.rft_learning_rate)
    given, record, _ = with_auto_defaults(
        _cfg(tiny, tmp_path, max_completion_length=50, lora_r=0)[0], rows, rt
    )
    assert (given.max_completion_length, given.lora_r) == (50, 0) and set(record) == {"model"}  # the user's


def test_the_toy_preset_on_a_real_model_warns(tiny, tmp_path, monkeypatch):
    from ark_trainer.app.demo.run import demo_config_path
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.services.planning import with_auto_defaults

    cfg, rows = _cfg(tiny, tmp_path, config=str(demo_config_path()))
    rt = Runtime("cpu", False, False, [])
    assert with_auto_defaults(cfg, rows, rt)[2] == []  # the toy preset on a toy model: as written
    monkeypatch.setattr(ad, "REAL_MODEL_PARAMS", 1)
    (warning,) = with_auto_defaults(cfg, rows, rt)[2]
    assert "presets/demo.yaml is tuned for ark-trainer's tiny demo model" in warning
    assert "demo --base_model" in warning


def test_the_demo_model_card_marks_a_toy(tmp_path):
    (tmp_path / "config.json").write_text(
        '{"hidden_size": 4096, "num_hidden_layers": 32, "vocab_size": 32000}'
    )
    assert not model_facts(tmp_path).toy  # ~7B by its config
    (tmp_path / ad.TOY_MODEL_CARD).write_text("the demo's toy model")
    assert model_facts(tmp_path).toy


@pytest.mark.slow
def test_demo_on_a_base_model_runs_the_qc_demo_with_the_real_preset(tmp_path):
    from tests.conftest import run_cli

    model = save_tiny_qwen(tmp_path / "model", max_position_embeddings=4096)
    out = tmp_path / "run"
    args = ("demo", "--base_model", str(model), "--output_dir", str(out), "--n_train", "40", "--n_eval", "6")
    done = run_cli(*args, "--max_train_steps", "3", cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["auto_defaults"]["model"].startswith("a toy model")  # this tiny one; SmolLM2 is real
    assert [(s["name"], s["steps"]) for s in plan["stages"]] == [
        ("rft", 2),
        ("grpo", 1),
    ]  # the real preset's share
    run_yaml = (out / "run.yaml").read_text(encoding="utf-8")
    assert "rft_num_samples: 0" in run_yaml and f"model_path: {model}" in run_yaml
    assert not (out / "base_model").exists()  # no toy built
    tested = (out / "data" / "test.jsonl").read_text(encoding="utf-8").splitlines()  # the test half of 6
    assert json.loads((out / "eval" / "grpo.json").read_text(encoding="utf-8"))["n"] == len(tested) >= 1
    assert (out / "report.md").is_file()


def test_demo_base_model_is_checked(tmp_path, capsys):
    from ark_trainer.cli import main

    assert main(["demo", "--base_model", str(tmp_path / "nope"), "--output_dir", str(tmp_path / "o")]) == 2
    assert "--base_model:" in capsys.readouterr().err
    assert (
        main(["demo", "--task", "agent", "--base_model", str(tmp_path), "--output_dir", str(tmp_path / "o")])
        == 2
    )


def test_the_demo_toy_trains_at_its_presets_rates_unless_the_user_sets_one(tmp_path):
    """At TRL's rates the demo's reference template left the toy's task accuracy at 27.0% → 27.0%."""
    from ark_trainer.app.demo.run import demo_config_path
    from ark_trainer.base.yamlsafe import read_yaml_file
    from ark_trainer.core.models.device import Runtime
    from ark_trainer.services.planning import with_auto_defaults

    model = save_tiny_qwen(tmp_path / "toy", texts=["结论：违规\n类型：辱骂\n回复：抱歉"])
    rt = Runtime("cpu", False, False, [])
    cfg, rows = _cfg(model, tmp_path)
    assert cfg.rft_learning_rate == config_class().rft_learning_rate  # a tiny model without the demo's card
    (model / ad.TOY_MODEL_CARD).write_text("the demo's toy model", encoding="utf-8")
    preset = read_yaml_file(demo_config_path())
    cfg, rows = _cfg(model, tmp_path, rft_learning_rate=3e-5)
    resolved, record, _ = with_auto_defaults(cfg, rows, rt)
    assert resolved.rft_learning_rate == 3e-5 and "rft_learning_rate" not in record  # the user's stays
    for name in ("dpo_learning_rate", "kto_learning_rate", "rloo_learning_rate", "rft_min_reward"):
        assert getattr(resolved, name) == preset[name] != getattr(config_class(), name)
        assert record[name]["value"] == preset[name]
        assert "demo's toy model" in record[name]["reason"] and "from scratch" in record[name]["reason"]
    assert resolved.dpo_loss_type == preset["dpo_loss_type"] == record["dpo_loss_type"]["value"]
    assert "frays the answer format" in record["dpo_loss_type"]["reason"]
    # GRPO on a short run: gentler than the preset's own 300 steps at batch 32 (which sets both itself)
    assert (resolved.grpo_learning_rate, resolved.scale_rewards) == (5e-5, "none")
    assert preset["grpo_learning_rate"] == 5e-4 and preset["scale_rewards"] == "group"
    assert "collapses GRPO" in record["grpo_learning_rate"]["reason"]
    assert record["scale_rewards"]["value"] == "none"
    lines: list[str] = []
    ad.announce(record, lambda fmt, *a: lines.append(fmt % a))
    assert lines[0].startswith("automatic choices for ark-trainer's demo toy model")
    assert any(line.startswith("  --kto_learning_rate 0.0005: presets/demo.yaml's, for") for line in lines)
    assert any(
        line.startswith("  --grpo_learning_rate 5e-05: for the demo's toy model outside") for line in lines
    )


def test_resume_with_the_automatic_flags_unset_again_matches_what_was_chosen(tiny, tmp_path):
    from dataclasses import replace

    from ark_trainer.base.errors import UserError
    from ark_trainer.core.config import to_yaml
    from ark_trainer.stages.registry import stages
    from tests.conftest import resume_check

    cfg, _ = _cfg(tiny, tmp_path, resume=True)
    out = tmp_path / "o"
    out.mkdir()
    (out / "run.yaml").write_text(to_yaml(replace(cfg, max_completion_length=96, lora_r=0)), encoding="utf-8")
    assert resume_check(cfg, out, list(stages().values()))  # unset again: what run.yaml chose stands
    with pytest.raises(UserError, match="--max_completion_length: 50 differs from 96"):
        resume_check(replace(cfg, max_completion_length=50), out, list(stages().values()))
