"""A request -> a plan (``nl/plan.py``): never a system folder, a note when a folder leaves the working folder,
and no user code run (a python grader's code runs at ``run``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.errors import UserError
from tests.conftest import refused
from tests.nl.code_graders import code_grader_spec


def test_a_plan_says_when_its_log_folder_leaves_the_working_folder(assets, tmp_path, capsys, monkeypatch):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    base = ["--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    lines = refused(capsys, ["plan", "RFT+GRPO，日志 /etc/ark", *base])
    assert lines == [
        "error: request: --log_dir: '/etc/ark' is a system folder; give a folder of its own, e.g. ./runs/NAME"
    ]
    assert main(["plan", "only GRPO, logs ../../../elsewhere", *base, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["log_dir"] == "../../../elsewhere"
    assert any(
        a.startswith("--log_dir ../../../elsewhere is outside the working folder")
        for a in plan["assumptions"]
    )


def test_a_plan_never_proposes_a_system_folder_and_says_when_it_leaves_the_working_folder(
    assets, tmp_path, capsys, monkeypatch
):
    work = tmp_path / "a" / "b" / "c" / "d"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    base = ["--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    lines = refused(capsys, ["plan", "RFT+GRPO，输出到 ../../../../../../../../../../etc", *base])
    assert len(lines) == 1 and "is a system folder" in lines[0] and lines[0].startswith("error: request:")
    assert main(["plan", "only GRPO, save to ../../elsewhere", *base, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["output_dir"] == "../../elsewhere"
    assert any("is outside the working folder" in a for a in plan["assumptions"]), plan["assumptions"]
    assert main(["plan", "only GRPO, save to ./runs/x", *base, "--json"]) == 0
    assert not any("outside" in a for a in json.loads(capsys.readouterr().out)["assumptions"])


def test_plan_runs_no_user_code_even_from_the_users_own_config(assets, tmp_path, capsys):
    spec, ran = code_grader_spec(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(f"reward_config: {spec}\n", encoding="utf-8")
    argv = ["plan", "only GRPO", "--model_path", str(assets["model"]), "--data_path", str(assets["train"])]
    assert main([*argv, "--config", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reward_config"] == str(spec)
    assert not ran.exists()
    from ark_trainer.rewards.builder import build_reward  # what `run` does once confirmed: the code runs

    with pytest.raises(UserError, match="os:system"):  # the rule is imported and checked at run time
        build_reward({"reward_config": str(spec)}, [{"prompt": "q"}], "cpu")
    assert ran.read_text() == "ran"


@pytest.mark.parametrize(
    "name",
    ["..", ".", "...", ".hidden", "a..b", "x" * 300, "-rf", "客服质检_v2", "名字.txt", "\u202e", "con\x00"],
)
def test_a_task_name_becomes_one_safe_folder_name(name):
    from ark_trainer.nl.plan import safe_folder_name

    safe = safe_folder_name(name)
    assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
    assert not safe.startswith((".", "-")) and len(safe) <= 80 and safe.isprintable()
    if name.isidentifier() and len(name) <= 80:
        assert safe == name  # unicode letters are kept as they are


@pytest.mark.parametrize("task", ["..", "...", ".ssh", "..-x", "a" * 300])
def test_run_never_writes_outside_runs_from_a_parsed_task_name(assets, tmp_path, monkeypatch, task):
    from ark_trainer.nl.plan import plan_request

    monkeypatch.chdir(tmp_path)
    plan = plan_request(f"RFT+GRPO, task name {task}, model {assets['model']}, data {assets['train']}")
    out = Path(plan.cfg.output_dir)
    assert out.parent == Path("runs") and out.name not in ("", ".", "..") and not out.name.startswith(".")
    assert len(out.name) <= 80
    assert (tmp_path / out).resolve().parent == (tmp_path / "runs").resolve()
