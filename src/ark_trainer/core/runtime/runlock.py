"""One live run per output folder: ``OUT/.lock``, held with ``flock`` while the run lives.

Two ``train`` commands in one folder would both "resume" and interleave their events. The process that
starts a run takes an exclusive ``flock`` on ``OUT/.lock`` and writes its pid, host and start time into it;
a second start is refused in one line naming that pid, before anything is written. The kernel drops a
``flock`` when its holder dies, however it dies, so a lock left by a dead run (a stale pid in the file) is
simply taken over. Only the launching process holds it: processes started by ``accelerate launch`` for a
multi-process run are its children and do not lock again.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from ark_trainer.base.errors import UserError

LOCK_NAME = ".lock"


def _refusal(out: Path, fd: int) -> UserError:
    os.lseek(fd, 0, os.SEEK_SET)
    try:
        holder = json.loads(os.read(fd, 4096) or b"{}")
    except ValueError:
        holder = {}
    who = (
        f"pid {holder.get('pid', '?')} on {holder.get('host', '?')}, started {holder.get('started_at', '?')}"
    )
    return UserError(
        f"--output_dir: {out} is in use by a live run ({who}); wait for it to end, stop it, "
        "or pick another folder"
    )


def _try_flock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def check_free(out: Path) -> None:
    """Refuse (UserError) when a live run holds ``out``'s lock; writes nothing."""
    path = Path(out) / LOCK_NAME
    if not path.is_file():
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if not _try_flock(fd):
            raise _refusal(Path(out), fd)
    finally:
        os.close(fd)  # closing drops the probe's lock


class RunLock:
    """The held lock of one run folder; :meth:`release` (or the process's death) frees it."""

    def __init__(self, out: Path) -> None:
        self.created = not out.exists()  # a refusal before the run wrote anything leaves no folder behind
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.path = out / LOCK_NAME
        self.fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_flock(self.fd):
            error = _refusal(out, self.fd)
            os.close(self.fd)
            raise error
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, (json.dumps(holder) + "\n").encode(), 0)

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing the only descriptor releases the flock
            self.fd = None

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.release()
        refused = self.created and exc_type is not None and issubclass(exc_type, UserError)
        if refused and [p.name for p in self.out.iterdir()] == [LOCK_NAME]:  # bad input found late
            self.path.unlink(missing_ok=True)
            self.out.rmdir()
