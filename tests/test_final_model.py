"""``OUT/model`` is the best stage on the dev split (``--final_model best``) or the last; never lost.

The choice is a pure function of the eval files; the move is renames of whole folders, so a kill at any
point of it leaves every stage's model on disk and the next attempt finishes it. The end-to-end test trains
two toy stages (the second spoils the weights) with a faked evaluation: no real training needed to say
which model ships.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ark_trainer.core.final_model import FinalChoice, choose, held_stage, ship, trained_dir
from ark_trainer.core.metrics import (
    COMPLIANCE_RATE,
    PASS_RATE,
    PREFERENCE_ALIGNMENT,
    REWARD_MEAN,
    TASK_ACCURACY,
    TASK_SUCCESS,
)
from ark_trainer.core.runfolder import FINAL_MODEL, RunFolder


def evaluated(accuracy: float | None, reward: float = 0.5, **extra) -> dict:
    return {"n": 60, REWARD_MEAN: reward, PASS_RATE: 0.5, TASK_ACCURACY: accuracy, **extra}


# --- the choice ---


def test_the_best_stage_ships_and_a_tie_goes_to_the_later_stage():
    evals = {"base": evaluated(0.3), "rft": evaluated(0.667), "grpo": evaluated(0.5)}
    choice = choose(evals, ["rft", "grpo"], "best")
    assert (choice.stage, choice.policy, choice.metric, choice.below_base) == (
        "rft",
        "best",
        TASK_ACCURACY,
        False,
    )
    assert "task_accuracy: 66.7% (grpo 50.0%)" in choice.reason and "OUT/grpo/final" in choice.reason
    tie = {**evals, "grpo": evaluated(0.667)}
    assert choose(tie, ["rft", "grpo"], "best").stage == "grpo"
    assert choose(evals, ["rft", "grpo"], "last").stage == "grpo"  # --final_model last


def test_the_base_model_never_ships_and_the_choice_says_every_stage_is_below_it():
    evals = {"base": evaluated(0.8), "rft": evaluated(0.6), "grpo": evaluated(0.7)}
    choice = choose(evals, ["rft", "grpo"], "best")
    assert choice.stage == "grpo" and choice.below_base
    assert "every stage is below the base model on dev (80.0%), which never ships" in choice.reason


def test_the_main_metric_is_the_first_every_stage_measured():
    agent = {
        "base": evaluated(None, **{TASK_SUCCESS: 0.0}),
        "rft": evaluated(None, 0.4, **{TASK_SUCCESS: 0.667}),
        "grpo": evaluated(None, 0.9, **{TASK_SUCCESS: 0.5}),
    }
    choice = choose(agent, ["rft", "grpo"], "best")  # an agent run: tasks solved, not the higher reward
    assert (choice.stage, choice.metric) == ("rft", TASK_SUCCESS)
    no_labels = {"rft": evaluated(None, 0.6), "grpo": evaluated(None, 0.5)}
    assert choose(no_labels, ["rft", "grpo"], "best").metric == PASS_RATE  # tied at 50%: the later
    assert choose(no_labels, ["rft", "grpo"], "best").stage == "grpo"


def test_without_an_evaluation_of_every_stage_the_last_ships():
    for evals in ({}, {"base": evaluated(0.3), "rft": evaluated(0.9)}):
        choice = choose(evals, ["rft", "grpo"], "best")
        assert (choice.stage, choice.policy, choice.metric) == ("grpo", "last", None)
    only = choose({"grpo": evaluated(0.4)}, ["grpo"], "best")
    assert only.stage == "grpo" and "the only stage" in only.reason


# --- the move, and a kill at every point of it ---


def weights(folder: Path) -> str:
    return (folder / "model.safetensors").read_text(encoding="utf-8")


def model_at(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_text(text, encoding="utf-8")
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


@pytest.fixture
def trained(tmp_path) -> RunFolder:
    """A run whose RFT model is in rft/final and whose last stage, GRPO, trained into model/."""
    folder = RunFolder(tmp_path / "out")
    model_at(folder.stage_final_dir("rft"), "rft weights")
    model_at(folder.model_dir, "grpo weights")
    return folder


BEST = FinalChoice("rft", "best", TASK_ACCURACY, "the best stage")
LAST = FinalChoice("grpo", "last", None, "the last stage")


def where(folder: RunFolder) -> dict[str, str]:
    """Which weights each stage's folder holds, as the pipeline finds them."""
    return {
        "rft": weights(trained_dir(folder, "rft", last=False)),
        "grpo": weights(trained_dir(folder, "grpo", last=True)),
    }


