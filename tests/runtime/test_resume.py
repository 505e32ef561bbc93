"""Kill-and-resume equivalence: N steps straight == k steps, ``kill -9``, resume to N (RFT, GRPO and DPO)."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.fileio import read_jsonl
from ark_trainer.runtime.resume import MARKER, checkpoints, latest_complete
from tests.conftest import refused
from tests.tiny_runs import assets, child, flags, run_child, train_flags, weights  # noqa: F401 - the module fixture is reused


def final_state(stage_dir: Path) -> dict:
    ckpt = latest_complete(stage_dir)
    return json.loads((ckpt / "trainer_state.json").read_text())


def assert_same_run(straight: Path, resumed: Path, stage: str) -> None:
    import torch

    a, b = final_state(straight / stage), final_state(resumed / stage)
    assert a["global_step"] == b["global_step"] == 4
    lr_a = [h["learning_rate"] for h in a["log_history"] if "learning_rate" in h]
    lr_b = [h["learning_rate"] for h in b["log_history"] if "learning_rate" in h]
    assert lr_a == lr_b and len(lr_a) == 4
    loss_a = [h["loss"] for h in a["log_history"] if "loss" in h]
    loss_b = [h["loss"] for h in b["log_history"] if "loss" in h]
    assert loss_b == pytest.approx(loss_a, rel=1e-4, abs=1e-6)
    wa, wb = weights(straight / "model"), weights(resumed / "model")
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=1e-5, rtol=1e-4), k


@pytest.mark.slow
@pytest.mark.parametrize("strategy,stage", [("RFT+GRPO", "rft"), ("GRPO", "grpo"), ("DPO", "dpo")])
def test_kill_and_resume_equals_straight_run(assets, tmp_path, strategy, stage):  # noqa: F811
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    assert main(["train", *flags(assets, straight, strategy)]) == 0

    killed = run_child(flags(assets, resumed, strategy), fault="kill_after_step:3", stage=stage)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert [s for s, _, ok in checkpoints(resumed / stage) if ok] == [2]  # step 3 never saved
    assert not (resumed / "model").exists()

    # only the output folder and --resume: the rest comes from OUT/run.yaml
    assert main(["train", "--output_dir", str(resumed), "--resume", "True"]) == 0
    events = read_jsonl(resumed / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "resume"] == [2]
    after = events[[e["event"] for e in events].index("resume") :]
    assert [e["step"] for e in after if e["event"] == "metrics" and "loss" in e] == [3, 4]  # not from step 1
    sampled = [e for e in events if e["event"] == "stage_start" and e["stage"].endswith("_sampling")]
    assert len(sampled) == (stage != "grpo")  # RFT's candidates and DPO's pairs: sampled once, then reused
    assert_same_run(straight, resumed, stage)
    # the initial weights changed, so equality above is not the untrained model twice
    import torch

    base, final = weights(assets["model"]), weights(resumed / "model")
    assert any(not torch.equal(base[k], final[k]) for k in base)


@pytest.mark.slow
def test_kill_during_save_keeps_previous_checkpoint_and_resume_uses_it(assets, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    killed = run_child(flags(assets, out, "GRPO"), fault="kill_in_save:4", stage="grpo")
    assert killed.returncode == -9, killed.stderr[-2000:]
    found = {s: ok for s, _, ok in checkpoints(out / "grpo")}
    assert found == {2: True, 4: False}  # checkpoint-4 written but never marked complete
    assert latest_complete(out / "grpo").name == "checkpoint-2"
    assert (latest_complete(out / "grpo") / MARKER).is_file()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert [e["step"] for e in events if e["event"] == "resume"] == [2]
    assert {s: ok for s, _, ok in checkpoints(out / "grpo")} == {2: True, 4: True}
    assert (out / "model" / "model.safetensors").is_file()


@pytest.mark.slow
def test_a_kill_after_grpos_final_save_still_evaluates_grpo_on_resume(assets, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    args = ["train", *train_flags(assets, out, steps=2, eval_auto=True, eval_dataset=assets["eval"])]
    proc = child(
        args, fault="kill_after_stage:2", stage="grpo", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    assert (out / "model" / "model.safetensors").is_file() and not (out / "eval" / "grpo.json").exists()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert [e["stage"] for e in events if e["event"] == "stage_end" and e["stage"] == "eval_grpo"] == [
        "eval_grpo"
    ]
    assert (out / "eval" / "grpo.json").is_file()
    assert "Final model (GRPO)" in (out / "report.md").read_text()


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('ARK_EVIL_MARK', '/tmp/ark-evil-mark')}",))


@pytest.mark.slow
def test_a_poisoned_checkpoint_is_refused_in_one_line_on_resume(assets, tmp_path, capsys, monkeypatch):  # noqa: F811
    out = tmp_path / "run"
    proc = child(["train", *train_flags(assets, out)], fault="kill_after_step:3", stage="grpo",
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    ckpt = out / "grpo" / "checkpoint-2"
    mark = tmp_path / "pwned"
    monkeypatch.setenv("ARK_EVIL_MARK", str(mark))
    for name, payload in (("rng_state.pth", pickle.dumps(_Evil())), ("optimizer.pt", b"\x00garbage" * 10)):
        original = (ckpt / name).read_bytes()
        (ckpt / name).write_bytes(payload)
        lines = refused(capsys, ["train", "--output_dir", str(out), "--resume", "True"])
        assert len(lines) == 1 and str(ckpt / name) in lines[0] and "delete the folder" in lines[0], lines
        assert "weights_only=False" not in lines[0] and not mark.exists()
        (ckpt / name).write_bytes(original)
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
