"""``--report_to`` (ark_trainer/base/trackers.py): tensorboard by default, none, and trackers that are not installed.

No tracker other than TensorBoard is installed in the test environment, so trackio/wandb/mlflow are tested
up to the refusal (and the Trainer argument they turn into), not with a live tracker.
"""

from __future__ import annotations

import importlib.util

import pytest

from ark_trainer.base.trackers import parse_report_to, report_to_problems, trainer_report_to
from ark_trainer.cli import main
from tests.tiny_runs import assets, flags  # noqa: F401 - the module fixture is reused


def test_names_are_parsed_as_transformers_spells_them():
    assert parse_report_to("tensorboard, wandb") == ["tensorboard", "wandb"]
    assert parse_report_to("none") == [] and trainer_report_to("none") == "none"
    assert trainer_report_to("tensorboard,mlflow") == ["mlflow"]  # tensorboard: our own callback and layout
    assert report_to_problems("tensorboard") == []
    assert "unknown tracker 'comet'" in report_to_problems("comet")[0]


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed here")
def test_a_tracker_that_is_not_installed_is_refused_before_anything_is_written(assets, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    assert main(["train", *flags(assets, out, "GRPO"), "--report_to", "wandb"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "error: --report_to: wandb is not installed; pip install wandb, or --report_to tensorboard"
    ]
    assert not out.exists()


@pytest.mark.slow
def test_tensorboard_by_default_and_nothing_with_none(assets, tmp_path):  # noqa: F811
    out = tmp_path / "tb"
    assert main(["train", *flags(assets, out, "GRPO", steps=2)]) == 0
    assert list((out / "logs" / "tensorboard" / "grpo").glob("events.out.tfevents.*"))
    quiet = tmp_path / "none"
    assert main(["train", *flags(assets, quiet, "GRPO", steps=2), "--report_to", "none"]) == 0
    assert not (quiet / "logs" / "tensorboard").exists()
    assert "report_to: none" in (quiet / "run.yaml").read_text()
