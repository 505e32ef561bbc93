"""A Hugging Face model folder read before it is loaded: ``config.json`` parsed and type-checked, every
``*.safetensors`` header read (size, dtypes, shapes, offsets) and matched against the config.

Nothing is loaded and nothing is written: each problem is one line naming the file, the field and the fix, so
a malformed folder (an empty ``model.safetensors``, a header that declares 2^60 bytes or is not JSON, a
``config.json`` that is not JSON, ``max_position_embeddings: "512"``, an unknown ``model_type``, an absurd
``vocab_size``, tensors that overlap or leave a gap, ``__metadata__`` that is not text) is refused before a run
folder exists, instead of a traceback halfway through the run. The files are then checked together, as
transformers will use them (the shards an index names, the model config.json builds, the tokenizer and
its chat template): :mod:`ark_trainer.core.models.structure`.
The safetensors format: 8 bytes little-endian header length N, N bytes of JSON (``name → {dtype, shape,
data_offsets: [begin, end]}`` plus an optional ``__metadata__``), then the tensor bytes.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json, read_text_bounded

MAX_HEADER_BYTES = 100_000_000  # the safetensors library's own limit
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}  # fmt: skip
SUB_BYTE_DTYPES = {"F4", "F6_E2M3", "F6_E3M2"}  # packed: sizes not checked per element
# config fields that size the model: integers in these ranges (vocab: the largest real ones are ~260k)
SIZE_FIELDS = {
    "vocab_size": (1, 4_194_304),
    "hidden_size": (1, 1_048_576),
    "intermediate_size": (1, 4_194_304),
    "num_hidden_layers": (1, 4096),
    "num_attention_heads": (1, 8192),
    "num_key_value_heads": (1, 8192),
    "max_position_embeddings": (1, 16_777_216),
    "head_dim": (1, 65_536),
    "n_embd": (1, 1_048_576),
    "n_layer": (1, 4096),
    "n_head": (1, 8192),
    "n_positions": (1, 16_777_216),
}
EMBEDDINGS = ("embed_tokens.weight", "wte.weight", "word_embeddings.weight", "embed_in.weight")


def _fail(where: Path, message: str) -> UserError:
    return UserError(f"{where}: {message}")


def read_config(path: Path, flag: str, trust_remote_code: bool = False) -> dict[str, Any]:
    """``config.json`` as a dict: JSON, an object, a known ``model_type``, sizes that are whole numbers."""
    try:
        text = read_text_bounded(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise _fail(path, f"unreadable ({exc}); {flag} needs a Hugging Face model folder") from None
    try:
        config = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: thousands of nested brackets
        raise _fail(path, f"not valid JSON ({exc}); save the model again with save_pretrained") from None
    if not isinstance(config, dict):
        raise _fail(path, f"expected a JSON object, got {type(config).__name__}")
    problems = [*_model_type_problems(path, config, trust_remote_code), *_size_problems(path, config)]
    if problems:
        raise UserError(*problems)
    return config


def _model_type_problems(path: Path, config: dict, trust_remote_code: bool) -> list[str]:
    kind = config.get("model_type")
    if config.get("auto_map") and trust_remote_code:
        return []  # the folder's own code defines it (the remote-code check asks for --trust_remote_code)
    if not isinstance(kind, str) or not kind:
        return [
            f"{path}: model_type: missing or not text ({kind!r}); a transformers config names its model_type"
        ]
    from transformers import CONFIG_MAPPING

    if kind in CONFIG_MAPPING or config.get("auto_map"):
        return []
    import transformers

    return [
        f"{path}: model_type: {kind!r} is not a model type transformers {transformers.__version__} knows; "
        "use a model with a built-in architecture (llama, qwen2, mistral, gemma, ...)"
    ]


def _size_problems(path: Path, config: dict) -> list[str]:
    problems = []
    for key, (lo, hi) in SIZE_FIELDS.items():
        if key not in config or config[key] is None:
            continue
        value = config[key]
        if isinstance(value, bool) or not isinstance(value, int):
            shown = f"the text {value!r}" if isinstance(value, str) else repr(value)
            problems.append(f"{path}: {key}: expected a whole number, got {shown}")
        elif not lo <= value <= hi:
            problems.append(f"{path}: {key}: {value} is outside [{lo}, {hi}]; this config.json is broken")
    return problems


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The tensors of a ``.safetensors`` file (name → dtype, shape, offsets), every field checked."""
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise _fail(
                    path, f"{size} bytes: too short for a safetensors file (empty or cut off); save it again"
                )
            (length,) = struct.unpack("<Q", head)
            if length > MAX_HEADER_BYTES or length > size - 8:
                raise _fail(
                    path,
                    f"the header declares {length} bytes but the file has {size - 8} after its length field; "
                    "not a safetensors file, or cut off: save it again",
                )
            raw = fh.read(length)
    except OSError as exc:
        raise _fail(path, f"unreadable ({exc.strerror or exc})") from None
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _fail(
            path, "the header is not JSON; not a safetensors file, or damaged: save it again"
        ) from None
    if not isinstance(header, dict):
        raise _fail(path, f"the header is a JSON {type(header).__name__}, not an object of tensors")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    data_bytes = size - 8 - length
    problems = [p for name, t in tensors.items() if (p := _tensor_problem(name, t, data_bytes))]
    problems = problems or [
        *_metadata_problems(header.get("__metadata__")),
        *_layout_problems(tensors, data_bytes),
    ]
    if problems:
        raise _fail(path, f"{problems[0]}{f' (and {len(problems) - 1} more)' if len(problems) > 1 else ''}")
    return tensors


