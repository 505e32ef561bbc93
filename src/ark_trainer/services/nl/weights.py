"""``--reward_weights name=weight,...``: how much each named component of the composite reward counts.

A natural-language request ("优化合规性与用户满意度") names objectives, not a reward spec file; the plan turns
them into this flag so the run keeps the preset's graders and only changes how much each one counts::

    ark-trainer-inner train ... --reward_weights qc_compliance=1,qc_satisfaction=1

The reward builder (``rewards/builder.py``) gives the weights to the components as it builds the reward; the
flag is read by :func:`ark_trainer.base.ranges.parse_weights`, on the base floor with the weights' range.
"""

from __future__ import annotations


def format_weights(weights: dict[str, float]) -> str:
    return ",".join(f"{name}={weight:g}" for name, weight in weights.items())
