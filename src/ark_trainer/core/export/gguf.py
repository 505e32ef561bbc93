"""GGUF files out: an HF folder (llama or qwen2) written as one GGUF with its tokenizer and chat template.

:func:`export_gguf` maps the tensor names with the ``gguf`` package (``get_tensor_name_map``), permutes
llama's q/k projections as llama.cpp's ``convert_hf_to_gguf.py`` does (transformers' GGUF loader reverses
it, so a file loaded back gives the same model), stores 2-D weights as F16 (``f16``) or Q8_0 (``q8_0``;
rows not a multiple of 32 stay F16) and 1-D ones (norms, biases) as F32, and writes the tokenizer as
``tokenizer.ggml.*`` (byte-level BPE: model ``gpt2``, tokens, token types, merges, special ids) plus
``tokenizer.chat_template``. :func:`modelfile` writes the Ollama ``Modelfile`` beside it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json

QUANTS = ("f16", "q8_0")
ARCHITECTURES = ("llama", "qwen2")  # HF model_type, and the GGUF architecture of the same name
Q8_BLOCK = 32


@dataclass(frozen=True)
class ExportedGguf:
    path: Path
    architecture: str
    quant: str
    size: int
    tensors: int
    pre_tokenizer: str | None
    eos_token: str | None
    chat_template: str | None


def permute(weights, n_head: int, n_head_kv: int | None):
    """llama.cpp's q/k permutation for llama (``LlamaModel.permute`` in convert_hf_to_gguf.py)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (
        weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
        .swapaxes(1, 2)
        .reshape(weights.shape)
    )


def _config(model_dir: Path) -> dict[str, Any]:
    """``config.json``, once it and the safetensors headers passed their checks (``core/export/check.py``)."""
    from ark_trainer.core.export.check import check_model_folder

    cfg = check_model_folder(model_dir)
    if cfg.get("model_type") not in ARCHITECTURES:
        raise UserError(
            f"{model_dir}: model_type {cfg.get('model_type')!r} cannot be exported to GGUF "
            f"(supported: {', '.join(ARCHITECTURES)})"
        )
    return cfg


def _rope_theta(cfg: dict[str, Any]) -> float:
    params = cfg.get("rope_parameters") or {}
    return float(params.get("rope_theta") or cfg.get("rope_theta") or 10000.0)


def _tensors(model_dir: Path):
    """Every tensor of the folder's safetensors files, as float32 numpy arrays (name, array)."""
    import torch
    from safetensors import safe_open

    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise UserError(f"{model_dir}: no .safetensors weights to export")
    for file in files:
        with safe_open(str(file), framework="pt") as fh:
            for name in fh.keys():  # noqa: SIM118 - safe_open has keys(), not iteration
                yield name, fh.get_tensor(name).to(torch.float32).numpy()


def _store(name: str, data, quant: str):
    """(array, raw_dtype) as written: F32 for 1-D, F16 or Q8_0 for matrices."""
    import gguf
    import numpy as np

    if data.ndim <= 1 or name.endswith("_norm.weight"):
        return data.astype(np.float32), gguf.GGMLQuantizationType.F32
    if quant == "q8_0" and data.shape[-1] % Q8_BLOCK == 0:
        qtype = gguf.GGMLQuantizationType.Q8_0
        return gguf.quants.quantize(data.astype(np.float32), qtype), qtype
    return data.astype(np.float16), gguf.GGMLQuantizationType.F16


def _write_params(writer, cfg: dict[str, Any], quant: str, name: str) -> None:
    import gguf

    n_head = int(cfg["num_attention_heads"])
    head_dim = int(cfg.get("head_dim") or cfg["hidden_size"] // n_head)
    writer.add_name(name)
    writer.add_context_length(int(cfg.get("max_position_embeddings") or 2048))
    writer.add_embedding_length(int(cfg["hidden_size"]))
    writer.add_block_count(int(cfg["num_hidden_layers"]))
    writer.add_feed_forward_length(int(cfg["intermediate_size"]))
    writer.add_head_count(n_head)
    writer.add_head_count_kv(int(cfg.get("num_key_value_heads") or n_head))
    writer.add_rope_freq_base(_rope_theta(cfg))
    writer.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps") or 1e-6))
    writer.add_rope_dimension_count(head_dim)
    writer.add_vocab_size(int(cfg["vocab_size"]))
    file_type = gguf.LlamaFileType.MOSTLY_Q8_0 if quant == "q8_0" else gguf.LlamaFileType.MOSTLY_F16
    writer.add_file_type(file_type)
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)


