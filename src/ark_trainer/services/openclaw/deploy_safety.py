"""What keeps a deploy whole: the config file checked before anything starts, one deploy at a time per
OpenClaw state, and its bookkeeping never cut in half by a signal.

- :func:`check_config_file`: the OpenClaw config deploy must read, patch and later restore by
  write-and-rename is refused in one line when it cannot be (a folder, a FIFO or another non-file, a
  symlink loop or a link to nothing, unreadable, read-only or in a read-only folder, a mount point such as a
  file bind-mounted into a container, which refuses a rename with EBUSY), before a server starts or a byte
  is written.
- :func:`deploy_lock`: a second deploy for the same OpenClaw state while one runs is refused, naming the
  running one; it is never told to roll back (that would undo the live deploy). The lock is ``flock`` on
  ``$OPENCLAW_STATE_DIR/ark-trainer/deploy.lock``, released by the kernel when its process dies, so a
  ``pending`` record found *with* the lock held by us is one whose deploy really died.
- :func:`signals_deferred`: SIGINT and SIGTERM wait (blocked, then delivered) while a record is written or a
  half-done deploy is undone, so Ctrl-C cannot leave half of either.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import file_kind

FIX = "fix the file, or point OPENCLAW_CONFIG_PATH at a writable config file"


def check_config_file(config: Path) -> None:
    """Refuse, in one line, an OpenClaw config deploy could not patch and restore (see the module doc)."""
    where = f"deploy: OpenClaw config {config}"
    try:
        st = os.stat(config)  # through links
    except FileNotFoundError:
        if config.is_symlink():
            raise UserError(
                f"{where} is a link to {os.readlink(config)}, which does not exist; {FIX}"
            ) from None
        _check_folder(config.parent, where)
        return
    except OSError as exc:  # ELOOP: a symlink loop; EACCES: a folder on the way cannot be entered
        raise UserError(f"{where}: {exc.strerror or exc}; {FIX}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{where} is a folder, not a file; {FIX}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{where} is {file_kind(st.st_mode)}, not a regular file; {FIX}")
    real = Path(os.path.realpath(config))
    if not os.access(real, os.R_OK | os.W_OK):
        raise UserError(
            f"{where} is read-only or unreadable (deploy patches it, rollback restores it); {FIX}"
        )
    if _mount_point(real):
        raise UserError(
            f"{where} is a mount point (a file mounted on its own, e.g. into a container): it cannot be "
            f"replaced by rename, as OpenClaw and deploy write it; mount its folder instead"
        )
    _check_folder(real.parent, where)


def _check_folder(folder: Path, where: str) -> None:
    """The config is written to a temp file in its folder, then renamed: the folder must be writable."""
    while not folder.exists():  # OpenClaw creates the missing folders
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(
            f"{where}: its folder {folder} is read-only (the config is written there and renamed); {FIX}"
        )


def _mount_point(path: Path) -> bool:
    """Whether ``path`` itself is mounted (``/proc/self/mountinfo``; False where there is none)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return False
    target = str(path)
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and _unescape(fields[4]) == target:
            return True
    return False


def _unescape(text: str) -> str:
    """mountinfo writes space, tab, newline and backslash as octal escapes (``\\040``)."""
    for code in ("040", "011", "012", "134"):
        text = text.replace("\\" + code, chr(int(code, 8)))
    return text


@contextlib.contextmanager
def deploy_lock(state_dir: Path) -> Iterator[None]:
    """Hold the OpenClaw state's deploy lock for the block; refuse in one line while another deploy holds it."""
    path = state_dir / "ark-trainer" / "deploy.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            holder = os.pread(fd, 64, 0).decode("ascii", errors="replace").strip() or "?"
            raise UserError(
                f"deploy: another ark-trainer deploy or rollback (pid {holder}) is running for this OpenClaw "
                "state; wait for it to finish, then see `ark-trainer deploy --status`"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM are held back within the block and delivered after it (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
