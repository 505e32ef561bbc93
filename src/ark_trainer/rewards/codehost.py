"""Python graders' code in a child process of its own, so it can neither end nor outlive the command.

A ``type: python`` grader (``source`` or ``function``) is the user's code. Run in the command's own process
it could end it (``sys.exit(0)`` made ``score`` exit 0 with no output), hang it at load (an endless loop
outside ``grade`` was under no time limit), or leave processes behind that hold the command's stdout.
Here each python grader's code lives in a *host*: ``python -m ark_trainer.rewards.codehost``, started in a
session of its own (so a process group of its own, which the grader's children join), speaking JSON lines
on two pipes:

- loading it (``exec`` of the source, or the import of ``package.module:function``) has the same time
  limit as grading a batch (``--reward_timeout``); past it the host's group is killed and the grader is
  refused in one line;
- a batch is one round trip (measured on a busy 2-core machine: 0.6 ms a call, 2,000 one-answer calls in
  1.2 s, one 2,000-answer batch in 64 ms, starting a host 0.5 s); a
  batch past the limit kills the host's group and raises :class:`TimeoutError` (the guards skip those
  samples, as for any reward out of time); the next call starts the host again;
- ``SystemExit`` or ``KeyboardInterrupt`` raised by the code, or the host process dying, is a grader error
  (:class:`GraderEnded`, one line, exit 2), never the end of the command;
- the host writes nothing on the command's stdout: what the code prints goes to the command's stderr,
  through a pipe the command reads (a process the grader left behind holds that pipe, not the command's
  stdout or stderr);
- when the command ends, every host's process group is killed (``cli.main`` and ``atexit``; a host no
  longer referenced, when it is collected), and a host whose parent is gone (the command was killed, even by
  SIGKILL) kills its own group within a quarter of a second.

Why a host rather than the alternatives: moving the whole command into a process group of its own would take
it out of the shell's foreground group (Ctrl-C would no longer reach it), and killing the command's
descendants at exit misses a grandchild that was reparented, and would also kill what the command starts on
purpose to outlive it (``deploy``'s model server). A host isolates only the grader's code, and its group is
one ``killpg``.

A grader's child that leaves the process group on purpose (``os.setsid``) escapes this; nothing short of a
container stops that.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

MAX_REPLY_BYTES = 64 * 1024 * 1024  # a reply is a few numbers per sample
WATCH_EVERY = 0.25  # seconds between the host's checks that its parent is alive
_HOSTS: weakref.WeakSet[CodeHost] = weakref.WeakSet()  # a host no longer referenced is killed when collected
_HOSTS_LOCK = threading.Lock()


class CodeLoadError(Exception):
    """The code did not load: ``key`` is the spec field to name (``source``/``function``), with the reason."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key, self.message = key, message


class HostEnded(Exception):
    """The code ended its host (``sys.exit``, ``KeyboardInterrupt``, ``os._exit``, a crash): the reason."""


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:20]}…({len(text)} characters)"


class CodeHost:
    """One python grader's code in a host process; :meth:`grade_many` grades ``(sample, item)`` pairs.

    ``load``: ``{"kind": "source", "text": ...}`` or ``{"kind": "function", "target": "module:function"}``;
    ``timeout``: seconds for loading and for each batch (0: no limit).
    """

    def __init__(self, name: str, load: dict[str, str], timeout: float) -> None:
        self.name, self.load, self.timeout = name, load, timeout
        self.proc: subprocess.Popen | None = None
        self.finalizer: weakref.finalize | None = None
        self.forwarder: threading.Thread | None = None  # copies the host's stderr to the command's
        self.owner = os.getpid()  # the process whose host this is (a fork copies the object, not the host)
        self.buffer = b""
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start the host and load the code; :class:`CodeLoadError` when it does not load in time."""
        self.owner = os.getpid()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ark_trainer.rewards.codehost"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group: killed as one, with the children of the code
            env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
        )
        with _HOSTS_LOCK:
            _HOSTS.add(self)
        self.finalizer = weakref.finalize(self, _kill_group, self.proc.pid)
        self.forwarder = threading.Thread(
            target=_forward, args=(self.proc.stderr,), daemon=True, name="ark-grader-out"
        )
        self.forwarder.start()
        key = "source" if self.load["kind"] == "source" else "function"
        limit = f"--reward_timeout {self.timeout:g} s"
        try:
            reply = self._ask({"op": "load", **self.load, "path": sys.path})
        except TimeoutError:
            self.stop()
            raise CodeLoadError(key, f"loading the code took longer than {limit}; it must finish") from None
        except HostEnded as exc:
            self.stop()
            raise CodeLoadError(key, f"the code ended its process while loading ({exc})") from None
        if "bad" in reply:
            self.stop()
            raise CodeLoadError(key, reply["bad"])

    def grade_many(self, pairs: list[tuple[dict, dict]]) -> list[list]:
        """Per pair ``["ok", value]``, ``["junk", repr]`` or ``["raised", type, message]``; raises
        :class:`HostEnded` (the code ended the host) or :class:`TimeoutError` (past the limit; host killed)."""
        with self.lock:
            if self.owner != os.getpid():  # a forked copy: the pipes are its parent's; start its own host
                self.proc, self.finalizer, self.buffer = None, None, b""
            if self.proc is None or self.proc.poll() is not None:
                self.start()
            try:
                reply = self._ask({"op": "grade", "pairs": pairs})
            except TimeoutError:
                self.stop()  # the code is stuck: kill its group; the next batch starts a fresh host
                raise TimeoutError(f"no answer after {self.timeout:g}s") from None
            except HostEnded:
                self.stop()
                raise
        if "ended" in reply:
            self.stop()
            raise HostEnded(reply["ended"])
        return reply["outcomes"]

    def _ask(self, message: dict) -> dict:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message, ensure_ascii=False, default=str).encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise HostEnded(self._exit_reason()) from None
        deadline = time.monotonic() + self.timeout if self.timeout > 0 else None
        return json.loads(self._line(deadline))

    def _line(self, deadline: float | None) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise TimeoutError
            chunk = os.read(fd, 1 << 16)
            if not chunk or len(self.buffer) > MAX_REPLY_BYTES:
                raise HostEnded(self._exit_reason())
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def _exit_reason(self) -> str:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "its process stopped answering"
        if code < 0:
            return f"its process was killed by signal {-code}"
        return f"its process exited with code {code}"

    def stop(self) -> None:
        """Kill the host's process group (the code and every process it started) and reap the host."""
        proc, self.proc, self.buffer = self.proc, None, b""
        with _HOSTS_LOCK:
            _HOSTS.discard(self)
        if self.finalizer is not None:
            self.finalizer.detach()  # this group is killed now; never again later, once its number is reused
        if proc is None:
            return
        _kill_group(proc.pid)
        for pipe in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close() if pipe else None
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if self.forwarder is not None:  # what the code printed reaches stderr before the command ends
            self.forwarder.join(timeout=2)

    def __getstate__(self) -> dict:  # a copy (pickled into a DataLoader worker) starts its own host
        return {"name": self.name, "load": self.load, "timeout": self.timeout}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["name"], state["load"], state["timeout"])  # type: ignore[misc]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(OSError):  # already gone, group and all
        os.killpg(pid, signal.SIGKILL)


