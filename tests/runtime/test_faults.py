"""Fault injection (``ARK_FAULT``): each fault ends as documented and nothing already saved is lost."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.runtime.resume import MARKER, checkpoints, latest_complete, rotate
from tests.tiny_runs import assets, flags, run_child, weights  # noqa: F401 - the module fixture is reused


def complete_steps(stage_dir: Path) -> list[int]:
    return [s for s, _, ok in checkpoints(stage_dir) if ok]


def assert_checkpoint_intact(ckpt: Path) -> None:
    import torch

    assert (ckpt / MARKER).is_file()
    state = weights(ckpt)
    assert all(torch.isfinite(t).all() for t in state.values())
    assert json.loads((ckpt / "trainer_state.json").read_text())["global_step"] == int(
        ckpt.name.split("-")[1]
    )


# --- checkpoints: rotation and disk ---
def test_rotation_keeps_newest_complete_and_drops_half_written(tmp_path):
    for step, complete in ((1, True), (2, False), (3, True), (4, True), (5, False)):
        d = tmp_path / f"checkpoint-{step}"
        d.mkdir()
        (d / "model.safetensors").write_bytes(b"")
        if complete:
            (d / MARKER).write_text("{}")
    rotate(tmp_path, keep=2)
    # 1 is old, 2 half-written below the newest complete: gone; 5 may still be being written: kept
    assert [(s, ok) for s, _, ok in checkpoints(tmp_path)] == [(3, True), (4, True), (5, False)]
    assert latest_complete(tmp_path).name == "checkpoint-4"


def test_too_little_free_disk_is_refused_before_anything_is_written(assets, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "never"
    assert main(["train", *flags(assets, out, "GRPO"), "--min_free_disk_gb", "1e9"]) == 2
    assert "--min_free_disk_gb" in capsys.readouterr().err
    assert not out.exists()


def test_disk_full_before_a_save_stops_and_keeps_earlier_checkpoints(assets, tmp_path, monkeypatch, capsys):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "disk_full_at_step:4")
    assert main(["train", *flags(assets, out, "GRPO")]) == 2
    err = capsys.readouterr().err
    assert "checkpoint-4" in err and "--min_free_disk_gb" in err
    assert complete_steps(out / "grpo") == [2] and not (out / "grpo" / "checkpoint-4").exists()
    assert_checkpoint_intact(out / "grpo" / "checkpoint-2")
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "failed"


# --- guards ---
@pytest.mark.slow
def test_nan_on_every_step_stops_and_no_nan_checkpoint(assets, tmp_path, monkeypatch, capsys):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "nan_from_step:3")
    assert main(["train", *flags(assets, out, "GRPO"), "--max_bad_steps", "2", "--max_rollbacks", "1"]) == 2
    assert "NaN/inf" in capsys.readouterr().err
    assert complete_steps(out / "grpo") == [2] and not (out / "model").exists()
    assert_checkpoint_intact(out / "grpo" / "checkpoint-2")  # skipped steps never reached a checkpoint
    diverged = [e for e in read_jsonl(out / "events.jsonl") if e["event"] == "diverged"]
    assert [e["step"] for e in diverged] == [4]


@pytest.mark.slow
def test_a_step_that_raises_fails_the_run_and_keeps_checkpoints(assets, tmp_path, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "raise_at_step:3")
    monkeypatch.setenv("ARK_FAULT_STAGE", "rft")
    with pytest.raises(RuntimeError, match="fault injection"):
        main(["train", *flags(assets, out, "RFT+GRPO")])
    assert complete_steps(out / "rft") == [2]
    assert_checkpoint_intact(out / "rft" / "checkpoint-2")
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "failed"
    # the same command again continues it: same run.yaml + a complete checkpoint = automatic resume
    monkeypatch.delenv("ARK_FAULT")
    assert main(["train", *flags(assets, out, "RFT+GRPO")]) == 0
    assert [e["step"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "resume"] == [2]


# --- watchdog and status ---
@pytest.mark.slow
def test_a_hang_is_caught_by_the_watchdog(assets, tmp_path, capsys):  # noqa: F811
    out, logs = tmp_path / "run", tmp_path / "logs"
    args = [*flags(assets, out, "GRPO"), "--stall_timeout", "20", "--log_dir", str(logs)]
    t0 = time.time()
    proc = run_child(args, fault="hang_at_step:3", stage="grpo")
    assert proc.returncode == 124, proc.stderr[-2000:]
    assert time.time() - t0 < 120
    assert json.loads((out / "heartbeat.json").read_text())["state"] == "stalled"
    text = (logs / "train.log").read_text()
    assert "--stall_timeout 20" in text and "Thread 0x" in text and "faults.py" in text  # stacks dumped
    assert complete_steps(out / "grpo") == [2]
    capsys.readouterr()
    assert main(["status", str(out)]) == 1
    assert capsys.readouterr().out.startswith("stalled")


def test_status_tells_dead_from_running(tmp_path, capsys):
    from ark_trainer.core.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=True, interval=1)
    monitor.start(task_name="t")
    assert main(["status", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("running")
    beat = json.loads((tmp_path / "heartbeat.json").read_text())
    monitor._stop.set()
    beat["pid"] = 2**22 + 12345  # a pid that does not exist
    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    assert main(["status", str(tmp_path)]) == 1
    assert capsys.readouterr().out.startswith("dead")


# --- supervisor ---
@pytest.mark.slow
def test_auto_resume_halves_the_micro_batch_after_oom(assets, tmp_path, monkeypatch):  # noqa: F811
    import os

    out = tmp_path / "run"
    monkeypatch.setenv("ARK_FAULT", "oom_at_step:3")
    monkeypatch.setenv("ARK_FAULT_STAGE", "grpo")
    monkeypatch.setenv(
        "PYTHONPATH",
        str(Path(__file__).resolve().parents[2] / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
    )
    assert main(["train", *flags(assets, out, "GRPO"), "--auto_resume", "2"]) == 0
    events = read_jsonl(out / "events.jsonl")
    restarts = [e for e in events if e["event"] == "restart"]
    assert len(restarts) == 1 and restarts[0]["reason"] == "OutOfMemoryError"
    assert restarts[0]["change"] == {"batch_size": [4, 2], "gradient_accumulation_steps": [1, 2]}
    assert [e["step"] for e in events if e["event"] == "resume"] == [2]
    state = json.loads((latest_complete(out / "grpo") / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    run = (out / "run.yaml").read_text()
    assert "batch_size: 2" in run and "gradient_accumulation_steps: 2" in run
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Restarts" in report and "batch_size 4 → 2" in report


def flaky_reward(prompts, completions, **kw):
    """Raises on every completion whose text has an even length, hangs on none: for the GRPO run below."""
    from ark_trainer.rewards.registry import completion_text

    texts = [completion_text(c) for c in completions]
    if any(len(t) % 2 == 0 for t in texts):
        raise ValueError("flaky reward")
    return [1.0 for _ in texts]


def test_grpo_goes_on_when_a_reward_raises_on_some_samples(assets, tmp_path):  # noqa: F811
    spec = tmp_path / "rewards.yaml"
    spec.write_text(
        "rewards:\n  - name: qc_verdict\n    weight: 1.0\n  - name: tests.runtime.test_faults:flaky_reward\n    weight: 1.0\n"
    )
    out = tmp_path / "run"
    args = [*flags(assets, out, "GRPO", steps=2), "--reward_config", str(spec), "--save_steps", "0"]
    assert main(["train", *args]) == 0
    events = read_jsonl(out / "events.jsonl")
    skipped = [e for e in events if e["event"] == "reward_skipped"]
    assert skipped and all(
        e["reward"] == "tests.runtime.test_faults:flaky_reward" and e["reason"] == "error" for e in skipped
    )
    total = sum(e["n"] for e in skipped)
    assert any(f"on {total} samples" in e["message"] for e in events if e["event"] == "warning")
    assert (out / "model" / "model.safetensors").is_file()


@pytest.fixture
def small_disk(tmp_path):
    """A 360 kB tmpfs: room for one tiny checkpoint (~200 kB), not two. Needs root (mount); skipped without."""
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=360k", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip(
            "cannot mount a size-limited tmpfs here (needs root); disk full is covered by disk_full_at_step"
        )
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_a_really_full_disk_during_a_save_keeps_the_previous_checkpoint(assets, tmp_path, small_disk, capsys):  # noqa: F811
    import subprocess

    out = small_disk / "run"
    args = [*flags(assets, out, "GRPO"), "--min_free_disk_gb", "0", "--log_dir", str(tmp_path / "logs")]
    assert main(["train", *args]) == 2
    err = capsys.readouterr().err
    assert "checkpoint-4: disk full while saving" in err and "checkpoint-2" in err
    assert [(s, ok) for s, _, ok in checkpoints(out / "grpo")] == [(2, True), (4, False)]
    assert_checkpoint_intact(out / "grpo" / "checkpoint-2")
    assert main(["status", str(out)]) == 1  # a run stopped by a full disk is failed, not dead
    assert capsys.readouterr().out.startswith("failed")
    # more room, then resume: the half-written checkpoint-4 is ignored and rewritten
    subprocess.run(["mount", "-o", "remount,size=2m", str(small_disk)], check=True)
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    assert [e["step"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "resume"] == [2]
    assert complete_steps(out / "grpo") == [2, 4]
