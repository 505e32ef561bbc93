"""The model a user names, resolved to a Hugging Face folder: an HF folder, a ``.gguf`` file or ``ollama:NAME[:TAG]``.

Interface (everything that takes ``--model_path`` goes through it)::

    from ark_trainer.core.models.source import check_model, convert, resolve_model

    src = check_model("SmolLM2.Q4_1.gguf", flag="--model_path")   # checks only: nothing is written
    model = resolve_model("ollama:qwen2.5:0.5b", convert_dir=out / "base_model")
    model.path      # the HF folder to load (AutoModelForCausalLM / AutoTokenizer.from_pretrained)
    model.kind      # "hf" | "gguf" | "ollama"
    model.source    # what the user gave, as given
    model.file      # the GGUF file read (gguf, ollama), else None
    model.sha256    # that file's checksum (gguf, ollama), else None
    model.name      # the GGUF's general.name, or the Ollama model's name:tag
    model.architecture, model.quantization   # "llama" / "qwen2", "Q4_1" (gguf, ollama)
    model.to_json() # the ``base_model`` entry of plan.json

    # check with everything else first, write later (what ``planning.prepare`` does):
    src = check_model(spec, flag="--model_path"); ...; model = convert(src, out / "base_model")

- An HF folder passes through unchanged (``check_policy_dir``: config.json, safetensors, tokenizer).
- A GGUF (a path ending ``.gguf``, or any file that starts with the GGUF magic) or an Ollama model
  (``core/models/ollama.py``) is checked first, cheaply (``core/models/gguf.py: inspect_gguf``: header, metadata,
  tensor table), then converted once into ``convert_dir``: the run's ``OUT/base_model/``, or without one a
  per-user cache (``~/.cache/ark-trainer/models/<name>-<sha256[:12]>``). A folder whose ``ark_source.json`` holds
  the same checksum is reused as it is.
- Every problem is a one-line :class:`~ark_trainer.base.errors.UserError` (exit 2) raised by
  :func:`check_model`, before anything is written.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.models.ollama import PREFIX as OLLAMA_PREFIX

KINDS = ("hf", "gguf", "ollama")


@dataclass(frozen=True)
class ResolvedModel:
    """A model the user named; ``path`` is the HF folder to load once :func:`resolve_model` converted it."""

    path: Path
    kind: str
    source: str
    file: Path | None = None
    sha256: str | None = None
    name: str | None = None
    architecture: str | None = None
    quantization: str | None = None
    pre_tokenizer: str | None = None  # tokenizer.ggml.pre of the source GGUF (export writes it back)
    template: str | None = None  # the Ollama model's own prompt template (a Go template), when it has one
    converted: bool = False  # this call converted it (False: passed through, or an earlier conversion reused)

    def to_json(self) -> dict[str, Any]:
        """``plan.json``'s ``base_model``: source, kind, checksum, file, folder, architecture, quantization."""
        data = {k: (str(v) if isinstance(v, Path) else v) for k, v in asdict(self).items()}
        data.pop("template", None)
        return {k: v for k, v in data.items() if v is not None}


def model_kind(spec: str) -> str:
    """``ollama`` for ``ollama:…``, ``gguf`` for a ``.gguf`` path or a file with the GGUF magic, else ``hf``."""
    if spec.startswith(OLLAMA_PREFIX):
        return "ollama"
    path = Path(spec).expanduser()
    if spec.lower().endswith(".gguf"):
        return "gguf"
    from ark_trainer.core.models.gguf import is_gguf_file

    return "gguf" if path.is_file() and is_gguf_file(path) else "hf"


def check_model(spec: str, *, flag: str = "--model_path", trust_remote_code: bool = False) -> ResolvedModel:
    """Everything about ``spec`` checked, nothing written. For a GGUF or Ollama model ``path`` is where the
    per-user cache would put its conversion (:func:`resolve_model` picks the folder)."""
    kind = model_kind(spec)
    if kind == "hf":
        from ark_trainer.core.models.loading import check_policy_dir

        if not Path(spec).exists():
            raise UserError(
                f"{flag}: no such folder {spec!r}; give a local Hugging Face checkpoint, a .gguf file or "
                "ollama:NAME[:TAG] (no hub downloads)"
            )
        if Path(spec).is_file():
            raise UserError(
                f"{flag}: {spec!r} is a file but not a GGUF model; give a Hugging Face folder, a .gguf file "
                "or ollama:NAME[:TAG]"
            )
        return ResolvedModel(path=check_policy_dir(spec, flag, trust_remote_code), kind="hf", source=spec)
    from ark_trainer.core.models.gguf import file_sha256, inspect_gguf

    name, template = None, None
    if kind == "ollama":
        from ark_trainer.core.models.ollama import find_model, verify

        found = find_model(spec, flag)
        info = inspect_gguf(found.blob, f"{flag}: {spec}")
        sha = file_sha256(found.blob)
        verify(found, sha, flag)
        name, template = f"{OLLAMA_PREFIX}{found.ref.short}", found.layers.get("template")
    else:
        info = inspect_gguf(Path(spec).expanduser(), flag)
        sha = file_sha256(info.path)
    slug = re.sub(r"[^a-z0-9]+", "-", str(name or info.name or "model").lower()).strip("-")[:40] or "model"
    return ResolvedModel(
        path=cache_dir() / f"{slug}-{sha[:12]}",
        kind=kind,
        source=spec,
        file=info.path.resolve(),
        sha256=sha,
        name=name or info.name,
        architecture=info.architecture,
        quantization=info.quantization,
        pre_tokenizer=info.pre_tokenizer,
        template=template,
    )


def cache_dir() -> Path:
    """Where a GGUF is converted when no run folder is given: ``$ARK_TRAINER_CACHE/models`` or
    ``~/.cache/ark-trainer/models``."""
    root = os.environ.get("ARK_TRAINER_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "ark-trainer") / "models"


def convert(model: ResolvedModel, convert_dir: Path | None = None) -> ResolvedModel:
    """``model`` (from :func:`check_model`) as an HF folder: converted into ``convert_dir`` unless it holds it."""
    if model.kind == "hf":
        return model
    from ark_trainer.core.models.gguf import convert_gguf, converted_record, inspect_gguf

    assert model.file is not None and model.sha256 is not None  # check_model sets both for gguf/ollama
    dest = Path(convert_dir) if convert_dir is not None else model.path
    earlier = converted_record(dest)
    if earlier and earlier.get("sha256") == model.sha256:  # reused without reading the file again
        return replace(model, path=dest)
    info = inspect_gguf(model.file)
    record = {"source": model.source, "kind": model.kind, "name": model.name}
    if model.template:
        record["ollama_template"] = model.template
    done = convert_gguf(info, model.sha256, dest, record)
    return replace(model, path=dest, converted=done)


def resolve_model(spec: str, *, flag: str = "--model_path", convert_dir: Path | None = None) -> ResolvedModel:
    """Check ``spec`` (:func:`check_model`), then convert a GGUF or Ollama model once (:func:`convert`)."""
    return convert(check_model(spec, flag=flag), convert_dir)
