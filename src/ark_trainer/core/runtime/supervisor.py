"""``--auto_resume N``: run the pipeline in a child process and restart it from its last checkpoint.

The ``train`` command with ``--auto_resume N`` does not train itself: it runs the same command in a child
(``python -m ark_trainer train ... --auto_resume 0``) and, when the child fails, starts it again with
``--resume True`` up to N times. A child that ran out of memory (its last ``error`` event in
``OUT/events.jsonl`` is ``OutOfMemoryError`` or ``MemoryError``) is restarted with half the micro-batch and
twice the gradient accumulation, so the effective batch (and the data order) stays the same. Every
restart and change is a ``restart`` event in ``OUT/events.jsonl``, shown in the report's Restarts block.

Not restarted: bad input (exit 2: it would fail the same way), a diverged run (NaN/inf through every
rollback: same), and a child stopped by the user (Ctrl-C, exit 130; SIGTERM, exit 143). When the restarts
are used up, a ``gave_up`` event and the report (the failure at the top) are written. ``ARK_FAULT`` (fault
injection) reaches the first child only.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime.launch import child_flags
from ark_trainer.core.runtime.monitor import Monitor

log = logging.getLogger("ark_trainer")

OOM_ERRORS = ("OutOfMemoryError", "MemoryError")
NO_RETRY_ERRORS = ("TrainingDiverged",)
NO_RETRY_CODES = (2, 130, 143)  # bad input, Ctrl-C, SIGTERM


def child_argv(flags: dict[str, Any], resume: bool) -> list[str]:
    """The child's ``train`` command line: every setting (the config's ``flag_items()``) spelled out, no
    supervisor."""
    argv = [sys.executable, "-m", "ark_trainer", "train", *child_flags(flags), "--auto_resume", "0"]
    if resume:
        argv += ["--resume", "True", "--overwrite_output_dir", "False"]
    return argv


def last_error(out: Path, since: int) -> dict | None:
    """The last ``error`` event written after line ``since`` of ``OUT/events.jsonl``."""
    errors = [e for e in RunFolder(out).events(since_line=since) if e.get("event") == "error"]
    return errors[-1] if errors else None


@dataclass(frozen=True)
class SupervisedRun:
    """What the supervisor reads: ``--resume``, ``--auto_resume``, and the flags every child is given (the
    run's ``flag_items()``: its ``output_dir``, and the micro-batch and accumulation a restart after running
    out of memory halves and doubles)."""

    resume: bool
    auto_resume: int
    flags: dict[str, Any]


def supervise(run: SupervisedRun, write_report: Callable[[Path], object]) -> Path:
    """Run ``run.flags`` in child processes until it finishes or ``run.auto_resume`` restarts are used up.

    ``write_report(OUT)`` writes the report when the restarts are used up (the caller's: the report is a
    floor above the runtime)."""
    flags = dict(run.flags)
    out = Path(flags["output_dir"])
    env = dict(os.environ)
    resume = run.resume
    for attempt in range(run.auto_resume + 1):
        start_line = RunFolder(out).n_event_lines()
        t0 = time.time()
        code = subprocess.call(child_argv(flags, resume), env=env)
        if code == 0:
            return out
        if code in NO_RETRY_CODES:
            raise SystemExit(code)  # bad input or Ctrl-C: the child said why; a restart would not help
        error = last_error(out, start_line) or {}
        kind = error.get("kind") or str(error.get("message", "")).split(":", 1)[0]
        if kind in NO_RETRY_ERRORS:
            raise SystemExit(1)
        if attempt == run.auto_resume:
            break
        change = {}
        if kind in OOM_ERRORS:
            batch, accumulation = flags["batch_size"], flags["gradient_accumulation_steps"]
            if batch < 2:
                _restart_event(out, attempt + 1, code, kind, {}, "out of memory at --batch_size 1: giving up")
                break
            change = {
                "batch_size": [batch, batch // 2],
                "gradient_accumulation_steps": [accumulation, accumulation * 2],
            }
            # the next attempt runs half the micro-batch, same effective batch
            flags.update(batch_size=batch // 2, gradient_accumulation_steps=accumulation * 2)
        reason = kind or f"exit code {code}"
        _restart_event(out, attempt + 1, code, reason, change, f"failed after {time.time() - t0:.0f}s")
        env.pop("ARK_FAULT", None)  # an injected fault fires in the first attempt only
        resume = True
    message = f"--auto_resume {run.auto_resume}: the run failed every time; see {RunFolder(out).events_path}"
    _give_up(out, message, write_report)
    raise UserError(message)


def _give_up(out: Path, message: str, write_report: Callable[[Path], object]) -> None:
    """A ``gave_up`` event and the report (failure at the top): a killed child could write neither."""
    Monitor(out, heartbeat=False).event("gave_up", message=message)
    try:
        write_report(out)
    except Exception as exc:  # noqa: BLE001 - the verdict above is what the user needs to see
        log.error("could not write the report: %s", exc)


def _restart_event(out: Path, attempt: int, code: int, reason: str, change: dict, note: str) -> None:
    monitor = Monitor(out, heartbeat=False)
    monitor.event("restart", attempt=attempt, exit_code=code, reason=reason, change=change, note=note)
    what = ", ".join(f"--{k} {a} → {b}" for k, (a, b) in change.items())
    print(
        f"auto_resume: run failed ({reason}, exit {code}); restart {attempt}"
        + (f" with {what}" if what else ""),
        file=sys.stderr,
    )