def test_an_earlier_stage_ships_into_model_and_the_last_one_is_kept(trained):
    ship(trained, BEST, "grpo")
    assert weights(trained.model_dir) == "rft weights" and trained.final_model()["stage"] == "rft"
    assert weights(trained.stage_final_dir("grpo")) == "grpo weights"
    assert where(trained) == {"rft": "rft weights", "grpo": "grpo weights"}
    assert held_stage(trained, "grpo") == "rft"
    ship(trained, BEST, "grpo")  # again (a resumed run): nothing moves
    assert weights(trained.model_dir) == "rft weights"
    ship(trained, LAST, "grpo")  # --final_model last on resume: the last stage's model moves back
    assert weights(trained.model_dir) == "grpo weights" and trained.final_model()["stage"] == "grpo"
    assert (
        not trained.stage_final_dir("grpo").exists()
        and weights(trained.stage_final_dir("rft")) == "rft weights"
    )
    assert not trained.incoming_model_dir.exists() and not trained.outgoing_model_dir.exists()


def test_the_last_stage_shipping_only_writes_its_record(trained):
    ship(trained, LAST, "grpo")
    assert weights(trained.model_dir) == "grpo weights" and trained.final_model()["stage"] == "grpo"
    assert not trained.stage_final_dir("grpo").exists()


class Killed(BaseException):
    """What a SIGKILL would leave: nothing after this point ran."""


# shipping RFT: copy it, move GRPO's model aside, rename the copy; back to GRPO: move RFT's copy out, GRPO's in
KILLS = [(None, BEST, step) for step in range(3)] + [(BEST, LAST, step) for step in range(2)]


@pytest.mark.parametrize(("shipped_before", "choice", "kill_at"), KILLS)
def test_a_kill_at_any_step_loses_no_model_and_the_next_attempt_finishes(
    trained, monkeypatch, kill_at, shipped_before, choice
):
    if shipped_before:  # an earlier attempt shipped RFT; this one is resumed with --final_model last
        ship(trained, shipped_before, "grpo")
    steps = {"n": 0}
    real_rename, real_copytree = Path.rename, shutil.copytree

    def step() -> None:
        if steps["n"] == kill_at:
            raise Killed
        steps["n"] += 1

    def rename(self, target):
        step()
        return real_rename(self, target)

    def copytree(src, dst, **kw):  # killed halfway through the copy: a partial folder is left
        Path(dst).mkdir(parents=True)
        (Path(dst) / "config.json").write_text("{}", encoding="utf-8")
        step()
        return real_copytree(src, dst, dirs_exist_ok=True, **kw)

    monkeypatch.setattr(Path, "rename", rename)
    monkeypatch.setattr(shutil, "copytree", copytree)
    with pytest.raises(Killed):
        ship(trained, choice, "grpo")
    monkeypatch.undo()
    assert where(trained) == {"rft": "rft weights", "grpo": "grpo weights"}  # a resume finds both
    ship(trained, choice, "grpo")  # the next attempt
    expected = "rft weights" if choice is BEST else "grpo weights"
    assert weights(trained.model_dir) == expected and trained.final_model()["stage"] == choice.stage
    assert where(trained) == {"rft": "rft weights", "grpo": "grpo weights"}
    assert not trained.incoming_model_dir.exists() and not trained.outgoing_model_dir.exists()


def test_the_record_is_written_before_the_folder_becomes_model(trained, monkeypatch):
    seen = []
    real_rename = Path.rename

    def rename(self, target):
        if Path(target) == trained.model_dir:
            seen.append(json.loads((self / FINAL_MODEL).read_text(encoding="utf-8"))["stage"])
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    ship(trained, BEST, "grpo")
    ship(trained, LAST, "grpo")
    assert seen == ["rft", "grpo"]


# --- end to end: two toy stages, the second spoils the weights; the evaluation is faked ---


class KeepStage:
    """A toy stage that "trains" by copying its input model."""

    name, label = "keep", "Keep"
    steps_flag, lr_flag = None, "grpo_learning_rate"
    plots = ()
    runs: list[str] = []

    def run(self, ctx, plan, model_in: str, final_dir: Path) -> str:
        type(self).runs.append(self.name)
        with ctx.monitor.stage(self.name, total=plan.steps):
            shutil.copytree(model_in, final_dir, dirs_exist_ok=True)
            self.change(final_dir)
        return str(final_dir)

    def change(self, folder: Path) -> None:
        pass


class SpoilStage(KeepStage):
    """A toy stage that adds 1 to every weight: a worse model, told apart by its weights."""

    name, label = "spoil", "Spoil"

    def change(self, folder: Path) -> None:
        from safetensors.torch import load_file, save_file

        tensors = load_file(folder / "model.safetensors")
        save_file(
            {k: v + 1 for k, v in tensors.items()}, folder / "model.safetensors", metadata={"format": "pt"}
        )


