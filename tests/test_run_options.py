"""``run_options.py``: the shared flags of a ``train`` run, each bounded where it is read."""

from __future__ import annotations

import pytest

from tests.conftest import refused, train_argv


@pytest.mark.parametrize("flag", ["reward_timeout", "tool_timeout", "stall_timeout", "heartbeat_interval"])
@pytest.mark.parametrize("value", ["1e12", "1e300"])
def test_train_seconds_are_bounded(assets, tmp_path, capsys, flag, value):
    lines = refused(capsys, train_argv(assets, tmp_path / "out", f"--{flag}", value))
    assert len(lines) == 1 and lines[0].startswith(f"error: --{flag}: must be in "), lines
    assert "1e+06]" in lines[0] and not (tmp_path / "out").exists()
