"""Evaluation of the base, RFT and GRPO models on the held-out set.

Greedy answers are scored with the very same reward functions that trained the model, so the metric and
the reward cannot drift apart. The metrics written to ``OUT/eval/<name>.json`` are named and computed in
``metrics.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.fileio import write_json
from ark_trainer.generation import generate
from ark_trainer.metrics import N_EXAMPLES, OUTCOMES, compute_metrics, prompt_outcomes
from ark_trainer.models.device import Runtime
from ark_trainer.models.loading import load_policy
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.scoring import metric_scores


def measurement_of(
    split: str, rows: list[dict], rt: Runtime, max_new_tokens: int, episodes: bool = False
) -> dict[str, Any]:
    """How an evaluation is measured: two evaluations are compared only when these agree (but ``split``,
    which says which rows they are). ``rows`` is a hash of the prompts in order (``data/split.py``)."""
    from ark_trainer.data.split import row_hash

    return {
        "split": split,
        "n": len(rows),
        "rows": row_hash(rows),
        "dtype": str(rt.dtype).removeprefix("torch."),
        "precision": rt.precision,
        "decoding": "greedy",
        "max_new_tokens": max_new_tokens,
        "episodes": episodes,
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
    measurement: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Greedy-decode every eval prompt, score, and write ``out_path``; returns the metrics plus totals.

    With ``env`` (an agent run: the limit-applying environment class and its limits) every prompt is played
    as a greedy episode with the tools executed (``agent/rollout.py``), and the file also carries the agent
    metrics (``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls``) and episodes.
    ``measurement`` (how it was measured: split, rows, dtype, decoding, ...) is recorded in the file as is,
    so that only evaluations measured alike are compared (``final_model.py``).
    """
    recorded = {"measurement": measurement} if measurement is not None else {}
    from ark_trainer.scale import generation_batch

    model, tok = load_policy(model_path, rt)
    if env is not None:
        from ark_trainer.agent.evaluate import evaluate_episodes

        args = (model, tok, env, rows, reward, max_new_tokens, pass_threshold, base_totals, seed, on_batch)
        result = {"name": name, "model": str(model_path), **evaluate_episodes(*args), **recorded}
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
    table = metric_scores(reward, rows, answers)
    totals = table[TOTAL]
    base = base_totals if base_totals is not None else totals
    metrics = compute_metrics(table, base, pass_threshold)
    outcomes = prompt_outcomes(table, base, pass_threshold)  # each rate above is the mean of its column
    examples = [
        {"prompt": rows[i]["prompt"][-1]["content"], "completion": answers[i], "reward": totals[i]}
        for i in range(min(N_EXAMPLES, len(rows)))
    ]
    result = {
        "name": name,
        "model": str(model_path),
        "dtype": str(rt.dtype).removeprefix("torch."),  # what it computed in; serving parity asks the same
        **metrics,
        "examples": examples,
        "answers": [
            {"completion": a, "reward": t, OUTCOMES: o}
            for a, t, o in zip(answers, totals, outcomes, strict=True)
        ],
        **recorded,
    }
    write_json(out_path, result)
    return result
