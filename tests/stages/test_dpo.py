"""--strategy DPO and RFT+DPO (``stages/dpo/stage.py``): pairs from the data or sampled (ties and small margins
dropped and counted: ``test_preference.py``), real TRL DPOTrainer runs on a tiny model, the report's "DPO
pairs" section, and flags refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.base.fileio import read_json, read_jsonl, write_jsonl
from ark_trainer.cli import main
from tests.conftest import tiny_qc_assets


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    return tiny_qc_assets(tmp_path_factory.mktemp("dpo_assets"))


def flags(a: dict, out: Path, strategy: str, data: Path | None = None, steps: int = 4) -> list[str]:
    return [
        "train", "--strategy", strategy, "--model_path", str(a["model"]), "--data_path", str(data or a["train"]),
        "--eval_dataset", str(a["eval"]), "--output_dir", str(out), "--max_train_steps", str(steps),
        "--rft_steps", "2", "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "3",
        "--max_completion_length", "6", "--rft_min_reward", "0", "--rft_learning_rate", "1e-2",
        "--dpo_learning_rate", "1e-2", "--dpo_min_margin", "0.01", "--logging_steps", "1", "--save_steps", "2",
        "--device", "cpu", "--seed", "7",
    ]  # fmt: skip


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def changed(before: Path, after: Path) -> bool:
    import torch

    a, b = weights(before), weights(after)
    return any(not torch.equal(a[k], b[k]) for k in a)


def event(out: Path, name: str) -> dict:
    return [e for e in read_jsonl(out / "events.jsonl") if e["event"] == name][-1]


def test_dpo_builds_pairs_from_samples_and_trains(assets, tmp_path):
    out = tmp_path / "run"
    assert main([*flags(assets, out, "DPO"), "--dpo_loss_type", "sigmoid,sft"]) == 0  # TRL adds the two up
    plan = read_json(out / "plan.json")
    assert plan["strategy"] == "DPO" and [(s["name"], s["steps"]) for s in plan["stages"]] == [("dpo", 4)]
    stats = event(out, "dpo_pairs")
    assert stats["source"] == "sampled" and stats["n_prompts"] == 10 and stats["n_pairs"] > 0
    assert stats["n_pairs"] + stats["n_ties"] + stats["n_below_margin"] + stats["n_unscored"] == 10
    pairs = read_jsonl(out / "data" / "dpo_pairs.jsonl")
    assert len(pairs) == stats["n_pairs"] and all(p["chosen"] != p["rejected"] for p in pairs)
    state = read_json(out / "dpo" / "checkpoint-4" / "trainer_state.json")
    assert state["global_step"] == 4 and any("rewards/margins" in h for h in state["log_history"])
    assert changed(assets["model"], out / "model")
    assert read_json(out / "eval" / "dpo.json")["preference_alignment"] is not None
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## DPO pairs" in md and "| n_ties |" in md and "Preference alignment, DPO vs base" in md
    assert "RFT data selection" not in md and "GRPO steps" not in md  # only the plan's stages
    assert (out / "plots" / "dpo_loss.png").is_file()


def test_dpo_uses_the_data_own_pairs(assets, tmp_path):
    rows = [  # the QC label is for the reward of the evaluation (pairs alone give the QC graders nothing)
        {
            "question": f"顾客：包裹{i}丢了。",
            "label": "无",
            "chosen": "结论：合规",
            "rejected": "好的好的好的",
        }
        for i in range(8)
    ]
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, rows)
    out = tmp_path / "run"
    assert main(flags(assets, out, "DPO", data=data, steps=2)) == 0
    stats = event(out, "dpo_pairs")
    assert (stats["source"], stats["n_pairs"], stats["n_without_pair"]) == ("data", 8, 0)
    assert not any(
        e["event"] == "stage_start" and e["stage"] == "dpo_sampling" for e in read_jsonl(out / "events.jsonl")
    )
    pair = read_jsonl(out / "data" / "dpo_pairs.jsonl")[0]
    assert "结论：合规" in str(pair["chosen"]) and "好的好的好的" in str(pair["rejected"])


def test_rft_then_dpo_from_the_rft_model(assets, tmp_path):
    out = tmp_path / "run"
    assert main(flags(assets, out, "RFT+DPO", steps=4)) == 0
    plan = read_json(out / "plan.json")
    assert [(s["name"], s["steps"], s["last"]) for s in plan["stages"]] == [
        ("rft", 2, False),
        ("dpo", 2, True),
    ]
    starts = [e["stage"] for e in read_jsonl(out / "events.jsonl") if e["event"] == "stage_start"]
    assert starts.index("rft") < starts.index("dpo_sampling") < starts.index("dpo")  # fresh pairs after RFT
    assert (out / "rft" / "final" / "model.safetensors").is_file() and (out / "model").is_dir()
    assert {"base", "rft", "dpo"} <= {p.stem for p in (out / "eval").glob("*.json")}
    assert changed(out / "rft" / "final", out / "model")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--strategy", "PPO"],
            "error: --strategy: 'PPO': TRL, the training library, no longer ships PPO; use GRPO or RLOO",
        ),
        (
            ["--dpo_loss_type", "nope"],
            "error: --dpo_loss_type: unknown loss 'nope'; use one of sigmoid, hinge",
        ),
        (["--dpo_beta", "0"], "error: --dpo_beta: must be > 0, got 0.0"),
        (
            ["--dpo_loss_type", "sigmoid,sftt"],
            "error: --dpo_loss_type: unknown loss 'sftt'; use one of sigmoid",
        ),
        (["--dpo_loss_type", ","], "error: --dpo_loss_type: unknown loss ''; use one of sigmoid"),
    ],
)
def test_bad_flags_are_refused_in_one_line(assets, tmp_path, capsys, extra, message):
    out = tmp_path / "run"
    assert main([*flags(assets, out, "DPO"), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
    assert not out.exists()
