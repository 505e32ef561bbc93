"""Process and port primitives, one home for each (the heartbeat, the launcher and deploy share them)."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and has not exited: one we may not signal (another user's) counts as
    alive, a zombie (an exited child not yet reaped) does not."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill(0) said it exists
    return state != "Z"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, field 22 of ``/proc/PID/stat``), or None without
    ``/proc``. With the pid it names one process: a pid is reused once its process has died."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def same_process(pid: int | None, started: str | None) -> bool:
    """``pid`` is alive and is the process that started at ``started`` (None: not recorded, the pid alone
    decides), so a crashed process's pid, reused by another, is not taken for it."""
    if not pid or not pid_alive(pid):
        return False
    now = process_start(pid)
    return started is None or now is None or now == started


def loopback_hosts(port: int) -> set[str]:
    """The ``Host`` headers a server of ours on 127.0.0.1:``port`` answers: only loopback names, so a page
    whose DNS name is re-pointed at 127.0.0.1 (DNS rebinding) is refused (the model server, the dashboard)."""
    return {f"{host}:{port}" for host in ("127.0.0.1", "localhost")}


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_taken(host: str, port: int) -> bool:
    """Whether something already listens on (or holds) ``host:port``: binding it fails."""
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def resolve_device(want: str, flag: str = "--device", fallback=None) -> str:
    """``--device`` as a torch device, the one rule for ``train``, ``score``, ``rm train`` and reward models.

    ``auto``/``cuda`` → ``cuda:0`` on a machine with a GPU, else ``cpu``; ``cuda[:N]`` without a GPU → ``cpu``
    and one line to ``fallback`` (a warning, not an error: a template written for a GPU still runs); an
    unknown name or a GPU index the machine does not have → a one-line :class:`UserError`.
    """
    from ark_trainer.base.errors import UserError

    name = want.strip().lower()
    if name not in ("auto", "cpu") and not name.startswith("cuda"):
        raise UserError(f"{flag}: unknown device {want!r}; use auto, cpu, cuda or cuda:N")
    if name == "cpu":
        return "cpu"
    import torch

    if not torch.cuda.is_available():
        if name != "auto" and fallback is not None:
            fallback(f"{flag} {want}: no CUDA GPU on this machine; training on CPU instead (slower)")
        return "cpu"
    if name.startswith("cuda:"):
        index = name.split(":", 1)[1]
        if not index.isdigit() or int(index) >= torch.cuda.device_count():
            raise UserError(
                f"{flag}: {want!r} does not exist; this machine has {torch.cuda.device_count()} GPU(s)"
            )
        return name
    return "cuda:0"
