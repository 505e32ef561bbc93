"""The ranges of numbers (``ranges.py``): every numeric ``train`` flag is refused out of its range in one
line, before anything is written: seconds, and counts that multiply memory.
"""

from __future__ import annotations

import pytest

from tests.conftest import refused, train_argv


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
