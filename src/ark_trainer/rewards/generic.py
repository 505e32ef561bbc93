"""General-purpose graders that apply to any task with a ``reference`` (or ``label``) column."""

from __future__ import annotations

import re

from ark_trainer.rewards.contract import completion_text, register_reward, register_reward_factory
from ark_trainer.rewards.qc import normalize_label


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _reference_of(reference, label, n):
    """``reference`` column, else ``label`` where it is a free-text answer (not a QC violation type)."""
    if reference is not None:
        return reference
    if label is not None:
        return [None if normalize_label(v) is not None else v for v in label]
    return [None] * n


@register_reward("reference_match")
def reference_match(prompts, completions, reference=None, label=None, **_) -> list[float | None]:
    """1 when the completion equals the reference (whitespace/case-insensitive), 0.5 when it contains it."""
    scores: list[float | None] = []
    for completion, ref in zip(completions, _reference_of(reference, label, len(completions)), strict=True):
        if not isinstance(ref, str) or not ref.strip():
            scores.append(None)
            continue
        text, ref = _norm(completion_text(completion)), _norm(ref)
        scores.append(1.0 if text == ref else 0.5 if ref in text else 0.0)
    return scores


@register_reward_factory("keywords")
def keywords(required=(), forbidden=()):
    """Share of ``required`` phrases present, zeroed by any ``forbidden`` phrase."""
    required, forbidden = list(required), list(forbidden)

    def reward(prompts, completions, **_) -> list[float | None]:
        scores: list[float | None] = []
        for completion in completions:
            text = completion_text(completion)
            if any(f in text for f in forbidden):
                scores.append(0.0)
            elif required:
                scores.append(sum(r in text for r in required) / len(required))
            else:
                scores.append(1.0)
        return scores

    return reward


@register_reward_factory("length")
def length(min_chars=1, max_chars=200):
    """1 inside [min_chars, max_chars], falling off linearly outside it."""

    def reward(prompts, completions, **_) -> list[float | None]:
        scores: list[float | None] = []
        for completion in completions:
            n = len(completion_text(completion))
            if n < min_chars:
                scores.append(n / max(min_chars, 1))
            elif n > max_chars:
                scores.append(max(0.0, 1 - (n - max_chars) / max(max_chars, 1)))
            else:
                scores.append(1.0)
        return scores

    return reward
