"""Evaluation of an agent run: every held-out task played once as a greedy episode, tools executed.

The episodes are scored by the same composite reward as training (environment reward and episode graders,
``environments`` passed as in GRPO), so ``eval/<name>.json`` has the usual metrics (``reward_mean``,
``pass_rate``, ``preference_alignment``, ...) plus the agent metrics of ``agent/episode.py``:
``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls`` and ``n``, and the episodes
(``episodes``: messages, tool calls with results, turns, reward) that the report shows.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.agent.episode import agent_metrics, view
from ark_trainer.agent.rollout import CPU_EPISODE_BATCH, run_episodes
from ark_trainer.metrics import N_EXAMPLES, compute_metrics
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.scoring import metric_scores

N_EPISODES = 3  # episodes kept in full for the report (all of them keep their summary)


def evaluate_episodes(
    model,
    tokenizer,
    env: tuple,
    rows: list[dict],
    reward: CompositeReward,
    max_new_tokens: int,
    pass_threshold: float,
    base_totals: list[float | None] | None,
    seed: int,
    on_batch=None,
) -> dict[str, Any]:
    """The metrics, agent metrics, examples and per-task answers of greedy episodes on ``rows``."""
    from ark_trainer.scale import generation_batch

    env_cls, limits = env
    episodes = [
        group[0]
        for group in run_episodes(
            model,
            tokenizer,
            env_cls,
            rows,
            limits,
            temperature=0.0,
            max_new_tokens=max_new_tokens,
            batch_size=generation_batch(str(model.device), CPU_EPISODE_BATCH),
            seed=seed,
            on_batch=on_batch,
        )
    ]
    completions = [ep.completion for ep in episodes]
    table = metric_scores(reward, rows, completions, [ep.env for ep in episodes])
    totals = table[TOTAL]
    metrics = compute_metrics(table, base_totals if base_totals is not None else totals, pass_threshold)
    records = [ep.record() for ep in episodes]
    views = [view(c, env_cls._spec.schemas) for c in completions]
    summary = agent_metrics(views, [r["env_reward"] for r in records])
    examples = [
        {
            "prompt": rows[i]["prompt"][-1]["content"],
            "completion": records[i]["final_answer"],
            "reward": totals[i],
        }
        for i in range(min(N_EXAMPLES, len(rows)))
    ]
    answers = [
        {
            "completion": r["final_answer"],
            "reward": t,
            **{k: r[k] for k in ("turns", "n_invalid", "tool_errors", "env_reward", "ended")},
            "tool_calls": len(r["tool_calls"]),
        }
        for r, t in zip(records, totals, strict=True)
    ]
    shown = [{**r, "reward": t} for r, t in zip(records[:N_EPISODES], totals, strict=False)]
    return {**metrics, **summary, "examples": examples, "episodes": shown, "answers": answers}
