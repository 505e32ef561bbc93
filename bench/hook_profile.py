"""Time what ark-trainer adds inside the training loop, directly: its trainer callbacks and its reward guard.

Runs ``ark-trainer-inner train`` in this process with two timers patched in, then writes JSON to
``--profile_out``:

- every trainer callback's time per event (transformers' ``CallbackHandler.call_event`` re-implemented with
  a timer around each callback), split into ours (the callbacks ark-trainer adds: events/heartbeat,
  TensorBoard, guards) and transformers' defaults (which the plain TRL script runs too);
- the reward guard's hand-off cost: the time ``_call_with_timeout`` takes minus the time the reward
  function itself runs on the worker thread.

The wall-time ratio in ``bench/overhead.py`` carries the noise of a shared machine (±10% per repeat on
2 cores); these two figures are what our layer adds to each step, measured without that noise.

    python bench/hook_profile.py --profile_out P.json train --strategy GRPO ...   (the train flags)
"""

from __future__ import annotations

import atexit
import collections
import json
import sys
import time

# transformers' own callbacks, which plain TRL runs too; ours replace the last two with a shorter log line
DEFAULTS = {
    "DefaultFlowCallback",
    "ProgressCallback",
    "PrinterCallback",
    "_ConsoleProgress",
    "_ConsolePrinter",
}


def main() -> int:
    out = sys.argv[sys.argv.index("--profile_out") + 1]
    argv = [a for i, a in enumerate(sys.argv[1:], 1) if "--profile_out" not in (a, sys.argv[i - 1])]
    callbacks: dict = collections.defaultdict(float)
    reward = {"calls": 0, "total_s": 0.0, "inner_s": 0.0}

    import transformers.trainer_callback as tc

    def call_event(self, event, args, state, control, **kwargs):
        for cb in self.callbacks:
            t0 = time.perf_counter()
            result = getattr(cb, event)(
                args,
                state,
                control,
                model=self.model,
                processing_class=self.processing_class,
                optimizer=self.optimizer,
                lr_scheduler=self.lr_scheduler,
                train_dataloader=self.train_dataloader,
                eval_dataloader=self.eval_dataloader,
                **kwargs,
            )
            callbacks[type(cb).__name__] += time.perf_counter() - t0
            if result is not None:
                control = result
        return control

    tc.CallbackHandler.call_event = call_event

    import ark_trainer.rewards.guards as guards

    original = guards._call_with_timeout

    def timed(fn, timeout, *args, **kwargs):
        def inner(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                reward["inner_s"] += time.perf_counter() - t0

        t0 = time.perf_counter()
        try:
            return original(inner, timeout, *args, **kwargs)
        finally:
            reward["total_s"] += time.perf_counter() - t0
            reward["calls"] += 1

    guards._call_with_timeout = timed

    def dump() -> None:
        ours = {k: v for k, v in callbacks.items() if k not in DEFAULTS}
        payload = {
            "callbacks_ours_s": sum(ours.values()),
            "callbacks_defaults_s": sum(v for k, v in callbacks.items() if k in DEFAULTS),
            "callbacks_s": dict(sorted(callbacks.items(), key=lambda kv: -kv[1])),
            "default_callbacks": sorted(DEFAULTS),
            "reward_guard_calls": reward["calls"],
            "reward_guard_handoff_s": reward["total_s"] - reward["inner_s"],
            "reward_functions_s": reward["inner_s"],
        }
        with open(out, "w", encoding="utf-8") as fh:
            json.dump(payload, fh, indent=1)

    atexit.register(dump)
    from ark_trainer.cli import main as ark_main

    return ark_main(argv)


if __name__ == "__main__":
    sys.exit(main())
