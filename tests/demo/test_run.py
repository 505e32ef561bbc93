"""``ark-trainer demo`` (``app/demo/run.py``): its sizes and seed are bounded before anything is written."""

from __future__ import annotations

import pytest

from ark_trainer.stages.registry import config_class
from tests.conftest import refused
from tests.tiny_runs import TINY_AGENT


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--n_train", "1000000000"], "--n_train: must be in [1, 100000], got 1000000000"),
        (["--n_eval", "1000000000"], "--n_eval: must be in [1, 100000], got 1000000000"),
        (["--seed", "-1"], "--seed: must be in [0, 4294967295], got -1"),
        (["--seed", "99999999999"], "--seed: must be in [0, 4294967295], got 99999999999"),
        (
            ["--max_train_steps", "99999999999"],
            "--max_train_steps: must be in [1, 2147483647], got 99999999999",
        ),
    ],
)
def test_demo_sizes_and_seed_are_bounded(tmp_path, capsys, flags, says):
    lines = refused(capsys, ["demo", "--output_dir", str(tmp_path / "demo"), *flags])
    assert lines == [f"error: {says}"], lines
    assert not (tmp_path / "demo").exists()


def _tiny_builder(monkeypatch):
    from ark_trainer.app.demo import agent_model

    real = agent_model.build_agent_model
    monkeypatch.setattr(
        agent_model,
        "build_agent_model",
        lambda out, rows, **kw: real(out, rows, **{**kw, **TINY_AGENT, "progress": False}),
    )


def test_demo_task_agent_trains_over_episodes_with_the_demo_env(tmp_path, monkeypatch, capsys):
    from ark_trainer.app.demo import run
    from ark_trainer.cli import main

    _tiny_builder(monkeypatch)
    seen = {}
    monkeypatch.setattr(run, "train_agent", lambda flags: seen.update(flags) or tmp_path / "o")
    out = tmp_path / "agent-demo"
    assert (
        main(
            ["demo", "--task", "agent", "--output_dir", str(out), "--n_train", "12", "--max_train_steps", "9"]
        )
        == 0
    )
    assert seen["env"] == "ark_trainer.app.demo.agent_env:make_env" and seen["max_turns"] == 4
    assert seen["eval_dataset"] == str(out / "data" / "eval.jsonl") and seen["model_path"] == str(
        out / "base_model"
    )
    assert (seen["max_train_steps"], seen["rft_steps"]) == (9, 3)
    from ark_trainer.core.config import load_yaml_config

    preset = load_yaml_config(config_class(), seen["config"])  # the demo's preset is valid train config today
    assert preset["strategy"] == "RFT+GRPO" and preset["rft_min_reward"] == 1.0


def test_demo_default_task_is_still_qc(tmp_path, monkeypatch):
    from ark_trainer.app.demo import run
    from ark_trainer.cli import main

    calls = []
    monkeypatch.setattr(run, "run_demo", lambda out, **kw: calls.append(out) or out)
    monkeypatch.setattr(run, "run_agent_demo", lambda *a, **kw: pytest.fail("the agent demo ran"))
    assert main(["demo", "--output_dir", str(tmp_path / "d")]) == 0
    assert calls == [tmp_path / "d"]


def test_demo_task_is_checked(capsys):
    from ark_trainer.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["demo", "--task", "chess"])
    assert exc.value.code == 2 and "--task" in capsys.readouterr().err


def test_demo_tools_mcp_trains_on_the_backend_served_over_mcp(tmp_path, monkeypatch, capsys):
    from ark_trainer.app.demo import run
    from ark_trainer.cli import main

    _tiny_builder(monkeypatch)
    seen = {}
    monkeypatch.setattr(run, "train_agent", lambda flags: seen.update(flags) or tmp_path / "o")
    out = tmp_path / "agent-demo"
    args = ["demo", "--task", "agent", "--tools", "mcp", "--output_dir", str(out), "--n_train", "12"]
    assert main([*args, "--max_train_steps", "9"]) == 0
    server = seen["env"]["mcp_servers"]["shop"]
    assert server["args"] == ["-m", "ark_trainer.app.demo.agent_mcp_server"] and server["env"]["PYTHONPATH"]
    assert main(["demo", "--tools", "mcp", "--output_dir", str(tmp_path / "qc")]) == 2
    assert "--tools: only with --task agent" in capsys.readouterr().err
