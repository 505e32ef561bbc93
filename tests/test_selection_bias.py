"""Choosing on dev and reporting on test leaves the reported gain unbiased (a null simulation).

Every model of a simulated RFT+GRPO run is identical in truth: each answers prompt i correctly with the
same probability q_i, independently, so any measured difference is noise. The run's own choosing code
picks GRPO's best evaluated step (``stages/grpo/grpo_eval.py``) and the stage that ships (``final_model.choose``)
on the dev split; the figure reported is the shipped model's gain over the base model on the test split.
Over many seeded runs that gain averages zero, while the dev gain the choice read is positive. Fed the test
split instead (choosing on the reported set, as runs did before), the same code reports a clearly positive
gain: the control that shows the test below can fail.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from ark_trainer.core.final_model import choose
from ark_trainer.core.metrics import PASS_RATE, REWARD_MEAN, TASK_ACCURACY
from ark_trainer.stages.grpo import grpo_eval

RUNS, N = 500, 200  # seeded null runs; prompts in each of dev and test
GRPO_STEPS = (2, 4, 6)  # evaluated after step 0 (the RFT model GRPO starts from): 4 evaluations a stage


class Quiet:
    def event(self, kind, **fields):
        pass


def difficulties(rng: np.random.Generator) -> np.ndarray:
    """Per-prompt chance of a right answer: most prompts every model gets right or wrong, a fifth are
    coin flips (the models then disagree on about a tenth of the prompts, as similar models do)."""
    return rng.choice([0.0, 1.0, 0.5], size=N, p=[0.4, 0.4, 0.2])


def grpo_best_step(monkeypatch, dev_scores: list[float]) -> int:
    """The step GRPO's own callback ends on, given the dev score of step 0 and of each of GRPO_STEPS."""
    scores = iter(dev_scores)
    monkeypatch.setattr(grpo_eval, "held_out_score", lambda *a, **k: ("task_accuracy", next(scores)))
    cb = grpo_eval.best_policy_callback([], None, None, 2, 8, False, Quiet())
    model = torch.nn.Linear(1, 1, bias=False)  # its weight is the step it was at
    state = SimpleNamespace(global_step=0, max_steps=GRPO_STEPS[-1])
    with torch.no_grad():
        model.weight.fill_(0.0)
    cb.on_train_begin(None, state, None, model=model)
    for step in range(1, GRPO_STEPS[-1] + 1):
        with torch.no_grad():
            model.weight.fill_(float(step))
        state.global_step = step
        cb.on_step_end(None, state, None, model=model)
    cb.on_train_end(None, state, None, model=model)
    return int(model.weight.item())


def evaluation(correct: np.ndarray) -> dict:
    share = float(correct.mean())
    return {"n": N, TASK_ACCURACY: share, PASS_RATE: share, REWARD_MEAN: share}


def null_run(monkeypatch, seed: int, choose_on: str) -> tuple[float, float]:
    """(the shipped model's test gain over base, its gain on the split the choices read), in points."""
    rng = np.random.default_rng(seed)
    q = {split: difficulties(rng) for split in ("dev", "test")}
    models = ["base", "rft", *(f"grpo@{s}" for s in GRPO_STEPS)]
    correct = {split: {m: rng.random(N) < q[split] for m in models} for split in ("dev", "test")}
    chosen = correct[choose_on]
    steps = [chosen["rft"].mean(), *(chosen[f"grpo@{s}"].mean() for s in GRPO_STEPS)]
    step = grpo_best_step(monkeypatch, [float(v) for v in steps])
    grpo = "rft" if step == 0 else f"grpo@{step}"  # step 0 is the starting model: the RFT model
    evals = {split: {"base": evaluation(c["base"]), "rft": evaluation(c["rft"]), "grpo": evaluation(c[grpo])}
             for split, c in correct.items()}  # fmt: skip
    shipped = choose(evals[choose_on], ["rft", "grpo"], "best", evals["test"]).stage
    gain = {
        split: evals[split][shipped][TASK_ACCURACY] - evals[split]["base"][TASK_ACCURACY] for split in evals
    }
    return 100 * gain["test"], 100 * gain[choose_on]


def mean_gains(monkeypatch, choose_on: str) -> tuple[float, float]:
    runs = [null_run(monkeypatch, seed, choose_on) for seed in range(RUNS)]
    return float(np.mean([r[0] for r in runs])), float(np.mean([r[1] for r in runs]))


def test_choosing_on_dev_reports_an_unbiased_test_gain(monkeypatch):
    test_gain, dev_gain = mean_gains(monkeypatch, "dev")
    assert abs(test_gain) <= 0.3, f"mean test gain {test_gain:+.2f} points over {RUNS} null runs"
    assert dev_gain > 0.5  # the split the choices read looks better than it is: hence never reported


def test_choosing_on_the_reported_split_is_biased_so_the_control_can_fail(monkeypatch):
    test_gain, _ = mean_gains(monkeypatch, "test")
    assert test_gain > 0.6, f"mean test gain {test_gain:+.2f} points when chosen on test"


def test_the_simulated_models_are_identical_in_truth():
    rng = np.random.default_rng(0)
    q = difficulties(rng)
    a, b = (rng.random((2000, N)) < q).mean(1), (rng.random((2000, N)) < q).mean(1)
    assert abs(float((a - b).mean())) < 0.002  # no model is better than another on average
