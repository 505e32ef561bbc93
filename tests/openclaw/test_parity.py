"""``services/openclaw/parity.py``: which model ``eval OUT --through openclaw --stage base`` serves; a held-out prompt
in OpenClaw's recorded request, and the gap between the two evaluations.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import write_json
from ark_trainer.services.openclaw.parity import gap, openclaw_messages, table_lines
from ark_trainer.services.openclaw.shape import MARKER, load_shape


def _run(tmp_path: Path, model_path: str) -> Path:
    out = tmp_path / "run"
    (out / "model").mkdir(parents=True)
    (out / "model" / "config.json").write_text("{}")
    (out / "run.yaml").write_text(f"model_path: {model_path}\n")
    write_json(out / "plan.json", {"stages": [{"name": "rft", "steps": 2, "last": True}]})
    return out


@pytest.mark.parametrize("source", ["model.Q4_1.gguf", "ollama:qwen2.5:0.5b"])
def test_base_of_a_run_trained_from_a_gguf_or_ollama_is_its_converted_folder(tmp_path, source):
    from ark_trainer.services.openclaw.parity import stage_model

    gguf = tmp_path / source
    if source.endswith(".gguf"):
        gguf.write_bytes(b"GGUF")
    out = _run(tmp_path, str(gguf) if source.endswith(".gguf") else source)
    (out / "base_model").mkdir()
    (out / "base_model" / "config.json").write_text("{}")
    assert stage_model(out, "base") == ("base", out / "base_model")


def test_base_of_a_run_from_a_folder_is_that_folder_and_a_missing_one_is_one_line(tmp_path):
    from ark_trainer.services.openclaw.parity import stage_model

    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert stage_model(_run(tmp_path, str(folder)), "base") == ("base", folder)
    (folder / "config.json").unlink()
    with pytest.raises(UserError, match="--stage: base: no model folder at"):
        stage_model(tmp_path / "run", "base")


def test_a_held_out_prompt_in_openclaws_request():
    shape = load_shape()
    prompt = [
        {"role": "system", "content": "own"},
        {"role": "user", "content": "first"},
        {"role": "assistant", "content": "answer"},
        {"role": "user", "content": "客服：您好"},
    ]
    body = openclaw_messages(shape, prompt, "ark-x")
    roles = [m["role"] for m in body["messages"]]
    assert roles[:4] == ["system", "user", "assistant", "user"] and body["model"] == "ark-x"
    assert (
        body["messages"][0]["content"] == shape["request"]["messages"][0]["content"]
    )  # OpenClaw's, not "own"
    assert (
        body["messages"][3]["content"].startswith("[")
        and "] 客服：您好\n\nRuntime:" in body["messages"][3]["content"]
    )
    assert MARKER not in json.dumps(body, ensure_ascii=False)


def test_the_gap_and_its_table():
    bare = {"n": 4, "task_accuracy": 0.75, "pass_rate": 0.5, "reward_mean": 0.4, "compliance_rate": None}
    through = {"n": 4, "task_accuracy": 0.5, "pass_rate": 0.5, "reward_mean": 0.3, "compliance_rate": 1.0}
    g = gap(through, bare)
    assert g["task_accuracy"] == -0.25 and g["pass_rate"] == 0 and g["compliance_rate"] is None
    lines = table_lines({**through, "name": "grpo-openclaw", "bare": bare, "gap": g})
    assert lines[1].split() == ["task_accuracy", "75.0%", "50.0%", "-25.0"]
