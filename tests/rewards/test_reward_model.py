"""A sequence-classification reward model as one more reward (``rewards/reward_model.py``): scores in [0, 1];
a causal LM is refused.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.rewards.composite import Component, CompositeReward
from tests.conftest import save_tiny_qwen
from tests.rewards.grading import GOOD_REPLY


def make_reward_model(path: Path, num_labels: int = 1) -> Path:
    """A tiny random Qwen2 sequence classifier and tokenizer, saved as safetensors."""
    return save_tiny_qwen(path, "Qwen2ForSequenceClassification", texts=[GOOD_REPLY], num_labels=num_labels)


@pytest.mark.parametrize("num_labels", [1, 2])
def test_reward_model_scores_in_unit_interval(tmp_path, num_labels):
    from ark_trainer.rewards.reward_model import RewardModelScorer

    path = make_reward_model(tmp_path / "rm", num_labels)
    scorer = RewardModelScorer(str(path), batch_size=2)
    prompts = ["问题一", [{"role": "user", "content": "问题二"}], "q3"]
    completions = ["抱歉", [{"role": "assistant", "content": GOOD_REPLY}], "hello world " * 5]
    scores = scorer(prompts, completions)
    assert len(scores) == 3
    assert all(isinstance(s, float) and 0.0 < s < 1.0 for s in scores)
    assert scorer(prompts, completions) == pytest.approx(scores)  # deterministic (eval mode)
    comp = CompositeReward([Component("reward_model", scorer, 1.0)])
    assert comp.trl_reward_funcs()[0][1].__name__ == "reward_model"


def test_a_causal_lm_is_refused_as_reward_model(tmp_path):
    from ark_trainer.rewards.reward_model import check_reward_model_dir

    save_tiny_qwen(tmp_path)  # a real causal LM folder
    with pytest.raises(UserError, match="not a sequence-classification reward model"):
        check_reward_model_dir(str(tmp_path))
