"""A compliant QC reply, and one completion scored by a grader, for the rewards' tests."""

from __future__ import annotations

GOOD_REPLY = "非常抱歉给您带来不便，我们会尽快为您处理。"


def one(fn, completion, **columns):
    """Score a single completion; columns are given per sample and wrapped into one-element lists."""
    scores = fn(prompts=["p"], completions=[completion], **{k: [v] for k, v in columns.items()})
    assert len(scores) == 1
    return scores[0]
