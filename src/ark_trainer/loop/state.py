"""``LOOP/state.json``: what the loop has done, so a restart after a crash resumes where it stopped.

Written only with :func:`ark_trainer.fileio.write_json` (temp file + rename), so a crash leaves the old
state or the new one, never half of one. Fields: ``serving`` (the round whose model is served: 0 is the
starting model), ``turns_used`` (recorded lines already taken into rounds), ``training`` (the round in
training: ``{"round", "pid", "started_at"}`` or null), ``next_round``, ``history`` (one entry per decided
round: ``{"round", "promoted", "reasons", "main", "decided_at"}``), ``events`` (promotions and rollbacks,
newest last), ``supervisor_pid`` and the loop's settings at its start (``settings``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ark_trainer.fileio import read_json, write_json
from ark_trainer.runfolder import RunFolder

STATE = "state.json"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def fresh_state(model_path: str, settings: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "ark-trainer-loop",
        "model_path": str(Path(model_path).resolve()),
        "serving": 0,
        "turns_used": 0,
        "training": None,
        "next_round": 1,
        "history": [],
        "events": [{"at": now(), "event": "start", "round": 0}],
        "supervisor_pid": None,
        "settings": settings,
    }


def load_state(loop: Path) -> dict[str, Any] | None:
    path = Path(loop) / STATE
    return read_json(path) if path.is_file() else None


def save_state(loop: Path, state: dict[str, Any]) -> None:
    write_json(Path(loop) / STATE, state)


def is_loop(folder: Path) -> bool:
    """Whether ``folder`` is a loop's folder (``status`` shows a loop's state instead of a run's heartbeat)."""
    state = load_state(folder)
    return state is not None and state.get("kind") == "ark-trainer-loop"


def model_of(loop: Path, state: dict[str, Any], round_id: int) -> Path:
    """The complete model of round ``round_id`` (0: the model the loop started from)."""
    if round_id == 0:
        return Path(state["model_path"])
    return RunFolder(Path(loop) / "rounds" / str(round_id)).model_dir  # a round is one train run
