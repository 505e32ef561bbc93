"""Stall watchdog: a run that makes no progress for ``--stall_timeout`` seconds is ended, loudly.

Progress is anything that calls ``Monitor.progress`` (a training step, a sampling or eval batch). When
none came for ``--stall_timeout`` seconds, the watchdog thread dumps every Python thread's stack into
``train.log`` (faulthandler), writes the heartbeat with state ``stalled`` and a ``stalled`` event, and ends
the process with exit code :data:`EXIT_STALLED` (``os._exit``: a hung main thread cannot be unwound).
``--auto_resume`` then restarts it from the last checkpoint like any other failure.
"""

from __future__ import annotations

import contextlib
import faulthandler
import logging
import os
import sys
import threading
import time

log = logging.getLogger("ark_trainer")

EXIT_STALLED = 124


class Watchdog:
    def __init__(self, monitor, timeout: float, poll: float | None = None) -> None:
        self.monitor, self.timeout = monitor, timeout
        self.poll = poll if poll is not None else min(max(timeout / 10, 0.2), 5.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="ark-watchdog")

    def start(self) -> Watchdog:
        if self.timeout > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            idle = time.time() - self.monitor.last_progress
            if idle > self.timeout:
                self._fire(idle)
                return

    def _fire(self, idle: float) -> None:
        m = self.monitor
        message = (
            f"no progress for {idle:.0f}s (--stall_timeout {self.timeout:g}) in stage {m._state.get('stage')} "
            f"at step {m._state.get('step')}; Python stacks follow in the log; exiting"
        )
        log.error(message)
        for handler in log.handlers:
            stream = getattr(handler, "stream", None)
            if stream is not None:
                stream.flush()
                with contextlib.suppress(ValueError, OSError, AttributeError):  # a stream without a fileno
                    faulthandler.dump_traceback(file=stream, all_threads=True)
                stream.flush()
        m.event("stalled", message=message, stage=m._state.get("stage"), step=m._state.get("step"))
        with m._lock:
            m._state["state"] = "stalled"
        m._stop.set()
        m.write_heartbeat()
        sys.stderr.flush()
        os._exit(EXIT_STALLED)
