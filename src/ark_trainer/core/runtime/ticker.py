"""A line every few seconds while something long runs that prints nothing of its own.

A model server loading a real model, ``npm install --loglevel=error``: each can take minutes in silence,
which reads as a hang. :func:`ticking` says what is under way when it starts, then ``… still <what> (N s)``
every ``every`` seconds until the block ends, from a daemon thread (the block itself is not touched).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

TICK_SECONDS = 10.0  # the longest silence a tick leaves


@contextlib.contextmanager
def ticking(say: Callable[[str], object], what: str, every: float | None = None) -> Iterator[None]:
    """Around a silent block: ``say(f"... still {what} ({n} s)")`` every ``every`` seconds
    (:data:`TICK_SECONDS` unless given) while it runs."""
    every = every or TICK_SECONDS
    done = threading.Event()
    start = time.monotonic()

    def tick() -> None:
        while not done.wait(every):
            say(f"  ... still {what} ({time.monotonic() - start:.0f} s)")

    thread = threading.Thread(target=tick, name="ticking", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=1.0)
