"""GGUF files in: checked cheaply with the ``gguf`` package's reader, then converted once into an HF folder.

:func:`inspect_gguf` reads only the header, the metadata and the tensor table (the tensor data is
memory-mapped, not read) and refuses, in one line each: a missing file, a file that is not GGUF (magic), a
truncated or corrupt one, an architecture we do not convert (:data:`SUPPORTED_ARCHITECTURES`), a
quantization the ``gguf`` package cannot dequantize (:data:`DEQUANTIZABLE`) and a tokenizer transformers
cannot rebuild. :func:`convert_gguf` then dequantizes it with transformers (``from_pretrained(folder,
gguf_file=name)``), moves the weights into a plain model of the same config (a GGUF-loaded model refuses
``save_pretrained``) and writes safetensors, tokenizer, chat template and generation config into a folder,
with ``ark_source.json`` recording where it came from; a folder whose record has the same checksum is reused.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, write_json

log = logging.getLogger("ark_trainer")

MAGIC = b"GGUF"


def is_gguf_file(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts with the GGUF magic (False when it cannot be read)."""
    if not path.is_file():  # a FIFO would block the open
        return False
    try:
        with path.open("rb") as fh:
            return fh.read(4) == MAGIC
    except OSError:
        return False


SUPPORTED_ARCHITECTURES = (
    "llama",
    "qwen2",
)  # converted and exported both ways, tested on tiny models of each
FLOAT_TYPES = ("F32", "F16", "BF16")
DEQUANTIZABLE = (
    *FLOAT_TYPES,
    *("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"),
    *("IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ4_NL", "IQ4_XS"),
)
TOKENIZER_MODELS = ("gpt2", "llama")  # byte-level BPE and sentencepiece, as transformers rebuilds them
SOURCE_RECORD = "ark_source.json"  # in a converted folder: what it was converted from (checksum, file, ...)


@dataclass(frozen=True)
class GgufInfo:
    """What the header of a GGUF file says (nothing of the tensor data has been read)."""

    path: Path
    architecture: str
    name: str | None
    size: int
    tensor_types: dict[str, int]  # e.g. {"Q4_1": 210, "F32": 61, "Q8_0": 1}
    tokenizer_model: str | None
    pre_tokenizer: str | None  # tokenizer.ggml.pre: llama.cpp's name of the pre-tokenizer, kept for export
    has_chat_template: bool
    metadata: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def quantization(self) -> str:
        """The main tensor type, e.g. ``Q4_1`` (the one most tensors are stored in, floats aside)."""
        quantized = {k: v for k, v in self.tensor_types.items() if k not in FLOAT_TYPES}
        counts = quantized or self.tensor_types
        return max(counts, key=lambda k: counts[k]) if counts else "none"


def _field(reader: Any, key: str) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return None
    try:
        return f.contents()
    except (ValueError, IndexError, UnicodeDecodeError):
        return None


def _reject(flag: str, path: Path, why: str) -> UserError:
    return UserError(f"{flag}: {path}: {why}")


def check_magic(path: Path, flag: str) -> None:
    """A file that exists and starts with ``GGUF``."""
    if not path.is_file():
        raise UserError(
            f"{flag}: no such file {str(path)!r}; give a .gguf file, a Hugging Face folder or ollama:NAME[:TAG]"
        )
    with path.open("rb") as fh:
        head = fh.read(4)
    if head != MAGIC:
        raise _reject(
            flag, path, f"not a GGUF file (it starts with {head!r}, not {MAGIC!r}); give a .gguf model file"
        )


NOTICE_AFTER_S = 3.0  # a step of a GGUF that lasts longer says what it is doing


