"""Guards on the rewards, in training and scoring (the trainer's own guards: :mod:`ark_trainer.core.runtime.guards`).

Rewards that raise or hang: :func:`guard_reward` wraps each reward component of a
:class:`CompositeReward` from the outside. A call that raises is retried one sample at a time; a call
that takes longer than ``--reward_timeout`` seconds is abandoned (its worker thread is left behind:
Python cannot kill a thread) and retried one sample at a time, each with the same timeout. Samples that still
fail score ``None`` (not applicable: left out of the composite's weighted mean) and are counted in
``reward_skipped`` events. A completion that no reward could score has a ``None`` total: RFT does not
rank it, and TRL 1.16's GRPOTrainer marks it unscorable (left out of its group's baseline, advantage 0).
Samples a grader failed on by itself (a regex out of time, a score that is not a finite number) are
counted and reported the same way. A :class:`RewardUnavailable` (a judge that refuses the key or cannot
be reached) is never skipped: it stops the run, since every sample would fail alike; so does reward code
that raises ``SystemExit`` or ``KeyboardInterrupt`` (a grader error in one line, exit 2, not the end of the
command). Python graders run in a process of their own (``rewards/codehost.py``), killed when out of time.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from ark_trainer.rewards.graders import GraderEnded
from ark_trainer.rewards.registry import RewardUnavailable

log = logging.getLogger("ark_trainer")


class _TimedOut(Exception):
    pass


class _Ended(Exception):
    """``SystemExit``/``KeyboardInterrupt`` raised by reward code on the worker thread (a real Ctrl-C only
    ever reaches the main thread): handed to the caller as this, to be a grader error, not the end."""

    def __init__(self, exc: BaseException) -> None:
        said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        super().__init__(said)


_WORKER = threading.local()


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        fn, args, kwargs, box, done = jobs.get()
        try:
            box["value"] = fn(*args, **kwargs)
        except (SystemExit, KeyboardInterrupt) as exc:  # code that tried to end the command
            box["error"] = _Ended(exc)
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc
        done.set()


def _call_with_timeout(fn, timeout: float, *args: Any, **kwargs: Any):
    """``fn(*args, **kwargs)`` on this thread's reward worker, given up after ``timeout`` seconds.

    One long-lived worker per calling thread: starting a thread per call cost ~1 ms each on a busy 2-core
    machine (``bench/overhead.py``). A worker that timed out is left to finish alone and replaced.
    """
    if timeout <= 0:
        return fn(*args, **kwargs)
    jobs = getattr(_WORKER, "jobs", None)
    if jobs is None:
        jobs = _WORKER.jobs = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(jobs,), daemon=True, name="ark-reward").start()
    box: dict[str, Any] = {}
    done = threading.Event()
    jobs.put((fn, args, kwargs, box, done))
    if not done.wait(timeout):
        _WORKER.jobs = None  # the stuck worker keeps its queue; the next call starts a fresh one
        raise _TimedOut(f"no answer after {timeout:g}s")
    if "error" in box:
        raise box["error"]
    return box["value"]


class Skips(dict):
    """Samples skipped per reward name, shared by the guarded components of one reward.

    ``monitor`` is where ``reward_skipped`` events go once the run has one (:func:`attach_monitor`); a
    reward built before the run starts (``train`` checks everything first) has none yet. ``first`` keeps
    each reward's first reason (``score`` prints it).
    """

    def __init__(self) -> None:
        super().__init__()
        self.monitor: Any = None
        self.first: dict[str, str] = {}


class GuardedReward:
    """One reward component whose failures on single samples are skipped, counted and reported."""

    def __init__(self, name: str, fn, timeout: float, skips: Skips) -> None:
        self.name, self.fn, self.timeout, self.skips = name, fn, timeout, skips
        self.__name__ = getattr(fn, "__name__", name)

    def __call__(self, prompts: list, completions: list, **columns: Any) -> Any:
        from ark_trainer.rewards.graders import failures

        before = failures(self.fn)[0]
        scores = self._scores(prompts, completions, columns)
        failed, reason = failures(self.fn)
        if failed > before:  # the grader skipped samples by itself (e.g. a regex out of time)
            self._count(failed - before, len(completions), "failed", reason)
        return scores

    def _call(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return _call_with_timeout(*args, **kwargs)
        except _Ended as exc:
            raise GraderEnded(
                f"reward {self.name!r} tried to end the process ({exc}); a reward returns scores and never "
                "exits: fix its code"
            ) from None

    def _scores(self, prompts: list, completions: list, columns: dict) -> Any:
        try:
            return self._call(self.fn, self.timeout, prompts=prompts, completions=completions, **columns)
        except RewardUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of user code is retried per sample
            first = exc
        scores, skipped = [], []
        for i in range(len(completions)):
            one = {
                k: [v[i]] if isinstance(v, list) and len(v) == len(completions) else v
                for k, v in columns.items()
            }
            try:
                scores.append(
                    list(
                        self._call(
                            self.fn, self.timeout, prompts=[prompts[i]], completions=[completions[i]], **one
                        )
                    )[0]
                )
            except RewardUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001
                scores.append(None)
                skipped.append((i, exc))
        if skipped:
            self._report(skipped, len(completions), first)
        return scores

    def applies(self, prompts: list, completions: list, **columns: Any) -> list[bool]:
        """The wrapped grader's :func:`~ark_trainer.rewards.graders.applies`, under the same timeout."""
        from ark_trainer.rewards.graders import applies

        try:
            return _call_with_timeout(applies, self.timeout, self.fn, prompts, completions, columns)
        except _TimedOut:
            return [True] * len(completions)

    def _report(self, skipped: list, n: int, first: Exception) -> None:
        reason = "timeout" if isinstance(skipped[0][1], _TimedOut | TimeoutError) else "error"
        self._count(len(skipped), n, reason, f"{type(skipped[0][1]).__name__}: {skipped[0][1]}")

    def _count(self, skipped: int, n: int, reason: str, err: str) -> None:
        with _LOCK:
            self.skips[self.name] = self.skips.get(self.name, 0) + skipped
            self.skips.first.setdefault(self.name, f"{reason}: {err}")
            total = self.skips[self.name]
        message = f"reward {self.name!r}: {skipped} of {n} samples skipped ({reason}: {err}); {total} so far"
        log.warning(message)
        if self.skips.monitor is not None:
            self.skips.monitor.event(
                "reward_skipped", reward=self.name, n=skipped, reason=reason, error=err, total=total
            )