ACCURACY = {"base": 0.3, "keep": 0.6, "spoil": 0.4}


def fake_evaluate(model_path, name, rows, reward, rt, path, **kwargs) -> dict:
    """The eval file of ``name`` with the task accuracy of :data:`ACCURACY`, whatever the model answers."""
    from ark_trainer.base.fileio import write_json

    accuracy = ACCURACY[name]
    result = {
        "name": name, "model": model_path, "n": len(rows), REWARD_MEAN: accuracy, PASS_RATE: accuracy,
        TASK_ACCURACY: accuracy, COMPLIANCE_RATE: None, PREFERENCE_ALIGNMENT: None, "components": {}, "examples": [],
        "answers": [{"completion": "", "reward": accuracy} for _ in rows],
        "measurement": kwargs.get("measurement"),
    }  # fmt: skip
    FAKE_EVALUATED.append((name, path.parent.name))
    write_json(path, result)
    return result


FAKE_EVALUATED: list[tuple[str, str]] = []  # (model, "eval" or "dev") of every fake evaluation


@pytest.fixture
def toy_run(tmp_path, monkeypatch):
    """``train`` argv of the KEEP+SPOIL strategy on a tiny model, its stages registered for the test."""
    from ark_trainer.base import strategies
    from ark_trainer.base.fileio import write_jsonl
    from ark_trainer.base.strategies import Strategy, add_strategy
    from ark_trainer.stages import evaluate, registry
    from tests.conftest import save_tiny_qwen

    registry.stages()
    registry.register_stage(KeepStage)
    registry.register_stage(SpoilStage)
    add_strategy("KEEP+SPOIL", Strategy(("keep", "spoil"), "keeps, then spoils the model"))
    monkeypatch.setattr(evaluate, "evaluate_model", fake_evaluate)
    KeepStage.runs.clear()
    FAKE_EVALUATED.clear()
    model = save_tiny_qwen(tmp_path / "model")
    rows = [
        {"question": f"客服：您好 {i}。顾客：订单{i}不对。", "label": ["无", "辱骂"][i % 2]}
        for i in range(10)
    ]
    write_jsonl(tmp_path / "train.jsonl", rows)
    yield [
        "train", "--strategy", "KEEP+SPOIL", "--model_path", str(model), "--data_path", str(tmp_path / "train.jsonl"),
        "--max_train_steps", "3", "--max_completion_length", "4", "--eval_ratio", "0.2", "--device", "cpu",
        "--heartbeat_interval", "1",
    ]  # fmt: skip
    registry._STAGES.pop("keep")
    registry._STAGES.pop("spoil")
    strategies.STRATEGIES.pop("KEEP+SPOIL")


def test_a_worse_last_stage_does_not_ship_and_the_report_says_so(toy_run, tmp_path):
    from ark_trainer.base.fileio import read_json, read_jsonl, write_json
    from ark_trainer.cli import main

    out = tmp_path / "out"
    assert main([*toy_run, "--output_dir", str(out)]) == 0
    folder = RunFolder(out)
    kept, spoilt = folder.stage_final_dir("keep"), folder.stage_final_dir("spoil")
    assert (folder.model_dir / "model.safetensors").read_bytes() == (kept / "model.safetensors").read_bytes()
    assert (spoilt / "model.safetensors").read_bytes() != (kept / "model.safetensors").read_bytes()
    assert folder.final_model()["stage"] == "keep"
    shape = (folder.model_dir / "ark_prompt_shape.json").read_text(encoding="utf-8")
    assert shape == (spoilt / "ark_prompt_shape.json").read_text(encoding="utf-8")
    shipped = [e for e in read_jsonl(folder.events_path) if e["event"] == "final_model"]
    assert [(e["stage"], e["policy"], e["metric"]) for e in shipped] == [("keep", "best", TASK_ACCURACY)]
    report = (out / "report.md").read_text(encoding="utf-8")
    top = report[: report.index("## At a glance")]
    assert (
        "OUT/model is Keep, the best stage on the dev split (n=2) by task_accuracy: 60.0% (spoil 40.0%)"
        in top
    )
    assert "| Spoil | 40.0% |" in top and "| never ships |" in top and "| ships |" in top
    assert "final (Keep)" in report  # at a glance: the model that ships against the base
    logged = (out / "logs" / "train.log").read_text(encoding="utf-8")  # the shipped stage against the base
    assert (
        "final model: keep vs base: task accuracy 30.0% → 60.0% (no paired test: per-prompt outcomes"
        in logged
    )

    assert folder.final_model()["split"] == "dev" and folder.final_model()["test_value"] == 0.6
    assert sorted(FAKE_EVALUATED) == sorted((m, s) for m in ACCURACY for s in ("eval", "dev"))

    # a resume of the finished run trains nothing, moves nothing and measures again only an evaluation
    # measured with other settings (here: another precision); --final_model last ships the last stage
    changed = read_json(folder.dev_eval_path("keep"))
    write_json(
        folder.dev_eval_path("keep"),
        {**changed, "measurement": {**changed["measurement"], "dtype": "bfloat16"}},
    )
    FAKE_EVALUATED.clear()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    assert KeepStage.runs == ["keep", "spoil"] and folder.final_model()["stage"] == "keep"
    assert FAKE_EVALUATED == [("keep", "dev")] and read_json(folder.dev_eval_path("keep")) == changed
    assert main(["train", "--output_dir", str(out), "--resume", "True", "--final_model", "last"]) == 0
    assert KeepStage.runs == ["keep", "spoil"] and folder.final_model()["stage"] == "spoil"
    assert not spoilt.exists() and (folder.model_dir / "model.safetensors").is_file()
    assert "OUT/model is Spoil, the last stage (--final_model last)" in (out / "report.md").read_text("utf-8")


