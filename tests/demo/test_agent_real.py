"""``ark-trainer demo --task agent --base_model PATH``: the agent demo on a real model.

Fast tests of the wiring (tiny ChatML models stand in for SmolLM2) and one slow test on the real SmolLM2 GGUF.
Run: PYTHONPATH=src python -m pytest tests/demo/test_agent_real.py -q            (add -m slow for the real model)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.app.demo import agent_real
from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_jsonl
from ark_trainer.stages.agent.toolcall import AGENT_CHAT_TEMPLATE, AGENT_CHAT_TEMPLATE_WITH_HINT
from ark_trainer.stages.registry import config_class
from tests.conftest import save_tiny_qwen


def _model(path: Path, template: str | None = None) -> Path:
    """A tiny ChatML model (SmolLM2's shape of tokenizer) whose template renders no tools, unless given."""
    from transformers import AutoTokenizer

    save_tiny_qwen(path, max_position_embeddings=1024)
    if template is not None:
        tok = AutoTokenizer.from_pretrained(path)
        tok.chat_template = template
        tok.save_pretrained(path)
    return path


def _tok(path: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def test_the_template_is_the_models_own_when_it_renders_tool_calls_else_the_projects(tmp_path):
    plain = _tok(_model(tmp_path / "plain"))
    assert agent_real.template_choice(plain, "M") == AGENT_CHAT_TEMPLATE_WITH_HINT
    own = _tok(_model(tmp_path / "own", AGENT_CHAT_TEMPLATE))
    assert agent_real.template_choice(own, "M") is None
    plain.eos_token = "<|endoftext|>"  # not ChatML's end of turn: the project's template does not fit
    with pytest.raises(UserError) as err:
        agent_real.template_choice(plain, "M")
    (line,) = err.value.messages
    assert line.startswith("--base_model: M: its chat template shows no <tool_call>") and "Qwen2.5" in line


def test_a_folder_without_tool_template_is_given_the_agent_template_beside_links_to_its_weights(tmp_path):
    user = _model(tmp_path / "user")
    before = {p.name: p.read_bytes() for p in user.iterdir()}
    out = tmp_path / "run"
    for _ in range(2):  # a second attempt in the same folder rebuilds it
        assert agent_real.prepare_model(str(user), out) == str(out / "base_model")
    base = out / "base_model"
    assert (base / "model.safetensors").is_symlink() and (base / "config.json").is_symlink()
    assert _tok(base).chat_template == AGENT_CHAT_TEMPLATE_WITH_HINT
    assert "AGENT_CHAT_TEMPLATE_WITH_HINT" in (base / agent_real.TEMPLATE_NOTE).read_text()
    assert {p.name: p.read_bytes() for p in user.iterdir()} == before  # the user's folder is never written
    assert not (base / "ARK_DEMO_MODEL.md").exists()  # not the toy's card: real-model defaults apply


def test_a_folder_whose_template_renders_tools_is_trained_as_it_is(tmp_path):
    user = _model(tmp_path / "user", AGENT_CHAT_TEMPLATE)
    assert agent_real.prepare_model(str(user), tmp_path / "run") == str(user)
    assert not (tmp_path / "run" / "base_model").exists()


def test_the_demo_on_a_real_model_uses_its_preset_candidates_and_template(tmp_path, monkeypatch):
    from ark_trainer.app.demo import run
    from ark_trainer.core.config import resolve_config

    seen: dict = {}
    monkeypatch.setattr(run, "train_agent", lambda flags: seen.update(flags) or Path(flags["output_dir"]))
    user, out = _model(tmp_path / "user"), tmp_path / "run"
    run.run_agent_demo(out, base_model=str(user), n_train=6, max_train_steps=8)
    assert seen["config"] == str(agent_real.config_path()) and seen["model_path"] == str(out / "base_model")
    assert seen["env"] == run.AGENT_ENV and seen["max_turns"] == run.AGENT_MAX_TURNS
    assert (seen["max_train_steps"], seen["rft_steps"]) == (8, 6)  # the preset's share: 48 of 56
    train, held_out = read_jsonl(out / "data" / "train.jsonl"), read_jsonl(out / "data" / "eval.jsonl")
    assert len(train) == 6 and len(held_out) == agent_real.REAL_N_EVAL
    assert all(len(r["candidates"]) == agent_real.REAL_CANDIDATES for r in train)
    assert all("candidates" not in r for r in held_out)
    cfg = resolve_config(config_class(), seen)  # the preset parses against the config with the demo's flags
    assert (cfg.rft_num_samples, cfg.rft_min_reward, cfg.max_completion_length) == (0, 1.0, 224)
    assert cfg.grpo_learning_rate == 5e-6 and cfg.lora_r is None  # LoRA chosen from the model


def test_the_candidates_solve_some_tasks_and_not_others():
    from ark_trainer.app.demo.agent_data import generate_tasks, with_candidates
    from ark_trainer.app.demo.agent_env import make_env

    rows = with_candidates(generate_tasks(30, seed=0), 4, seed=0)
    assert rows == with_candidates(generate_tasks(30, seed=0), 4, seed=0)  # deterministic

    def reward(row: dict, episode: list[dict]) -> float:
        env = make_env()
        env.reset(**row)
        for message in episode:
            for call in message.get("tool_calls") or []:
                getattr(env, call["function"]["name"])(**call["function"]["arguments"])
        return env.get_reward()

    rewards = [reward(r, e) for r in rows for e in r["candidates"]]
    assert all(e[0]["role"] == "assistant" for r in rows for e in r["candidates"])
    assert 0.2 < sum(x == 1.0 for x in rewards) / len(rewards) < 0.7


def test_the_toy_agent_demo_data_is_unchanged(tmp_path):
    from ark_trainer.app.demo.agent_data import write_agent_data

    train, _ = write_agent_data(tmp_path, n_train=5, n_eval=2)
    assert all("candidates" not in r for r in read_jsonl(train))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--base_model", "nope"], "--base_model: 'nope' does not exist"),
        (["--base_model", "nope", "--lang", "en"], "--lang: only with --task qc"),
    ],
)
def test_demo_agent_base_model_refusals_are_one_line(tmp_path, capsys, args, message):
    from ark_trainer.cli import main

    assert main(["demo", "--task", "agent", "--output_dir", str(tmp_path / "o"), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_the_agent_demo_runs_on_smollm2(tmp_path, monkeypatch, smollm2_converted):
    """The real model end to end on a tiny setting (~2-3 min on 2 quiet cores): 4 tasks, 2 held out, one RFT
    and one GRPO step, with turns cut to 48 tokens (the preset's 224 are for the measured run). The GGUF's
    conversion is the session's (``smollm2_converted``): the demo reuses it in OUT/base_model."""
    from ark_trainer.cli import main
    from tests.conftest import converted_base
    from tests.model_files import smollm2_gguf

    gguf = smollm2_gguf()
    preset = agent_real.config_path().read_text(encoding="utf-8")
    small = preset.replace("max_completion_length: 224", "max_completion_length: 48")
    small = small.replace("batch_size: 8", "batch_size: 4").replace(
        "num_generations: 4", "num_generations: 2"
    )
    assert (
        small.count("max_completion_length: 48") == 1
        and "batch_size: 4" in small
        and "num_generations: 2" in small
    )
    (tmp_path / "preset.yaml").write_text(small, encoding="utf-8")
    monkeypatch.setattr(agent_real, "config_path", lambda: tmp_path / "preset.yaml")
    out = converted_base(smollm2_converted, tmp_path / "run")
    args = ["demo", "--task", "agent", "--base_model", str(gguf), "--output_dir", str(out)]
    assert main([*args, "--n_train", "4", "--n_eval", "2", "--max_train_steps", "2"]) == 0
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["base_model"]["kind"] == "gguf" and plan["auto_defaults"]["model"].startswith("a real model")
    assert [(s["name"], s["steps"]) for s in plan["stages"]] == [("rft", 1), ("grpo", 1)]
    assert _tok(out / "base_model").chat_template == AGENT_CHAT_TEMPLATE_WITH_HINT
    assert _tok(out / "model").chat_template == AGENT_CHAT_TEMPLATE_WITH_HINT  # kept by the trained model
    selection = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    (picked,) = [e for e in selection if e.get("event") == "rft_selection"]
    assert picked["n_candidates"] == 4 * agent_real.REAL_CANDIDATES and picked["n_selected"] >= 1
    for name in ("base", "rft", "grpo"):
        metrics = json.loads((out / "eval" / f"{name}.json").read_text(encoding="utf-8"))
        assert (
            metrics["n"] == len((out / "data" / "test.jsonl").read_text().splitlines())
            and 0.0 <= metrics["task_success"] <= 1.0
        )
    assert "task_success" in (out / "report.md").read_text(encoding="utf-8")
