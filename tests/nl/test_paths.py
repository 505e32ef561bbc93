"""Paths in a request (``services/nl/paths.py``): a ``.gguf`` file or an ``ollama:NAME`` is the model."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("request_text", "model"),
    [
        ("用 data/qc.jsonl 训练 ollama:qwen2.5:0.5b，输出到 runs/x", "ollama:qwen2.5:0.5b"),
        ("train ./models/smol.Q4_1.gguf on data/qc.jsonl with RFT+GRPO", "./models/smol.Q4_1.gguf"),
        ("RFT+GRPO on data/qc.jsonl, model smol.gguf", "smol.gguf"),
    ],
)
def test_a_request_names_a_gguf_file_or_an_ollama_model(request_text, model):
    from ark_trainer.services.nl.plan import plan_request

    plan = plan_request(request_text, {})
    assert plan.cfg.model_path == model and plan.cfg.data_path == "data/qc.jsonl"
