"""Controls: a GRPO stage that cannot change the model reports no gain on the test split.

At a learning rate far below what the fp32 weights can register (1e-30: the flag refuses 0), every step's
policy is the starting model, so any test gain the run reported would be an artefact of how it measures
and chooses. The run goes through ``train`` with the best-step search on: it must ship a model whose test
evaluation equals the base model's answer for answer, and the diagnosis must say "no improvement".
"""

from __future__ import annotations

import json

import pytest

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


# Held-out prompts, divided by prompt hash into test (the village, the bridge, the garden) and dev (the other
# five). SmolLM2's greedy answer starts with "The" on the village, the weather, the river and the city ("A
# bridge is a ..." on the others; the converted GGUF, 4 tokens), so the test pass rate is 1 of 3 and dev's 3
# of 5: a gain or a loss would show.
HELD_OUT = [
    "Describe a bridge.", "Describe a village.", "What is the weather like?", "Describe a boat.",
    "What is the river like?", "What is the city like?", "Describe a garden.", "Describe a dog.",
]  # fmt: skip


@pytest.mark.slow
def test_smollm2_at_a_learning_rate_of_nearly_0_reports_no_test_gain(tmp_path, smollm2_converted):
    """The lr-0 control on the real model: SmolLM2-135M-Instruct's Q4_1 GGUF, two GRPO steps at 1e-30 (full
    fine-tuning in fp32: no weight can register the update) with the best-step search on dev, 4 dev and 4 test
    prompts. The pipeline converts the GGUF, trains, saves, reloads and evaluates as in a real run; the
    reported test change of the final model over the base must have an interval containing 0 and the
    diagnosis must say "no improvement". The GGUF's conversion is the session's (``smollm2_converted``); the
    run took 12.5 minutes on the shared 2-core machine at a load average of 6-16 with two torch threads, less
    with one (``OMP_NUM_THREADS=1``, as the suite runs)."""
    from ark_trainer.cli import main
    from ark_trainer.core.stats import compare_evals
    from tests.conftest import converted_base
    from tests.model_files import smollm2_gguf
    from tests.stages.test_grpo import PROMPTS, REWARDS

    gguf = smollm2_gguf()
    (tmp_path / "train.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in HELD_OUT))
    (tmp_path / "rewards.yaml").write_text(REWARDS)
    out = converted_base(smollm2_converted, tmp_path / "OUT")
    argv = [
        "train", "--strategy", "GRPO", "--model_path", str(gguf), "--output_dir", str(out),
        "--data_path", str(tmp_path / "train.jsonl"), "--eval_dataset", str(tmp_path / "eval.jsonl"),
        "--reward_config", str(tmp_path / "rewards.yaml"), "--device", "cpu", "--seed", "0",
        "--max_train_steps", "2", "--batch_size", "4", "--num_generations", "2", "--grpo_prompts_per_step", "2",
        "--max_completion_length", "4", "--grpo_learning_rate", "1e-30", "--lora_r", "0", "--beta", "0",
        "--mixed_precision", "no", "--grpo_eval_steps", "1", "--save_steps", "100", "--logging_steps", "1",
    ]  # fmt: skip
    assert main(argv) == 0
    folder = RunFolder(out)
    base, final_name = folder.eval("base"), folder.final_name(["base", "grpo"])
    final = folder.eval(final_name or "grpo")
    metric = "pass_rate"  # the regex grader's: what the run is judged on (no labels, no reference)
    assert base["measurement"]["split"] == "test" and 0 < base[metric] < 1, base[metric]  # room both ways
    assert [x["completion"] for x in final["answers"]] == [x["completion"] for x in base["answers"]]
    found = compare_evals(base, final, metric)
    assert found is not None and found.n == base["n"] >= 2
    assert found.low <= 0 <= found.high and not found.significant, found.text()
    findings = {f["code"]: f for f in read_json(out / "diagnosis.json")["findings"]}
    assert "no_improvement" in findings, findings
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "Splits: test n = " in report and "dev n = " in report
