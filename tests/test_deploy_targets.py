"""Deploy targets: OpenClaw is one target behind the protocol the deploy command and train call."""

from __future__ import annotations

import inspect

import pytest

from ark_trainer.cli import main
from ark_trainer.deploy.targets import TARGETS, DeployTarget, get_target


def _methods() -> list[str]:
    return [n for n, f in vars(DeployTarget).items() if inspect.isfunction(f) and not n.startswith("_")]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_registered_target_has_the_protocols_functions_with_its_parameters(name):
    target = get_target(name)
    assert _methods() == ["deploy", "status", "stop", "rollback", "deploy_after_train"]
    for method in _methods():
        want = list(inspect.signature(getattr(DeployTarget, method)).parameters)[1:]  # without self
        got = list(inspect.signature(getattr(target, method)).parameters)
        assert got[: len(want)] == want, (name, method, got)


def test_an_unknown_target_is_one_line_and_exit_2(capsys):
    assert main(["deploy", "--status", "--target", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --target: unknown deploy target 'nowhere'; known: openclaw"]
