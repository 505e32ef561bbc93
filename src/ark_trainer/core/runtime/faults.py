"""Fault injection for tests: one environment variable makes a training step fail in a chosen way.

``ARK_FAULT="KIND:STEP"`` (several separated by commas), read when a stage's trainer starts:

- ``raise_at_step:3``   — step 3 raises ``RuntimeError`` (a crash)
- ``hang_at_step:3``    — step 3 never ends (for the watchdog)
- ``oom_at_step:3``     — step 3 raises ``torch.OutOfMemoryError`` (for the supervisor)
- ``nan_at_step:3``     — step 3's gradients become NaN (for the bad-step guard); ``nan_at_step:3-5``
  for steps 3 to 5. Each step fires once, as a transient blow-up would: after a rollback it trains normally
- ``nan_from_step:3``   — every step from 3 on gets NaN gradients, also after a rollback (a real divergence)
- ``kill_after_step:3`` — the process SIGKILLs itself at the end of step 3, before its checkpoint
- ``kill_in_save:4``    — SIGKILL while checkpoint-4 is being written (files there, marker not yet)
- ``disk_full_at_step:4`` — the free-disk check before checkpoint-4 sees 0 bytes free
- ``kill_after_stage:4`` — SIGKILL right after a stage ended at step 4 (final model saved, its
  ``stage_end`` written), before anything after it (e.g. that model's evaluation) starts

- ``deploy_kill_after:patched`` — ``deploy`` SIGKILLs itself right after that point (``backup``,
  ``server_started``, ``smoke``, ``patched``, ``recorded``; see :mod:`ark_trainer.services.openclaw.deploy`)
- ``deploy_term_after:patched``, ``deploy_int_after:patched`` — ``deploy`` sends itself SIGTERM or SIGINT
  there (a user's ``kill`` or Ctrl-C at that point), which it must undo cleanly

``ARK_FAULT_STAGE=grpo`` limits the faults to one stage (its name: ``rft``, ``grpo``, ``dpo``, ...). Nothing here runs unless
the variable is set; ``--auto_resume`` clears it for the restarted runs so a fault fires once.
"""

from __future__ import annotations

import os
import signal
import time

ENV, STAGE_ENV = "ARK_FAULT", "ARK_FAULT_STAGE"
DEPLOY_KILL = "deploy_kill_after"
DEPLOY_SIGNALS = {"deploy_term_after": signal.SIGTERM, "deploy_int_after": signal.SIGINT}
KINDS = (
    "raise_at_step",
    "hang_at_step",
    "oom_at_step",
    "nan_at_step",
    "nan_from_step",
    "kill_after_step",
    "kill_in_save",
    "disk_full_at_step",
    "kill_after_stage",
)


def active(stage: str) -> dict[str, int]:
    """The faults set for ``stage``: ``{kind: step}`` (a range ``A-B`` counts as its first step here)."""
    return {kind: steps[0] for kind, steps in _ranges(stage).items()}


def _ranges(stage: str) -> dict[str, range]:
    """The faults set for ``stage``: ``{kind: steps}``."""
    spec = os.environ.get(ENV, "").strip()
    only = os.environ.get(STAGE_ENV, "").strip()
    if not spec or (only and only != stage):
        return {}
    faults = {}
    for item in spec.split(","):
        kind, _, step = item.strip().partition(":")
        if kind == DEPLOY_KILL or kind in DEPLOY_SIGNALS:
            continue
        first, _, last = step.strip().partition("-")
        if kind not in KINDS or not first.isdigit() or not (last or first).isdigit():
            raise ValueError(f"{ENV}: unknown fault {item!r}; use one of {', '.join(KINDS)} as KIND:STEP")
        faults[kind] = range(int(first), int(last or first) + 1)
    return faults


def fires(stage: str, kind: str, step: int) -> bool:
    return active(stage).get(kind) == step


def kill_now() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def deploy_point(point: str) -> None:
    """SIGKILL this process at ``point`` of a deploy when ``ARK_FAULT`` holds ``deploy_kill_after:POINT``
    (SIGTERM or SIGINT for ``deploy_term_after``/``deploy_int_after``)."""
    for item in os.environ.get(ENV, "").split(","):
        if item.strip() == f"{DEPLOY_KILL}:{point}":
            kill_now()
        for kind, signum in DEPLOY_SIGNALS.items():
            if item.strip() == f"{kind}:{point}":
                os.kill(os.getpid(), signum)  # delivered (and raised) before this returns


def fault_callback(stage: str):
    """A TrainerCallback that injects the faults of ``ARK_FAULT`` into a stage (None when there are none)."""
    faults = active(stage)
    if not faults:
        return None
    from transformers import TrainerCallback

    nan_steps = _ranges(stage).get("nan_at_step", range(0))
    nan_from = faults.get("nan_from_step")

    class _FaultCallback(TrainerCallback):
        hook = None
        fired: set[int] = set()  # nan_at_step steps already poisoned (one callback per stage)

        def on_step_begin(self, args, state, control, model=None, **kwargs):
            step = state.global_step + 1
            once = step in nan_steps and step not in self.fired
            if (once or (nan_from is not None and step >= nan_from)) and model is not None:
                import torch

                self.fired.add(step)
                # NaN born in the backward pass, as a real blow-up would be (before the Trainer's grad norm)
                param = next(p for p in model.parameters() if p.requires_grad)
                self.hook = param.register_hook(lambda grad: torch.full_like(grad, float("nan")))

        def on_step_end(self, args, state, control, **kwargs):
            if self.hook is not None:
                self.hook.remove()
                self.hook = None
            step = state.global_step
            if faults.get("kill_after_step") == step:
                kill_now()
            if faults.get("raise_at_step") == step:
                raise RuntimeError(f"fault injection: step {step} raised")
            if faults.get("oom_at_step") == step:
                import torch

                raise torch.OutOfMemoryError(f"fault injection: CUDA out of memory at step {step}")
            if faults.get("hang_at_step") == step:
                while True:
                    time.sleep(1)

    return _FaultCallback()