def export_gguf(
    model_dir: str | Path,
    dest: str | Path,
    quant: str = "f16",
    pre_tokenizer: str | None = None,
    name: str = "",
) -> ExportedGguf:
    """Write ``model_dir`` (an HF llama/qwen2 folder) as the GGUF ``dest`` (atomically: temp file, rename)."""
    import gguf

    if quant not in QUANTS:
        raise UserError(f"--quant: {quant!r} is not one of {', '.join(QUANTS)}")
    model_dir, dest = Path(model_dir), Path(dest)
    cfg = _config(model_dir)
    arch = cfg["model_type"]
    tok = _tokenizer(model_dir, int(cfg["vocab_size"]), pre_tokenizer)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.partial"
    writer = gguf.GGUFWriter(str(tmp), arch)
    try:
        _write_params(writer, cfg, quant, name or model_dir.name)
        _write_tokenizer(writer, tok)
        count = _write_tensors(writer, cfg, model_dir, quant)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, dest)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)
        raise
    return ExportedGguf(
        dest, arch, quant, dest.stat().st_size, count, tok["pre"], tok["eos_token"], tok["chat_template"]
    )


def _write_tensors(writer, cfg: dict[str, Any], model_dir: Path, quant: str) -> int:
    import gguf

    arch = gguf.MODEL_ARCH.LLAMA if cfg["model_type"] == "llama" else gguf.MODEL_ARCH.QWEN2
    names = gguf.get_tensor_name_map(arch, int(cfg["num_hidden_layers"]))
    n_head = int(cfg["num_attention_heads"])
    n_kv = int(cfg.get("num_key_value_heads") or n_head)
    tied = bool(cfg.get("tie_word_embeddings"))
    count = 0
    for hf_name, data in _tensors(model_dir):
        if hf_name == "lm_head.weight" and tied:
            continue  # llama.cpp and transformers both reuse token_embd when output.weight is absent
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise UserError(f"{model_dir}: tensor {hf_name!r} has no GGUF name for {cfg['model_type']}")
        try:
            if cfg["model_type"] == "llama" and hf_name.endswith("q_proj.weight"):
                data = permute(data, n_head, n_head)
            elif cfg["model_type"] == "llama" and hf_name.endswith("k_proj.weight"):
                data = permute(data, n_head, n_kv)
        except ValueError:  # a config.json edited to other head counts than the weights have
            raise UserError(
                f"{model_dir}: tensor {hf_name!r} of shape {list(data.shape)} does not split into "
                f"config.json's heads ({n_head}, {n_kv} for keys); restore the model's config.json"
            ) from None
        array, qtype = _store(gguf_name, data, quant)
        writer.add_tensor(gguf_name, array, raw_dtype=qtype)
        count += 1
    return count


