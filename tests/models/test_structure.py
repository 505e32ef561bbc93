"""A model folder checked the way transformers will use it (``core/models/structure.py``): an adapter-only folder
names what it lacks, and transformers' own warnings add no lines to the one-line refusal.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ark_trainer.cli import main
from tests.models.folder_edits import edit_config


def _adapter_only(m: Path) -> None:
    (m / "model.safetensors").rename(m / "adapter_model.safetensors")


def test_transformers_warnings_do_not_add_lines(assets, tmp_path):
    from tests.conftest import run_cli

    model = tmp_path / "model"
    shutil.copytree(assets["model"], model)
    edit_config(rope_scaling={"type": "bogus", "factor": 2.0})(model)
    result = run_cli("train", "--model_path", str(model), "--data_path", str(assets["train"]),
                     "--output_dir", str(tmp_path / "out"), cwd=tmp_path)  # fmt: skip
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "out").exists()


def test_an_adapter_folder_names_what_it_lacks(assets, tmp_path, capsys):
    model = tmp_path / "model"
    shutil.copytree(assets["model"], model)
    _adapter_only(model)
    argv = ["train", "--model_path", str(model), "--data_path", str(assets["train"])]
    assert main([*argv, "--output_dir", str(tmp_path / "out"), "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"error: --model_path: {str(model)!r} has no model.safetensors (nor model.safetensors.index.json naming "
        "its shards); a LoRA adapter folder needs its base model merged in: save the merged model with save_pretrained"
    ]
    assert not (tmp_path / "out").exists()