def _metadata_problems(metadata: Any) -> list[str]:
    """``__metadata__``: absent, or an object of text values (the safetensors library refuses anything else)."""
    if metadata is None:
        return []
    if not isinstance(metadata, dict):
        return [f"__metadata__: expected an object of text values, got {type(metadata).__name__}"]
    return [
        f"__metadata__: {key}: expected text, got {type(value).__name__}; save it again"
        for key, value in metadata.items()
        if not isinstance(value, str)
    ]


def _layout_problems(tensors: dict[str, dict[str, Any]], data_bytes: int) -> list[str]:
    """The tensors, in offset order, cover the data bytes exactly: each starts where the one before ends
    (tensors sharing bytes, or a gap, are what the safetensors library refuses at load)."""
    at = 0
    for name, t in sorted(tensors.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        begin, end = t["data_offsets"]
        if begin != at:
            how = "overlap the tensor before it" if begin < at else "leave a gap after the tensor before it"
            return [f"tensor {name!r}: data_offsets {[begin, end]} {how} (which ends at {at}); save it again"]
        at = end
    if at != data_bytes:
        return [f"the tensors end at byte {at} but the file has {data_bytes} data bytes; save it again"]
    return []


def _tensor_problem(name: str, tensor: Any, data_bytes: int) -> str | None:
    if not isinstance(tensor, dict):
        return f"tensor {name!r}: expected {{dtype, shape, data_offsets}}, got {type(tensor).__name__}"
    dtype, shape, offsets = tensor.get("dtype"), tensor.get("shape"), tensor.get("data_offsets")
    if dtype not in DTYPE_BYTES and dtype not in SUB_BYTE_DTYPES:
        return f"tensor {name!r}: unknown dtype {dtype!r}"
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        return f"tensor {name!r}: shape {shape!r} is not a list of sizes"
    outside = f"tensor {name!r}: data_offsets {offsets!r} lie outside the file's {data_bytes} data bytes"
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(type(o) is int for o in offsets)):
        return outside
    begin, end = offsets
    if not 0 <= begin <= end <= data_bytes:
        return outside
    if dtype in DTYPE_BYTES and end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
        return (
            f"tensor {name!r}: {dtype} {shape} needs {math.prod(shape) * DTYPE_BYTES[dtype]} bytes, "
            f"its offsets hold {end - begin}"
        )
    return None


def check_weights_match(folder: Path, config: dict, tensors: dict[str, dict[str, Any]]) -> None:
    """The embedding matrix the weights hold is the one ``config.json`` describes (vocab × hidden)."""
    vocab, hidden = config.get("vocab_size"), config.get("hidden_size", config.get("n_embd"))
    for name, tensor in tensors.items():
        if not name.endswith(EMBEDDINGS) or len(tensor["shape"]) != 2:
            continue
        rows, cols = tensor["shape"]
        if isinstance(vocab, int) and rows != vocab:
            raise _fail(
                folder / "config.json",
                f"vocab_size: {vocab}, but the weights' {name} has {rows} rows; the config does not belong to "
                "these weights",
            )
        if isinstance(hidden, int) and cols != hidden:
            raise _fail(
                folder / "config.json",
                f"hidden_size: {hidden}, but the weights' {name} is {cols} wide; the config does not belong to "
                "these weights",
            )
        return


def check_model_files(folder: Path, flag: str, trust_remote_code: bool = False) -> None:
    """``config.json`` and the header of every safetensors file transformers will read, checked on their
    own and then together (:mod:`ark_trainer.core.models.structure`); see the module docstring."""
    from ark_trainer.core.models.structure import check_structure, weight_files

    config = read_config(folder / "config.json", flag, trust_remote_code)
    tensors: dict[str, dict[str, Any]] = {}
    for weights in weight_files(folder, flag):
        tensors.update(read_safetensors_header(weights))
    if not tensors:
        raise _fail(folder, f"{flag}: the .safetensors files hold no tensors; save the model again")
    check_weights_match(folder, config, tensors)
    check_structure(folder, config, tensors)


def check_tokenizer_files(folder: Path) -> None:
    """The tokenizer's JSON files parse (a broken one would fail deep inside the tokenizer's loader)."""
    for name in ("tokenizer_config.json", "tokenizer.json", "special_tokens_map.json"):
        path = folder / name
        if not path.is_file():
            continue
        try:
            data = read_json(path)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise _fail(
                path, f"not valid JSON ({exc}); save the tokenizer again with save_pretrained"
            ) from None
        if not isinstance(data, dict):
            raise _fail(path, f"expected a JSON object, got {type(data).__name__}")
    from ark_trainer.core.models.structure import check_tokenizer_loads

    check_tokenizer_loads(folder)
