"""One live run per output folder (``core/runtime/runlock.py``): a second start is refused and a signal ends the
run (SIGTERM as failed, Ctrl-C as stopped); a stale lock of a dead run is taken over. These run real
training processes on a tiny model and signal them for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.cli import main
from ark_trainer.core.runtime.resume import MARKER
from tests.tiny_runs import SRC, child, read_status_state, train_flags


def tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


def wait_for(predicate, timeout: float = 240.0) -> None:
    t0 = time.time()
    while not predicate():
        assert time.time() - t0 < timeout, "timed out"
        time.sleep(0.2)


def live_state(out: Path) -> dict:
    try:
        return json.loads((out / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.mark.slow
@pytest.mark.parametrize("sig,code,state", [(signal.SIGTERM, 143, "failed"), (signal.SIGINT, 130, "stopped")])
def test_a_second_start_is_refused_and_a_signal_ends_the_run(assets, tmp_path, sig, code, state):
    out = tmp_path / "run"
    log = (tmp_path / "first.log").open("w")  # a pipe nobody reads would fill up and block the run
    first = child(["train", *train_flags(assets, out, steps=5000, save_steps=5)], stdout=log, stderr=log)
    live = ("heartbeat.json", "events.jsonl", "logs", "grpo")  # what the live run itself keeps writing
    try:
        # with a checkpoint saved, the same command would "resume" the live run (the reviewed defect)
        wait_for(lambda: (out / "grpo" / "checkpoint-5" / MARKER).is_file())
        before = {k: v for k, v in tree(out).items() if not k.startswith(live)}
        second = child(
            ["train", *train_flags(assets, out, steps=5000, save_steps=5)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _, err = second.communicate(timeout=120)
        finally:
            second.kill()
        assert second.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "in use by a live run" in lines[0], err
        assert {k: v for k, v in tree(out).items() if not k.startswith(live)} == before  # nothing written
        first.send_signal(sig)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == code, (tmp_path / "first.log").read_text()[-3000:]
    assert main(["status", str(out)]) == 1
    assert read_status_state(out) == state
    events = read_jsonl(out / "events.jsonl")
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == state
    assert any(e["event"] == ("error" if state == "failed" else "stopped") for e in events)


def test_a_stale_lock_of_a_dead_run_is_taken_over(tmp_path):
    from ark_trainer.core.runtime.runlock import LOCK_NAME, RunLock, check_free

    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 12345, "host": "gone", "started_at": "then"}))
    check_free(out)  # nobody holds it: no refusal
    with RunLock(out):
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
    # a lock held by another live process is refused, naming it
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys,time; sys.path.insert(0, {SRC!r}); from ark_trainer.core.runtime.runlock import RunLock; "
         f"l = RunLock(__import__('pathlib').Path({str(out)!r})); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        from ark_trainer.base.errors import UserError

        with pytest.raises(UserError, match=f"pid {holder.pid} "):
            check_free(out)
        with pytest.raises(UserError, match=f"pid {holder.pid} "):
            RunLock(out)
    finally:
        holder.kill()
        holder.wait()
    with RunLock(out):  # its death released the lock
        pass
