"""``ark-trainer loop`` (``app/commands/loop.py``): the loop's own options are checked before anything runs, and
``--rollback`` is refused in one line where it cannot be done.
"""

from __future__ import annotations

import pytest

from ark_trainer.cli import main
from ark_trainer.services.loop.state import fresh_state, save_state
from tests.conftest import refused


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--min_improvement", "nan"], "--min_improvement: expected a number in [0, 1e+06], got nan"),
        (["--max_regression", "nan"], "--max_regression: expected a number in [0, 1e+06], got nan"),
        (["--max_regression", "-0.1"], "--max_regression: expected a number in [0, 1e+06], got -0.1"),
        (["--poll", "-1"], "--poll: expected a number in (0, 3600], got -1.0"),
        (["--poll", "0"], "--poll: expected a number in (0, 3600], got 0.0"),
        (["--every", "inf"], "--every: expected a number in [0, 1e+06], got inf"),
        (["--min_new_turns", "0"], "--min_new_turns: expected an integer in [1, 2147483647], got 0"),
        (["--heldout_size", "-3"], "--heldout_size: expected an integer in [1, 2147483647], got -3"),
        (["--eval_newest", "-1"], "--eval_newest: expected an integer in [0, 2147483647], got -1"),
        (["--max_rounds", "-2"], "--max_rounds: expected an integer in [0, 2147483647], got -2"),
    ],
)
def test_loop_options_are_checked_before_anything_runs(assets, tmp_path, capsys, flags, says):
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"]), *flags]
    assert refused(capsys, argv) == [f"error: {says}"]
    assert not loop.exists()


def test_loop_flags_and_rollback_refusals(tmp_path, capsys):
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--min_new_turns", "many"]) == 2
    assert "--min_new_turns: expected int" in capsys.readouterr().err
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--rollback", "1"]) == 2
    assert "not a loop folder" in capsys.readouterr().err
    state = fresh_state(str(tmp_path), {"main_metric": "reward_mean"})
    state["history"] = [{"round": 1, "promoted": False, "reasons": ["x"], "main": 0.1, "decided_at": "t"}]
    save_state(tmp_path / "l", state)
    assert main(["loop", "--output_dir", str(tmp_path / "l"), "--rollback", "1"]) == 2
    assert "round 1 was never promoted" in capsys.readouterr().err
    assert main(["status", str(tmp_path / "l")]) == 0
    out = capsys.readouterr().out
    assert "serving round 0" in out and "round 1: refused at t: x" in out and "training: none" in out
