"""``train --resume True`` on a run folder edited by hand is refused in one line before anything trains: a
checkpoint whose trainer_state.json says another step, an edited plan, an eval file or event that no run
writes. The folder is built from the tiny QC assets the way a killed run leaves it (no training here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.core.config import resolve_config, to_yaml
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime.resume import MARKER, TRAINER_STATE
from ark_trainer.stages.plan import resolve_plan
from ark_trainer.stages.registry import config_class
from tests.commands.refusals import refused
from tests.tiny_runs import assets  # noqa: F401 - the module fixture is reused

NAN, INF = float("nan"), float("inf")
RESUME = ["--resume", "True"]


@pytest.fixture
def run(assets, tmp_path) -> Path:  # noqa: F811
    """A RFT+GRPO run killed in GRPO after its step-2 checkpoint: run.yaml, plan.json, events, RFT's eval."""
    out = tmp_path / "out"
    flags = {"model_path": str(assets["model"]), "data_path": str(assets["train"]), "output_dir": str(out),
             "device": "cpu", "strategy": "RFT+GRPO", "max_train_steps": 6, "rft_steps": 2}  # fmt: skip
    cfg = resolve_config(config_class(), flags)
    folder = RunFolder(out)
    out.mkdir(parents=True)
    folder.config_path.write_text(to_yaml(cfg), encoding="utf-8")
    folder.write_plan(resolve_plan(cfg).to_json())
    events = [{"event": "run_start", "ts": 1.0}, {"event": "stage_start", "stage": "grpo", "ts": 2.0}]
    folder.events_path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    ckpt = out / "grpo" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    state = {"global_step": 2, "max_steps": 4, "epoch": 0.5, "log_history": [{"step": 1, "loss": 0.5}]}
    (ckpt / TRAINER_STATE).write_text(json.dumps(state), encoding="utf-8")
    (ckpt / MARKER).write_text(json.dumps({"step": 2, "files": []}), encoding="utf-8")
    (ckpt / "model.safetensors").write_bytes(b"")
    folder.eval_dir.mkdir()
    rft = {"name": "rft", "model": "OUT/rft", "n": 2, "reward_mean": 0.5, "task_accuracy": 0.5, "answers": []}
    folder.eval_path("rft").write_text(json.dumps(rft), encoding="utf-8")
    return out


def edit(path: Path, **changes) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, **changes}), encoding="utf-8")


def resume_refused(capsys, run: Path, *expected: str) -> str:
    (line,) = refused(capsys, ["train", "--output_dir", str(run), *RESUME])
    assert all(text in line for text in expected), line
    assert not (run / "model").exists() and not (run / "grpo" / "checkpoint-4").exists()
    return line


@pytest.mark.parametrize("step", [-7, 7, 0, 2.0, "2", None, 1e308, NAN])
def test_a_trainer_state_that_is_not_its_checkpoints_step_is_refused(run, capsys, step):
    state = run / "grpo" / "checkpoint-2" / TRAINER_STATE
    edit(state, global_step=step)
    resume_refused(capsys, run, str(state), "global_step", "delete the folder")


@pytest.mark.parametrize(
    "changes", [{"max_steps": -1}, {"epoch": INF}, {"log_history": {"a": 1}}, {"log_history": [{"step": -3}]}]
)
def test_a_trainer_state_with_counts_no_trainer_writes_is_refused(run, capsys, changes):
    state = run / "grpo" / "checkpoint-2" / TRAINER_STATE
    edit(state, **changes)
    resume_refused(capsys, run, str(state), next(iter(changes)))


@pytest.mark.parametrize("marker", [{}, {"step": -7}, {"step": 3}, {"step": "2"}, [2]])
def test_a_checkpoint_marker_that_is_not_its_step_is_refused(run, capsys, marker):
    path = run / "grpo" / "checkpoint-2" / MARKER
    path.write_text(json.dumps(marker), encoding="utf-8")
    resume_refused(capsys, run, str(path))


def test_a_trainer_state_nested_10000_deep_is_refused(run, capsys):
    state = run / "grpo" / "checkpoint-2" / TRAINER_STATE
    state.write_text("[" * 10000 + "]" * 10000, encoding="utf-8")
    resume_refused(capsys, run, str(state), "nested")


def _stages(run: Path) -> list[dict]:
    return json.loads((run / "plan.json").read_text(encoding="utf-8"))["stages"]


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda s: s[0].pop("name"), "stages[0]: no 'name'"),
        (lambda s: s[1].pop("learning_rate"), "stages[1]: no 'learning_rate'"),
        (lambda s: s[0].update(steps=-3), "stages[0].steps"),
        (lambda s: s[0].update(steps="3"), "stages[0].steps"),
        (lambda s: s[1].update(learning_rate=NAN), "stages[1].learning_rate"),
        (lambda s: s[1].update(learning_rate=0), "stages[1].learning_rate"),
        (lambda s: s[1].update(last="yes"), "stages[1].last"),
        (lambda s: s[1].update(extra=1), "stages[1].extra"),
        (lambda s: s[0].update(name="nope"), "stages nope, grpo are not RFT+GRPO's"),
        (lambda s: s.reverse(), "stages grpo, rft are not"),
        (lambda s: s.pop(), "stages rft are not"),
        (lambda s: s.append(dict(s[-1])), "are not"),
        (lambda s: s[0].update(last=True), "'last'"),
        (lambda s: s.__setitem__(0, "rft"), "stages[0]"),
    ],
)
def test_an_edited_plan_is_refused_in_one_line(run, capsys, mutate, field):
    stages = _stages(run)
    mutate(stages)
    edit(run / "plan.json", stages=stages)
    resume_refused(capsys, run, "plan.json", field)


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"strategy": "ALL"}, "strategy 'ALL'"), ({"strategy": 7}, "strategy"), ({"stages": {}}, "stages")],
)
def test_a_plan_with_an_edited_strategy_is_refused(run, capsys, changes, field):
    edit(run / "plan.json", **changes)
    resume_refused(capsys, run, "plan.json", field)


@pytest.mark.parametrize("value", [INF, -INF, NAN, 1e308, "0.9", [0.9], 1.5])
def test_an_eval_file_no_run_writes_is_never_a_basis_for_shipping(run, capsys, value):
    """The resume would choose the model to ship from this file: refused before anything trains."""
    edit(run / "eval" / "rft.json", task_accuracy=value)
    resume_refused(capsys, run, str(run / "eval" / "rft.json"), "task_accuracy")


def test_an_event_with_a_negative_step_is_refused_on_resume(run, capsys):
    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"event": "stage_end", "stage": "rft", "status": "ok", "step": -7}) + "\n")
    resume_refused(capsys, run, "events.jsonl:3", "step")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("[" * 10000 + "]" * 10000, "nested"), ("[1, 2]", "no stages"), ('{"stages": [' * 50 + "]}" * 50, "")],
)
def test_a_plan_json_that_is_no_plan_is_refused(run, capsys, text, expected):
    (run / "plan.json").write_text(text, encoding="utf-8")
    resume_refused(capsys, run, "plan.json", expected)


@pytest.mark.parametrize("value", [".inf", "-7", ".nan", "[8]", "1e308"])
def test_a_run_yaml_edited_to_no_config_is_refused(run, capsys, value):
    path = run / "run.yaml"
    path.write_text(path.read_text(encoding="utf-8") + f"max_train_steps: {value}\n", encoding="utf-8")
    resume_refused(capsys, run, "max_train_steps")
