"""Deploy targets: OpenClaw is one target behind the protocol the deploy command and train call."""

from __future__ import annotations

import inspect

import pytest

from ark_trainer.cli import main
from ark_trainer.services.deploy.targets import TARGETS, DeployTarget, get_target


def _methods() -> list[str]:
    return [n for n, f in vars(DeployTarget).items() if inspect.isfunction(f) and not n.startswith("_")]


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_every_registered_target_has_the_protocols_functions_with_its_parameters(name):
    target = get_target(name)
    assert _methods() == ["deploy", "swap", "current", "status", "stop", "rollback", "deploy_after_train"]
    for method in _methods():
        want = list(inspect.signature(getattr(DeployTarget, method)).parameters)[1:]  # without self
        got = list(inspect.signature(getattr(target, method)).parameters)
        assert got[: len(want)] == want, (name, method, got)


def test_an_unknown_target_is_one_line_and_exit_2(capsys):
    assert main(["deploy", "--status", "--target", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --target: unknown deploy target 'nowhere'; known: openclaw"]


def test_openclaw_refuses_a_client_setting_that_is_not_its_own_before_anything_runs(tmp_path):
    from ark_trainer.base.errors import UserError
    from ark_trainer.services.openclaw import deploy

    for setting in ({"agnet": "qc"}, {"agent": "qc", "model": "x"}):
        with pytest.raises(UserError, match="is not an OpenClaw deploy setting \\(it takes: agent\\)"):
            deploy.deploy(tmp_path, client=setting)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_the_loop_and_train_reach_openclaw_through_the_target_registry():
    """No module outside the OpenClaw target calls its deploy functions directly: the deploy command,
    train's end-of-run deploy and the live loop all go through ``get_target``."""
    import ast
    from pathlib import Path

    import ark_trainer

    src = Path(ark_trainer.__file__).parent
    direct = []
    for path in src.rglob("*.py"):
        if path.parent.name == "openclaw":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "ark_trainer.services.openclaw.deploy":
                direct += [
                    f"{path.relative_to(src)}: {a.name}" for a in node.names if a.name in TARGET_FUNCTIONS
                ]
            if isinstance(node, ast.ImportFrom) and node.module == "ark_trainer.services.openclaw":
                direct += [f"{path.relative_to(src)}: deploy" for a in node.names if a.name == "deploy"]
    assert direct == []


TARGET_FUNCTIONS = {
    "deploy",
    "swap",
    "current",
    "status",
    "stop",
    "rollback",
    "deploy_after_train",
    "find_record",
}


def test_deploy_record_flag_reaches_the_target_and_is_off_by_default(tmp_path, monkeypatch):
    import ark_trainer.services.deploy.targets as targets

    calls = []

    class Target:
        def deploy(self, out, serving, client=None, log=print):
            calls.append((serving.record_to, client))

    monkeypatch.setattr(targets, "get_target", lambda name="openclaw": Target())
    assert main(["deploy", str(tmp_path)]) == 0
    assert main(["deploy", str(tmp_path), "--record", str(tmp_path / "turns.jsonl")]) == 0
    assert main(["deploy", str(tmp_path), "--agent", "qc"]) == 0
    assert calls == [(None, {}), (str(tmp_path / "turns.jsonl"), {}), (None, {"agent": "qc"})]
