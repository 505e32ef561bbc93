"""``LOOP/state.json``: what the loop has done, so a restart after a crash resumes where it stopped.

Written only with :func:`ark_trainer.base.fileio.write_json` (temp file + rename), so a crash leaves the old
state or the new one, never half of one. Fields: ``serving`` (the round whose model is served: 0 is the
starting model), ``turns_used`` (recorded lines already taken into rounds), ``training`` (the round in
training: ``{"round", "pid", "started", "started_at"}`` or null), ``next_round``, ``history`` (one entry per
decided round: ``{"round", "promoted", "reasons", "main", "decided_at"}``), ``events`` (promotions and
rollbacks, newest last), ``supervisor_pid`` and ``supervisor_started``, and the loop's settings at its start
(``settings``). A pid is recorded with its process's start time (``runtime.system.process_start``), so a pid
that another process took over after a crash is never waited for or signalled.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, write_json
from ark_trainer.core.runfolder import RunFolder

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
    """The loop's state, None without one; a file that is not a loop's state is one line (UserError)."""
    path = Path(loop) / STATE
    if not path.is_file():
        return None
    try:
        state = read_json(path)
    except (OSError, ValueError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).splitlines()[0][:120]
        raise UserError(f"{path}: unreadable ({reason}); {RESTORE}") from None
    problem = _shape_problem(state)
    if problem:
        raise UserError(f"{path}: {problem}, so it is not a loop's state; {RESTORE}")
    return state


RESTORE = "restore it from a copy, or start a new loop in a new --output_dir"


def _shape_problem(state: Any) -> str | None:
    """What makes ``state`` unusable as a loop's state (the fields every command reads), or None."""
    if not isinstance(state, dict):
        return f"it holds a JSON {type(state).__name__}, not an object"
    if state.get("kind", "ark-trainer-loop") != "ark-trainer-loop":
        return f"kind is {state.get('kind')!r}"
    kinds = {"serving": int, "history": list, "settings": dict, "model_path": str}
    for key, kind in kinds.items():
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            return f"{key}: expected {kind.__name__}, got {type(state.get(key)).__name__}"
    if not all(isinstance(h, dict) and isinstance(h.get("round"), int) for h in state["history"]):
        return "history: expected a list of {round, promoted, ...} objects"
    return None


def save_state(loop: Path, state: dict[str, Any]) -> None:
    write_json(Path(loop) / STATE, state)


def is_loop(folder: Path) -> bool:
    """Whether ``folder`` is a loop's folder (``status`` shows a loop's state instead of a run's heartbeat):
    marked a loop (a damaged state.json is then reported by :func:`load_state`), or its state says so."""
    from ark_trainer.core.folders import marker_kind

    if not (Path(folder) / STATE).is_file():
        return False
    if marker_kind(Path(folder)) == "loop":
        return True
    try:
        state = read_json(Path(folder) / STATE)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(state, dict) and state.get("kind") == "ark-trainer-loop"


def model_of(loop: Path, state: dict[str, Any], round_id: int) -> Path:
    """The complete model of round ``round_id`` (0: the model the loop started from)."""
    if round_id == 0:
        return Path(state["model_path"])
    return RunFolder(Path(loop) / "rounds" / str(round_id)).model_dir  # a round is one train run
