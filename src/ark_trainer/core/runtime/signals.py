"""How a run is asked to stop: Ctrl-C (stopped by the user) and SIGTERM (failed).

Ctrl-C: while a run lives, the first SIGINT only asks it to stop (:func:`request_stop`); the run stops at
its next stop point (:func:`check_stop`: every decoder layer's forward and backward, every micro-step, every
decoding step of a generation batch, ``core/runtime/stop_points.py``), which is seconds away, not at the end of
the optimizer step. A phase with no stop point still ends within :data:`STOP_GRACE_S`: the request then
raises wherever the main thread is, as a second Ctrl-C does at once. It raises :class:`StoppedByUser`; the
pipeline records the run as ``stopped`` and the CLI exits with 130 (128 + SIGINT), saying so.

SIGTERM: Python's default kills the process on the spot, so the heartbeat stayed ``running`` and
``status`` called the run ``dead``. While a run lives, SIGTERM raises :class:`Terminated` (a
``KeyboardInterrupt``, so nothing that catches ``Exception`` swallows it) in the main thread; the
pipeline's failure path records it as ``failed``, and the CLI exits with 143 (128 + SIGTERM).
"""

from __future__ import annotations

import _thread
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

STOP_GRACE_S = 3.0  # after the first Ctrl-C, the longest wait for a stop point before raising anyway

_requested = threading.Event()  # the first Ctrl-C came
_raised = threading.Event()  # StoppedByUser was raised: the grace timer must not interrupt the clean-up
_from_timer = threading.Event()  # the SIGINT being handled is the grace timer's, not the user's
_timers: list[threading.Timer] = []  # cancelled when the run's block ends


class Terminated(KeyboardInterrupt):
    """The run received SIGTERM."""


class StoppedByUser(KeyboardInterrupt):
    """The user pressed Ctrl-C: the run stops, keeping its checkpoints; not an error."""


def stopped_by_user(exc: BaseException) -> bool:
    """Whether ``exc`` is the user's Ctrl-C (at a stop point or raised at once), not SIGTERM or a failure."""
    return isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Terminated)


def request_stop() -> None:
    """Ask the run to stop at its next stop point (what the first Ctrl-C does)."""
    _requested.set()


def stop_requested() -> bool:
    return _requested.is_set()


def check_stop() -> None:
    """A stop point: raise :class:`StoppedByUser` once a stop was requested (cheap: one flag read)."""
    if _requested.is_set() and not _raised.is_set():
        _raised.set()
        raise StoppedByUser("stopped by the user (Ctrl-C)")


def _raise_terminated(signum, frame) -> None:
    raise Terminated("SIGTERM: the run was asked to stop")


def _on_ctrl_c(signum, frame) -> None:
    if _requested.is_set():  # the second Ctrl-C, or the grace timer: stop here, now
        timer_call = _from_timer.is_set()
        _from_timer.clear()
        if timer_call and _raised.is_set():
            return  # a stop point raised meanwhile: the clean-up (events, report) goes on
        _raised.set()
        raise StoppedByUser("stopped by the user (Ctrl-C)")
    request_stop()
    print(
        "\nstopping at the next step or generation batch (Ctrl-C again to stop at once)",
        file=sys.stderr,
        flush=True,
    )
    timer = threading.Timer(STOP_GRACE_S, _interrupt_if_still_running)
    timer.daemon = True
    _timers.append(timer)
    timer.start()


def _interrupt_if_still_running() -> None:
    if _requested.is_set() and not _raised.is_set():
        _from_timer.set()
        _thread.interrupt_main(signal.SIGINT)  # runs _on_ctrl_c again in the main thread: it raises


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


@contextlib.contextmanager
def ctrl_c_stops() -> Iterator[None]:
    """Within the block, Ctrl-C stops the run at its next stop point (main thread only; elsewhere a no-op).
    A SIGINT that was ignored when the block began (a run started in the background) stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is signal.SIG_IGN:
        yield
        return
    for flag in (_requested, _raised, _from_timer):
        flag.clear()
    signal.signal(signal.SIGINT, _on_ctrl_c)
    try:
        yield
    finally:
        while _timers:
            _timers.pop().cancel()
        signal.signal(signal.SIGINT, previous)
        for flag in (_requested, _raised, _from_timer):
            flag.clear()
