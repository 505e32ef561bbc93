"""The current agent's model on a local server (``services/nl/local_model.py``), through plan/run: Ollama's store, another
local server, a hosted model. (A ``.gguf`` or ``ollama:NAME`` named in the request: ``test_paths.py``.)

OpenClaw's config is written by hand (as ``openclaw config patch`` would leave it); the Ollama store is
built by the test (tests/model_files.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.model_files import ollama_store, tiny_gguf

REQUEST = "对当前客服质检Agent执行RFT+GRPO训练，优化合规性与用户满意度"


@pytest.fixture(scope="module")
def gguf(tmp_path_factory) -> Path:
    return tiny_gguf(tmp_path_factory.mktemp("nl"), "qwen2")[1]


def _config(primary: str, providers: dict) -> None:
    path = Path(os.environ["OPENCLAW_STATE_DIR"]) / "openclaw.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {"models": {"providers": providers}, "agents": {"defaults": {"model": {"primary": primary}}}}
        )
    )


OLLAMA = {"ollama": {"baseUrl": "http://127.0.0.1:11434", "api": "ollama", "models": [{"id": "tiny:latest"}]}}


def test_an_agent_on_ollama_trains_the_model_file_from_ollamas_store(gguf, tmp_path, monkeypatch):
    from ark_trainer.services.nl.plan import plan_request

    store = ollama_store(tmp_path / "store", gguf)
    monkeypatch.setenv("OLLAMA_MODELS", str(store))
    _config("ollama/tiny:latest", OLLAMA)
    plan = plan_request(REQUEST, {"output_dir": str(tmp_path / "run")})
    assert plan.cfg.model_path == "ollama:tiny:latest" and plan.missing == []
    said = "\n".join(plan.assumptions)
    assert "served by Ollama at http://127.0.0.1:11434" in said and "sha256-" in said


def test_a_port_11434_provider_is_ollama_and_a_missing_model_is_said_plainly(gguf, tmp_path, monkeypatch):
    from ark_trainer.services.nl.plan import plan_request

    monkeypatch.setenv("OLLAMA_MODELS", str(ollama_store(tmp_path / "store", gguf)))
    _config(
        "local/qwen2.5:0.5b", {"local": {"baseUrl": "http://localhost:11434/v1", "api": "openai-completions"}}
    )
    plan = plan_request(REQUEST, {"output_dir": str(tmp_path / "run")})
    assert len(plan.missing) == 1
    line = plan.missing[0]
    assert "served by Ollama at http://localhost:11434/v1, but its file is not in the Ollama store" in line
    assert "ollama pull qwen2.5:0.5b" in line


def test_another_local_server_says_where_it_looked(tmp_path, monkeypatch):
    from ark_trainer.services.nl.plan import plan_request

    monkeypatch.setenv("OLLAMA_MODELS", str(tmp_path / "none"))
    _config(
        "llamacpp/smol", {"llamacpp": {"baseUrl": "http://127.0.0.1:8080/v1", "api": "openai-completions"}}
    )
    line = plan_request(REQUEST, {"output_dir": str(tmp_path / "run")}).missing[0]
    assert "a local OpenAI-compatible server at http://127.0.0.1:8080/v1" in line
    assert "pass --model_path FILE.gguf" in line


def test_a_hosted_model_is_not_looked_for_locally(tmp_path):
    from ark_trainer.services.nl.plan import plan_request

    _config(
        "openai/gpt-5.1", {"openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-completions"}}
    )
    line = plan_request(REQUEST, {"output_dir": str(tmp_path / "run")}).missing[0]
    assert "not a model ark-trainer deployed" in line and "Ollama" not in line
