"""Controls: a GRPO stage that cannot change the model reports no gain on the test split.

At a learning rate far below what the fp32 weights can register (1e-30: the flag refuses 0), every step's
policy is the starting model, so any test gain the run reported would be an artefact of how it measures
and chooses. The run goes through ``train`` with the best-step search on: it must ship a model whose test
evaluation equals the base model's answer for answer, and the diagnosis must say "no improvement".
"""

from __future__ import annotations

from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.core.metrics import TASK_ACCURACY
from ark_trainer.core.runfolder import RunFolder


def test_a_grpo_stage_that_cannot_learn_reports_no_test_gain(tmp_path):
    from ark_trainer.cli import main
    from tests.conftest import tiny_qc_assets

    a = tiny_qc_assets(tmp_path)
    out = tmp_path / "run"
    args = [
        "train", "--strategy", "GRPO", "--model_path", str(a["model"]), "--data_path", str(a["train"]),
        "--eval_ratio", "0.5", "--output_dir", str(out), "--max_train_steps", "2", "--batch_size", "4",
        "--num_generations", "2", "--max_completion_length", "6", "--device", "cpu", "--save_steps", "0",
        "--seed", "7", "--grpo_eval_steps", "1", "--grpo_learning_rate", "1e-30",
    ]  # fmt: skip
    assert main(args) == 0
    folder = RunFolder(out)
    base, grpo = folder.eval("base"), folder.eval("grpo")
    assert base["measurement"]["split"] == "test" and grpo["measurement"] == base["measurement"]
    assert [x["completion"] for x in grpo["answers"]] == [x["completion"] for x in base["answers"]]
    assert grpo[TASK_ACCURACY] == base[TASK_ACCURACY]  # a test gain of exactly 0
    dev_steps = [e["value"] for e in read_jsonl(folder.events_path) if e["event"] == "grpo_eval"]
    assert len(dev_steps) == 3 and len(set(dev_steps)) == 1  # steps 0, 1, 2 measured alike, all equal
    assert folder.dev_eval("grpo")["measurement"]["split"] == "dev"
    assert (
        len(read_jsonl(folder.test_rows_path)) == base["n"] == len(read_jsonl(folder.data_dir / "eval.jsonl"))
    )
    assert len(read_jsonl(folder.dev_rows_path)) == folder.dev_eval("grpo")["n"]
    findings = {f["code"] for f in read_json(out / "diagnosis.json")["findings"]}
    assert "no_improvement" in findings
    stats = folder.data_stats()
    assert stats["splits"]["dev"] >= 1 and stats["splits"]["test"] >= 1
    assert stats["splits"]["train"] + stats["splits"]["dev"] + stats["splits"]["test"] == 12
    assert stats["splits"]["test_mde_points"] > 50  # a handful of test prompts: only a huge difference shows
