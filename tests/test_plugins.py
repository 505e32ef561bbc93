"""Plug-ins from installed packages: a stage and its strategy, a grader kind, a deploy target and a command.

The throw-away plug-in ``tests/plugin_pkg/toy`` (``ark-toy-plugin``: a module and a ``*.dist-info`` with
``[ark_trainer] toy = ark_toy_plugin`` in its ``entry_points.txt``) is installed for a child process by
putting its folder on ``PYTHONPATH``, as an installed package is found on ``sys.path``; nothing of
ark-trainer is edited. ``tests/plugin_pkg/clash`` names only things ark-trainer already has.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_qc_assets

PLUGINS = Path(__file__).resolve().parent / "plugin_pkg"
CLASH = "warning: plug-in clash (ark-clash-plugin 0.1): "


def ark(*args: str, plugin: str | None = "toy", cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m ark_trainer ARGS`` in a child process that has the plug-in ``plugin`` installed."""
    return _child(["-m", "ark_trainer", *args], plugin, cwd, timeout)


def _child(argv: list[str], plugin: str | None, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ARK_TRAINER_PLUGINS"}
    paths = [str(PLUGINS / plugin)] if plugin else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, *_source_path()])
    env["PYTHONWARNINGS"] = "ignore"
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def _source_path() -> list[str]:
    """The test run's own ``PYTHONPATH`` (the checkout's ``src`` under test), kept for a child process."""
    return list(filter(None, [os.environ.get("PYTHONPATH")]))


