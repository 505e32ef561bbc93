"""A reward that carries no signal: the QC preset's composite reward, shuffled across the batch's completions.

Plugged in as a user plugs in their own function, a ``rule: tests.stages.shuffled_reward:shuffled_qc`` grader
of a ``--reward_config`` (:data:`REWARDS`): each call grades the completions with the real QC composite
(``presets/qc.yaml``: verdict 1.0, compliance 0.5, satisfaction 0.25, format 0.25), then hands the scores
back in a random order, so a completion's reward no longer says anything about it while the batch's rewards
keep their values and spread. A GRPO stage trained on it is a control: any test gain it reports comes from
how the run measures and chooses, not from learning.
"""

from __future__ import annotations

import random
from functools import cache

from ark_trainer.core.metrics import TOTAL

# the QC preset's graders at their weights (what RFT and the evaluations use), and the shuffled composite
# at weight 0: GRPO alone is scored by it (--grpo_reward_weights GRPO_WEIGHTS)
REWARDS = """graders:
  - {name: qc_verdict, rule: qc_verdict, weight: 1.0}
  - {name: qc_compliance, rule: qc_compliance, weight: 0.5}
  - {name: qc_satisfaction, rule: qc_satisfaction, weight: 0.25}
  - {name: qc_format, rule: qc_format, weight: 0.25}
  - {name: qc_type, rule: qc_type, weight: 0.0}
  - {name: shuffled_qc, type: rule, rule: "tests.stages.shuffled_reward:shuffled_qc", weight: 0.0}
"""
GRPO_WEIGHTS = "qc_verdict=0,qc_compliance=0,qc_satisfaction=0,qc_format=0,qc_type=0,shuffled_qc=1"
_ORDER = random.Random(0)  # one stream per process: every call shuffles differently, every run alike


@cache
def _qc_composite():
    from ark_trainer.rewards.composite import CompositeReward

    return CompositeReward.from_spec(None)  # the QC preset


def shuffled_qc(prompts, completions, **columns) -> list[float | None]:
    scores = list(_qc_composite().score(prompts, completions, **columns)[TOTAL])
    _ORDER.shuffle(scores)
    return scores
