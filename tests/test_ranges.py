"""The ranges of numbers (``base/ranges.py``): every numeric ``train`` flag is refused out of its range in one
line, before anything is written: seconds, and counts that multiply memory.
"""

from __future__ import annotations

import pytest

from ark_trainer.core.config import field_types
from ark_trainer.stages.registry import config_class
from tests.conftest import refused, train_argv
from tests.tiny_runs import base


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("rft_num_samples", "1000000000", "--rft_num_samples: must be in [0, 256]"),
        ("num_generations", "100000", "--num_generations: must be in [2, 256]"),
        ("auto_probe_samples", "5000", "--auto_probe_samples: must be in [2, 256]"),
        ("max_completion_length", "1000000000", "--max_completion_length: must be in [1, 131072]"),
        ("batch_size", "1000000000", "--batch_size: must be in [1, 8192]"),
        ("rollout_steps", "100000", "--rollout_steps: must be in [1, 64]"),
        ("lora_r", "1000000", "--lora_r: must be in [0, 4096]"),
        ("rm_weight", "1e308", "--rm_weight: must be in [0, 1e+06]"),
    ],
)
def test_counts_that_multiply_memory_have_ranges(assets, tmp_path, capsys, flag, value, says):
    lines = refused(capsys, train_argv(assets, tmp_path / "out", f"--{flag}", value))
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}"), lines


@pytest.mark.parametrize("flag", ["reward_timeout", "tool_timeout", "stall_timeout", "heartbeat_interval"])
@pytest.mark.parametrize("value", ["1e12", "1e300"])
def test_train_seconds_are_bounded(assets, tmp_path, capsys, flag, value):
    lines = refused(capsys, train_argv(assets, tmp_path / "out", f"--{flag}", value))
    assert len(lines) == 1 and lines[0].startswith(f"error: --{flag}: must be in "), lines
    assert "1e+06]" in lines[0] and not (tmp_path / "out").exists()


NUMERIC = sorted(n for n, kind in field_types(config_class()).items() if kind in (int, float))


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_every_numeric_flag_refuses_non_finite_values(assets, tmp_path, capsys, value):
    """All of them in one command: each is refused in its own line (every problem is reported at once)."""
    out = tmp_path / "run"
    lines = refused(capsys, [*base(assets, out), *(f"--{name}={value}" for name in NUMERIC)])
    for name in NUMERIC:
        assert any(
            line.startswith(f"error: --{name}: ") and "not a finite number" in line for line in lines
        ), (name, lines)
    assert not out.exists()


def _outside(name: str) -> list[str]:
    """Values just outside the flag's range, below and above."""
    from ark_trainer.core.config import range_of

    rng, kind = range_of(config_class(), name), field_types(config_class())[name]
    values = []
    if rng.lo is not None:
        values.append(rng.lo if rng.lo_open else rng.lo - (1 if kind is int else 0.5))
    if rng.hi is not None:
        values.append(rng.hi if rng.hi_open else rng.hi + (1 if kind is int else 0.5))
    return [str(v) for v in values]


def test_every_numeric_flag_refuses_values_out_of_its_range(assets, tmp_path, capsys):
    """Every flag just outside its range in one command (below it, or above where it has no lower bound), then
    every flag with both bounds just above it: each refused in one line of its own (every problem is reported
    at once)."""
    out = tmp_path / "run"
    first = {name: values[0] for name in NUMERIC if (values := _outside(name))}
    second = {name: values[1] for name in NUMERIC if len(values := _outside(name)) == 2}
    checked = 0
    for values in (first, second):
        lines = refused(
            capsys, [*base(assets, out), *(f"--{name}={value}" for name, value in values.items())]
        )
        for name, value in values.items():
            mine = [line for line in lines if line.startswith(f"error: --{name}: ")]
            assert len(mine) == 1, (name, value, lines)
            checked += 1
    assert checked > len(NUMERIC)  # more values than flags: nearly every flag has a bound, many both
    assert not out.exists()


@pytest.mark.parametrize(
    "flag,value,says",
    [
        ("max_train_steps", "1e999", "--max_train_steps: '1e999' is not a finite number; must be in [1, "),
        (
            "grpo_learning_rate",
            "nan",
            "--grpo_learning_rate: 'nan' is not a finite number; must be in (0, 1]",
        ),
        ("save_total_limit", "-3", "--save_total_limit: must be in [0, "),
        ("pass_threshold", "nan", "--pass_threshold: 'nan' is not a finite number"),
        ("rm_weight", "-5", "--rm_weight: must be in [0, 1e+06], got -5.0"),
    ],
)
def test_the_reviews_examples_are_one_line_each(assets, tmp_path, capsys, flag, value, says):
    lines = refused(capsys, [*base(assets, tmp_path / "run"), f"--{flag}", value])
    assert lines == [f"error: {says}" + lines[0][len(says) + 7 :]]


def test_a_yaml_config_with_nan_is_refused_too(assets, tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("beta: .nan\nmax_train_steps: 1e999\n")
    lines = refused(capsys, [*base(assets, tmp_path / "run"), "--config", str(cfg)])
    assert any(line.endswith("beta: nan is not a finite number; must be ≥ 0") for line in lines), lines
    assert any("max_train_steps: '1e999' is not a finite number" in line for line in lines), lines
