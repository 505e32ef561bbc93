"""A bad (NaN/inf) step does not end the run: it is skipped, a streak rolls back, and a stop keeps a report.

Real TRL training on the tiny model of ``test_resume`` (``tiny_runs.py``) with ``ARK_FAULT`` (``ark_trainer.core.runtime.faults``) making
chosen steps' gradients NaN, as a real blow-up would.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from tests.tiny_runs import assets, flags, weights  # noqa: F401 - the module fixture is reused


def events(out: Path, name: str) -> list[dict]:
    return [e for e in read_jsonl(out / "events.jsonl") if e["event"] == name]


def optimizer_state(ckpt: Path) -> dict:
    import torch

    return torch.load(ckpt / "optimizer.pt", weights_only=False)["state"]


def scheduler_state(ckpt: Path) -> dict:
    import torch

    return torch.load(ckpt / "scheduler.pt", weights_only=False)


def all_finite(state: dict) -> bool:
    import torch

    return all(torch.isfinite(t).all() for t in state.values())


@pytest.mark.slow
def test_one_nan_step_is_skipped_and_the_run_finishes(assets, tmp_path, monkeypatch):  # noqa: F811
    import torch

    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_at_step:3")
    args = [*flags(assets, out, "GRPO"), "--save_steps", "1", "--save_total_limit", "0"]
    assert main(["train", *args]) == 0
    bad = events(out, "bad_step")
    assert [(e["stage"], e["step"], e["precision"]) for e in bad] == [("grpo", 3, "fp32")]
    assert "gradient norm (nan)" in bad[0]["what"] and not events(out, "rollback")
    grpo = out / "grpo"
    before, skipped, after = (grpo / f"checkpoint-{s}" for s in (2, 3, 4))
    # step 3 changed nothing: same weights, same Adam moments and step count, LR schedule not advanced
    assert all(torch.equal(weights(before)[k], weights(skipped)[k]) for k in weights(before))
    for a, b in zip(optimizer_state(before).values(), optimizer_state(skipped).values(), strict=True):
        assert all(torch.equal(torch.as_tensor(a[k]), torch.as_tensor(b[k])) for k in a)
    assert scheduler_state(skipped)["last_epoch"] == scheduler_state(before)["last_epoch"]
    assert scheduler_state(after)["last_epoch"] == scheduler_state(before)["last_epoch"] + 1
    assert not all(torch.equal(weights(skipped)[k], weights(after)[k]) for k in weights(after))  # 4 trains
    assert all_finite(weights(out / "model"))
    assert json.loads((grpo / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
    md = (out / "report.md").read_text()
    assert "## Bad steps" in md and "Bad steps skipped (no update applied): 1 (grpo 1)" in md
    assert "grpo step 3" in md and "## Failure" not in md


@pytest.mark.slow
def test_nans_in_a_row_roll_back_to_the_last_checkpoint_with_half_the_lr(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_at_step:3-4")
    args = [*flags(assets, out, "GRPO", steps=6), "--max_bad_steps", "2"]
    assert main(["train", *args]) == 0
    assert [e["step"] for e in events(out, "bad_step")] == [3, 4]
    (rollback,) = events(out, "rollback")
    assert (rollback["stage"], rollback["at_step"], rollback["to_step"]) == ("grpo", 4, 2)
    assert rollback["learning_rate"] == pytest.approx(5e-3)  # --grpo_learning_rate 1e-2, halved
    final = out / "grpo" / "checkpoint-6"
    assert scheduler_state(final)["base_lrs"] == pytest.approx([5e-3, 5e-3])  # the rest ran at the lower rate
    state = json.loads((final / "trainer_state.json").read_text())
    assert state["global_step"] == 6 and all_finite(weights(out / "model"))
    assert "grpo rollback 1" in (out / "report.md").read_text()


@pytest.mark.slow
def test_nan_on_every_step_stops_after_bounded_rollbacks_with_a_report(assets, tmp_path, monkeypatch, capsys):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_from_step:3")
    monkeypatch.setenv("ARK_FAULT_STAGE", "grpo")
    args = [*flags(assets, out, "RFT+GRPO"), "--max_bad_steps", "2", "--max_rollbacks", "1"]
    args += ["--max_train_steps", "8", "--eval_auto", "True", "--eval_ratio", "0.2"]  # RFT 4, GRPO 4
    assert main(["train", *args]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and err[0].startswith("error: grpo step 4: the gradient norm (nan)")
    assert "precision in use: fp32" in err[0] and "--grpo_learning_rate" in err[0]
    assert "fp16" not in err[0]  # names the precision actually used
    assert len(events(out, "rollback")) == 1 and len(events(out, "diverged")) == 1
    assert not (out / "model").exists() and (out / "rft" / "final" / "model.safetensors").is_file()
    md = (out / "report.md").read_text()
    assert md.index("## Failure") < md.index("## Strategy")  # the failure comes first
    assert "Stopped in stage grpo: grpo step 4: the gradient norm (nan)" in md
    assert f"Model of the last finished stage (rft): {out / 'rft' / 'final'}" in md
    results = md[md.index("## Results") :].split("\n## ")[0]
    assert "base (n=" in results and "RFT (n=" in results and "GRPO (n=" not in results
    assert (out / "report.html").is_file() and "failed" in md.splitlines()[0]


@pytest.mark.slow
def test_a_crash_in_grpo_after_rft_leaves_a_report_with_the_finished_stages(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "raise_at_step:2")
    monkeypatch.setenv("ARK_FAULT_STAGE", "grpo")
    args = [*flags(assets, out, "RFT+GRPO", steps=2), "--max_train_steps", "4"]  # RFT 2, GRPO 2
    args += ["--eval_auto", "True", "--eval_ratio", "0.2"]
    with pytest.raises(RuntimeError, match="fault injection"):
        main(["train", *args])
    md = (out / "report.md").read_text()
    assert "Stopped in stage grpo: RuntimeError: fault injection: step 2 raised" in md
    assert "Finished before it: eval_base, eval_base_dev, rft_sampling, rft, eval_rft, eval_rft_dev" in md
    assert "base (n=" in md and "RFT (n=" in md


def test_fault_ranges_parse():
    from ark_trainer.core.runtime import faults

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(faults.ENV, "nan_at_step:3-5,kill_after_step:7")
        assert faults._ranges("grpo") == {"nan_at_step": range(3, 6), "kill_after_step": range(7, 8)}
        assert faults.active("grpo") == {"nan_at_step": 3, "kill_after_step": 7}
        mp.setenv(faults.ENV, "nan_at_step:x-5")
        with pytest.raises(ValueError, match="unknown fault"):
            faults.active("grpo")


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [("--max_bad_steps", "0", "--max_bad_steps: must be ≥ 1"), ("--max_rollbacks", "-1", "must be ≥ 0")],
)
def test_bad_step_flags_are_checked(assets, tmp_path, capsys, flag, value, message):  # noqa: F811
    out = tmp_path / "never"
    assert main(["train", *flags(assets, out, "GRPO"), flag, value]) == 2
    assert message in capsys.readouterr().err and not out.exists()


# --- the guard itself ---
class _State:
    def __init__(self, step: int) -> None:
        self.global_step = step


def _optimizer():
    """A real accelerate-wrapped Adam on a tiny model, as the Trainer hands it to callbacks."""
    import torch
    from accelerate import Accelerator

    model = torch.nn.Linear(3, 2)
    return model, Accelerator(cpu=True).prepare_optimizer(torch.optim.Adam(model.parameters(), lr=0.1))


def test_a_nan_gradient_skips_the_optimizer_step_and_a_streak_raises(tmp_path):
    import torch

    from ark_trainer.core.runtime.bad_steps import BadStreak, step_guard
    from ark_trainer.core.runtime.monitor import Monitor

    model, opt = _optimizer()
    guard = step_guard(Monitor(tmp_path, heartbeat=False), "rft", max_bad_steps=2)
    fp32 = SimpleNamespace(fp16=False, bf16=False)
    model(torch.ones(1, 3)).sum().backward()
    guard.on_pre_optimizer_step(fp32, _State(0), None, model=model, optimizer=opt)
    opt.step()  # finite: applied
    assert not opt.step_was_skipped and opt.optimizer.state
    guard.on_step_end(fp32, _State(1), None, optimizer=opt)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = {k: v.clone() for k, v in opt.optimizer.state[model.weight].items()}
    model.weight.grad[0, 1] = float("nan")
    guard.on_pre_optimizer_step(fp32, _State(1), None, model=model, optimizer=opt)
    opt.step()  # skipped: no weight change, no Adam moment or step-count change
    assert opt.step_was_skipped  # so neither the Trainer nor accelerate steps the LR scheduler
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(moments[k], v) for k, v in opt.optimizer.state[model.weight].items())
    guard.on_step_end(fp32, _State(2), None, optimizer=opt)
    assert not opt.step_was_skipped  # the next step is a normal one
    event = read_jsonl(tmp_path / "events.jsonl")[0]
    assert (event["event"], event["step"], event["streak"], event["precision"]) == ("bad_step", 2, 1, "fp32")
    with pytest.raises(BadStreak, match=r"step 3: the gradient norm \(nan\) is NaN/inf, 2 steps in a row"):
        guard.on_pre_optimizer_step(fp32, _State(2), None, model=model, optimizer=opt)


def test_the_guard_reads_the_trainers_own_norm_and_loss(tmp_path):
    from ark_trainer.core.runtime.bad_steps import step_guard
    from ark_trainer.core.runtime.monitor import Monitor

    class _Trainer:
        norms = iter([0.5, float("inf")])
        callbacks: list = []

        def _get_grad_norm(self, model, grad_norm=None):
            return next(self.norms)

        def training_step(self, model, inputs, num_items_in_batch=None):
            return inputs

        def add_callback(self, cb):
            self.callbacks.append(cb)

    trainer, args = _Trainer(), SimpleNamespace(fp16=False, bf16=True)
    guard = step_guard(Monitor(tmp_path, heartbeat=False), "grpo", max_bad_steps=3)
    guard.attach(trainer)
    assert trainer.callbacks == [guard]
    trainer._get_grad_norm(None)
    guard.on_pre_optimizer_step(args, _State(4), None)  # finite norm
    trainer._get_grad_norm(None)
    guard.on_pre_optimizer_step(args, _State(4), None)
    import torch

    trainer.training_step(None, torch.tensor(float("nan")))
    guard.on_pre_optimizer_step(args, _State(5), None)
    bad = read_jsonl(tmp_path / "events.jsonl")
    assert [(e["step"], e["what"], e["streak"]) for e in bad] == [
        (5, "the gradient norm (inf)", 1),
        (6, "the loss", 2),
    ]
    assert bad[0]["precision"] == "bf16 autocast, fp32 weights"  # no model: fp32 weights assumed


def test_under_fp16_overflowing_gradients_are_left_to_the_loss_scaler_but_a_nan_loss_counts(tmp_path):
    import torch

    from ark_trainer.core.runtime.bad_steps import step_guard
    from ark_trainer.core.runtime.monitor import Monitor

    model, opt = _optimizer()
    guard = step_guard(Monitor(tmp_path, heartbeat=False), "rft", max_bad_steps=3)
    fp16 = SimpleNamespace(fp16=True, bf16=False)
    model(torch.ones(1, 3)).sum().backward()
    model.weight.grad[0, 0] = float("inf")
    guard.on_pre_optimizer_step(fp16, _State(0), None, model=model, optimizer=opt)
    assert not (tmp_path / "events.jsonl").exists()  # routine overflow: the scaler skips and rescales
    guard.losses = [torch.tensor(float("nan"))]
    guard.on_pre_optimizer_step(fp16, _State(1), None, model=model, optimizer=opt)
    (event,) = read_jsonl(tmp_path / "events.jsonl")
    assert event["what"] == "the loss" and event["precision"] == "fp16 autocast, fp32 weights"
    assert "step" not in vars(opt)  # the scaler does the skipping under fp16


@pytest.mark.parametrize(
    ("dtype", "fp16", "bf16", "name", "fix"),
    [
        ("float32", False, False, "fp32", ""),
        ("float32", False, True, "bf16 autocast, fp32 weights", "--mixed_precision no"),
        ("bfloat16", False, True, "bf16 weights", "--mixed_precision bf16 (bf16 autocast"),
        ("float32", True, False, "fp16 autocast, fp32 weights", "--mixed_precision no"),
    ],
)
def test_messages_name_the_precision_in_use_and_the_flag_to_change(dtype, fp16, bf16, name, fix):
    import torch

    from ark_trainer.core.runtime.bad_steps import precision_fix, precision_of

    model = torch.nn.Linear(2, 2).to(getattr(torch, dtype))
    assert precision_of(SimpleNamespace(fp16=fp16, bf16=bf16), model) == name
    assert (fix in precision_fix(name)) if fix else precision_fix(name) == ""


def test_under_bf16_autocast_a_nan_step_is_skipped_too(assets, tmp_path, monkeypatch):  # noqa: F811
    """bf16 autocast over fp32 weights, emulated on CPU (accelerate autocasts to bf16 there too)."""
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.core.runtime.resume import AttemptSettings, run_trainer

    monkeypatch.setenv("ARK_FAULT", "nan_at_step:2")
    ids = [[5, 6, 7, 8, 9, 10]] * 8
    data = Dataset.from_list([{"input_ids": x, "labels": x} for x in ids])
    args = TrainingArguments(
        output_dir=str(tmp_path / "rft"), max_steps=3, per_device_train_batch_size=2, learning_rate=1e-2,
        bf16=True, use_cpu=True, report_to="none", save_strategy="no", logging_steps=1,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(str(assets["model"]), dtype=torch.float32)
    cfg = AttemptSettings(
        max_bad_steps=3, max_rollbacks=2, resume=False, min_free_disk_gb=0, save_total_limit=0
    )
    monitor = Monitor(tmp_path, heartbeat=False)
    trainer = run_trainer(
        lambda: Trainer(model=model, args=args, train_dataset=data),
        cfg,
        monitor,
        SimpleNamespace(name="rft", label="RFT", lr_flag="rft_learning_rate"),
        tmp_path,
    )
    assert trainer.state.global_step == 3
    (bad,) = events(tmp_path, "bad_step")
    assert bad["step"] == 2 and bad["precision"] == "bf16 autocast, fp32 weights"
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())
    assert next(trainer.model.parameters()).dtype == torch.float32  # the master weights stayed fp32


def test_ctrl_c_during_grpo_still_writes_the_report(assets, tmp_path, monkeypatch):  # noqa: F811
    import ark_trainer.stages.grpo.stage as grpo

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(grpo, "train_grpo", interrupted)
    out = tmp_path / "run"
    assert main(["train", *flags(assets, out, "RFT+GRPO", steps=2), "--max_train_steps", "4"]) == 130
    md = (out / "report.md").read_text()
    assert "## Stopped by the user" in md and ": stopped by the user" in md and "KeyboardInterrupt" not in md
    assert f"Model of the last finished stage (rft): {out / 'rft' / 'final'}" in md


def test_when_auto_resume_gives_up_the_report_says_so(tmp_path):
    """A child killed every time wrote no error of its own: the supervisor's verdict is the cause."""
    from ark_trainer.core.runtime.monitor import Monitor
    from ark_trainer.core.runtime.supervisor import _give_up
    from ark_trainer.stages.report import build_report

    (tmp_path / "run.yaml").write_text("task_name: t\nstrategy: GRPO\n")
    monitor = Monitor(tmp_path, heartbeat=False)
    monitor.event("run_start", task_name="t")
    monitor.event("stage_start", stage="eval_base")
    monitor.event("stage_end", stage="eval_base", status="ok", seconds=1)
    monitor.event("stage_start", stage="grpo")  # then SIGKILL: no stage_end, no run_end
    _give_up(tmp_path, "--auto_resume 1: the run failed every time; see events.jsonl", build_report)
    md = (tmp_path / "report.md").read_text()
    assert "Stopped in stage grpo: --auto_resume 1: the run failed every time" in md
    assert "Finished before it: eval_base" in md


