"""Deploy targets: OpenClaw is one target behind the protocol the deploy command and train call."""

from __future__ import annotations

import inspect

import pytest

from ark_trainer.cli import main
from ark_trainer.services.deploy.targets import DeployTarget, get_target, targets


def _methods() -> list[str]:
    return [n for n, f in vars(DeployTarget).items() if inspect.isfunction(f) and not n.startswith("_")]


@pytest.mark.parametrize("name", sorted(targets()))
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


def test_deploy_target_flag_takes_a_registered_target_and_refuses_another_in_one_line(tmp_path, capsys):
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.config import resolve_config
    from ark_trainer.stages.registry import config_class

    base = {"model_path": "m", "data_path": "d.jsonl", "output_dir": str(tmp_path / "out")}
    assert resolve_config(config_class(), base).deploy_target == "openclaw"  # the default
    with pytest.raises(UserError) as refused:
        resolve_config(config_class(), {**base, "deploy_target": "nowhere"})
    assert refused.value.messages == ["--deploy_target: unknown deploy target 'nowhere'; use openclaw"]
    argv = ["train", "--model_path", "m", "--data_path", "d.jsonl", "--output_dir", str(tmp_path / "out")]
    assert main([*argv, "--deploy_target", "nowhere"]) == 2
    assert "--deploy_target: unknown deploy target 'nowhere'; use openclaw" in capsys.readouterr().err


def test_no_module_chooses_a_deploy_target_by_its_name():
    """train's end-of-run deploy and check and the live loop take the target from ``--deploy_target``: no
    call of ``get_target`` in the source names one."""
    import ast
    from pathlib import Path

    import ark_trainer

    src = Path(ark_trainer.__file__).parent
    literal = []
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = getattr(node, "func", None) and getattr(node.func, "id", getattr(node.func, "attr", ""))
            if name == "get_target" and any(isinstance(a, ast.Constant) for a in node.args):
                literal.append(f"{path.relative_to(src)}:{node.lineno}")
    assert literal == []


def test_the_parity_after_the_end_of_run_deploy_is_the_targets_own(tmp_path, monkeypatch):
    """After ``train --openclaw_env True`` deployed, the held-out set is asked through the deployment only by a
    target that has ``evaluate_through`` (OpenClaw's: ``services/openclaw/parity.py``)."""
    from ark_trainer.services import pipeline

    calls = []

    class WithParity:
        def evaluate_through(self, out, log=print):
            calls.append(out)

    monkeypatch.setattr(pipeline, "_build_report", lambda out: calls.append("report"))
    monkeypatch.setattr("ark_trainer.stages.agent.env.env_for", lambda cfg: None)
    run = type("Run", (), {"deploy_target": "test_target", "eval_auto": True})()
    prepared = type("Prepared", (), {"run": run, "eval": [{"prompt": "q"}], "out": tmp_path})()
    pipeline._parity_after_deploy(prepared, WithParity())
    pipeline._parity_after_deploy(prepared, object())  # a target without it: nothing asked
    assert calls == [tmp_path, "report"]
    from ark_trainer.services.deploy.targets import get_target

    openclaw = get_target("openclaw")
    assert callable(openclaw.evaluate_through) and callable(openclaw.check_before_train)