_LOCK = threading.Lock()


def guard_reward(reward, timeout: float) -> Skips:
    """Wrap every component of ``reward`` (a CompositeReward); returns the shared skip counters.

    Called by :func:`ark_trainer.rewards.builder.build_reward` while it builds the reward, so every
    command gets the same guarded reward.
    """
    skips = getattr(reward, "guard_stats", None)
    skips = skips if isinstance(skips, Skips) else Skips()
    for comp in reward.components:
        if not isinstance(comp.fn, GuardedReward):
            comp.fn = GuardedReward(comp.name, comp.fn, timeout, skips)
    reward.guard_stats = skips
    return skips


def unguarded(fn):
    """The grader inside a :class:`GuardedReward` (its own counters, nested graders, judge stats)."""
    return fn.fn if isinstance(fn, GuardedReward) else fn


def attach_monitor(reward, monitor) -> None:
    """Send the ``reward_skipped`` events of ``reward`` (guard skips, refused scores) to ``monitor``."""
    skips = getattr(reward, "guard_stats", None)
    if isinstance(skips, Skips):
        skips.monitor = monitor

    def on_reject(name: str, n: int, example: str, total: int) -> None:
        error = f"score {example} is not a finite number within bounds"
        monitor.event("reward_skipped", reward=name, n=n, reason="invalid", error=error, total=total)

    reward.on_reject = on_reject


def warn_skipped(reward, monitor) -> None:
    """One warning per reward that skipped samples during the run (shown in the report's Warnings)."""
    skips = getattr(reward, "guard_stats", None) or {}
    for name, count in skips.items():
        if count:
            monitor.warn(
                f"reward {name!r} failed (raised, timed out after --reward_timeout, or could not grade) on "
                f"{count} samples; they were skipped (see reward_skipped events and train.log)"
            )
    for name, count in (getattr(reward, "rejected", None) or {}).items():
        monitor.warn(
            f"reward {name!r} returned {count} scores that are not finite numbers within bounds (inf, nan, "
            "huge); those samples were skipped, never trained on (see reward_skipped events)"
        )
