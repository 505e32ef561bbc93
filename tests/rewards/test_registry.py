"""The reward registry (``rewards/registry.py``): ``os:getcwd`` as a rule stops ``train`` before anything is written."""

from __future__ import annotations

from ark_trainer.cli import main
from tests.rewards.attacks import one_error_line, rules_yaml, train_flags, unlabelled_data


def test_os_getcwd_as_a_rule_stops_train_before_anything_is_written(user_rules, model, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, rules_yaml(tmp_path, "os:getcwd"))) == 2
    assert "not a reward function" in one_error_line(capsys.readouterr().err) and not out.exists()
