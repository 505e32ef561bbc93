"""SIGTERM ends a run the way Ctrl-C does: as a ``failed`` run with an ``error`` event.

Python's default for SIGTERM kills the process on the spot, so the heartbeat stayed ``running`` and
``status`` called the run ``dead``. While a run lives, SIGTERM raises :class:`Terminated` (a
``KeyboardInterrupt``, so nothing that catches ``Exception`` swallows it) in the main thread; the
pipeline's failure path records it, and the CLI exits with 143 (128 + SIGTERM).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """The run received SIGTERM."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated("SIGTERM: the run was asked to stop")


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
