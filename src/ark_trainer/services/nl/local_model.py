"""The current agent's model when a local server runs it: Ollama (``api: "ollama"``, or a ``baseUrl`` on port
11434) or another OpenAI-compatible server on this machine (llama.cpp's ``llama-server``, vLLM, LM Studio).

OpenClaw names the model ``<provider>/<model id>``; for an Ollama provider the id is Ollama's own name
(``qwen2.5:0.5b``), so the model is looked up in Ollama's store (``core/models/ollama.py``) and trained from
its GGUF blob (``--model_path ollama:qwen2.5:0.5b``). A model the store does not hold, or one served by a
server that does not say where its file is, gets one plain sentence saying so and what to pass instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ark_trainer.base.errors import UserError

OLLAMA_PORT = 11434
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")


@dataclass(frozen=True)
class LocalModel:
    spec: str | None  # what --model_path gets (ollama:NAME:TAG), or None when the file was not found
    says: str  # where it came from, or why it was not found (one sentence)


def _provider(config: dict, provider_id: str) -> dict[str, Any] | None:
    models = config.get("models") if isinstance(config.get("models"), dict) else {}
    providers = models.get("providers") if isinstance(models, dict) else None
    provider = providers.get(provider_id) if isinstance(providers, dict) else None
    if isinstance(provider, dict):
        return provider
    return (
        {"api": "ollama", "baseUrl": f"http://127.0.0.1:{OLLAMA_PORT}"} if provider_id == "ollama" else None
    )


def local_model(config: dict, model_ref: str) -> LocalModel | None:
    """The agent's model as a local file, or why it cannot be found; None for a hosted (remote) model."""
    provider_id, _, model_id = model_ref.partition("/")
    provider = _provider(config, provider_id)
    if provider is None or not model_id:
        return None
    base = str(provider.get("baseUrl") or "")
    url = urlparse(base)
    ollama = provider.get("api") == "ollama" or url.port == OLLAMA_PORT
    if not ollama and url.hostname not in LOCAL_HOSTS:
        return None
    from ark_trainer.core.models.ollama import PREFIX, find_model, models_dir

    server = f"Ollama at {base}" if ollama else f"a local OpenAI-compatible server at {base}"
    try:
        found = find_model(PREFIX + model_id, flag="model")
    except UserError as exc:
        why = exc.messages[0].removeprefix(f"model: {PREFIX}{model_id}: ")
        if ollama:
            return LocalModel(None, f"served by {server}, but its file is not in the Ollama store: {why}")
        return LocalModel(
            None,
            f"served by {server}, which does not say where its model file is, and the Ollama store at "
            f"{models_dir()} does not hold {model_id!r}; pass --model_path FILE.gguf or a Hugging Face folder",
        )
    spec = PREFIX + found.ref.short
    return LocalModel(
        spec, f"served by {server}; its file is {found.blob} in the Ollama store: --model_path {spec}"
    )
