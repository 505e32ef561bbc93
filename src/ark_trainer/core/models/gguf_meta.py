"""A GGUF file's metadata checked against its own tensors before anything is converted.

transformers builds the model and the tokenizer from these numbers: a head count of 0 divided by zero, a
block count of 2^31 allocated layers until the machine gave up, a token list shorter than the embedding or a
bos/eos id past its end gave an IndexError deep inside the conversion. Each is one line here, naming the
key, with the ranges of a Hugging Face config (``checks.SIZE_FIELDS``) and the shapes of the tensors; the
chat template is rendered once within bounds (``template_check``).
"""

from __future__ import annotations

import re
from typing import Any

from ark_trainer.core.models.checks import SIZE_FIELDS

# GGUF key (after "<arch>.") → the config field whose range it shares
SIZES = {
    "block_count": "num_hidden_layers",
    "embedding_length": "hidden_size",
    "feed_forward_length": "intermediate_size",
    "attention.head_count": "num_attention_heads",
    "attention.head_count_kv": "num_key_value_heads",
    "context_length": "max_position_embeddings",
}
TOKEN_IDS = ("bos_token_id", "eos_token_id", "padding_token_id", "unknown_token_id")
_BLOCK = re.compile(r"blk\.(\d+)\.")


def metadata_problems(reader: Any, arch: str, field: Any) -> list[str]:
    """What in the metadata of ``reader`` (a ``gguf.GGUFReader``) cannot be right; ``field(reader, key)``
    reads one scalar."""
    problems = []
    sizes: dict[str, int] = {}
    for key, config_field in SIZES.items():
        value = field(reader, f"{arch}.{key}")
        if value is None:
            continue
        lo, hi = SIZE_FIELDS[config_field]
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            problems.append(f"metadata {arch}.{key}: {value!r} is outside [{lo}, {hi}]")
        else:
            sizes[key] = value
    problems += _shape_problems(reader, arch, sizes)
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    n_tokens = len(tokens.data) if tokens is not None else 0
    vocab = _embedding_rows(reader)
    if vocab is not None and n_tokens != vocab:
        problems.append(
            f"metadata tokenizer.ggml.tokens: {n_tokens} tokens, but token_embd.weight has {vocab} rows"
        )
    for key in ("tokenizer.ggml.scores", "tokenizer.ggml.token_type"):
        listed = reader.fields.get(key)
        if listed is not None and len(listed.data) != n_tokens:
            problems.append(f"metadata {key}: {len(listed.data)} entries for {n_tokens} tokens")
    for key in TOKEN_IDS:
        value = field(reader, f"tokenizer.ggml.{key}")
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_tokens
        ):
            problems.append(
                f"metadata tokenizer.ggml.{key}: {value!r} is not a token id (0 to {n_tokens - 1})"
            )
    return problems


def _shape_problems(reader: Any, arch: str, sizes: dict[str, int]) -> list[str]:
    problems = []
    blocks = {int(m.group(1)) for t in reader.tensors if (m := _BLOCK.match(t.name))}
    count = sizes.get("block_count")
    if count is not None and blocks and count != max(blocks) + 1:
        problems.append(
            f"metadata {arch}.block_count: {count}, but the tensors have {max(blocks) + 1} blocks"
        )
    width, heads, kv = (
        sizes.get("embedding_length"),
        sizes.get("attention.head_count"),
        sizes.get("attention.head_count_kv"),
    )
    embed = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    if width is not None and embed is not None and int(embed.shape[0]) != width:
        problems.append(
            f"metadata {arch}.embedding_length: {width}, but token_embd.weight is {int(embed.shape[0])} wide"
        )
    if width is not None and heads is not None and width % heads:
        problems.append(
            f"metadata {arch}.attention.head_count: {heads} does not divide embedding_length {width}"
        )
    if heads is not None and kv is not None and (kv > heads or heads % kv):
        problems.append(f"metadata {arch}.attention.head_count_kv: {kv} does not divide head_count {heads}")
    return problems


def _embedding_rows(reader: Any) -> int | None:
    embed = next((t for t in reader.tensors if t.name == "token_embd.weight"), None)
    return int(embed.shape[1]) if embed is not None and len(embed.shape) > 1 else None


def chat_template_tokens(reader: Any, field: Any) -> tuple[str, str]:
    """(bos, eos) as text, for rendering the chat template ("" where absent or out of range)."""
    tokens = reader.fields.get("tokenizer.ggml.tokens")
    found = []
    for key in ("bos_token_id", "eos_token_id"):
        index = field(reader, f"tokenizer.ggml.{key}")
        try:
            found.append(str(tokens.contents(index)) if tokens is not None and isinstance(index, int) else "")
        except (IndexError, ValueError, TypeError, UnicodeDecodeError):
            found.append("")
    return found[0], found[1]