def test_final_model_last_keeps_the_last_stage(toy_run, tmp_path):
    from ark_trainer.cli import main

    out = tmp_path / "out"
    assert main([*toy_run, "--output_dir", str(out), "--final_model", "last"]) == 0
    folder = RunFolder(out)
    assert folder.final_model()["stage"] == "spoil" and not folder.stage_final_dir("spoil").exists()
    spoilt = (folder.model_dir / "model.safetensors").read_bytes()
    assert spoilt != (folder.stage_final_dir("keep") / "model.safetensors").read_bytes()


def test_a_run_killed_while_its_model_moves_resumes_without_training_again(toy_run, tmp_path, monkeypatch):
    from ark_trainer.cli import main

    out = tmp_path / "out"
    folder = RunFolder(out)
    real_rename = Path.rename

    def killed_before_the_copy_becomes_model(self, target):
        if Path(target) == folder.model_dir:  # the last stage's model is already in spoil/final
            raise Killed
        return real_rename(self, target)

    monkeypatch.setattr(Path, "rename", killed_before_the_copy_becomes_model)
    with pytest.raises(Killed):
        main([*toy_run, "--output_dir", str(out)])
    monkeypatch.setattr(Path, "rename", real_rename)
    assert not folder.model_dir.exists() and (folder.stage_final_dir("spoil") / "model.safetensors").is_file()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    assert KeepStage.runs == [
        "keep",
        "spoil",
    ]  # nothing trained again: spoil's model was found in spoil/final
    kept = folder.stage_final_dir("keep") / "model.safetensors"
    assert (folder.model_dir / "model.safetensors").read_bytes() == kept.read_bytes()
    assert folder.final_model()["stage"] == "keep" and not folder.incoming_model_dir.exists()


# --- dev decides, test is stated; evaluations measured differently are not compared ---


def measured(accuracy: float, dtype: str = "float32", split: str = "dev") -> dict:
    setting = {
        "split": split,
        "n": 60,
        "rows": "abc",
        "dtype": dtype,
        "decoding": "greedy",
        "max_new_tokens": 8,
    }
    return evaluated(accuracy, measurement=setting)


def test_the_choice_reads_dev_and_states_the_shipped_stages_test_figure():
    dev = {"base": measured(0.3), "rft": measured(0.7), "grpo": measured(0.6)}
    test = {"base": evaluated(0.3), "rft": evaluated(0.55), "grpo": evaluated(0.9)}
    choice = choose(dev, ["rft", "grpo"], "best", test)
    assert (choice.stage, choice.split, choice.n, choice.test_value, choice.n_test) == (
        "rft",
        "dev",
        60,
        0.55,
        60,
    )
    assert "the best stage on the dev split (n=60)" in choice.reason
    assert "on the test split (n=60), which no choice read, its task_accuracy is 55.0%" in choice.reason
    last = choose(dev, ["rft", "grpo"], "last", test)
    assert last.stage == "grpo" and last.test_value == 0.9


def test_evaluations_measured_differently_are_not_compared():
    dev = {"base": measured(0.3), "rft": measured(0.9, dtype="bfloat16"), "grpo": measured(0.6)}
    choice = choose(dev, ["rft", "grpo"], "best")
    assert (choice.stage, choice.policy, choice.metric) == ("grpo", "last", None)
    assert "measured differently: dtype: base float32, rft bfloat16, grpo float32" in choice.reason
    unrecorded = {**dev, "rft": evaluated(0.9)}
    assert "no measurement recorded for rft" in choose(unrecorded, ["rft", "grpo"], "best").reason
    alike = {**dev, "rft": measured(0.9)}
    assert choose(alike, ["rft", "grpo"], "best").stage == "rft"
