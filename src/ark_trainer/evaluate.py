"""Evaluation of the base, RFT and GRPO models on the held-out set.

Greedy answers are scored with the very same reward functions that trained the model, so the metric and
the reward cannot drift apart. Metrics (``OUT/eval/<name>.json``):

- ``reward_mean``: mean composite reward.
- ``pass_rate``: share of answers whose composite reward reaches ``--pass_threshold``.
- ``task_accuracy``: share of labelled prompts answered exactly right (QC: verdict and violation type;
  free-text tasks: equal to ``reference``); ``null`` without labels.
- ``compliance_rate``: share of answers whose suggested reply keeps all five compliance rules.
- ``preference_alignment``: share of prompts where the composite reward prefers this model's answer to the
  base model's (a tie counts one half, so the base model scores 50% against itself).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.fileio import write_json
from ark_trainer.generation import generate
from ark_trainer.models.device import Runtime
from ark_trainer.models.loading import load_policy
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.rewards.registry import get_reward
from ark_trainer.scoring import score_completions

ACCURACY_GRADERS = ("qc_verdict", "reference_match")
COMPLIANCE_GRADER = "qc_compliance"
N_EXAMPLES = 5


def _share(values: list[float | None], target: float = 1.0) -> float | None:
    applicable = [v for v in values if v is not None]
    if not applicable:
        return None
    return round(sum(v >= target - 1e-9 for v in applicable) / len(applicable), 4)


def _metric_scores(
    reward: CompositeReward, rows: list[dict], answers: list, envs: list | None = None
) -> dict[str, list]:
    """Per-answer scores of the composite plus the accuracy and compliance verifiers."""
    scored = score_completions(reward, rows, [[a] for a in answers], [[e] for e in envs] if envs else None)
    table: dict[str, list] = {TOTAL: [s[0]["total"] for s in scored]}
    for name in reward.names:
        table[name] = [s[0]["scores"][name] for s in scored]
    extra = [n for n in (*ACCURACY_GRADERS, COMPLIANCE_GRADER) if n not in table]
    if extra:
        from ark_trainer.rewards.composite import Component

        verifiers = CompositeReward([Component(n, get_reward(n), 1.0) for n in extra])
        more = score_completions(verifiers, rows, [[a] for a in answers])
        for name in extra:
            table[name] = [s[0]["scores"][name] for s in more]
    return table


def _preference(mine: list[float | None], base: list[float | None]) -> float | None:
    pairs = [(m, b) for m, b in zip(mine, base, strict=True) if m is not None and b is not None]
    if not pairs:
        return None
    wins = sum(1.0 if m > b + 1e-9 else 0.5 if abs(m - b) <= 1e-9 else 0.0 for m, b in pairs)
    return round(wins / len(pairs), 4)


def compute_metrics(table: dict[str, list], base_totals: list[float | None], pass_threshold: float) -> dict:
    totals = table[TOTAL]
    applicable = [t for t in totals if t is not None]
    accuracy = next((_share(table[n]) for n in ACCURACY_GRADERS if _share(table[n]) is not None), None)
    components = {}
    for name, values in table.items():
        vals = [v for v in values if v is not None]
        if name != TOTAL and vals:
            components[name] = round(sum(vals) / len(vals), 4)
    return {
        "n": len(totals),
        "reward_mean": round(sum(applicable) / len(applicable), 4) if applicable else None,
        "pass_rate": round(sum(t >= pass_threshold for t in applicable) / len(applicable), 4)
        if applicable
        else None,
        "task_accuracy": accuracy,
        "compliance_rate": _share(table[COMPLIANCE_GRADER]),
        "preference_alignment": _preference(totals, base_totals),
        "components": components,
    }


def evaluate_model(
    model_path: str | Path,
    name: str,
    rows: list[dict],
    reward: CompositeReward,
    rt: Runtime,
    out_path: Path,
    *,
    max_new_tokens: int,
    pass_threshold: float,
    base_totals: list[float | None] | None = None,
    seed: int = 0,
    on_batch=None,
    env: tuple | None = None,
    on_tick=None,
) -> dict[str, Any]:
    """Greedy-decode every eval prompt, score, and write ``out_path``; returns the metrics plus totals.

    With ``env`` (an agent run: the limit-applying environment class and its limits) every prompt is played
    as a greedy episode with the tools executed (``agent/rollout.py``), and the file also carries the agent
    metrics (``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls``) and episodes.
    """
    from ark_trainer.scale import generation_batch

    model, tok = load_policy(model_path, rt)
    if env is not None:
        from ark_trainer.agent.evaluate import evaluate_episodes

        args = (model, tok, env, rows, reward, max_new_tokens, pass_threshold, base_totals, seed, on_batch)
        result = {"name": name, "model": str(model_path), **evaluate_episodes(*args)}
        del model
        write_json(out_path, result)
        return result
    answers = [
        a[0]
        for a in generate(
            model,
            tok,
            [r["prompt"] for r in rows],
            num_samples=1,
            temperature=0.0,
            max_new_tokens=max_new_tokens,
            batch_size=generation_batch(rt.device, 32),  # larger on a GPU, where decoding is launch-bound
            seed=seed,
            on_batch=on_batch,
            desc=f"eval {name}",
            on_tick=on_tick,
        )
    ]
    del model
    table = _metric_scores(reward, rows, answers)
    totals = table[TOTAL]
    metrics = compute_metrics(table, base_totals if base_totals is not None else totals, pass_threshold)
    examples = [
        {"prompt": rows[i]["prompt"][-1]["content"], "completion": answers[i], "reward": totals[i]}
        for i in range(min(N_EXAMPLES, len(rows)))
    ]
    result = {
        "name": name,
        "model": str(model_path),
        **metrics,
        "examples": examples,
        "answers": [{"completion": a, "reward": t} for a, t in zip(answers, totals, strict=True)],
    }
    write_json(out_path, result)
    return result
