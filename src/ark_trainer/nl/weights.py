"""``--reward_weights name=weight,...``: how much each named component of the composite reward counts.

A natural-language request ("优化合规性与用户满意度") names objectives, not a reward spec file; the plan turns
them into this flag so the run keeps the preset's graders and only changes how much each one counts::

    ark-trainer-inner train ... --reward_weights qc_compliance=1,qc_satisfaction=1

The reward builder (``rewards/builder.py``) gives the weights to the components as it builds the reward.
"""

from __future__ import annotations

from ark_trainer.errors import UserError

FLAG = "--reward_weights"


def parse_weights(text: str, flag: str = FLAG) -> dict[str, float]:
    """``"a=1,b=0.5"`` → ``{"a": 1.0, "b": 0.5}``; a malformed item is a one-line UserError naming ``flag``."""
    weights: dict[str, float] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        from ark_trainer.ranges import MAX_WEIGHT

        if not sep or not name or not 0 <= weight <= MAX_WEIGHT:  # nan and inf fail this too
            raise UserError(
                f"{flag}: {item!r}: expected name=weight with a weight in [0, {MAX_WEIGHT:g}], e.g. qc_compliance=1"
            )
        weights[name] = weight
    return weights


def format_weights(weights: dict[str, float]) -> str:
    return ",".join(f"{name}={weight:g}" for name, weight in weights.items())
