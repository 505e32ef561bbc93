"""Safe loading and writing: no remote code unless asked, resume only from safetensors, torn event lines."""

from __future__ import annotations

import json

from ark_trainer.config import resolve_config
from ark_trainer.models.device import resolve_runtime
from ark_trainer.models.loading import model_init_kwargs
from ark_trainer.runtime.monitor import Monitor
from ark_trainer.runtime.resume import MARKER, Progress, latest_complete


def all_stages() -> list:
    """Every registered stage: what the pipeline tells the resume check."""
    from ark_trainer.stages.registry import stages

    return list(stages().values())


def _cfg(tmp_path, **extra):
    flags = {"model_path": "m", "data_path": "d", "output_dir": str(tmp_path / "out"), "device": "cpu"}
    return resolve_config({**flags, **extra})


def test_remote_code_is_off_unless_the_flag_turns_it_on(tmp_path):
    rt = resolve_runtime(_cfg(tmp_path))
    assert model_init_kwargs(rt)["trust_remote_code"] is False
    assert model_init_kwargs(rt)["use_safetensors"] is True
    rt = resolve_runtime(_cfg(tmp_path, trust_remote_code="True"))
    assert model_init_kwargs(rt)["trust_remote_code"] is True
    assert any("--trust_remote_code" in w for w in rt.warnings)


def test_a_checkpoint_with_pickle_weights_only_is_never_resumed_from(tmp_path):
    for step, weights in ((2, "model.safetensors"), (4, "pytorch_model.bin")):
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

    from ark_trainer.config import to_yaml
    from ark_trainer.errors import UserError
    from ark_trainer.fileio import atomic_write_text
    from ark_trainer.runtime.resume import check_resume

    out = tmp_path / "out"
    out.mkdir()
    atomic_write_text(out / "run.yaml", to_yaml(_cfg(tmp_path)))
    same = _cfg(tmp_path)
    with pytest.raises(UserError, match="already holds a run"):
        check_resume(same, out, all_stages())  # same run.yaml but nothing saved yet: not a resume
    (out / "events.jsonl").write_text('{"event": "stage_end", "stage": "eval_base", "status": "ok"}\n')
    assert check_resume(same, out, all_stages())  # same run.yaml + saved progress: continued automatically
    changed = _cfg(tmp_path, resume="True", grpo_learning_rate="3e-6", batch_size="4")
    with pytest.raises(UserError) as err:
        check_resume(changed, out, all_stages())
    assert err.value.messages == [
        f"--resume: --grpo_learning_rate: 3e-06 differs from 1e-06 in {out / 'run.yaml'}"
    ]
    smaller = _cfg(tmp_path, resume="True", batch_size="4", gradient_accumulation_steps="2")
    check_resume(smaller, out, all_stages())  # resources may change
    with pytest.raises(UserError, match="no run"):
        check_resume(
            _cfg(tmp_path / "elsewhere", resume="True"), tmp_path / "elsewhere" / "out", all_stages()
        )


def test_resuming_an_auto_run_keeps_the_strategy_its_probe_chose(tmp_path):
    from ark_trainer.config import to_yaml
    from ark_trainer.fileio import atomic_write_text
    from ark_trainer.runtime.resume import check_resume

    out = tmp_path / "out"
    out.mkdir()
    from ark_trainer.plan import Plan, ProbeChoice, resolve_plan

    first = _cfg(tmp_path, strategy="auto")
    atomic_write_text(out / "run.yaml", to_yaml(first))  # run.yaml keeps what the user asked: auto
    chosen = resolve_plan(first, ProbeChoice("GRPO", "strong base", {"pass_rate": 0.9}))
    (out / "plan.json").write_text(json.dumps(chosen.to_json()))  # the probe's choice is the plan's
    (out / "events.jsonl").write_text('{"event": "stage_end", "stage": "probe", "status": "ok"}\n')
    again = _cfg(tmp_path, strategy="auto")  # the same command line as the first attempt
    resumes = check_resume(again, out, all_stages())
    assert resumes and (again.strategy, again.rft_steps) == ("auto", None)  # the config is not rewritten
    plan = Plan.from_json(json.loads((out / "plan.json").read_text()), again)  # what prepare() resumes with
    assert (plan.strategy, plan.pending, plan.steps("rft")) == ("GRPO", False, 0)