def test_a_plugin_command_is_in_the_help_and_runs(tmp_path):
    help_text = ark("--help", cwd=tmp_path)
    assert help_text.returncode == 0, help_text.stderr
    assert "say hello from the toy plug-in" in help_text.stdout and not help_text.stderr
    done = ark("hello", "--name", "ark", cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello, ark, from the toy plug-in\n", "")
    greet = ark("toy", "greet", "--name", "ark", cwd=tmp_path)  # a sub-command of the plug-in's group
    assert (greet.returncode, greet.stdout, greet.stderr) == (0, "hello, ark, from the toy plug-in\n", "")
    group = ark("toy", cwd=tmp_path)
    assert group.returncode == 2 and "say hello, as a sub-command of toy" in group.stdout
    assert "hello" not in ark("--help", plugin=None, cwd=tmp_path).stdout  # not installed: not there


def test_importing_ark_trainer_loads_no_plugin(tmp_path):
    code = (
        "import sys; import ark_trainer.cli, ark_trainer.core.config, ark_trainer.stages.registry, "
        "ark_trainer.rewards.spec, ark_trainer.services.deploy.targets; print('ark_toy_plugin' in sys.modules)"
    )
    done = _child(["-c", code], "toy", tmp_path)
    assert done.stdout.strip() == "False", done.stderr


def test_built_ins_come_only_through_the_default_plugins_hooks(tmp_path):
    """Importing ark-trainer's own modules registers nothing: every built-in stage, strategy, grader type,
    deploy target and command is added by a ``register_*`` hook of a module of ``DEFAULT_PLUGINS``, each of
    which defines at least one hook."""
    code = (
        "import importlib\n"
        "from ark_trainer.base import plugins, strategies\n"
        "from ark_trainer.stages import registry\n"
        "from ark_trainer.rewards import spec\n"
        "from ark_trainer.services.deploy import targets\n"
        "mods = [importlib.import_module(m) for m in plugins.DEFAULT_PLUGINS]\n"
        "print(len(registry._STAGES), len(strategies._STRATEGIES), len(spec._KINDS), len(targets._TARGETS))\n"
        "print(all(any(callable(getattr(m, h, None)) for h in plugins.HOOKS) for m in mods))\n"
        "print(len(registry.stages()), len(strategies.strategy_table()), len(spec.grader_kinds()),"
        " sorted(targets.targets()))\n"
    )
    done = _child(["-c", code], None, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["0 0 0 0", "True", "5 6 13 ['openclaw']"]


def test_a_plugin_grader_kind_scores_with_score(tmp_path):
    spec = tmp_path / "rewards.yaml"
    spec.write_text("graders:\n  - name: short\n    type: max_words\n    max_words: 2\n", encoding="utf-8")
    data = tmp_path / "data.jsonl"
    rows = [{"prompt": "q1", "completion": "two words"}, {"prompt": "q2", "completion": "three words here"}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    done = ark("score", "--reward_config", str(spec), "--data_path", str(data), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    short = json.loads(done.stdout)["graders"]["short"]
    assert (short["applicable"], short["mean"], short["min"], short["max"]) == (2, 0.5, 0.0, 1.0)
    refused = ark("score", "--reward_config", str(spec), "--data_path", str(data), plugin=None, cwd=tmp_path)
    assert refused.returncode == 2 and "unknown grader type 'max_words'" in refused.stderr


def test_a_plugin_deploy_target_is_chosen_by_its_name(tmp_path):
    out = tmp_path / "run"
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text("{}", encoding="utf-8")
    done = ark("deploy", str(out), "--target", "toyfile", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "toyfile.json").read_text(encoding="utf-8"))
    assert record["model"] == str(out / "model") and record["files"] == ["config.json"]
    status = ark("deploy", str(out), "--status", "--target", "toyfile", cwd=tmp_path)
    assert "deploy       complete" in status.stdout
    assert ark("deploy", str(out), "--rollback", "--target", "toyfile", cwd=tmp_path).returncode == 0
    assert not (out / "toyfile.json").exists()
    unknown = ark("deploy", str(out), "--target", "toyfile", plugin=None, cwd=tmp_path)
    assert unknown.stderr.strip() == "error: --target: unknown deploy target 'toyfile'; known: openclaw"
    code = (
        "from ark_trainer.core.config import resolve_config\n"
        "from ark_trainer.stages.registry import config_class\n"
        "flags = {'model_path': 'm', 'data_path': 'd', 'output_dir': 'o', 'deploy_target': 'toyfile'}\n"
        "cfg = resolve_config(config_class(), flags)\n"
        "print(cfg.deploy_target)"
    )
    chosen = _child(["-c", code], "toy", tmp_path)  # train's and loop's --deploy_target take it too
    assert (chosen.returncode, chosen.stdout, chosen.stderr) == (0, "toyfile\n", ""), chosen.stderr


def test_a_plugin_stage_brings_its_own_flag(tmp_path):
    """The toy stage declares ``EchoOptions`` (``options = EchoOptions``): its flag is in ``train --help``
    under its own heading, checked against its declared range, read by the stage, and kept in run.yaml."""
    help_text = ark("train", "--help", cwd=tmp_path)
    assert help_text.returncode == 0 and not help_text.stderr, help_text.stderr
    assert "\nEcho:\n  --echo_candidate" in help_text.stdout
    bare = ark("train", "--help", plugin=None, cwd=tmp_path).stdout
    assert "--echo_candidate" not in bare
    flat = " ".join(
        help_text.stdout.split()
    )  # the registries' names in --strategy's and --deploy_target's help
    assert "RLOO (rloo), ECHO (echo) or auto" in flat and "deploy target, openclaw or toyfile" in flat
    assert "ECHO" not in bare and "toyfile" not in bare
    code = (
        "from ark_trainer.core.config import resolve_config, to_yaml; from ark_toy_plugin.stage import EchoOptions\n"
        "from ark_trainer.services.planning import stage_options_of\n"
        "from ark_trainer.stages.registry import config_class\n"
        "cfg = resolve_config(config_class(), {'model_path': 'm', 'data_path': 'd', 'output_dir': 'o',"
        " 'strategy': 'echo', 'echo_candidate': '2'})\n"
        "print(stage_options_of(cfg)['echo'], cfg.echo_candidate); print(to_yaml(cfg), end='')"
    )
    done = _child(["-c", code], "toy", tmp_path)
    assert done.returncode == 0, done.stderr
    first, *yaml_lines = done.stdout.splitlines()
    # the stage is handed its own options, an instance of its class; run.yaml lists the flag after the built-ins'
    assert first == "EchoOptions(echo_candidate=2) 2" and yaml_lines[-1] == "echo_candidate: 2"
    (tmp_path / "run.yaml").write_text("echo_candidate: 3\n", encoding="utf-8")
    refused = ark("train", "--config", "run.yaml", "--echo_candidate", "99", cwd=tmp_path)
    assert refused.returncode == 2 and "--echo_candidate: " in refused.stderr, refused.stderr
    unknown = ark("train", "--config", "run.yaml", plugin=None, cwd=tmp_path)
    assert "run.yaml: echo_candidate: unknown key" in unknown.stderr


def test_a_plugin_name_that_clashes_is_refused_in_one_line_each(tmp_path):
    code = (
        "from ark_trainer.cli import build_parser; build_parser()\n"
        "from ark_trainer.base.strategies import strategy_table; from ark_trainer.stages.registry import stages\n"
        "from ark_trainer.rewards.spec import grader_kinds; from ark_trainer.services.deploy.targets import targets\n"
        "print(strategy_table()['GRPO'].reason[:9], stages()['rft'].label, targets()['openclaw'],\n"
        "      grader_kinds()['regex'].fields >= {'pattern', 'expect'})"
    )
    done = _child(["-c", code], "clash", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "one",
        "step:",
        "RFT",
        "ark_trainer.services.openclaw.target",
        "True",
    ]  # built-ins stay
    clashes = (
        "a command named 'train' already exists",
        "a strategy named 'GRPO' is already registered",
        "a stage named 'rft' is already registered",
        "a grader type named 'regex' is already registered",
        "a deploy target named 'openclaw' is already registered",
    )
    refused = [f"{CLASH}{clash}; refused (the plug-in must rename it)" for clash in clashes]
    broken = f"{CLASH}register_commands failed (RuntimeError: a broken hook); skipped"  # its own bug
    assert sorted(done.stderr.splitlines()) == sorted([*refused, broken])
    assert ark("--help", plugin="clash", cwd=tmp_path, timeout=120).returncode == 0  # still usable


@pytest.mark.slow
def test_a_plugin_strategy_trains_end_to_end_and_deploys(tmp_path):
    """``--strategy ECHO``: the plug-in's stage trains the tiny model for 2 real SFT steps, is evaluated and
    reported like a built-in one, and its model goes to the plug-in's deploy target: at the end of the run
    (``--openclaw_env True --deploy_target toyfile``) and with ``deploy --target toyfile``."""
    assets = tiny_qc_assets(tmp_path)
    out = tmp_path / "out"
    args = [
        "train", "--strategy", "echo", "--model_path", str(assets["model"]), "--data_path", str(assets["train"]),
        "--eval_dataset", str(assets["eval"]), "--output_dir", str(out), "--max_train_steps", "2",
        "--batch_size", "2", "--num_generations", "2", "--max_completion_length", "4", "--logging_steps", "1",
        "--save_steps", "0", "--device", "cpu", "--report_to", "none",
        "--openclaw_env", "True", "--deploy_target", "toyfile", "--deploy_if_not_better", "True",
    ]  # fmt: skip
    done = ark(*args, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["strategy"] == "ECHO"
    assert plan["stages"] == [{"name": "echo", "steps": 2, "learning_rate": 2e-5, "last": True}]
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    losses = [e for e in events if e["event"] == "metrics" and e.get("stage") == "echo" and "loss" in e]
    assert [e["step"] for e in losses] == [1, 2]  # two optimizer steps, each logged
    assert [e["model"] for e in events if e["event"] == "eval"] == ["base", "echo"]
    assert (out / "model" / "model.safetensors").is_file() and (out / "eval" / "echo.json").is_file()
    assert "| Echo" in (out / "report.md").read_text(encoding="utf-8")
    at_the_end = json.loads((out / "toyfile.json").read_text(encoding="utf-8"))  # the end-of-run deploy
    assert at_the_end["model"] == str(out / "model") and "model.safetensors" in at_the_end["files"]
    assert "openclaw" not in {e["event"] for e in events}  # OpenClaw's check before training: not its target
    (out / "toyfile.json").unlink()
    deployed = ark("deploy", str(out), "--target", "toyfile", cwd=tmp_path)
    assert deployed.returncode == 0, deployed.stderr
    assert "model.safetensors" in json.loads((out / "toyfile.json").read_text(encoding="utf-8"))["files"]


def _broken_package(root: Path, name: str, module_code: str, entry_points: str | None = None) -> Path:
    """An installed package ``name`` (a module and its ``*.dist-info``) under ``root``, put on PYTHONPATH."""
    module = name.replace("-", "_")
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(module_code, encoding="utf-8")
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    points = f"[ark_trainer]\n{module} = {module}\n" if entry_points is None else entry_points
    (info / "entry_points.txt").write_text(points, encoding="utf-8")
    return root


BROKEN = {  # module code, entry_points.txt (None: a good one), the warning's words (None: no warning)
    "sys.exit(0) on import": ("import sys\nsys.exit(0)\n", None, "does not import (SystemExit"),
    "sys.exit(3) on import": ("raise SystemExit(3)\n", None, "does not import (SystemExit: 3)"),
    "KeyboardInterrupt on import": ("raise KeyboardInterrupt\n", None, "does not import (KeyboardInterrupt)"),
    "sys.exit in a hook": (
        "import sys\ndef register_commands(register):\n    sys.exit(0)\n",
        None,
        "register_commands failed (SystemExit",
    ),
    "KeyboardInterrupt in a hook": (
        "def register_commands(register):\n    raise KeyboardInterrupt('x')\n",
        None,
        "register_commands failed (KeyboardInterrupt",
    ),
    "malformed entry_points.txt of ours": ("", "[ark_trainer]\nno equals sign here\n", "does not parse"),
    "malformed value of ours": ("", "[ark_trainer]\nx = 1bad..mod::\n", "does not parse"),
    "malformed entry_points.txt not ours": ("", "[console_scripts\nfoo = = bar:baz\nnoequals\n", None),
    "not UTF-8, not ours": ("", "[console_scripts]\nfoo = \xff\xfe:bar\n", None),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_package_is_skipped_with_one_warning(tmp_path, case):
    code, points, words = BROKEN[case]
    root = _broken_package(tmp_path / "site", "ark-broken-plugin", code, points)
    if case.startswith("not UTF-8"):
        (next(root.glob("*.dist-info")) / "entry_points.txt").write_bytes(
            b"[console_scripts]\nfoo = \xff:bar\n"
        )
    env = {k: v for k, v in os.environ.items() if k != "ARK_TRAINER_PLUGINS"}
    # the caller's PYTHONPATH kept: this checkout's package, not an installed one
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root), str(PLUGINS / "toy"), *filter(None, [env.get("PYTHONPATH")])]
    )
    done = subprocess.run(
        [sys.executable, "-m", "ark_trainer", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and "usage:" in done.stdout and "Traceback" not in done.stderr, done.stderr
    assert "say hello from the toy plug-in" in done.stdout  # the good plug-in beside it still loads
    lines = done.stderr.splitlines()
    if words is None:
        assert lines == [], lines
    else:
        assert len(lines) == 1 and lines[0].startswith("warning: plug-in ") and words in lines[0], lines
        assert "ark-broken-plugin 0.1" in lines[0] or "ark_broken_plugin" in lines[0], lines


def test_a_hook_that_exits_does_not_end_a_command(tmp_path):
    code = "import sys\ndef register_grader_kinds(register):\n    sys.exit(0)\n"
    root = _broken_package(tmp_path / "site", "ark-exit-plugin", code)
    spec = tmp_path / "rewards.yaml"
    spec.write_text("graders:\n  - name: has_a\n    type: regex\n    pattern: a\n", encoding="utf-8")
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps({"prompt": "q", "completion": "a"}) + "\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "ARK_TRAINER_PLUGINS"}
    env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [env.get("PYTHONPATH")])])
    argv = [
        sys.executable,
        "-m",
        "ark_trainer",
        "score",
        "--reward_config",
        str(spec),
        "--data_path",
        str(data),
    ]
    done = subprocess.run(
        argv + ["--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["graders"]["has_a"]["mean"] == 1.0
    assert done.stderr.splitlines() == [
        "warning: plug-in ark_exit_plugin (ark-exit-plugin 0.1): register_grader_kinds failed (SystemExit: 0); "
        "skipped"
    ]
