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
    from ark_trainer.render import Code, Heading, Para

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
