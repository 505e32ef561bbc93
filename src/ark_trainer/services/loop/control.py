"""Controlling a running loop from another shell: ``loop --rollback N`` and ``loop --stop``.

``--rollback N`` asks the running supervisor to serve round N (``LOOP/rollback.json``, claimed by one
rename so only one side serves it) and waits; with no supervisor (or one that stops without serving it)
it switches itself. ``--stop`` signals the supervisor (it stops a round in training) and stops the model
server. A pid is trusted only with its recorded start time, so a pid another process took after a crash is
never waited for or signalled.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_json
from ark_trainer.core.runtime.system import pid_alive, same_process
from ark_trainer.services.loop.state import load_state, now
from ark_trainer.services.loop.supervisor import ROLLBACK_REQUEST, Loop, LoopSettings, claim_rollback_request


def _supervised_by(folder: Path, pid: int) -> bool:
    """``pid`` is alive and still the loop's supervisor (it clears ``supervisor_pid`` when it stops; a pid
    reused by another process after a crash is not it)."""
    state = load_state(folder) or {}
    return state.get("supervisor_pid") == pid and same_process(pid, state.get("supervisor_started"))


def servable_rounds(folder: Path, state: dict) -> list[int]:
    """Rounds that may be served: the starting model (0) and every round the gate promoted."""
    return [0] + [h["round"] for h in state["history"] if h["promoted"]]


def request_rollback(folder: Path, n: int, log=print, timeout: float = 600) -> None:
    """``loop --rollback N``: serve round N again (through the running supervisor, or directly)."""
    folder = Path(folder).resolve()
    state = load_state(folder)
    if state is None:
        raise UserError(f"loop --rollback: {folder} is not a loop folder (no state.json)")
    if n not in servable_rounds(folder, state):
        raise UserError(
            f"--rollback: round {n} was never promoted; choose one of {servable_rounds(folder, state)}"
        )
    pid, started = state.get("supervisor_pid"), state.get("supervisor_started")
    if pid and same_process(pid, started):
        if _through_supervisor(folder, n, pid, started, timeout):
            log(f"loop: serving round {n}")
            return
        log(f"loop: the supervisor (pid {pid}) stopped without switching; switching here")
        state = load_state(folder) or state
    loop = Loop(
        folder, LoopSettings(**{k: v for k, v in state["settings"].items() if k != "train_flags"}), {}, log
    )
    loop.state = state
    loop.switch_to(n, "rollback")
    loop._write_report()
    log(f"loop: serving round {n}")


def _through_supervisor(folder: Path, n: int, pid: int, started: str | None, timeout: float) -> bool:
    """Ask the running supervisor to serve round ``n``; True once it does, False when it stopped (or is
    stopping) without doing it, so the caller switches itself instead of waiting for nobody."""
    write_json(folder / ROLLBACK_REQUEST, {"round": n, "asked_at": now()})
    deadline = time.time() + timeout
    while time.time() < deadline:
        if (load_state(folder) or {}).get("serving") == n and not (folder / ROLLBACK_REQUEST).exists():
            return True
        gone = not _supervised_by(folder, pid)  # stopped, or stopping: it will not look again
        # it stopped: switch here if the request is still ours to take, or once its process has ended
        if gone and (claim_rollback_request(folder) is not None or not same_process(pid, started)):
            return (load_state(folder) or {}).get("serving") == n
        time.sleep(0.2)
    raise UserError(f"loop --rollback: the supervisor (pid {pid}) did not switch within {timeout:.0f}s")


def stop_loop(folder: Path) -> str:
    """``loop --stop``: SIGTERM the supervisor (it stops a round in training), stop the model server; the
    line says how to restore the client of the deploy target in use (``--deploy_target``)."""
    from ark_trainer.base.run_options import DEFAULT_DEPLOY_TARGET
    from ark_trainer.services.deploy.targets import get_target
    from ark_trainer.services.loop.serving import target_of

    folder = Path(folder).resolve()
    state = load_state(folder)
    if state is None:
        raise UserError(f"loop --stop: {folder} is not a loop folder (no state.json)")
    name = target_of(state)
    target = get_target(name)
    stop = target.stop
    pid = state.get("supervisor_pid")
    said = []
    if pid and same_process(pid, state.get("supervisor_started")):  # never a process that reused its pid
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + 30
        while pid_alive(pid) and time.time() < deadline:
            time.sleep(0.2)
        said.append(f"stopped the supervisor (pid {pid})")
    try:
        said.append("stopped the model server" if stop(str(folder)) else "the model server was not running")
    except UserError:
        said.append("no model server was deployed")
    rollback = "ark-trainer deploy LOOP" + ("" if name == DEFAULT_DEPLOY_TARGET else f" --target {name}")
    label = getattr(target, "label", name)  # the client's name for people (OpenClaw)
    return "; ".join(said) + f"; `{rollback} --rollback` restores {label}'s config"
