"""Evaluation during GRPO, keeping the best policy (TRL's ``load_best_model_at_end`` pattern).

Every ``--grpo_eval_steps`` optimizer steps (and after the last one) the policy greedy-decodes the dev
prompts with GRPO's own completion budget (``--grpo_max_completion_length``: for QC the decision lines,
which is all task accuracy reads) and is scored by the run's graders. The measured metric is the run's task
accuracy where the graders give one, else the mean of GRPO's reward. The trainable parameters of the best
step so far are kept in memory (the starting model is step 0, measured the same way: every figure the
search compares comes from :func:`held_out_score` with the same settings); at the end of the stage the
policy goes back to the best step when a later one was worse, so ``OUT/grpo`` ships the best policy GRPO
reached. The choice reads the dev split only (``data/split.py``): the stage's reported figure, on the test
split, was never used to pick the step, so it is not inflated by the pick.

The best step is also recorded in the run folder (``<stage>/best_step.json``, its weights beside it), so a
run that resumes from a checkpoint keeps it; a record measured with other settings (the precision may
change between attempts) is not compared and is dropped. Every evaluation is an event (``grpo_eval``) and a
line of the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger("ark_trainer")
EVAL_BATCH = 32


@dataclass
class BestPolicy:
    """The best evaluation so far: its step, its metric value, and (after step 0) its trainable weights."""

    step: int = -1
    value: float = float("-inf")
    weights: dict[str, Any] | None = None
    history: list[tuple[int, float]] = field(default_factory=list)


def held_out_score(
    model, tok, rows: list[dict], reward, max_new_tokens: int, bf16: bool
) -> tuple[str, float]:
    """(metric name, value) of ``model`` greedy-decoding ``rows`` within ``max_new_tokens``."""
    import torch

    from ark_trainer.core.generation import generate
    from ark_trainer.core.metrics import TASK_ACCURACY, compute_metrics
    from ark_trainer.rewards.composite import TOTAL
    from ark_trainer.rewards.scoring import metric_scores

    was_training = model.training
    model.eval()
    device = next(model.parameters()).device.type
    with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
        answers = [
            a[0]
            for a in generate(
                model, tok, [r["prompt"] for r in rows], num_samples=1, temperature=0.0,
                max_new_tokens=max_new_tokens, batch_size=EVAL_BATCH, desc="eval during GRPO",
            )
        ]  # fmt: skip
    if was_training:
        model.train()
    table = metric_scores(reward, rows, answers)
    metrics = compute_metrics(table, table[TOTAL], 0.5)
    if metrics[TASK_ACCURACY] is not None:
        return TASK_ACCURACY, float(metrics[TASK_ACCURACY])
    totals = [t for t in table[TOTAL] if t is not None]
    return "grpo_reward_mean", sum(totals) / len(totals) if totals else 0.0


def step_measurement(rows: list[dict], max_new_tokens: int, bf16: bool) -> dict[str, Any]:
    """How every step of the search is measured: a record measured otherwise is not compared."""
    from ark_trainer.data.split import row_hash

    return {
        "split": "dev",
        "n": len(rows),
        "rows": row_hash(rows),
        "autocast": "bf16" if bf16 else None,
        "decoding": "greedy",
        "max_new_tokens": max_new_tokens,
    }


@dataclass
class StepRecord:
    """``<stage>/best_step.json`` and the best step's trainable weights beside it (written by the main
    process only)."""

    path: Path
    measurement: dict[str, Any]

    @property
    def weights_path(self) -> Path:
        return self.path.with_suffix(".safetensors")

    def load(self) -> BestPolicy | None:
        """The best step an earlier attempt recorded, where it was measured alike and its weights are kept."""
        from ark_trainer.core.runfolder import read_mapping

        data = read_mapping(self.path)
        if not data:
            return None
        step, value = data.get("step"), data.get("value")
        if data.get("measurement") != self.measurement or not isinstance(step, int):
            log.info("GRPO: the best step recorded before the resume was measured otherwise; not compared")
            return None
        if not isinstance(value, int | float) or (step > 0 and not self.weights_path.is_file()):
            return None
        return BestPolicy(step, float(value), None, [(step, float(value))])

    def save(self, best: BestPolicy) -> None:
        from ark_trainer.base.fileio import write_json
        from ark_trainer.core.runtime.distributed import ranks

        if not ranks().is_main:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if best.weights is not None:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in best.weights.items()}, str(self.weights_path))
        write_json(
            self.path,
            {"step": best.step, "value": best.value, "measurement": self.measurement,
             "weights": self.weights_path.name if best.step > 0 else None},
        )  # fmt: skip

    def weights(self) -> dict[str, Any]:
        from safetensors.torch import load_file

        return load_file(str(self.weights_path)) if self.weights_path.is_file() else {}

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
        self.weights_path.unlink(missing_ok=True)


def best_policy_callback(
    rows: list[dict], reward, tok, every: int, max_new_tokens: int, bf16: bool, monitor, record=None
):
    """A TrainerCallback evaluating every ``every`` steps and restoring the best policy at the end;
    ``record``: ``<stage>/best_step.json`` (a path), where the best step survives a resume."""
    from transformers import TrainerCallback

    kept = StepRecord(Path(record), step_measurement(rows, max_new_tokens, bf16)) if record else None

    class BestPolicyCallback(TrainerCallback):
        def __init__(self) -> None:
            self.best = BestPolicy()

        def _evaluate(self, model, step: int) -> None:
            name, value = held_out_score(model, tok, rows, reward, max_new_tokens, bf16)
            self.best.history.append((step, value))
            better = value > self.best.value
            monitor.event("grpo_eval", step=step, metric=name, value=round(value, 4), best=better)
            log.info("GRPO step %d: dev %s %.4f%s", step, name, value, " (best so far)" if better else "")
            if better:
                self.best.step, self.best.value = step, value
                self.best.weights = None if step == 0 else trainable_copy(model)
                if kept:
                    kept.save(self.best)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if model is None:
                return
            if state.global_step == 0:  # a fresh start: a record of another attempt's steps is not ours
                if kept:
                    kept.clear()
                self._evaluate(model, 0)
            elif kept and (earlier := kept.load()) is not None:
                self.best = earlier
                log.info(
                    "GRPO: resumed with the best step so far, %d (dev %.4f)", earlier.step, earlier.value
                )

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if model is not None and (state.global_step % every == 0 or state.global_step >= state.max_steps):
                self._evaluate(model, state.global_step)

        def on_train_end(self, args, state, control, model=None, **kwargs):
            last = self.best.history[-1][0] if self.best.history else state.global_step
            if model is None or self.best.step in (-1, last):
                return
            if self.best.step == 0:
                log.info(
                    "GRPO: no evaluated step beat the starting model; the stage's model is its last step"
                )
                return
            weights = self.best.weights if self.best.weights is not None else kept.weights() if kept else {}
            restore(model, weights)
            monitor.event("grpo_best", step=self.best.step, value=round(self.best.value, 4), last_step=last)
            log.info(
                "GRPO: the policy of step %d (dev %.4f) is the stage's model",
                self.best.step,
                self.best.value,
            )

    return BestPolicyCallback()


def trainable_copy(model) -> dict[str, Any]:
    """A CPU copy of the parameters training changes (LoRA: the adapters; full fine-tuning: all)."""
    return {n: p.detach().to("cpu", copy=True) for n, p in model.named_parameters() if p.requires_grad}


def restore(model, weights: dict[str, Any]) -> None:
    import torch

    with torch.no_grad():
        for name, param in model.named_parameters():
            if name in weights:
                param.copy_(weights[name].to(param.device))