@contextlib.contextmanager
def slow_notice(line: str) -> Iterator[None]:
    """Print ``line`` on stderr if the block is still running after :data:`NOTICE_AFTER_S`: a real model's
    metadata takes seconds to read and its conversion minutes, in silence before (a run's log is not set up
    yet, so ``log.info`` would show nothing); a small file's quick steps (and a refusal after them) print
    nothing."""
    timer = threading.Timer(NOTICE_AFTER_S, lambda: print(line, file=sys.stderr, flush=True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


_INSPECTED: dict[tuple[str, int, int], GgufInfo] = {}


def inspect_gguf(path: str | Path, flag: str = "--model_path") -> GgufInfo:
    """The header of ``path``, checked; a one-line UserError for anything we could not convert. Read once
    per process for a given path, size and mtime (``train`` checks the file, then converts it)."""
    p = Path(path)
    check_magic(p, flag)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _INSPECTED:
        with slow_notice(f"reading {p.name} ({st.st_size / 1e6:.0f} MB GGUF): its metadata and tokenizer"):
            _INSPECTED[key] = _inspect(p, flag)
    return _INSPECTED[key]


def _inspect(p: Path, flag: str) -> GgufInfo:
    import gguf

    try:
        reader = gguf.GGUFReader(p)
    except (ValueError, IndexError, KeyError, OSError, OverflowError, UnicodeDecodeError) as exc:
        raise _reject(
            flag, p, f"truncated or corrupt GGUF ({_short(exc)}); copy or download the file again"
        ) from None
    size = p.stat().st_size
    ends = [int(t.data_offset) + int(t.n_bytes) for t in reader.tensors]
    if not reader.tensors or max(ends) > size:
        raise _reject(
            flag, p, f"truncated GGUF ({size} bytes, its tensors need {max(ends, default=0)}); copy it again"
        )
    arch = _field(reader, "general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise _reject(
            flag,
            p,
            f"architecture {arch!r} is not supported (supported: {', '.join(SUPPORTED_ARCHITECTURES)})",
        )
    types = Counter(t.tensor_type.name for t in reader.tensors)
    bad = sorted(set(types) - set(DEQUANTIZABLE))
    if bad:
        raise _reject(
            flag, p,
            f"quantization {', '.join(bad)} cannot be dequantized here (supported: {', '.join(DEQUANTIZABLE)}); "
            "re-quantize it with llama.cpp's llama-quantize (e.g. to Q8_0)",
        )  # fmt: skip
    tok_model = _field(reader, "tokenizer.ggml.model")
    if tok_model not in TOKENIZER_MODELS or "tokenizer.ggml.tokens" not in reader.fields:
        raise _reject(
            flag,
            p,
            f"tokenizer {tok_model!r} cannot be rebuilt (supported: {', '.join(TOKENIZER_MODELS)} with tokens)",
        )
    from ark_trainer.core.models.gguf_meta import chat_template_tokens, metadata_problems
    from ark_trainer.core.models.template_check import check_chat_template

    problems = metadata_problems(reader, arch, _field)
    if problems:
        fix = "the file is damaged or was written wrong; convert or download it again"
        raise UserError(*(f"{flag}: {p}: {problem}; {fix}" for problem in problems))
    template = _field(reader, "tokenizer.chat_template")
    if isinstance(template, str):
        check_chat_template(
            template, f"{flag}: {p}: tokenizer.chat_template", *chat_template_tokens(reader, _field)
        )
    scalar = {
        k: _field(reader, k)
        for k, f in reader.fields.items()
        if len(f.data) <= 1 and not k.startswith("GGUF.")
    }
    return GgufInfo(
        path=p,
        architecture=arch,
        name=_field(reader, "general.name"),
        size=size,
        tensor_types=dict(types),
        tokenizer_model=tok_model,
        pre_tokenizer=_field(reader, "tokenizer.ggml.pre"),
        has_chat_template="tokenizer.chat_template" in reader.fields,
        metadata={k: v for k, v in scalar.items() if isinstance(v, (str, int, float, bool))},
    )


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path) -> str:
    """The file's sha256 (hex), computed once per process for a given path, size and mtime."""
    p = Path(path).resolve()
    st = p.stat()
    key = (str(p), st.st_size, st.st_mtime_ns)
    if key not in _HASHES:
        digest = hashlib.sha256()
        with p.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                digest.update(chunk)
        _HASHES[key] = digest.hexdigest()
    return _HASHES[key]


def converted_record(folder: Path) -> dict | None:
    """``ark_source.json`` of a complete converted folder, or None."""
    record = folder / SOURCE_RECORD
    if not (record.is_file() and (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))):
        return None
    try:
        data = read_json(record)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def convert_gguf(info: GgufInfo, sha256: str, dest: Path, record: dict[str, Any]) -> bool:
    """Convert ``info.path`` into ``dest`` unless ``dest`` already holds it (same sha256). True if converted.

    The folder is written beside ``dest`` and renamed into place, so an interrupted conversion leaves no
    half-written ``dest`` (a partial one is removed on the next try).
    """
    old = converted_record(dest)
    if old and old.get("sha256") == sha256:
        return False
    staging = dest.parent / f".{dest.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    start = time.monotonic()
    try:
        _dequantize_into(info.path, staging)
        seconds = round(time.monotonic() - start, 1)
        write_json(
            staging / SOURCE_RECORD,
            {
                **record,
                "sha256": sha256,
                "file": str(info.path),
                "architecture": info.architecture,
                "gguf_name": info.name,
                "quantization": info.quantization,
                "tensor_types": info.tensor_types,
                "pre_tokenizer": info.pre_tokenizer,
                "convert_seconds": seconds,
            },
        )
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info(
        "converted %s (%s, %s) into %s in %.1f s",
        info.path.name,
        info.architecture,
        info.quantization,
        dest,
        seconds,
    )
    return True


def _dequantize_into(path: Path, folder: Path) -> None:
    """transformers dequantizes the GGUF; its weights go into a plain model (same config), which is saved."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    where, name = str(path.parent), path.name
    with slow_notice(f"converting {name} into a Hugging Face folder, once: rebuilding its tokenizer"):
        tok = AutoTokenizer.from_pretrained(where, gguf_file=name)
    with slow_notice(f"converting {name}: reading and dequantizing its weights (minutes on a CPU)"):
        loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # what makes save_pretrained refuse ("quantized with gguf")
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = plain.load_state_dict(loaded.state_dict(), strict=False, assign=True)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise UserError(
            f"{path}: its tensors do not match a {config.model_type} model (missing {missing[:3]}, extra {unexpected[:3]})"
        )
    if tied:
        plain.tie_weights()
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.model_max_length = getattr(config, "max_position_embeddings", None) or tok.model_max_length
    plain.generation_config = GenerationConfig.from_model_config(config)
    plain.generation_config.pad_token_id = tok.pad_token_id
    plain.save_pretrained(str(folder), safe_serialization=True)
    tok.save_pretrained(str(folder))
