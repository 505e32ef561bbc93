"""Kill-and-resume equivalence: N steps straight == k steps, ``kill -9``, resume to N (RFT, GRPO and DPO).

Resume only from safetensors checkpoints, never after a changed setting, over a torn event line, keeping
the strategy an ``auto`` run's probe chose; a poisoned checkpoint is refused in one line. (Remote code is
off unless asked: ``core/models/loading.py``, checked here with the other safe-loading cases.)
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.config import resolve_config
from ark_trainer.core.models.device import resolve_runtime
from ark_trainer.core.models.loading import model_init_kwargs
from ark_trainer.core.runtime.monitor import Monitor
from ark_trainer.core.runtime.resume import MARKER, Progress, checkpoints, latest_complete
from ark_trainer.stages.registry import config_class
from tests.conftest import refused
from tests.tiny_runs import assets, child, flags, run_child, train_flags, weights  # noqa: F401 - the module fixture is reused


def final_state(stage_dir: Path) -> dict:
    ckpt = latest_complete(stage_dir)
    return json.loads((ckpt / "trainer_state.json").read_text())


def assert_same_run(straight: Path, resumed: Path, stage: str) -> None:
    import torch

    a, b = final_state(straight / stage), final_state(resumed / stage)
    assert a["global_step"] == b["global_step"] == 4
    lr_a = [h["learning_rate"] for h in a["log_history"] if "learning_rate" in h]
    lr_b = [h["learning_rate"] for h in b["log_history"] if "learning_rate" in h]
    assert lr_a == lr_b and len(lr_a) == 4
    loss_a = [h["loss"] for h in a["log_history"] if "loss" in h]
    loss_b = [h["loss"] for h in b["log_history"] if "loss" in h]
    assert loss_b == pytest.approx(loss_a, rel=1e-4, abs=1e-6)
    wa, wb = weights(straight / "model"), weights(resumed / "model")
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=1e-5, rtol=1e-4), k


@pytest.mark.slow
@pytest.mark.parametrize("strategy,stage", [("RFT+GRPO", "rft"), ("GRPO", "grpo"), ("DPO", "dpo")])
def test_kill_and_resume_equals_straight_run(assets, tmp_path, strategy, stage):  # noqa: F811
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["train", *flags(assets, straight, strategy)]) == 0

    killed = run_child(flags(assets, resumed, strategy), fault="kill_after_step:3", stage=stage)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert [s for s, _, ok in checkpoints(resumed / stage) if ok] == [2]  # step 3 never saved
    assert not (resumed / "model").exists()

    # only the output folder and --resume: the rest comes from OUT/run.yaml
    assert main(["train", "--output_dir", str(resumed), "--resume", "True"]) == 0
    events = read_jsonl(resumed / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "resume"] == [2]
    after = events[[e["event"] for e in events].index("resume") :]
    assert [e["step"] for e in after if e["event"] == "metrics" and "loss" in e] == [3, 4]  # not from step 1
    sampled = [e for e in events if e["event"] == "stage_start" and e["stage"].endswith("_sampling")]
    assert len(sampled) == (stage != "grpo")  # RFT's candidates and DPO's pairs: sampled once, then reused
    assert_same_run(straight, resumed, stage)
    # the initial weights changed, so equality above is not the untrained model twice
    import torch

    base, final = weights(assets["model"]), weights(resumed / "model")
    assert any(not torch.equal(base[k], final[k]) for k in base)


@pytest.mark.slow
def test_kill_during_save_keeps_previous_checkpoint_and_resume_uses_it(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    killed = run_child(flags(assets, out, "GRPO"), fault="kill_in_save:4", stage="grpo")
    assert killed.returncode == -9, killed.stderr[-2000:]
    found = {s: ok for s, _, ok in checkpoints(out / "grpo")}
    assert found == {2: True, 4: False}  # checkpoint-4 written but never marked complete
    assert latest_complete(out / "grpo").name == "checkpoint-2"
    assert (latest_complete(out / "grpo") / MARKER).is_file()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "resume"] == [2]
    assert {s: ok for s, _, ok in checkpoints(out / "grpo")} == {2: True, 4: True}
    assert (out / "model" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_kill_after_grpos_final_save_still_evaluates_grpo_on_resume(assets, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    args = ["train", *train_flags(assets, out, steps=2, eval_auto=True, eval_dataset=assets["eval"])]
    proc = child(
        args, fault="kill_after_stage:2", stage="grpo", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    assert (out / "model" / "model.safetensors").is_file() and not (out / "eval" / "grpo.json").exists()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert [e["stage"] for e in events if e["event"] == "stage_end" and e["stage"] == "eval_grpo"] == [
        "eval_grpo"
    ]
    assert (out / "eval" / "grpo.json").is_file()
    assert "Final model (GRPO)" in (out / "report.md").read_text()


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('ARK_EVIL_MARK', '/tmp/ark-evil-mark')}",))


@pytest.mark.slow
def test_a_poisoned_checkpoint_is_refused_in_one_line_on_resume(assets, tmp_path, capsys, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    proc = child(["train", *train_flags(assets, out)], fault="kill_after_step:3", stage="grpo",
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    ckpt = out / "grpo" / "checkpoint-2"
    mark = tmp_path / "pwned"
    monkeypatch.setenv("ARK_EVIL_MARK", str(mark))
    for name, payload in (("rng_state.pth", pickle.dumps(_Evil())), ("optimizer.pt", b"\x00garbage" * 10)):
        original = (ckpt / name).read_bytes()
        (ckpt / name).write_bytes(payload)
        lines = refused(capsys, ["train", "--output_dir", str(out), "--resume", "True"])
        assert len(lines) == 1 and str(ckpt / name) in lines[0] and "delete the folder" in lines[0], lines
        assert "weights_only=False" not in lines[0] and not mark.exists()
        (ckpt / name).write_bytes(original)
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0


def all_stages() -> list:
    """Every registered stage: what the pipeline tells the resume check."""
    from ark_trainer.stages.registry import stages

    return list(stages().values())


def _cfg(tmp_path, **extra):
    flags = {"model_path": "m", "data_path": "d", "output_dir": str(tmp_path / "out"), "device": "cpu"}
    return resolve_config(config_class(), {**flags, **extra})


def test_remote_code_is_off_unless_the_flag_turns_it_on(tmp_path):
    rt = resolve_runtime(_cfg(tmp_path))
    assert model_init_kwargs(rt)["trust_remote_code"] is False
    assert model_init_kwargs(rt)["use_safetensors"] is True
    rt = resolve_runtime(_cfg(tmp_path, trust_remote_code="True"))
    assert model_init_kwargs(rt)["trust_remote_code"] is True
    assert any("--trust_remote_code" in w for w in rt.warnings)


def test_a_checkpoint_with_pickle_weights_only_is_never_resumed_from(tmp_path):
    for step, weights in ((2, "model.safetensors"), (4, "pytorch_model.bin")):  # noqa: F402 - not tiny_runs.weights
        ckpt = tmp_path / f"checkpoint-{step}"
        ckpt.mkdir()
        (ckpt / weights).write_bytes(b"")
        (ckpt / MARKER).write_text("{}")
    assert latest_complete(tmp_path).name == "checkpoint-2"


def test_a_torn_last_event_line_does_not_swallow_the_next_event(tmp_path):
    monitor = Monitor(tmp_path, heartbeat=False)
    monitor.start(task_name="t")
    with (tmp_path / "events.jsonl").open("a") as fh:
        fh.write('{"event": "metr')  # killed mid-write
    again = Monitor(tmp_path, heartbeat=False)
    again.start(task_name="t")
    again.event("stage_end", stage="rft", status="ok")
    progress = Progress(tmp_path)
    assert progress.stage_ok("rft") and [e["event"] for e in progress.events].count("run_start") == 2


def test_resume_refuses_a_changed_setting_and_allows_resource_flags(tmp_path):
    import pytest

    from ark_trainer.base.errors import UserError
    from ark_trainer.base.fileio import atomic_write_text
    from ark_trainer.core.config import to_yaml
    from tests.conftest import resume_check

    out = tmp_path / "out"
    out.mkdir()
    atomic_write_text(out / "run.yaml", to_yaml(_cfg(tmp_path)))
    same = _cfg(tmp_path)
    with pytest.raises(UserError, match="already holds a run"):
        resume_check(same, out, all_stages())  # same run.yaml but nothing saved yet: not a resume
    (out / "events.jsonl").write_text('{"event": "stage_end", "stage": "eval_base", "status": "ok"}\n')
    assert resume_check(same, out, all_stages())  # same run.yaml + saved progress: continued automatically
    changed = _cfg(tmp_path, resume="True", grpo_learning_rate="3e-6", batch_size="4")
    with pytest.raises(UserError) as err:
        resume_check(changed, out, all_stages())
    assert err.value.messages == [
        f"--resume: --grpo_learning_rate: 3e-06 differs from 1e-06 in {out / 'run.yaml'}"
    ]
    smaller = _cfg(tmp_path, resume="True", batch_size="4", gradient_accumulation_steps="2")
    resume_check(smaller, out, all_stages())  # resources may change
    with pytest.raises(UserError, match="no run"):
        resume_check(
            _cfg(tmp_path / "elsewhere", resume="True"), tmp_path / "elsewhere" / "out", all_stages()
        )


def test_resuming_an_auto_run_keeps_the_strategy_its_probe_chose(tmp_path):
    from ark_trainer.base.fileio import atomic_write_text
    from ark_trainer.core.config import to_yaml
    from tests.conftest import resume_check

    out = tmp_path / "out"
    out.mkdir()
    from ark_trainer.stages.plan import Plan, ProbeChoice, resolve_plan

    first = _cfg(tmp_path, strategy="auto")
    atomic_write_text(out / "run.yaml", to_yaml(first))  # run.yaml keeps what the user asked: auto
    chosen = resolve_plan(first, ProbeChoice("GRPO", "strong base", {"pass_rate": 0.9}))
    (out / "plan.json").write_text(json.dumps(chosen.to_json()))  # the probe's choice is the plan's
    (out / "events.jsonl").write_text('{"event": "stage_end", "stage": "probe", "status": "ok"}\n')
    again = _cfg(tmp_path, strategy="auto")  # the same command line as the first attempt
    resumes = resume_check(again, out, all_stages())
    assert resumes and (again.strategy, again.rft_steps) == ("auto", None)  # the config is not rewritten
    plan = Plan.from_json(json.loads((out / "plan.json").read_text()), again)  # what prepare() resumes with
    assert (plan.strategy, plan.pending, plan.steps("rft")) == ("GRPO", False, 0)
