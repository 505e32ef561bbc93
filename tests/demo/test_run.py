"""``ark-trainer demo`` (``demo/run.py``): its sizes and seed are bounded before anything is written."""

from __future__ import annotations

import pytest

from tests.conftest import refused


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--n_train", "1000000000"], "--n_train: must be in [1, 100000], got 1000000000"),
        (["--n_eval", "1000000000"], "--n_eval: must be in [1, 100000], got 1000000000"),
        (["--seed", "-1"], "--seed: must be in [0, 4294967295], got -1"),
        (["--seed", "99999999999"], "--seed: must be in [0, 4294967295], got 99999999999"),
        (
            ["--max_train_steps", "99999999999"],
            "--max_train_steps: must be in [1, 2147483647], got 99999999999",
        ),
    ],
)
def test_demo_sizes_and_seed_are_bounded(tmp_path, capsys, flags, says):
    lines = refused(capsys, ["demo", "--output_dir", str(tmp_path / "demo"), *flags])
    assert lines == [f"error: {says}"], lines
    assert not (tmp_path / "demo").exists()
