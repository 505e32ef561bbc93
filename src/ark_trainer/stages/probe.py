"""``--strategy auto``: look at the data, probe the base model, then choose a strategy.

The rules, in order (each strategy is a name of ``AUTO_CHOICES`` in ``base/strategies.py``):

1. **Only preference pairs → DPO.** Every training row has ``chosen`` and ``rejected`` and none has a
   ``reference`` or a task ``label`` the graders could check: the data says which answer is better, not
   what is right, so DPO learns from the pairs as given.
2. **Only thumbs-up/down labels → KTO.** Every row has ``label: true/false`` and an answer, and none has a
   ``reference``: unpaired good/bad feedback, the shape KTO is made for.
3. Otherwise the probe's numbers decide between RFT+GRPO and Only GRPO, as below.

The probe samples ``--auto_probe_samples`` answers (one GRPO group) for each of ``--auto_probe_prompts``
training prompts with the base model, at the GRPO sampling temperature, and scores them with the run's
composite reward. Two numbers decide:

- ``pass_rate``: share of answers whose reward reaches ``--pass_threshold``. Below ``--auto_min_pass_rate``
  the base model rarely finds a good answer on its own, so RFT first fine-tunes it on the best it can find.
- ``zero_std_share``: share of groups whose answers all got the same reward. GRPO learns from differences
  within a group; at or above ``--auto_max_zero_std`` most of its steps would carry no signal, so RFT
  goes first to move the model to where the rewards differ.

Otherwise the base model already passes often and its groups differ: Only GRPO (one step, faster).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from ark_trainer.base.strategies import AUTO_CHOICES
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.generation import GEN_SEQUENCES, generate
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.loading import load_policy
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.rewards.scoring import score_completions
from ark_trainer.stages.grpo.options import GRPOOptions

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags


@dataclass
class ProbeResult:
    prompts: int
    samples_per_prompt: int
    pass_threshold: float
    pass_rate: float
    zero_std_share: float
    reward_mean: float
    min_pass_rate: float
    max_zero_std: float
    data: str = "prompts"  # the training data's shape (data_shape): prompts, pairs or labels


SAMPLES_AS = GRPOOptions  # the probe samples one GRPO group per prompt, at GRPO's temperature


def probe_settings(run: RunFlags, grpo: GRPOOptions) -> ProbeSettings:
    """The probe's settings: the shared flags (``run``) and GRPO's sampling temperature (``grpo``)."""
    return ProbeSettings(
        prompts=run.auto_probe_prompts,
        samples=run.auto_probe_samples,
        temperature=grpo.temperature,
        max_new_tokens=new_tokens(run.max_completion_length),
        seed=run.seed,
        pass_threshold=run.pass_threshold,
        min_pass_rate=run.auto_min_pass_rate,
        max_zero_std=run.auto_max_zero_std,
    )


@dataclass(frozen=True)
class ProbeSettings:
    """What the probe reads: ``--auto_probe_prompts`` prompts × ``--auto_probe_samples`` answers at the GRPO
    ``--temperature``, the run's completion length and seed, and the thresholds that decide
    (``--pass_threshold``, ``--auto_min_pass_rate``, ``--auto_max_zero_std``)."""

    prompts: int
    samples: int
    temperature: float
    max_new_tokens: int
    seed: int
    pass_threshold: float
    min_pass_rate: float
    max_zero_std: float


def data_shape(rows: list[dict]) -> str:
    """``pairs`` (only preference pairs), ``labels`` (only thumbs-up/down answers) or ``prompts``."""
    from ark_trainer.stages.preference import has_pair, labelled_answers, thumbs

    if not rows or any(r.get("reference") is not None for r in rows):
        return "prompts"
    if all(has_pair(r) for r in rows) and all(r.get("label") is None or thumbs(r) is not None for r in rows):
        return "pairs"
    if all(thumbs(r) is not None and labelled_answers(r) for r in rows):
        return "labels"
    return "prompts"


def probe_prompts(rows: list[dict], n: int, seed: int) -> list[dict]:
    """A seeded sample of ``n`` training rows (all of them when there are fewer)."""
    if len(rows) <= n:
        return list(rows)
    return random.Random(f"ark-probe:{seed}").sample(rows, n)


def summarize(
    groups: list[list[float | None]],
    samples_per_prompt: int,
    pass_threshold: float,
    min_pass_rate: float,
    max_zero_std: float,
) -> ProbeResult:
    """Pass rate and zero-variance share of scored groups (``None`` rewards count as not passing);
    ``pass_threshold``, ``min_pass_rate`` and ``max_zero_std`` are ``--pass_threshold``,
    ``--auto_min_pass_rate`` and ``--auto_max_zero_std``, ``samples_per_prompt`` ``--auto_probe_samples``."""
    flat = [r for g in groups for r in g]
    scored = [r for r in flat if r is not None]
    passed = sum(r is not None and r >= pass_threshold - 1e-9 for r in flat)
    zero_std = sum(len({None if r is None else round(r, 6) for r in g}) <= 1 for g in groups)
    return ProbeResult(
        prompts=len(groups),
        samples_per_prompt=samples_per_prompt,
        pass_threshold=pass_threshold,
        pass_rate=round(passed / max(len(flat), 1), 4),
        zero_std_share=round(zero_std / max(len(groups), 1), 4),
        reward_mean=round(statistics.fmean(scored), 4) if scored else 0.0,
        min_pass_rate=min_pass_rate,
        max_zero_std=max_zero_std,
    )


def pct(value: float, other: float) -> str:
    """``value`` as a percentage with enough decimals to differ from ``other`` when the two differ
    (0.297 against 0.3 prints "29.7%", never "30% below 30%")."""
    for digits in range(5):
        if value == other or round(value * 100, digits) != round(other * 100, digits):
            return f"{value * 100:.{digits}f}%"
    return f"{value * 100:g}%"


def decide(result: ProbeResult) -> tuple[str, str]:
    """(strategy, reason) from the probe's numbers and thresholds; the strategies are the table's
    ``AUTO_CHOICES`` (``base/strategies.py``)."""
    pass_rate, min_pass = (
        pct(result.pass_rate, result.min_pass_rate),
        pct(result.min_pass_rate, result.pass_rate),
    )
    zero, max_zero = (
        pct(result.zero_std_share, result.max_zero_std),
        pct(result.max_zero_std, result.zero_std_share),
    )
    numbers = (
        f"base model probe: pass rate {pass_rate} on {result.prompts} prompts × "
        f"{result.samples_per_prompt} samples (reward ≥ {result.pass_threshold}), "
        f"{zero} of groups with zero reward variance"
    )
    if result.data == "pairs":
        return AUTO_CHOICES["pairs"], (
            "auto: every training row is a preference pair (chosen/rejected) with no reference or task label "
            f"to check answers against, so DPO learns from the pairs as given ({numbers})"
        )
    if result.data == "labels":
        return AUTO_CHOICES["labels"], (
            "auto: every training row is an answer with a thumbs-up/down label (label true/false) and no "
            f"reference, so KTO learns from the good and bad answers as given ({numbers})"
        )
    if result.pass_rate < result.min_pass_rate:
        return AUTO_CHOICES["weak"], (
            f"auto: {numbers}; the pass rate is below --auto_min_pass_rate {min_pass}, so RFT "
            "first fine-tunes the model on its best-scored answers, then GRPO optimises from there"
        )
    if result.zero_std_share >= result.max_zero_std:
        return AUTO_CHOICES["weak"], (
            f"auto: {numbers}; at least --auto_max_zero_std {max_zero} of groups would give "
            "GRPO no learning signal, so RFT goes first"
        )
    return AUTO_CHOICES["strong"], (
        f"auto: {numbers}; the base model already passes often (≥ --auto_min_pass_rate "
        f"{min_pass}) and its groups differ, so Only GRPO (one step, faster iteration)"
    )


def run_probe(
    settings: ProbeSettings,
    rt: Runtime,
    model_path: str,
    rows: list[dict],
    reward: CompositeReward,
    on_batch=None,
    on_tick=None,
) -> tuple[ProbeResult, list[dict]]:
    """Sample and score the base model's answers on a sample of training prompts.

    Returns the summary and, per prompt, its answers with their rewards (for ``OUT/data/probe_scored.jsonl``)."""
    sample = probe_prompts(rows, settings.prompts, settings.seed)
    model, tok = load_policy(model_path, rt)
    try:
        answers = generate(
            model,
            tok,
            [row["prompt"] for row in sample],
            num_samples=settings.samples,
            temperature=settings.temperature,
            max_new_tokens=settings.max_new_tokens,
            batch_size=max(1, GEN_SEQUENCES // settings.samples),
            seed=settings.seed,
            on_batch=on_batch,
            desc="probing base model",
            on_tick=on_tick,
        )
    finally:
        del model
    scores = score_completions(reward, sample, answers)
    scored = [
        {
            "prompt": row["prompt"],
            "answers": [{"text": t, "reward": s["total"]} for t, s in zip(texts, group, strict=True)],
        }
        for row, texts, group in zip(sample, answers, scores, strict=True)
    ]
    result = summarize(
        [[s["total"] for s in group] for group in scores],
        settings.samples,
        settings.pass_threshold,
        settings.min_pass_rate,
        settings.max_zero_std,
    )
    result.data = data_shape(rows)
    return result, scored


def probe_record(result: ProbeResult) -> dict:
    return asdict(result)
