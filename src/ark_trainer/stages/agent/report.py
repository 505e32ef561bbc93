"""The report's "Agent episodes" section: the same tasks played by the base and the final model.

For an agent run (``eval/*.json`` with ``episodes``), up to :data:`N_SHOWN` held-out tasks are shown as
transcripts, before (base model) and after (final model): each assistant turn, its tool calls with their
arguments, each tool's result, then the episode's turns, environment reward and composite reward.
"""

from __future__ import annotations

import json
from typing import Any

N_SHOWN = 3
MAX_CHARS = 1500
MAX_PART = 120  # characters of one argument or result in a one-line trace


def trace(episode: dict[str, Any]) -> str:
    """What an episode did, in one line: each call with its arguments and result, the answer, the outcome.

    ``lookup_order(order_id=A1) → A1：已签收，可退款; reply(message=已退款) → 已回复; answer: 完成; solved``
    (an eval file's ``answers`` entry or a full episode record: ``tool_calls`` with name, arguments, result).
    """
    steps = []
    for call in episode.get("tool_calls") or []:
        if not isinstance(call, dict):
            continue
        args = call.get("arguments")
        args = args if isinstance(args, dict) else {}
        shown = ", ".join(f"{k}={_flat(v)}" for k, v in args.items())
        steps.append(f"{call.get('name')}({shown}) → {_flat(call.get('result', ''))}")
    answer = _flat(episode.get("final_answer") or episode.get("completion") or "")
    steps.append(f"answer: {answer or '(none)'}")
    reward = episode.get("env_reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        steps.append("solved" if reward >= 1.0 else f"not solved (env reward {reward:.2g})")
    return "; ".join(steps)


def _flat(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_PART else text[:MAX_PART] + "…"


def transcript(episode: dict[str, Any]) -> str:
    """An episode as readable text: one line per message, tool calls as ``→ name(args)``."""
    lines = []
    for m in episode.get("messages", []):
        role, content = m.get("role", "?"), str(m.get("content") or "").strip()
        if role == "tool":
            lines.append(f"  ← {m.get('name', 'tool')}: {content}")
            continue
        if content or role != "assistant":
            lines.append(f"{role}: {content}")
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)
            args = fn.get("arguments", {})
            args = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            lines.append(f"  → {fn.get('name')}({args})")
    text = "\n".join(lines)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS] + " …"


def summary(episode: dict[str, Any]) -> str:
    parts = [f"{episode.get('turns', '?')} turns", f"{len(episode.get('tool_calls') or [])} tool calls"]
    if episode.get("n_invalid"):
        parts.append(f"{episode['n_invalid']} invalid")
    if episode.get("tool_errors"):
        parts.append(f"{episode['tool_errors']} tool errors")
    for key, label in (("env_reward", "env reward"), ("reward", "reward")):
        if isinstance(episode.get(key), int | float):
            parts.append(f"{label} {episode[key]:.3g}")
    return ", ".join(parts)


def episode_blocks(run, final: tuple[str, str] | None) -> list:
    """Before/after transcripts of the first held-out tasks; nothing for a run without episodes."""
    from ark_trainer.stages.report.render import Code, Heading, Para

    base = run.evals.get("base", {}).get("episodes") or []
    after = run.evals.get(final[0], {}).get("episodes") if final else None
    if not base and not after:
        return []
    blocks: list = [Heading("Agent episodes"), Para("The same held-out tasks, greedy, tools executed.")]
    columns = [("base", base)] + ([(final[1], after)] if final and final[0] != "base" and after else [])
    for i in range(min(N_SHOWN, max(len(base), len(after or [])))):
        blocks.append(Para(f"Task {i + 1}"))
        for label, episodes in columns:
            if i < len(episodes):
                blocks += [Para(f"{label}: {summary(episodes[i])}"), Code(transcript(episodes[i]))]
    return blocks