def test_without_an_accelerate_optimizer_a_bad_step_drops_the_gradients(tmp_path):
    import torch

    from ark_trainer.core.runtime.bad_steps import step_guard
    from ark_trainer.core.runtime.monitor import Monitor

    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)  # a bare torch optimizer: nothing to skip through
    model(torch.ones(1, 3)).sum().backward()
    model.weight.grad[0, 0] = float("nan")
    guard = step_guard(Monitor(tmp_path, heartbeat=False), "rft", max_bad_steps=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    guard.on_pre_optimizer_step(SimpleNamespace(fp16=False), _State(0), None, model=model, optimizer=opt)
    opt.step()
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items()) and not opt.state


def test_a_long_list_of_bad_steps_is_cut_in_the_report():
    from ark_trainer.stages.report.incidents import MAX_ROWS, bad_step_blocks

    bad = [
        {"event": "bad_step", "stage": "grpo", "step": i, "what": "the loss", "precision": "fp32"}
        for i in range(100)
    ]
    para, table = bad_step_blocks(bad)[1:]
    assert "Bad steps skipped (no update applied): 100 (grpo 100)" in para.text
    assert len(table.rows) == MAX_ROWS + 1 and table.rows[MAX_ROWS // 2][1] == f"{100 - MAX_ROWS} more"
