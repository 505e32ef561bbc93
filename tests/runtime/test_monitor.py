"""The console shows one short line per logging step; every metric still goes to events.jsonl."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.core.runtime.monitor import console_line
from tests.commands.refusals import refused
from tests.line_breakers import IDS, RAW_LEGAL
from tests.tiny_runs import read_status_state, train_flags


def test_a_grpo_log_becomes_one_short_line_in_a_fixed_order():
    logs = {
        "step_time": 0.6306,
        "kl": 8.98e-06,
        "reward_std": 0.04897,
        "reward": 0.29375,
        "loss": -0.0197,
        "frac_reward_zero_std": 0.2,
        "completions/clipped_ratio": 0.95,  # not shown: events.jsonl and TensorBoard have it
        "rewards/qc_compliance/mean": 0.9,
        "learning_rate": 9e-07,
    }
    assert console_line("grpo", 5, 40, logs) == (
        "grpo step 5/40: loss -0.0197, reward 0.2938 ± 0.04897, zero-std groups 20%, kl 8.98e-06, "
        "lr 9e-07, 0.63 s/step"
    )


def test_the_sft_log_and_the_final_summary():
    logs = {"loss": 6.86, "grad_norm": 10.44, "learning_rate": 2e-05, "mean_token_accuracy": 0.0}
    assert (
        console_line("rft", 1, 3, logs) == "rft step 1/3: loss 6.86, token acc 0, grad norm 10.44, lr 2e-05"
    )
    assert console_line("rft", 3, 3, {"train_runtime": 0.8683, "train_loss": 6.7}) == "rft: 3 steps in 0.9s"


def test_the_trainers_progress_and_printer_callbacks_are_swapped_for_the_short_line(capsys):
    from types import SimpleNamespace

    from transformers.trainer_callback import DefaultFlowCallback, PrinterCallback, ProgressCallback

    from ark_trainer.core.runtime.monitor import use_console_progress

    class _Trainer:  # the two methods of transformers' Trainer that the swap uses
        def __init__(self, callbacks):
            self.callbacks = callbacks

        def pop_callback(self, cls):
            found = next((cb for cb in self.callbacks if isinstance(cb, cls)), None)
            if found is not None:
                self.callbacks.remove(found)
            return found

        def add_callback(self, cb):
            self.callbacks.append(cb)

    trainer = _Trainer([DefaultFlowCallback(), PrinterCallback()])  # what disable_tqdm=True gives
    use_console_progress(trainer, "rft")
    assert [type(cb).__name__ for cb in trainer.callbacks] == ["DefaultFlowCallback", "_ConsolePrinter"]
    state = SimpleNamespace(is_local_process_zero=True, global_step=2, max_steps=4)
    trainer.callbacks[1].on_log(None, state, None, logs={"loss": 1.5, "total_flos": 9.0})
    assert capsys.readouterr().out == "rft step 2/4: loss 1.5\n"
    trainer = _Trainer([ProgressCallback()])
    use_console_progress(trainer, "grpo")
    assert [type(cb).__name__ for cb in trainer.callbacks] == ["_ConsoleProgress"]
    assert isinstance(trainer.callbacks[0], ProgressCallback)  # the same bar
    bar = trainer.callbacks[0]
    bar.on_train_begin(None, SimpleNamespace(is_world_process_zero=True, max_steps=200), None)
    assert bar.training_bar.desc.startswith("grpo")  # named: not a bare 0/200
    bar.training_bar.close()


@pytest.mark.parametrize("sep", RAW_LEGAL, ids=IDS[:3])
def test_the_monitor_writes_one_line_per_event(tmp_path, sep):
    from ark_trainer.core.runtime.monitor import Monitor

    monitor = Monitor(tmp_path)
    for i in range(3):
        monitor.event("note", text=f"x{sep}{i}")
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["text"] for line in lines if '"note"' in line] == [
        f"x{sep}{i}" for i in range(3)
    ]


def test_a_warning_is_said_once_per_run(tmp_path, caplog):
    from ark_trainer.core.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=False)
    for _ in range(2):
        monitor.warn("RFT kept 239 answers for the 320 its steps train on; it repeats them")
    monitor.warn("another warning")
    lines = (tmp_path / "events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["message"] for line in lines] == [
        "RFT kept 239 answers for the 320 its steps train on; it repeats them",
        "another warning",
    ]
    assert sum("RFT kept" in r.getMessage() for r in caplog.records) <= 1


def test_status_counts_prompts_not_steps_in_an_evaluation(tmp_path, capsys):
    from ark_trainer.core.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=True, interval=1)
    monitor.start(task_name="t")
    with monitor.stage("eval_grpo", total=89):
        monitor.progress(89)
        monitor.write_heartbeat()
        assert main(["status", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "prompt 89/89" in out and "step 89/89" not in out
    with monitor.stage("grpo", total=40):
        monitor.progress(12)
        monitor.write_heartbeat()
        assert main(["status", str(tmp_path)]) == 0
    assert "step 12/40" in capsys.readouterr().out
    monitor.finish("finished")


def test_stage_summary_after_a_resume_counts_this_attempts_steps():
    from ark_trainer.core.runtime.monitor import console_line

    line = console_line("grpo", 30, 30, {"train_runtime": 67.0}, start=10)
    assert line == "grpo: 20 steps (resumed from step 10) in 67.0s"
    assert console_line("grpo", 30, 30, {"train_runtime": 67.0}) == "grpo: 30 steps in 67.0s"


def test_a_kill_while_the_report_is_built_does_not_leave_a_finished_run(assets, tmp_path, monkeypatch):
    import ark_trainer.stages.report as report
    from ark_trainer.core.runtime.monitor import read_status

    out = tmp_path / "run"
    seen = {}
    real = report.build_report

    def spy(run_dir):
        seen["state"] = read_status(run_dir)[0]  # what a SIGKILL now would leave behind
        seen["beat"] = json.loads((Path(run_dir) / "heartbeat.json").read_text())["state"]
        return real(run_dir)

    monkeypatch.setattr(report, "build_report", spy)
    assert main(["train", *train_flags(assets, out, steps=2)]) == 0
    assert seen == {"state": "running", "beat": "running"}
    assert read_status(out)[0] == "finished"


def test_a_full_disk_ends_the_run_as_failed(assets, tmp_path):
    from ark_trainer.core.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=True, interval=10)
    monitor.start(task_name="t")

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monitor.write_heartbeat = no_space  # what a full disk does to the atomic rewrite (a new temp file)
    monitor.finish("failed")
    assert read_status_state(tmp_path) == "failed"


def test_the_console_log_follows_stderr_after_set_up(tmp_path, monkeypatch):
    """A run started in-process with stderr redirected (a test's capture, a notebook) that closes it after:
    later log lines go to stderr as it is then, never a logging traceback about a closed file."""
    import io
    import sys

    from ark_trainer.core.runtime.monitor import log, setup_logging

    first = io.StringIO()
    monkeypatch.setattr(sys, "stderr", first)
    setup_logging(tmp_path / "logs")
    log.info("first run")
    first.close()
    second = io.StringIO()
    monkeypatch.setattr(sys, "stderr", second)
    log.warning("a later command")
    assert "a later command" in second.getvalue() and "Logging error" not in second.getvalue()


def _beat(tmp_path: Path, **fields) -> Path:
    import time

    beat = {"state": "running", "stage": "grpo", "step": 3, "total": 8, "pid": os.getpid(),
            "updated_ts": time.time(), "interval": 60, "updated_at": "now", "metrics": {"loss": 0.5}}  # fmt: skip
    (tmp_path / "heartbeat.json").write_text(json.dumps({**beat, **fields}), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    "fields",
    [{"pid": 1}, {"pid": 1, "pid_started": "1"}, {}, {"pid_started": "12345678"}, {"pid_started": None}],
    ids=["pid-1", "pid-1-with-a-start", "no-start", "another-start", "null-start"],
)
def test_status_says_running_only_for_the_process_that_wrote_the_heartbeat(tmp_path, capsys, fields):
    """A heartbeat naming a live pid (1, or this test's own) whose start time is not the one recorded is a
    dead run's: the pid was reused, or the file was edited."""
    assert main(["status", str(_beat(tmp_path, **fields))]) == 1
    assert capsys.readouterr().out.startswith("dead: ")


def test_status_says_running_for_the_process_that_wrote_it(tmp_path, capsys):
    from ark_trainer.core.runtime.system import process_start

    beat = _beat(tmp_path, pid_started=process_start(os.getpid()), metrics={"loss": float("nan")})
    assert main(["status", str(beat)]) == 0  # a NaN loss is what a diverging step logs: shown, not refused
    assert capsys.readouterr().out.startswith("running: ")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"pid": -7}, "pid"),
        ({"pid": "1"}, "pid"),
        ({"pid": 1e308}, "pid"),
        ({"pid": 2.5}, "pid"),
        ({"pid": 10**15}, "pid"),
        ({"step": -7}, "step"),
        ({"total": float("inf")}, "total"),
        ({"updated_ts": float("nan")}, "updated_ts"),
        ({"updated_ts": "now"}, "updated_ts"),
        ({"interval": 0}, "interval"),
        ({"interval": -float("inf")}, "interval"),
        ({"eta_seconds": -1}, "eta_seconds"),
        ({"metrics": [1, 2]}, "metrics"),
        ({"metrics": {"loss": "x"}}, "metrics.loss"),
        ({"state": None}, "state"),
        ({"state": ["running"]}, "state"),
        ({"extra": json.loads("[" * 100 + "]" * 100)}, "nested"),
    ],
)
def test_a_heartbeat_no_run_writes_is_refused_naming_its_field(tmp_path, capsys, fields, field):
    (line,) = refused(capsys, ["status", str(_beat(tmp_path, **fields))])
    assert f"{tmp_path / 'heartbeat.json'}: {field}" in line, line


def test_a_heartbeat_nested_10000_deep_is_one_line(tmp_path, capsys):
    (tmp_path / "heartbeat.json").write_text("[" * 10000 + "]" * 10000, encoding="utf-8")
    (line,) = refused(capsys, ["status", str(tmp_path)])
    assert "heartbeat.json: nested more than" in line
