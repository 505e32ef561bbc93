"""Every input of a ``train`` run checked in one pass (``data/inputs.py``): flags, model and data problems reported
together, before anything is written; a model that needs its own Python code is refused.
"""

from __future__ import annotations

import json

from tests.conftest import refused, save_tiny_qwen


def test_flags_model_and_data_problems_are_reported_together(assets, tmp_path, capsys):
    bad_data = tmp_path / "bad.jsonl"
    bad_data.write_text('{"question": "ok"}\nnot json\n', encoding="utf-8")
    argv = [
        "train", "--model_path", str(tmp_path / "no_model"), "--data_path", str(bad_data),
        "--output_dir", str(tmp_path / "run"), "--max_train_steps", "1e999", "--rm_weight", "-5",
    ]  # fmt: skip
    lines = refused(capsys, argv)
    text = "\n".join(lines)
    assert "--max_train_steps" in text and "--rm_weight" in text
    assert "--model_path: no such folder" in text
    assert f"{bad_data}:2" in text
    assert not (tmp_path / "run").exists()


def test_paths_from_a_config_file_are_checked_with_its_bad_values(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"model_path: {tmp_path / 'gone'}\ndata_path: {tmp_path / 'gone.jsonl'}\nbeta: -1\n")
    text = "\n".join(refused(capsys, ["train", "--config", str(cfg), "--output_dir", str(tmp_path / "r")]))
    assert "--beta: must be ≥ 0" in text and "--model_path: no such folder" in text and "--data_path:" in text


def test_model_and_data_problems_are_reported_together_with_valid_flags(assets, tmp_path, capsys):
    bad_data = tmp_path / "bad.jsonl"
    bad_data.write_text("not json\n", encoding="utf-8")
    argv = [
        "train",
        "--model_path",
        str(tmp_path),
        "--data_path",
        str(bad_data),
        "--output_dir",
        str(tmp_path / "r"),
    ]
    text = "\n".join(refused(capsys, argv))
    assert "--model_path:" in text and f"{bad_data}:1" in text


def test_a_model_that_needs_remote_code_is_refused_before_anything_is_written(tmp_path, capsys, assets):
    model = save_tiny_qwen(tmp_path / "remote")
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (model / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    out = tmp_path / "run"
    argv = [
        "train",
        "--model_path",
        str(model),
        "--data_path",
        str(assets["train"]),
        "--output_dir",
        str(out),
    ]
    lines = refused(capsys, argv)
    assert (
        len(lines) == 1 and "needs its own Python code" in lines[0] and "--trust_remote_code True" in lines[0]
    )
    assert not out.exists()
