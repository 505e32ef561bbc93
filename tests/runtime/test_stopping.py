"""Stopping keeps the work: checkpoints every ``--save_minutes`` as well as every ``--save_steps``, and Ctrl-C
stops a run within seconds, at its next stop point, as ``stopped`` (exit 130), not as a failure."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from types import SimpleNamespace

import pytest

from ark_trainer.cli import main
from ark_trainer.core.runtime import signals
from ark_trainer.core.runtime.resume import MARKER
from ark_trainer.core.runtime.save_timer import save_timer_callback
from ark_trainer.core.runtime.signals import StoppedByUser, check_stop, request_stop
from tests.tiny_runs import child, read_status_state, train_flags


def test_the_save_timer_asks_for_a_save_once_the_interval_has_passed():
    now = [0.0]
    timer = save_timer_callback(2.0, clock=lambda: now[0])
    state = SimpleNamespace(global_step=1, max_steps=10)
    control = SimpleNamespace(should_save=False)
    timer.on_train_begin(None, state, control)
    now[0] = 119.0
    timer.on_step_end(None, state, control)
    assert control.should_save is False  # 1 min 59 s: not yet
    now[0] = 120.0
    timer.on_step_end(None, state, control)
    assert control.should_save is True
    timer.on_save(None, state, control)  # any save, by steps or by time, restarts the interval
    control.should_save = False
    now[0] = 200.0
    timer.on_step_end(None, state, control)
    assert control.should_save is False
    assert save_timer_callback(0) is None  # 0 = off


def test_a_tiny_interval_saves_checkpoints_that_save_steps_would_not(assets, tmp_path):
    out = tmp_path / "run"
    flags = train_flags(assets, out, steps=3, save_steps=0, save_minutes=1e-6)
    assert main(["train", *flags]) == 0
    saved = sorted(p.name for p in (out / "grpo").glob("checkpoint-*") if (p / MARKER).is_file())
    assert saved == ["checkpoint-1", "checkpoint-2"]  # the last step is the stage's final model


def test_a_stop_point_raises_once_a_stop_was_requested(monkeypatch):
    for flag in (signals._requested, signals._raised):
        monkeypatch.setattr(flag, "_flag", False)
    check_stop()  # nothing asked: nothing happens
    request_stop()
    try:
        with pytest.raises(StoppedByUser):
            check_stop()
        check_stop()  # raised once: the clean-up that follows is not interrupted again
    finally:
        signals._requested.clear()
        signals._raised.clear()


def test_a_stop_point_in_the_layers_stops_the_backward_pass(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    from ark_trainer.core.runtime.stop_points import add_stop_points, remove_stop_points
    from tests.conftest import save_tiny_qwen

    model = AutoModelForCausalLM.from_pretrained(save_tiny_qwen(tmp_path / "m"))
    handles = add_stop_points(model)
    ids = torch.tensor([[1, 2, 3, 4]])
    loss = model(ids, labels=ids).loss
    request_stop()
    try:
        with pytest.raises(StoppedByUser):
            loss.backward()  # one call of the autograd engine: stopped inside it
    finally:
        signals._requested.clear()
        signals._raised.clear()
        remove_stop_points(handles)
    model(ids)  # the hooks are gone


def test_a_generation_batch_stops_at_its_next_decoding_step(tmp_path):
    """Evaluation and RFT sampling decode through ``generation.generate``: each decoding step is a stop
    point, so Ctrl-C there ends the batch within a token, not at the end of the evaluation."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ark_trainer.core.generation import generate
    from tests.conftest import save_tiny_qwen

    path = save_tiny_qwen(tmp_path / "m")
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    prompts = [[{"role": "user", "content": "hello"}]]
    steps = []
    request = lambda detail: (steps.append(detail), request_stop())  # noqa: E731 - stop after the first tick
    try:
        with pytest.raises(StoppedByUser):
            generate(model, tok, prompts, max_new_tokens=50, on_tick=request)
    finally:
        signals._requested.clear()
        signals._raised.clear()
    assert len(steps) == 1  # the next decoding step stopped it
    assert len(generate(model, tok, prompts, max_new_tokens=3)[0]) == 1  # and nothing is left behind


@pytest.mark.slow  # a real train process, signalled (about a minute on 2 busy cores)
def test_ctrl_c_stops_a_live_run_as_stopped_with_exit_130(assets, tmp_path):
    out = tmp_path / "run"
    run = child(
        ["train", *train_flags(assets, out, steps=5000, save_steps=0)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        t0 = time.time()
        while _beat(out).get("stage") != "grpo" or not _beat(out).get("step"):
            assert run.poll() is None and time.time() - t0 < 240, run.communicate()[1][-3000:]
            time.sleep(0.2)
        run.send_signal(signal.SIGINT)
        _, err = run.communicate(timeout=120)  # generous: a step of this model takes well under a second
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, err[-3000:]
    assert "stopped by the user" in err and "KeyboardInterrupt" not in err
    assert read_status_state(out) == "stopped"
    beat = _beat(out)
    assert beat["state"] == "stopped" and beat["eta_seconds"] is None
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["status"] for e in events if e["event"] == "run_end"] == ["stopped"]
    assert [e["status"] for e in events if e["event"] == "stage_end"][-1] == "stopped"
    assert not [e for e in events if e["event"] == "error"]
    assert "## Stopped by the user" in (out / "report.md").read_text()


def _beat(out) -> dict:
    try:
        return json.loads((out / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return {}
