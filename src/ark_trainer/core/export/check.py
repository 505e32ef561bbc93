"""What ``export`` reads of a model folder, checked before it writes anything.

``config.json`` and the ``.safetensors`` files of ``OUT/model`` are files anyone may edit or a full disk
may cut short. Read on trust, a tampered config (a head count that is text, a negative hidden size) or a
truncated weights file stopped the export with a traceback from ``int()``, numpy or the safetensors reader.
:func:`check_model_folder` refuses either in one line naming the file and the field: the config's numbers
are whole and positive (and agree: the hidden size splits into the heads), and every safetensors file's
header is a JSON object whose tensors' byte ranges lie inside the file, each as long as its dtype and
shape say.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_bounded
from ark_trainer.core.runcheck import Rule, check_file, count, flag, optional, positive, text

MAX_HEADER = 100 << 20  # the safetensors format's own limit on a header
MAX_DIM = 1 << 24  # no layer count, width or vocabulary of a model to export comes near it
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
               "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}  # fmt: skip


def dim(value: Any) -> str | None:
    """A size of the model: a whole number from 1 to :data:`MAX_DIM`."""
    wrong = count(value)
    return wrong or (f"{value} is not from 1 to {MAX_DIM}" if not 1 <= value <= MAX_DIM else None)


CONFIG_FIELDS: dict[str, Rule] = {
    "model_type": text,
    **{k: dim for k in ("num_attention_heads", "hidden_size", "num_hidden_layers", "intermediate_size")},
    "vocab_size": dim,
    **{k: optional(dim) for k in ("num_key_value_heads", "head_dim", "max_position_embeddings")},
    "rms_norm_eps": optional(positive),
    "rope_theta": optional(positive),
    "tie_word_embeddings": optional(flag),
}
CONFIG_REQUIRED = ("model_type", "num_attention_heads", "hidden_size", "num_hidden_layers", "vocab_size")


def check_model_folder(model_dir: Path) -> dict[str, Any]:
    """``model_dir``'s ``config.json`` once checked (see the module), after its safetensors headers are."""
    cfg = check_config(model_dir / "config.json")
    for path in sorted(model_dir.glob("*.safetensors")):
        check_heads(cfg, path, check_safetensors(path))
    return cfg


def check_heads(cfg: dict[str, Any], path: Path, shapes: dict[str, list[int]]) -> None:
    """llama's q/k projections are permuted head by head (``gguf.permute``): their rows must split into
    config.json's heads, or the export would stop halfway."""
    if cfg.get("model_type") != "llama":
        return
    heads = {"q_proj.weight": cfg["num_attention_heads"]}
    heads["k_proj.weight"] = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    for name, shape in shapes.items():
        n = next((h for suffix, h in heads.items() if name.endswith(suffix)), None)
        if n is not None and (not shape or shape[0] % (2 * n) or not shape[0]):
            raise UserError(
                f"{path}: tensor {name[:80]!r} of shape {shape} does not split into config.json's {n} heads; "
                "restore the model's config.json"
            )


def check_config(path: Path) -> dict[str, Any]:
    fix = "export the model folder a run wrote (OUT/model), or restore its config.json"
    try:
        data = json.loads(read_bounded(path, 16 << 20, "a config.json"))
    except (OSError, ValueError, RecursionError) as exc:
        raise UserError(f"{path.parent}: no readable config.json ({type(exc).__name__}); {fix}") from None
    cfg = check_file(data, str(path), CONFIG_FIELDS, CONFIG_REQUIRED, fix)
    params = cfg.get("rope_parameters")
    if params is not None:
        check_file(params, f"{path}: rope_parameters", {"rope_theta": optional(positive)}, (), fix)
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    if heads % kv:
        raise UserError(
            f"{path}: num_key_value_heads: {kv} does not divide num_attention_heads {heads}; {fix}"
        )
    if not cfg.get("head_dim") and cfg["hidden_size"] % heads:
        raise UserError(f"{path}: hidden_size: {cfg['hidden_size']} does not split into {heads} heads; {fix}")
    return cfg


def check_safetensors(path: Path) -> dict[str, list[int]]:
    """The header of one safetensors file: its length within the file, JSON, every tensor's data offsets
    inside the data and as long as its dtype and shape say (a truncated file fails here, not mid-export).
    Returns the tensors' shapes by name."""
    fix = "the weights are cut short or edited; train again, or export a model folder whose files are whole"
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise UserError(f"{path}: {size} bytes, shorter than a safetensors header; {fix}")
        (n,) = struct.unpack("<Q", head)
        if n > min(MAX_HEADER, size - 8):
            raise UserError(f"{path}: header length {n} runs past the file's {size} bytes; {fix}")
        raw = fh.read(n)
    try:
        header = json.loads(raw)
    except (ValueError, RecursionError):
        raise UserError(f"{path}: the header is not JSON; {fix}") from None
    if not isinstance(header, dict):
        raise UserError(f"{path}: the header is not a JSON object; {fix}")
    data_bytes = size - 8 - n
    tensors = {name: entry for name, entry in header.items() if name != "__metadata__"}
    for name, entry in tensors.items():
        if wrong := _tensor_wrong(entry, data_bytes):
            raise UserError(f"{path}: tensor {name[:80]!r}: {wrong}; {fix}")
    return {name: entry["shape"] for name, entry in tensors.items()}


def _tensor_wrong(entry: Any, data_bytes: int) -> str | None:
    if not isinstance(entry, dict):
        return "not an object"
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if dtype not in DTYPE_BYTES:
        return f"dtype {str(dtype)[:20]!r} is not one safetensors has"
    if not isinstance(shape, list) or any(count(d) for d in shape):
        return "shape is not a list of whole numbers >= 0"
    if not (isinstance(offsets, list) and len(offsets) == 2 and not any(count(o) for o in offsets)):
        return "data_offsets is not two whole numbers >= 0"
    begin, end = offsets
    if not begin <= end <= data_bytes:
        return f"data_offsets [{begin}, {end}] run past the file's {data_bytes} bytes of data"
    if end - begin != math.prod(shape) * DTYPE_BYTES[dtype]:
        return f"data_offsets [{begin}, {end}] do not hold a {dtype} tensor of shape {shape}"
    return None
