"""Evaluation of an agent run: every held-out task played once as a greedy episode, tools executed.

The episodes are scored by the same composite reward as training (environment reward and episode graders,
``environments`` passed as in GRPO), so ``eval/<name>.json`` has the usual metrics (``reward_mean``,
``pass_rate``, ``preference_alignment``, ...) plus the agent metrics of ``base/chat/episode.py``:
``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls`` and ``n``, and the episodes
(``episodes``: messages, tool calls with results, turns, reward) that the report shows. Each task's answer
(``answers``) keeps its tool calls (name, arguments, result, ok) next to the final text, so the report and
the diagnosis read what the episode did, not only its sign-off. The QC verifiers are not run on episodes
and ``preference_alignment`` is null: no grader of an agent run measures them.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.base.chat.episode import view
from ark_trainer.core.metrics import (
    N_EXAMPLES,
    OUTCOMES,
    PREFERENCE_ALIGNMENT,
    TASK_SUCCESS,
    agent_metrics,
    compute_metrics,
    prompt_outcomes,
    task_outcomes,
)
from ark_trainer.rewards.composite import TOTAL, CompositeReward
from ark_trainer.rewards.scoring import metric_scores
from ark_trainer.stages.agent.report import trace
from ark_trainer.stages.agent.rollout import CPU_EPISODE_BATCH, run_episodes

N_EPISODES = 3  # episodes kept in full for the report (all of them keep their summary)
MAX_RESULT = 120  # characters of a tool result (or argument) kept per call in answers and traces


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
    from ark_trainer.base.scale import generation_batch

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
    table = metric_scores(reward, rows, completions, [ep.env for ep in episodes], verifiers=False)
    totals = table[TOTAL]
    base = base_totals if base_totals is not None else totals
    metrics = compute_metrics(table, base, pass_threshold)
    # No preference grader judges episodes: whether the model got better is task_success and reward_mean.
    metrics[PREFERENCE_ALIGNMENT] = None
    records = [ep.record() for ep in episodes]
    views = [view(c, env_cls._spec.schemas) for c in completions]
    env_rewards = [r["env_reward"] for r in records]
    summary = agent_metrics(views, env_rewards)
    outcomes = [  # each rate above is the mean of its outcomes, task by task
        {**{k: v for k, v in o.items() if k != PREFERENCE_ALIGNMENT}, TASK_SUCCESS: s}
        for o, s in zip(prompt_outcomes(table, base, pass_threshold), task_outcomes(env_rewards), strict=True)
    ]
    examples = [
        {
            "prompt": rows[i]["prompt"][-1]["content"],
            "completion": records[i]["final_answer"],
            "episode": trace(records[i]),
            "reward": totals[i],
        }
        for i in range(min(N_EXAMPLES, len(rows)))
    ]
    answers = [
        {
            "completion": r["final_answer"],
            "reward": t,
            OUTCOMES: o,
            **{k: r[k] for k in ("turns", "n_invalid", "tool_errors", "env_reward", "ended")},
            "tool_calls": [_call(c) for c in r["tool_calls"]],
        }
        for r, t, o in zip(records, totals, outcomes, strict=True)
    ]
    shown = [{**r, "reward": t} for r, t in zip(records[:N_EPISODES], totals, strict=False)]
    return {**metrics, **summary, "examples": examples, "episodes": shown, "answers": answers}


def _call(call: dict) -> dict:
    """A tool call as the eval file keeps it for every task: name, arguments, result (clipped), ok."""
    result = str(call.get("result", ""))
    result = result if len(result) <= MAX_RESULT else result[:MAX_RESULT] + "…"
    return {
        "name": call.get("name"),
        "arguments": call.get("arguments"),
        "result": result,
        "ok": call.get("ok"),
    }
