"""The reward contract (``rewards/contract.py``): the completion and prompt text a reward reads; a rule that is
not a reward function is refused when the spec is read.
"""

from __future__ import annotations

import pytest

from ark_trainer.rewards.registry import completion_text, prompt_text
from tests.rewards.attacks import one_error_line, rules_yaml, score, unlabelled_data


@pytest.mark.parametrize(
    "rule", ["os:getcwd", "json:dumps", "builtins:len", "harden_rules:positional", "os:sep"]
)
def test_a_rule_that_is_not_a_reward_function_is_refused_when_the_spec_is_read(
    user_rules, tmp_path, capsys, rule
):
    spec = rules_yaml(tmp_path, rule)
    code, _, err = score(spec, unlabelled_data(tmp_path, n=1, candidates=["a"]), capsys)
    line = one_error_line(err)
    assert code == 2 and f"rules.yaml:4: rule: {rule!r}" in line
    assert "reward(prompts, completions, **kwargs)" in line


def test_completion_and_prompt_text():
    assert completion_text("abc") == "abc"
    assert (
        completion_text([{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}])
        == "ab"
    )
    assert completion_text({"content": "x"}) == "x"
    assert (
        prompt_text(
            [
                {"role": "user", "content": "1"},
                {"role": "assistant", "content": "2"},
                {"role": "user", "content": "3"},
            ]
        )
        == "3"
    )
    assert prompt_text("q") == "q"
    assert prompt_text([{"role": "system", "content": "s"}]) == ""
