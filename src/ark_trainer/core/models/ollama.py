"""Ollama's local model store, read without Ollama: ``ollama:NAME[:TAG]`` → the model's GGUF blob.

The layout (documented in docs/models.md)::

    $OLLAMA_MODELS (default ~/.ollama/models)/
      manifests/<registry>/<namespace>/<name>/<tag>   JSON: {"layers": [{"mediaType", "digest", "size"}, ...]}
      blobs/sha256-<hex>                              the layers' contents, named by their digest

The layer of media type ``application/vnd.ollama.image.model`` is the GGUF file itself; ``…image.template``
(a Go template), ``…image.system`` and ``…image.params`` (JSON: stop tokens, temperature, …) are read
when present. ``ollama:qwen2.5:0.5b`` is ``registry.ollama.ai/library/qwen2.5/0.5b``; ``ollama:me/bot``
is namespace ``me``, tag ``latest``; ``ollama:hf.co/user/repo:Q8_0`` names its registry. Every problem
(no store, no manifest, a manifest without a model layer, a missing blob, a blob whose checksum is not its
name) is one line naming the path and the fix. Every layer's digest must be ``sha256:<64 hex>``, so its
blob is a file directly inside ``blobs/`` (a digest that is a path would copy any file the user can read into
the run folder and the Modelfile); a text layer is read within :data:`MAX_TEXT_LAYER_BYTES` and must hash
to its digest.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_bounded, read_text_bounded

PREFIX = "ollama:"
DEFAULT_REGISTRY, DEFAULT_NAMESPACE, DEFAULT_TAG = "registry.ollama.ai", "library", "latest"
MEDIA = "application/vnd.ollama.image."
MODEL_MEDIA = MEDIA + "model"
TEXT_LAYERS = ("template", "system", "params", "license")
MAX_TEXT_LAYER_BYTES = 1_000_000  # a chat template, system prompt, parameters or licence: a few kB each


@dataclass(frozen=True)
class OllamaRef:
    registry: str
    namespace: str
    name: str
    tag: str

    @property
    def short(self) -> str:
        """How ``ollama list`` shows it: ``qwen2.5:0.5b``, ``me/bot:latest``."""
        prefix = "" if self.registry == DEFAULT_REGISTRY else f"{self.registry}/"
        ns = "" if self.namespace == DEFAULT_NAMESPACE and not prefix else f"{self.namespace}/"
        return f"{prefix}{ns}{self.name}:{self.tag}"

    def manifest(self, store: Path) -> Path:
        return store / "manifests" / self.registry / self.namespace / self.name / self.tag


@dataclass(frozen=True)
class OllamaModel:
    """A model found in the store: its GGUF blob and the text layers that came with it."""

    ref: OllamaRef
    store: Path
    manifest: Path
    blob: Path
    digest: str  # hex, from the manifest (the blob's name)
    layers: dict[str, str] = field(default_factory=dict)  # "template" / "system" / "params" / "license": text

    @property
    def params(self) -> dict[str, Any]:
        try:
            data = json.loads(self.layers.get("params") or "{}")
        except (ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}


def models_dir() -> Path:
    """``$OLLAMA_MODELS``, else ``~/.ollama/models`` (Ollama's own default)."""
    env = os.environ.get("OLLAMA_MODELS")
    return Path(env).expanduser() if env else Path.home() / ".ollama" / "models"


def parse_ref(text: str, flag: str = "--model_path") -> OllamaRef:
    """``[registry/][namespace/]name[:tag]`` (``ollama:`` prefix optional) as an :class:`OllamaRef`."""
    body = text[len(PREFIX) :] if text.startswith(PREFIX) else text
    name_part, _, tag = body.rpartition(":") if ":" in body.split("/")[-1] else (body, "", "")
    parts = [p for p in name_part.split("/")]
    if not body or any(not p or p in (".", "..") for p in parts) or len(parts) > 3 or "/" in tag:
        raise UserError(
            f"{flag}: {text!r} is not an Ollama model name; write ollama:NAME[:TAG] (e.g. ollama:qwen2.5:0.5b)"
        )
    registry = parts[0] if len(parts) == 3 else DEFAULT_REGISTRY
    namespace = parts[-2] if len(parts) >= 2 else DEFAULT_NAMESPACE
    return OllamaRef(registry, namespace, parts[-1], tag or DEFAULT_TAG)


def find_model(text: str, flag: str = "--model_path", store: Path | None = None) -> OllamaModel:
    """The model ``text`` names in the store, with its blob checked to exist (its checksum: :func:`verify`)."""
    ref = parse_ref(text, flag)
    store = store or models_dir()
    where = "set OLLAMA_MODELS to the folder holding manifests/ and blobs/"
    if not (store / "manifests").is_dir():
        raise UserError(f"{flag}: {text}: no Ollama model store at {store} (no manifests/ folder); {where}")
    path = ref.manifest(store)
    if not path.is_file():
        known = ", ".join(list_models(store)[:8]) or "none"
        raise UserError(
            f"{flag}: {text}: no manifest {path}; run `ollama pull {ref.short}` or pick one of: {known}"
        )
    layers = _layers(path, flag, text)
    model = [layer for layer in layers if layer.get("mediaType") == MODEL_MEDIA]
    if not model:
        raise UserError(
            f"{flag}: {text}: manifest {path} has no model layer ({MODEL_MEDIA}); "
            f"run `ollama pull {ref.short}` again"
        )
    digests = [_digest(layer, path, flag, text) for layer in layers]  # every layer's, not only the model's
    digest = _digest(model[0], path, flag, text)
    blob = _blob(store, digest, path, flag, text)
    if not blob.is_file():
        raise UserError(f"{flag}: {text}: model blob {blob} is missing; run `ollama pull {ref.short}` again")
    texts = {}
    for layer, layer_digest in zip(layers, digests, strict=True):
        kind = str(layer.get("mediaType", "")).removeprefix(MEDIA)
        text_blob = _blob(store, layer_digest, path, flag, text)
        if kind in TEXT_LAYERS and text_blob.exists():  # a FIFO or device: refused as it is read
            texts[kind] = _text_layer(text_blob, layer_digest, kind, flag, text)
    return OllamaModel(ref, store, path, blob, digest, texts)


def _blob(store: Path, digest: str, manifest: Path, flag: str, text: str) -> Path:
    """``blobs/sha256-<digest>``, which must stay inside ``blobs/`` once links are followed."""
    blobs = store / "blobs"
    blob = blobs / f"sha256-{digest}"
    if blob.exists() and blob.resolve().parent != blobs.resolve():
        raise UserError(
            f"{flag}: {text}: manifest {manifest}: blob {blob} links outside {blobs}; "
            "run `ollama pull` for it again"
        )
    return blob


def _text_layer(blob: Path, digest: str, kind: str, flag: str, text: str) -> str:
    """A text layer's content, within MAX_TEXT_LAYER_BYTES and hashing to its digest."""
    try:
        data = read_bounded(blob, MAX_TEXT_LAYER_BYTES, f"an Ollama {kind} layer")
    except OSError as exc:
        raise UserError(
            f"{flag}: {text}: {kind} layer {blob}: cannot read it ({exc.strerror or exc})"
        ) from None
    except UserError as exc:
        raise UserError(f"{flag}: {text}: {kind} layer {exc}; run `ollama pull` for it again") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise UserError(
            f"{flag}: {text}: {kind} layer {blob} does not hash to its name (damaged, or not Ollama's); "
            "run `ollama pull` for it again"
        )
    return data.decode("utf-8", "replace")


def verify(model: OllamaModel, sha256: str, flag: str = "--model_path") -> None:
    """The blob's checksum must be the digest it is named by (a damaged or half-copied blob is refused)."""
    if sha256 != model.digest:
        raise UserError(
            f"{flag}: {PREFIX}{model.ref.short}: blob {model.blob} has sha256 {sha256[:12]}…, not the "
            f"{model.digest[:12]}… its manifest names; run `ollama pull {model.ref.short}` again"
        )


MAX_MANIFEST_BYTES = 1_000_000  # a manifest names a few layers


def _layers(path: Path, flag: str, text: str) -> list[dict]:
    try:
        data = json.loads(read_text_bounded(path, MAX_MANIFEST_BYTES, "a manifest"))
    except RecursionError:  # thousands of nested brackets
        raise UserError(
            f"{flag}: {text}: manifest {path} is not valid JSON (nested too deeply); run `ollama pull` for it again"
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{flag}: {text}: manifest {path} is not valid JSON ({exc}); run `ollama pull` for it again"
        ) from None
    layers = data.get("layers") if isinstance(data, dict) else None
    if not isinstance(layers, list):
        raise UserError(f"{flag}: {text}: manifest {path} has no layers list; run `ollama pull` for it again")
    return [layer for layer in layers if isinstance(layer, dict)]


def _digest(layer: dict, path: Path, flag: str, text: str) -> str:
    digest = str(layer.get("digest", ""))
    algo, _, hexpart = digest.partition(":")
    if algo != "sha256" or len(hexpart) != 64 or any(c not in "0123456789abcdef" for c in hexpart):
        kind = str(layer.get("mediaType", "")).removeprefix(MEDIA) or "a"
        raise UserError(
            f"{flag}: {text}: manifest {path}: {kind} layer digest {digest[:80]!r} is not sha256:<64 hex>; "
            "run `ollama pull` for it again"
        )
    return hexpart


def list_models(store: Path | None = None) -> list[str]:
    """Every model of the store, as ``ollama list`` names them."""
    root = (store or models_dir()) / "manifests"
    if not root.is_dir():
        return []
    found = []
    for tag in sorted(root.glob("*/*/*/*")):
        if tag.is_file():
            registry, namespace, name = tag.parts[-4:-1]
            found.append(OllamaRef(registry, namespace, name, tag.name).short)
    return found