def _tokenizer(model_dir: Path, vocab_size: int, pre: str | None) -> dict[str, Any]:
    """The byte-level BPE tokenizer of ``model_dir`` as GGUF wants it (tokens padded to the model's vocab)."""
    from transformers import AutoTokenizer

    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise UserError(f"{model_dir}: no tokenizer.json; only fast byte-level BPE tokenizers export to GGUF")
    data = read_json(path)
    model = data.get("model") or {}
    byte_level = '"ByteLevel"' in json.dumps([data.get("pre_tokenizer"), data.get("decoder")])
    if model.get("type") != "BPE" or not byte_level:
        raise UserError(
            f"{model_dir}: the tokenizer is not byte-level BPE (model {model.get('type')!r}, e.g. sentencepiece); "
            "only byte-level BPE tokenizers (Qwen2, Llama 3, SmolLM) are exported to GGUF"
        )
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    vocab = tok.get_vocab()
    size = max(vocab_size, max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [5] * size  # UNUSED, until a token claims the id
    for token, idx in vocab.items():
        tokens[idx], types[idx] = token, 1  # NORMAL
    special = set(tok.all_special_tokens)
    for idx, added in tok.added_tokens_decoder.items():
        tokens[idx], types[idx] = added.content, 3 if added.special or added.content in special else 4
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    return {
        "tokens": tokens,
        "types": types,
        "merges": merges,
        "bos": tok.bos_token_id,
        "eos": tok.eos_token_id,
        "eos_token": tok.eos_token,
        "pad": tok.pad_token_id,
        "chat_template": tok.chat_template if isinstance(tok.chat_template, str) else None,
        "add_bos": bool(tok.bos_token_id is not None and tok("a").input_ids[:1] == [tok.bos_token_id]),
        "pre": pre or infer_pre_tokenizer(data.get("pre_tokenizer")),
    }


def _write_tokenizer(writer, tok: dict[str, Any]) -> None:
    writer.add_tokenizer_model("gpt2")
    if tok["pre"]:
        writer.add_tokenizer_pre(tok["pre"])
    writer.add_token_list(tok["tokens"])
    writer.add_token_types(tok["types"])
    writer.add_token_merges(tok["merges"])
    for key, add in (
        ("bos", writer.add_bos_token_id),
        ("eos", writer.add_eos_token_id),
        ("pad", writer.add_pad_token_id),
    ):
        if tok[key] is not None:
            add(int(tok[key]))
    writer.add_add_bos_token(tok["add_bos"])  # as the HF tokenizer does (ChatML models add none)
    if tok["chat_template"]:
        writer.add_chat_template(tok["chat_template"])


def infer_pre_tokenizer(pre: dict | None) -> str | None:
    """llama.cpp's name (``tokenizer.ggml.pre``) of a tokenizer.json pre-tokenizer, when it is a known one."""
    from transformers.integrations.gguf.gguf_tokenizer_mapping import GGUF_PRE_TOKENIZER_SPLITS

    if not isinstance(pre, dict):
        return None
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        return "gpt-2"
    for step in pre.get("pretokenizers") or []:
        pattern = (step.get("pattern") or {}).get("Regex") if step.get("type") == "Split" else None
        if pattern:
            return next((name for name, split in GGUF_PRE_TOKENIZER_SPLITS.items() if split == pattern), None)
    return None


CHATML_GO_TEMPLATE = """{{- if .System }}<|im_start|>system
{{ .System }}<|im_end|>
{{ end }}{{- range .Messages }}<|im_start|>{{ .Role }}
{{ .Content }}<|im_end|>
{{ end }}<|im_start|>assistant
"""


MODELFILE_HEAD = "# ollama create NAME -f Modelfile"  # the first line of every Modelfile written here


def modelfile(gguf_name: str, exported: ExportedGguf, ollama_template: str | None = None) -> str:
    """An Ollama ``Modelfile`` for the file: FROM, TEMPLATE (Ollama's Go syntax), SYSTEM, PARAMETER stop."""
    jinja = exported.chat_template or ""
    lines = [f"{MODELFILE_HEAD}  (then: ollama run NAME)", f"FROM ./{gguf_name}"]
    stops = [exported.eos_token] if exported.eos_token else []
    if ollama_template:
        lines.append(f'TEMPLATE """{ollama_template}"""')
    elif "<|im_start|>" in jinja:
        lines.append(f'TEMPLATE """{CHATML_GO_TEMPLATE}"""')
        default_system = re.search(r"<\|im_start\|>system(?:\\n|\n)([^<'\"]+)<\|im_end\|>", jinja)
        if default_system:
            lines.append(f'SYSTEM """{default_system.group(1)}"""')
        stops += ["<|im_start|>", "<|im_end|>"]
    elif jinja:
        lines.append(
            "# no TEMPLATE: Ollama matches the GGUF's own tokenizer.chat_template (Jinja) to a built-in one"
        )
    for stop in dict.fromkeys(stops):
        lines.append(f"PARAMETER stop {json.dumps(stop)}")
    return "\n".join(lines) + "\n"
