"""YAML read within bounds (``base/yamlsafe.py``): ``--config``, ``--reward_config`` and a grader's ``params:``,
``--feedback_rules``, an accelerate config. Alias bombs, self-referencing aliases, 20,000 levels of nesting and
oversized files are refused before anything is built, naming the file and line.
"""

from __future__ import annotations

import time

import pytest

from ark_trainer.base.errors import UserError
from tests.conftest import refused, train_argv


def alias_bomb(levels: int = 24, indent: str = "") -> str:
    """``a0: &a0 [x, x]``, ``a1: &a1 [*a0, *a0]``, …: 2**levels values once expanded, a few hundred bytes."""
    lines = [f"{indent}a0: &a0 [x, x]"]
    lines += [f"{indent}a{i}: &a{i} [*a{i - 1}, *a{i - 1}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMB_IN_PARAMS = "graders:\n  - name: qc_format\n    weight: 1\n    params:\n" + alias_bomb(indent="      ")


DEEP_FLOW = "graders: " + "[" * 20000 + "]" * 20000 + "\n"


DEEP_BLOCK = "".join(f"{'  ' * i}k{i}:\n" for i in range(80)) + "  " * 80 + "v: 1\n"


SELF_ALIAS = "graders: &g [*g]\n"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (BOMB_IN_PARAMS, "expand to more than 100000 values (an alias bomb?)"),
        (DEEP_FLOW, ":1: nested deeper than 64 levels"),
        (DEEP_BLOCK, ":65: nested deeper than 64 levels"),
        (SELF_ALIAS, "*g refers to a value that contains it"),
    ],
)
def test_hostile_reward_yaml_is_refused_at_once(assets, tmp_path, capsys, text, says):
    spec = tmp_path / "rewards.yaml"
    spec.write_text(text, encoding="utf-8")
    started = time.monotonic()
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--reward_config", str(spec)))
    assert time.monotonic() - started < 30  # it was a MemoryError after 54 s
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}:") and says in lines[0], lines
    assert not (tmp_path / "out").exists()
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert says in lines[0]


@pytest.mark.parametrize("text", [alias_bomb(), DEEP_FLOW.replace("graders", "tags"), "x: " * 600_000])
def test_hostile_config_yaml_is_refused_at_once(assets, tmp_path, capsys, text):
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--config", str(config)))
    assert lines[0].startswith(f"error: {config}"), lines
    assert any(w in lines[0] for w in ("alias bomb", "nested deeper", "bytes; a YAML config is at most")), (
        lines
    )


def test_the_other_yaml_readers_are_bounded_too(tmp_path):
    from ark_trainer.core.runtime.launch import check_engine
    from ark_trainer.services.loop.feedback import load_rules

    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb(), encoding="utf-8")
    with pytest.raises(UserError, match=r"--feedback_rules: .*alias bomb"):
        load_rules(str(bomb))
    with pytest.raises(UserError, match=r"--accelerate_config: .*alias bomb"):
        check_engine(str(bomb), use_cpu=True)


def test_a_few_aliases_are_fine(tmp_path):
    from ark_trainer.base.yamlsafe import safe_load

    text = "base: &b {lr: 1, steps: 2}\nrun1: *b\nrun2: *b\n" + alias_bomb(10)
    assert safe_load(text, "ok.yaml")["run2"] == {"lr": 1, "steps": 2}
