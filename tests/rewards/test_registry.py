"""The reward registry (``rewards/registry.py``): rewards looked up by name, duplicates refused, factories with
their params, user code by ``module:function``; ``os:getcwd`` as a rule stops ``train`` before anything is
written.
"""

from __future__ import annotations

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.cli import main
from ark_trainer.rewards import contract, registry
from ark_trainer.rewards.registry import (
    available_rewards,
    get_reward,
    register_reward,
    register_reward_factory,
)
from tests.rewards.attacks import one_error_line, rules_yaml, train_flags, unlabelled_data


def test_os_getcwd_as_a_rule_stops_train_before_anything_is_written(user_rules, model, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, rules_yaml(tmp_path, "os:getcwd"))) == 2
    assert "not a reward function" in one_error_line(capsys.readouterr().err) and not out.exists()


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made in a test vanish after it."""
    registry._load_builtins()
    monkeypatch.setattr(contract, "REWARDS", dict(contract.REWARDS))
    monkeypatch.setattr(contract, "FACTORIES", dict(contract.FACTORIES))


def test_builtins_registered():
    names = available_rewards()
    for name in (
        "qc_verdict",
        "qc_compliance",
        "qc_satisfaction",
        "qc_format",
        "reference_match",
        "keywords",
        "length",
    ):
        assert name in names


def test_registry_refuses_duplicates(scratch_registry):
    @register_reward("test_dup")
    def first(prompts, completions, **_):
        return [1.0] * len(completions)

    with pytest.raises(ValueError, match="test_dup"):

        @register_reward("test_dup")
        def second(prompts, completions, **_):
            return [0.0] * len(completions)

    with pytest.raises(ValueError, match="test_dup"):
        register_reward_factory("test_dup")(lambda: first)
    with pytest.raises(ValueError, match="qc_verdict"):
        register_reward("qc_verdict")(first)
    assert get_reward("test_dup") is first


def test_register_sets_name(scratch_registry):
    @register_reward("test_named")
    def some_function(prompts, completions, **_):
        return [None] * len(completions)

    assert some_function.__name__ == "test_named"


def test_unknown_name_lists_choices():
    with pytest.raises(UserError) as exc:
        get_reward("qc_verdictt", where="spec.yaml:3")
    message = exc.value.messages[0]
    assert message.startswith("spec.yaml:3: ") and "qc_verdictt" in message
    assert "qc_verdict" in message and "reference_match" in message and "module:function" in message


def test_plain_reward_refuses_params():
    with pytest.raises(UserError, match="no params"):
        get_reward("qc_verdict", {"x": 1})


def test_factories_keep_name_and_use_params():
    fn = get_reward("keywords", {"required": ["抱歉", "处理"], "forbidden": ["滚"]})
    assert fn.__name__ == "keywords"
    assert fn(["p"] * 3, ["抱歉，马上处理", "抱歉", "滚，抱歉处理"]) == [1.0, 0.5, 0.0]
    fn = get_reward("length", {"min_chars": 2, "max_chars": 4})
    assert fn.__name__ == "length"
    assert fn(["p"] * 4, ["a", "abc", "abcd", "abcdefgh"]) == [0.5, 1.0, 1.0, 0.0]


def test_factory_bad_params():
    with pytest.raises(UserError, match="bad params"):
        get_reward("keywords", {"requird": ["x"]}, "spec.yaml:2")


def test_keywords_without_required_is_one():
    assert get_reward("keywords", {})(["p"], ["anything"]) == [1.0]


def test_module_function_import(tmp_path, monkeypatch):
    (tmp_path / "my_rewards_mod.py").write_text(
        "def politeness(prompts, completions, **kw):\n"
        "    return [1.0 if '请' in c else 0.0 for c in completions]\n"
        "NOT_CALLABLE = 3\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    fn = get_reward("my_rewards_mod:politeness")
    assert fn(["p", "p"], ["请稍等", "等着"]) == [1.0, 0.0]
    with pytest.raises(UserError, match="cannot import"):
        get_reward("my_rewards_mod:missing")
    with pytest.raises(UserError, match="cannot import"):
        get_reward("no_such_module_xyz:fn")
    with pytest.raises(UserError, match="not callable"):
        get_reward("my_rewards_mod:NOT_CALLABLE")
    with pytest.raises(UserError, match="no params"):
        get_reward("my_rewards_mod:politeness", {"x": 1})
