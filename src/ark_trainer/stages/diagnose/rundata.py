"""What the diagnosis reads: a run folder's files, parsed once and tolerantly.

Only the run folder (``core/runfolder.py``; and the ``--log_dir`` its ``run.yaml`` names) is read, so ``ark-trainer diagnose OUT``
works on a finished, failed, killed or still-running run, on this machine or a copy of the folder. A file
that is missing or unreadable is treated as absent: a diagnosis must never fail on the run it diagnoses.
"""

from __future__ import annotations

import math
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.core.runfolder import RunFolder, final_of, run_end_status

LOG_TAIL_BYTES = 200_000  # the end of train.log is where a crash or a stall writes what happened
# what an online-RL trainer of TRL (GRPOTrainer, RLOOTrainer) logs of the groups it samples, and only it
SAMPLED_GROUP_KEYS = ("reward", "frac_reward_zero_std")


@dataclass
class RunData:
    """A run folder as read from disk; every field is empty when its file is absent."""

    out: Path
    config: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    evals: dict[str, dict[str, Any]] = field(default_factory=dict)  # in the order the run evaluated them
    state: str = "unknown"  # from the heartbeat: finished, failed, running, stalled, dead, unknown
    beat: dict[str, Any] = field(default_factory=dict)
    log_text: str = ""
    final_model: dict[str, Any] = field(default_factory=dict)  # model/ark_final_model.json: what ships

    def final_name(self) -> str | None:
        """The evaluated model that ``OUT/model`` is (the stage that ships, else the last evaluated)."""
        return final_of(list(self.evals), self.final_model)

    def of(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("event") == name]

    def metrics(self, stage: str) -> list[dict[str, Any]]:
        return [e for e in self.of("metrics") if e.get("stage") == stage]

    def series(self, stage: str, key: str) -> list[tuple[float, float]]:
        """``(step, value)`` of one logged metric of a stage, finite values only."""
        points = []
        for i, e in enumerate(self.metrics(stage)):
            value, step = num(e.get(key)), num(e.get("step"))
            if value is not None and math.isfinite(value):
                points.append((step if step is not None else float(i), value))
        return points

    def training_stages(self) -> list[str]:
        """The stages that logged metrics, in the order they first did."""
        return list(dict.fromkeys(str(e.get("stage")) for e in self.of("metrics")))

    def reward_stages(self) -> list[str]:
        """The online-RL stages of the run: those that logged a training reward of the groups they sampled
        (TRL's ``reward`` or ``frac_reward_zero_std``: GRPO, RLOO, a plug-in's stage built on them), in
        order. The checks of sampled groups (flat reward, KL, entropy, truncation, reward hacking) read these."""
        return [
            s
            for s in self.training_stages()
            if any(key in e for e in self.metrics(s) for key in SAMPLED_GROUP_KEYS)
        ]

    def cfg(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return default if value is None else value

    @property
    def log_path(self) -> Path:
        return RunFolder(self.out).log_dir(self.config.get("log_dir")) / "train.log"

    def final_status(self) -> str:
        """finished / failed / stalled / dead / running / unknown: the heartbeat, else the last run_end."""
        ended = self._ended()
        if self.state == "running" and ended:  # the run has ended and is writing its report
            return ended
        if self.state != "unknown":
            return self.state
        if ended:
            return ended
        return "running" if self.events else "unknown"

    def _ended(self) -> str | None:
        """The status of the ``run_end`` that follows the last ``run_start`` (this attempt's end), if any."""
        return run_end_status(self.events)


def num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def load(out: Path) -> RunData:
    """Read the run folder ``out``."""
    from ark_trainer.core.runtime.monitor import read_status

    folder = RunFolder(out)
    run = RunData(out=folder.out)
    run.config = folder.config()
    run.plan = folder.plan()
    run.events = folder.events()
    run.evals = _evals(folder, run.events)
    run.final_model = folder.final_model()
    try:
        run.state, run.beat = read_status(out)
    except (OSError, ValueError, TypeError):
        run.state, run.beat = "unknown", {}
    run.log_text = _tail(run.log_path)
    return run


def _evals(folder: RunFolder, events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """eval/<name>.json, ordered as the run's ``eval`` events were (base first), then the known names."""
    order = [str(e.get("model")) for e in events if e.get("event") == "eval" and e.get("model")]
    from ark_trainer.stages.registry import stage_names_in_order

    return folder.evals([*order, "base", *stage_names_in_order()])


def _tail(path: Path) -> str:
    """The log's last :data:`LOG_TAIL_BYTES`; "" for one that is absent or not a regular file (opened without
    blocking: a named pipe there would hold the reader forever)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return ""
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return ""
        os.lseek(fd, max(0, st.st_size - LOG_TAIL_BYTES), os.SEEK_SET)
        return os.read(fd, LOG_TAIL_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
