"""The short KTO and RLOO runs of the stage tests: their ``train`` flags, the events and the weights they leave."""

from __future__ import annotations

from pathlib import Path

from ark_trainer.base.fileio import read_jsonl


def flags(a: dict, out: Path, strategy: str, data: Path | None = None, steps: int = 3) -> list[str]:
    return [
        "train", "--strategy", strategy, "--model_path", str(a["model"]), "--data_path", str(data or a["train"]),
        "--eval_dataset", str(a["eval"]), "--output_dir", str(out), "--max_train_steps", str(steps),
        "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "3", "--max_completion_length", "6",
        "--kto_learning_rate", "1e-2", "--rloo_learning_rate", "1e-2", "--logging_steps", "1",
        "--save_steps", "0", "--device", "cpu", "--seed", "7",
    ]  # fmt: skip


def event(out: Path, name: str) -> dict:
    return [e for e in read_jsonl(out / "events.jsonl") if e["event"] == name][-1]


def changed(before: Path, after: Path) -> bool:
    import torch
    from safetensors.torch import load_file

    a, b = load_file(str(before / "model.safetensors")), load_file(str(after / "model.safetensors"))
    return any(not torch.equal(a[k], b[k]) for k in a)
