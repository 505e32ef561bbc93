"""Control: GRPO on a reward that carries no signal (the QC reward shuffled across each batch's completions)
reports no significant test gain over its start, while the same GRPO on the real reward does.

Apart from ``test_grpo_controls.py`` (the learning-rate-0 controls): the demo's RFT model this file trains
once and two GRPO runs from it are the longest file of the suite, which a pytest-xdist worker runs while the
other takes the rest.
"""

from __future__ import annotations

import pytest

from ark_trainer.base.fileio import read_jsonl
from ark_trainer.core.metrics import TASK_ACCURACY
from ark_trainer.core.runfolder import RunFolder

GRPO_STEPS = 300  # the demo preset's GRPO stage (450 steps, 150 of them RFT), from the demo's RFT model


@pytest.fixture(scope="module")
def demo_rft(tmp_path_factory) -> dict:
    """The toy QC demo's RFT stage: ``train --config presets/demo.yaml`` on its data (seed 0) and its shipped base
    model, stopped after its 150 RFT steps (``--max_train_steps 150``: GRPO gets none and is skipped); the
    last stage that trains, RFT writes its model to OUT/model."""
    from ark_trainer.app.demo.data import write_demo_data
    from ark_trainer.app.demo.run import demo_config_path, shipped_base_model
    from ark_trainer.cli import main

    root = tmp_path_factory.mktemp("demo_rft")
    base = shipped_base_model()
    assert base is not None, "the toy base model shipped with the package is missing"
    train, held_out = write_demo_data(root / "data", seed=0)
    out = root / "rft"
    argv = [
        "train", "--config", str(demo_config_path()), "--max_train_steps", "150", "--rft_steps", "150",
        "--model_path", str(base), "--data_path", str(train), "--eval_dataset", str(held_out),
        "--output_dir", str(out), "--seed", "0",
    ]  # fmt: skip
    assert main(argv) == 0
    return {"model": out / "model", "train": train, "eval": held_out, "root": root}


def grpo_from(rft: dict, name: str, *reward: str):
    """``GRPO_STEPS`` of the demo preset's GRPO from the RFT model with the ``reward`` flags; returns the
    paired test of its test-split task accuracy against its start's (the RFT model, ``eval/base.json``)."""
    from ark_trainer.app.demo.run import demo_config_path
    from ark_trainer.cli import main
    from ark_trainer.core.stats import compare_evals

    out = rft["root"] / name
    argv = [
        "train", "--config", str(demo_config_path()), "--strategy", "GRPO", "--max_train_steps", str(GRPO_STEPS),
        "--model_path", str(rft["model"]), "--data_path", str(rft["train"]), "--eval_dataset", str(rft["eval"]),
        "--output_dir", str(out), "--seed", "0", "--grpo_eval_steps", "0", *reward,
    ]  # fmt: skip
    assert main(argv) == 0
    folder = RunFolder(out)
    start, grpo = folder.eval("base"), folder.eval("grpo")
    assert grpo["measurement"]["split"] == "test" and grpo["n"] == start["n"] > 100
    moved = [x["completion"] for x in grpo["answers"]] != [x["completion"] for x in start["answers"]]
    assert moved  # the stage changed the model: not a control by standing still
    found = compare_evals(start, grpo, TASK_ACCURACY)
    assert found is not None and found.n == start["n"]
    print(found.text(f"GRPO ({name}) vs its start, the RFT model", values=True))
    return found, folder


@pytest.mark.slow
def test_grpo_on_a_shuffled_reward_reports_no_significant_test_gain(demo_rft):
    """Control: GRPO scored by the QC reward shuffled across each batch's completions (``shuffled_reward.py``:
    the same values, no information about which answer earned them), plugged in as a user's
    ``--reward_config`` rule and chosen for GRPO by ``--grpo_reward_weights``, shows no significant test gain
    over its start, the demo's RFT model: the paired test (exact McNemar, ``core/stats.py``) finds no gain (its
    one-sided p for a rise ≥ 0.05; a fall may be significant). The same GRPO from the same RFT model on the
    real reward (the preset's QC composite, the demo's own GRPO stage) runs beside it and must show a
    significant gain, so the control fails where the reward carries signal.

    Measured on the shared 2-core AMD EPYC (bench/results/grpo_controls.md; the RFT model from the demo's RFT
    stage, test 47.7% as the demo's): real reward 47.7% → 57.6%, +9.9 pts [+3.2, +16.4], n = 151, p = 0.0059
    (the demo's GRPO figure to the answer); shuffled 47.7% → 0.0%, −47.7 pts [−55.6, −39.5], p < 0.001 (300
    steps of noise at 5e-4 wreck the toy: answers grow longer and lose the format), so "p ≥ 0.05 or an
    interval containing 0" would not hold: no gain, but a significant fall. About 10 minutes there
    with one torch thread (GRPO 0.8-1.7 s a step); less on a quiet machine."""
    from tests.stages.shuffled_reward import GRPO_WEIGHTS, REWARDS

    rewards = demo_rft["root"] / "shuffled.yaml"
    rewards.write_text(REWARDS)
    shuffled, folder = grpo_from(
        demo_rft, "shuffled", "--reward_config", str(rewards), "--grpo_reward_weights", GRPO_WEIGHTS
    )
    logged = [
        e for e in read_jsonl(folder.events_path) if e["event"] == "metrics" and e.get("stage") == "grpo"
    ]
    assert logged and all("rewards/shuffled_qc/mean" in e for e in logged if "reward" in e)  # trained on it
    assert not shuffled.rose and shuffled.p_rise >= 0.05, shuffled.text()
    real, _ = grpo_from(demo_rft, "real")
    assert real.rose and real.low > 0, real.text()  # the same test passes a reward that carries signal
