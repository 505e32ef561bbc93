"""Heartbeat, events and logs of a run.

- ``OUT/events.jsonl``: one line per thing that happened (stage start/end, metrics, warnings); the report
  is built from it.
- ``OUT/heartbeat.json``: rewritten atomically every ``--heartbeat_interval`` seconds by a background
  thread while the run lives (stage, step/total, ETA, last metrics, pid, updated_at), so a watcher can
  tell a live run from a dead or hung one: ``ark-trainer status OUT``.
- ``--log_dir``: ``train.log`` (text) and TensorBoard event files, one folder per stage.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ark_trainer.base.fileio import atomic_write_text, json_line
from ark_trainer.core.runfolder import RunFolder, run_end_status
from ark_trainer.core.runtime.system import pid_alive, process_start

log = logging.getLogger("ark_trainer")

STALE_FACTOR = 3  # a heartbeat older than this many intervals counts as stale


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Monitor:
    """Writes events and the heartbeat of one run."""

    def __init__(self, out_dir: Path, heartbeat: bool = True, interval: float = 5.0) -> None:
        folder = RunFolder(out_dir)
        self.out_dir = folder.out
        self.events_path = folder.events_path
        self.heartbeat_path = folder.heartbeat_path
        self.interval = min(interval, 10.0)
        self._lock = threading.Lock()
        self._state: dict[str, Any] = {
            "state": "starting",
            "stage": None,
            "step": 0,
            "total": 0,
            "metrics": {},
        }
        self._stage_started = time.time()
        self._pid_started = process_start(
            os.getpid()
        )  # with the pid, names this process (status checks both)
        self.last_progress = time.time()  # read by the stall watchdog
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True) if heartbeat else None
        self._warned: set[str] = set()  # the warnings said: each once (warn)

    # --- lifecycle ---
    def start(self, **info: Any) -> None:
        self.started = time.time()
        self._mend_torn_line()
        self.event("run_start", **info)
        with self._lock:
            self._state.update(state="running", started_at=_now_iso())
        if self._thread:
            self.write_heartbeat()
            self._thread.start()

    def finish(self, status: str, before_final: Callable[[], None] | None = None) -> None:
        """End the run as ``status``; ``before_final`` (the report) runs while the heartbeat still beats
        ``running``, so a kill during it never leaves a run that looks finished."""
        self.event("run_end", status=status, seconds=round(time.time() - self.started, 2))
        try:
            if before_final is not None:
                with self._lock:
                    last = {k: self._state[k] for k in ("stage", "step", "total")}
                    self._state.update(stage="report", step=0, total=0)
                before_final()
                with self._lock:
                    self._state.update(last)  # the finished run shows where its work ended
        except BaseException as exc:
            self.event("error", message=f"{type(exc).__name__}: {exc}", kind=type(exc).__name__)
            self.event("run_end", status="failed", seconds=round(time.time() - self.started, 2))
            self._end_heartbeat("failed")
            raise
        self._end_heartbeat(status)

    def _end_heartbeat(self, status: str) -> None:
        with self._lock:
            self._state["state"] = status
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
            try:
                self.write_heartbeat()
            except OSError as exc:  # a full disk: a new file cannot be made, the old one can be rewritten
                log.error("could not write %s: %s", self.heartbeat_path, exc)
                self._overwrite_state(status)

    def _overwrite_state(self, status: str) -> None:
        """Rewrite the heartbeat's state in place (no new blocks needed), so ``status`` reads the end."""
        try:
            with self.heartbeat_path.open("r+", encoding="utf-8") as fh:
                beat = json.load(fh)
                beat["state"] = status
                fh.seek(0)
                fh.write(json.dumps(beat, ensure_ascii=False))
                fh.truncate()
        except (OSError, ValueError) as exc:
            log.error("could not rewrite %s: %s", self.heartbeat_path, exc)

    def _mend_torn_line(self) -> None:
        """A kill mid-write leaves a last line without its newline; end it, so the next event stays whole."""
        if self.events_path.is_file() and self.events_path.stat().st_size:
            with self.events_path.open("rb") as fh:
                fh.seek(-1, os.SEEK_END)
                torn = fh.read(1) != b"\n"
            if torn:
                with self.events_path.open("a", encoding="utf-8") as fh:
                    fh.write("\n")

    # --- events ---
    def event(self, name: str, **fields: Any) -> None:
        record = {"ts": round(time.time(), 3), "time": _now_iso(), "event": name, **fields}
        try:
            with self._lock, self.events_path.open("a", encoding="utf-8") as fh:
                fh.write(json_line(record, default=str))
        except OSError as exc:  # a full disk must not hide the error that is being reported
            log.error("could not write %s event to %s: %s", name, self.events_path, exc)

    def warn(self, message: str) -> None:
        """Log ``message`` and record it as a ``warning`` event, once per run: a warning said again (the
        same words from another round, stage or caller) adds nothing for the reader."""
        if message in self._warned:
            return
        self._warned.add(message)
        log.warning(message)
        self.event("warning", message=message)

    def stage(self, name: str, total: int = 0) -> _Stage:
        """Context manager timing a stage: ``with monitor.stage("grpo", total=steps): ...``."""
        return _Stage(self, name, total)

    def tick(self, detail: str) -> None:
        """Work inside one step moved (a decoding step of a generation batch): ``detail`` says where, in the
        heartbeat; the stall watchdog counts it as progress."""
        self.last_progress = time.time()
        with self._lock:
            self._state["detail"] = detail

    def progress(self, step: int, total: int | None = None, **metrics: Any) -> None:
        self.last_progress = time.time()
        with self._lock:
            self._state.pop("detail", None)
            self._state["step"] = step
            if total is not None:
                self._state["total"] = total
            if metrics:
                self._state["metrics"] = {k: v for k, v in metrics.items() if isinstance(v, int | float)}

    # --- heartbeat ---
    def _beat(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.write_heartbeat()
            except OSError as exc:  # e.g. disk full: keep beating, the next write may succeed
                log.error("could not write %s: %s", self.heartbeat_path, exc)

    def write_heartbeat(self) -> None:
        with self._lock:
            state = dict(self._state)
        step, total = state["step"], state["total"]
        elapsed = time.time() - self._stage_started
        eta = elapsed / step * (total - step) if step and total and total >= step else None
        if state["state"] != "running":  # a stopped, failed or finished run has no time left
            eta = None
        state.update(
            pid=os.getpid(),
            pid_started=self._pid_started,
            updated_at=_now_iso(),
            updated_ts=time.time(),
            interval=self.interval,
            eta_seconds=round(eta, 1) if eta is not None else None,
            stage_elapsed_seconds=round(elapsed, 1),
        )
        atomic_write_text(self.heartbeat_path, json.dumps(state, ensure_ascii=False, indent=2) + "\n")


class _Stage:
    def __init__(self, monitor: Monitor, name: str, total: int) -> None:
        self.monitor, self.name, self.total = monitor, name, total

    def __enter__(self) -> _Stage:
        m = self.monitor
        self.t0 = time.time()
        with m._lock:
            m._state.update(stage=self.name, step=0, total=self.total)
            m._state.pop("detail", None)
            m._stage_started = self.t0
        m.last_progress = self.t0
        m.event("stage_start", stage=self.name, total=self.total)
        log.info("stage %s: start", self.name)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        seconds = round(time.time() - self.t0, 2)
        from ark_trainer.core.runtime.signals import stopped_by_user

        status = "ok" if exc_type is None else "stopped" if stopped_by_user(exc) else "failed"
        self.monitor.event("stage_end", stage=self.name, seconds=seconds, status=status)
        log.info("stage %s: %s in %.1fs", self.name, status, seconds)
        from ark_trainer.core.runtime import faults

        if exc_type is None and faults.fires(self.name, "kill_after_stage", self.monitor._state["step"]):
            faults.kill_now()


def trainer_callback(monitor: Monitor, stage: str):
    """A transformers TrainerCallback that feeds step progress and TRL's logs to the monitor."""
    from transformers import TrainerCallback

    class _MonitorCallback(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            monitor.progress(state.global_step, state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):
            numeric = {k: float(v) for k, v in (logs or {}).items() if isinstance(v, int | float)}
            if numeric and "train_runtime" not in numeric:
                monitor.progress(state.global_step, state.max_steps, **numeric)
                monitor.event("metrics", stage=stage, step=state.global_step, **numeric)

    return _MonitorCallback()


# What the console shows of each logging step, in this order: (metric, how), for the metrics the stage logs.
CONSOLE_METRICS = (
    ("loss", "loss {:.4g}"),
    ("reward", "reward {:.4g}"),
    ("reward_std", "± {:.4g}"),
    ("frac_reward_zero_std", "zero-std groups {:.0%}"),
    ("kl", "kl {:.4g}"),
    ("entropy", "entropy {:.4g}"),
    ("completions/mean_length", "length {:.4g}"),
    ("rewards/agent_turns/mean", "turns {:.3g}"),  # --env: assistant turns per episode
    ("tools/call_frequency", "tool calls {:.3g}"),  # --env: tool calls per episode (TRL)
    ("mean_token_accuracy", "token acc {:.4g}"),
    ("accuracy", "pair acc {:.4g}"),
    ("margin", "margin {:.4g}"),
    ("grad_norm", "grad norm {:.4g}"),
    ("learning_rate", "lr {:.4g}"),
    ("step_time", "{:.2f} s/step"),
)


def console_line(stage: str, step: int, total: int, logs: dict, start: int = 0) -> str:
    """One short console line for a logging step (every metric stays in events.jsonl and TensorBoard)."""
    if "train_runtime" in logs:  # after a resume, count only the steps this attempt ran
        ran = f"{step - start} steps (resumed from step {start})" if start else f"{step} steps"
        return f"{stage}: {ran} in {float(logs['train_runtime']):.1f}s"
    line = f"{stage} step {step}/{total}:"
    for key, how in CONSOLE_METRICS:
        value = logs.get(key)
        if isinstance(value, int | float):
            text = how.format(value)
            line += (" " if text.startswith("±") or line.endswith(":") else ", ") + text
    return line


def use_console_progress(trainer, stage: str) -> None:
    """Keep ``trainer``'s progress bar, but print :func:`console_line` instead of each whole log dict."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    start: dict[str, int] = {}  # the step this attempt began at (> 0 after a resume)

    def line(state, logs: dict) -> str:
        return console_line(stage, state.global_step, state.max_steps, logs, start.get("step", 0))

    class _ConsoleProgress(ProgressCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            if self.training_bar is not None:  # the bar says whose steps it counts, not just 0/200
                self.training_bar.set_description(stage)

        def on_step_begin(self, args, state, control, **kwargs):
            start.setdefault("step", state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_world_process_zero and self.training_bar is not None and logs:
                self.training_bar.write(line(state, logs))

    class _ConsolePrinter(PrinterCallback):  # what transformers uses instead under disable_tqdm
        def on_step_begin(self, args, state, control, **kwargs):
            start.setdefault("step", state.global_step)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if state.is_local_process_zero and logs:
                print(line(state, logs), flush=True)

    if trainer.pop_callback(ProgressCallback) is not None:
        trainer.add_callback(_ConsoleProgress())
    if trainer.pop_callback(PrinterCallback) is not None:
        trainer.add_callback(_ConsolePrinter())


class _Console(logging.StreamHandler):
    """The console handler: writes to ``sys.stderr`` as it is when a record comes, not as it was at set-up
    (a caller that ran ``main()`` in-process with stderr redirected, then closed it, must not leave every
    later log line failing with a logging traceback)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(log_dir: Path) -> None:
    """Send the ``ark_trainer`` logger to ``log_dir/train.log`` and the console."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log.setLevel(logging.INFO)
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")
    file_handler = logging.FileHandler(log_dir / "train.log", encoding="utf-8")
    console = _Console()
    for handler in (file_handler, console):
        handler.setFormatter(fmt)
        log.addHandler(handler)
    log.propagate = False


def run_process_alive(pid: int, started: str | None) -> bool:
    """Whether the heartbeat's process still runs: its pid alive AND started when the heartbeat says
    (``/proc/PID/stat``), so a pid reused after the run died, or a heartbeat edited to name pid 1, is not
    taken for the run. Without ``/proc`` the pid alone decides; a heartbeat that records no start time
    where ``/proc`` would have given one was not written by a run of ours."""
    if not pid_alive(pid):
        return False
    now = process_start(pid)
    return now is None or now == started


def read_status(out_dir: Path) -> tuple[str, dict[str, Any]]:
    """The run's state from its heartbeat: finished / failed / stopped (Ctrl-C) / running / stalled / dead /
    unknown.

    ``stalled``: the watchdog ended it (no progress for ``--stall_timeout``), or its pid lives but the
    heartbeat stopped (the whole process is stuck); ``dead``: the pid is gone without a final state.
    """
    folder = RunFolder(out_dir)
    beat = folder.heartbeat()
    if beat is None:
        return "unknown", {}
    state = beat.get("state", "unknown")
    if state in ("finished", "failed", "stalled", "stopped"):
        return state, beat
    age = time.time() - float(beat.get("updated_ts", 0))
    limit = STALE_FACTOR * float(beat.get("interval", 5.0))
    if not run_process_alive(
        int(beat.get("pid", 0)), beat.get("pid_started")
    ):  # the heartbeat could not be rewritten (full disk?): the events may say how it ended
        return ("failed" if run_end_status(folder.events()) == "failed" else "dead"), beat
    return ("stalled" if age > limit else "running"), beat
