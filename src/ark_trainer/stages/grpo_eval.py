"""Evaluation during GRPO, keeping the best policy (TRL's ``load_best_model_at_end`` pattern).

Every ``--grpo_eval_steps`` optimizer steps (and after the last one) the policy greedy-decodes the held-out
prompts with GRPO's own completion budget (``--grpo_max_completion_length``: for QC the decision lines,
which is all task accuracy reads) and is scored by the run's graders. The measured metric is the run's task
accuracy where the graders give one, else the mean of GRPO's reward. The trainable parameters of the best
step so far are kept in memory (the starting model counts as step 0); at the end of the stage the policy
goes back to the best step when a later one was worse, so ``OUT/grpo`` ships the best policy GRPO reached.
The held-out set is the one every stage is evaluated on, as ``metric_for_best_model`` reads the trainer's
eval set: the choice of step is made on the figures the report shows. Every evaluation is an event
(``grpo_eval``) and a line of the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
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

    from ark_trainer.generation import generate
    from ark_trainer.metrics import TASK_ACCURACY, compute_metrics
    from ark_trainer.rewards.composite import TOTAL
    from ark_trainer.scoring import metric_scores

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


def starting_score(out, model_in: str) -> tuple[str, float] | None:
    """(metric, value) of the model GRPO starts from, where the run has evaluated it already (the previous
    stage's or the base model's ``OUT/eval/<name>.json``, whose ``model`` is ``model_in``): step 0 is not
    decoded twice. Greedy decoding gives the same decision lines whatever the length budget."""
    from ark_trainer.metrics import TASK_ACCURACY
    from ark_trainer.runfolder import RunFolder

    folder = RunFolder(out)
    for name in folder.eval_names():
        data = folder.eval(name)
        if str(data.get("model")) == str(model_in) and isinstance(data.get(TASK_ACCURACY), int | float):
            return TASK_ACCURACY, float(data[TASK_ACCURACY])
    return None


def best_policy_callback(
    rows: list[dict], reward, tok, every: int, max_new_tokens: int, bf16: bool, monitor, start=None
):
    """A TrainerCallback evaluating every ``every`` steps and restoring the best policy at the end;
    ``start``: the starting model's (metric, value) where it is known (:func:`starting_score`)."""
    from transformers import TrainerCallback

    class BestPolicyCallback(TrainerCallback):
        def __init__(self) -> None:
            self.best = BestPolicy()

        def _evaluate(self, model, step: int) -> None:
            if step == 0 and start is not None:
                name, value = start
            else:
                name, value = held_out_score(model, tok, rows, reward, max_new_tokens, bf16)
            self.best.history.append((step, value))
            better = value > self.best.value
            monitor.event("grpo_eval", step=step, metric=name, value=round(value, 4), best=better)
            log.info(
                "GRPO step %d: held-out %s %.4f%s", step, name, value, " (best so far)" if better else ""
            )
            if better:
                self.best.step, self.best.value = step, value
                self.best.weights = None if step == 0 else trainable_copy(model)

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if model is not None and state.global_step == 0:
                self._evaluate(model, 0)

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
            restore(model, self.best.weights or {})
            monitor.event("grpo_best", step=self.best.step, value=round(self.best.value, 4), last_step=last)
            log.info(
                "GRPO: the policy of step %d (held-out %.4f) is the stage's model",
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
