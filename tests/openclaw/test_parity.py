"""``openclaw/parity.py``: which model ``eval OUT --through openclaw --stage base`` serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from ark_trainer.errors import UserError
from ark_trainer.fileio import write_json


def _run(tmp_path: Path, model_path: str) -> Path:
    out = tmp_path / "run"
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text("{}")
    (out / "run.yaml").write_text(f"model_path: {model_path}\n")
    write_json(out / "plan.json", {"stages": [{"name": "rft", "steps": 2, "last": True}]})
    return out


@pytest.mark.parametrize("source", ["model.Q4_1.gguf", "ollama:qwen2.5:0.5b"])
def test_base_of_a_run_trained_from_a_gguf_or_ollama_is_its_converted_folder(tmp_path, source):
    from ark_trainer.openclaw.parity import stage_model

    gguf = tmp_path / source
    if source.endswith(".gguf"):
        gguf.write_bytes(b"GGUF")
    out = _run(tmp_path, str(gguf) if source.endswith(".gguf") else source)
    (out / "base_model").mkdir()
    (out / "base_model" / "config.json").write_text("{}")
    assert stage_model(out, "base") == ("base", out / "base_model")


def test_base_of_a_run_from_a_folder_is_that_folder_and_a_missing_one_is_one_line(tmp_path):
    from ark_trainer.openclaw.parity import stage_model

    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert stage_model(_run(tmp_path, str(folder)), "base") == ("base", folder)
    (folder / "config.json").unlink()
    with pytest.raises(UserError, match="--stage: base: no model folder at"):
        stage_model(tmp_path / "run", "base")