def _forward(pipe) -> None:
    """Copy the host's stderr (and what the code prints) to the command's stderr."""
    try:
        for line in iter(pipe.readline, b""):
            sys.stderr.write(line.decode("utf-8", errors="replace"))
            sys.stderr.flush()
    except (OSError, ValueError):
        pass
    finally:
        pipe.close()


@atexit.register
def stop_all() -> None:
    """Kill every host's process group: nothing the graders started outlives the command."""
    with _HOSTS_LOCK:
        hosts = list(_HOSTS)
    for host in hosts:
        host.stop()


# --- the host process ---


def _load(message: dict) -> tuple[Any, str | None]:
    """The code's ``grade`` function, or ``(None, reason)`` in the words the spec's other checks use."""
    import importlib
    import inspect

    sys.path[:] = message.get("path") or sys.path
    if message["kind"] == "source":
        namespace: dict[str, Any] = {}
        try:
            exec(compile(message["text"], f"<{message.get('name', 'grader')} source>", "exec"), namespace)  # noqa: S102
        except Exception as exc:  # noqa: BLE001 - any error in the user's code
            return None, f"the code does not run: {type(exc).__name__}: {exc}"
        fn = namespace.get("grade")
        if fn is None:
            return None, "the code must define grade(sample, item)"
    else:
        target = message["target"]
        module_name, _, attr = target.partition(":")
        try:
            fn = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            return None, f"cannot import {target!r}: {exc}"
    if not callable(fn):
        return None, "is not callable"
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        return None, "must take two arguments: grade(sample, item)"
    except ValueError:
        pass  # builtins without a signature: trust them
    return fn, None


def _outcome(fn, sample: dict, item: dict) -> list:
    try:
        value = fn(sample, item)
    except Exception as exc:  # noqa: BLE001 - the user's code; the command words it
        return ["raised", type(exc).__name__, str(exc)[:2000]]
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return ["ok", value]
    return ["junk", short(value)]


def _serve_one(fn, message: dict) -> dict:
    if message["op"] == "load":
        fn, bad = _load(message)
        return {"bad": bad} if bad else {"ok": True, "fn": fn}
    return {"outcomes": [_outcome(fn, sample, item) for sample, item in message["pairs"]]}


def _watch_parent(parent: int) -> None:
    """Kill this host's whole group once the command that started it is gone (it was killed)."""
    while os.getppid() == parent:
        time.sleep(WATCH_EVERY)
    os.killpg(os.getpgrp(), signal.SIGKILL)


def main() -> None:
    """The host: requests on fd 0, replies on fd 1; the code sees /dev/null and writes to stderr."""
    requests = os.fdopen(os.dup(0), "rb")
    replies = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)  # the code's print() goes to stderr, never into the replies
    sys.stdout = sys.stderr
    # SIGINT the code sends itself (``os.kill(os.getpid(), signal.SIGINT)``) stays pending until the request is
    # served, then ends it as a KeyboardInterrupt would: delivered, Python raised it at its next check, which
    # could fall after the reply was written (the host then died with the batch graded). No Ctrl-C reaches a
    # host (a session of its own); the code's own children inherit the block.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    fn = None
    for line in requests:
        message = json.loads(line)
        try:
            reply = _serve_one(fn, message)
            if signal.SIGINT in signal.sigpending():
                signal.sigwait({signal.SIGINT})
                raise KeyboardInterrupt
        except (SystemExit, KeyboardInterrupt) as exc:  # the code tried to end the process
            reply = {"ended": f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__}
            reply = (
                {"bad": f"the code ended its process while loading ({reply['ended']})"}
                if message["op"] == "load"
                else reply
            )
        fn = reply.pop("fn", fn)
        replies.write(json.dumps(reply, default=str).encode() + b"\n")
        replies.flush()


if __name__ == "__main__":
    main()
