"""A model folder checked the way transformers will use it, before a run folder exists; nothing is loaded.

:mod:`ark_trainer.core.models.checks` reads each file on its own (``config.json``'s fields, each safetensors
header). Here they are checked together, so that what transformers or the safetensors library would refuse
deep inside loading (a traceback, and a run folder left half-written) is one line instead:

- the weight files transformers reads (:func:`weight_files`): ``model.safetensors``, else the shards that
  ``model.safetensors.index.json`` names, each a file in the folder (a LoRA adapter folder has neither);
- transformers builds the config (its own validation: ``tie_word_embeddings: "yes"``, ``layer_types`` that
  do not match ``num_hidden_layers``) and a skeleton of the model on the ``meta`` device, which takes no
  memory (a ``rope_scaling`` of an unknown type fails there);
- every parameter of the skeleton is in the weights with the shape the config gives it (a transposed
  matrix, a head count that does not divide the width, more layers than the weights hold); tied ones and
  those the model itself may miss aside;
- the tokenizer loads and its chat template compiles (:func:`check_tokenizer_loads`).

A folder whose own code defines the model or tokenizer (``auto_map``) or whose weights are quantized
(``quantization_config``) is left to transformers: building it would run that code, and packed tensors
have other shapes.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import read_json

INDEX = "model.safetensors.index.json"
SINGLE = "model.safetensors"
MAX_INDEX_BYTES = 50_000_000
SHOWN = 3


def _first_line(exc: BaseException) -> str:
    """The exception's type and first line; a first line that ends in ":" with the line that says why."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    text = f"{lines[0]} {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    return f"{type(exc).__name__}: {text[:300]}"


@contextmanager
def _quiet_transformers():
    """transformers' own warnings off while it builds a config we may refuse (the refusal is the one line)."""
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(before)


def weight_files(folder: Path, flag: str) -> list[Path]:
    """The safetensors files transformers loads from ``folder`` (one line naming what is wrong otherwise)."""
    if (folder / SINGLE).is_file():
        return [folder / SINGLE]
    index = folder / INDEX
    if not index.is_file():
        raise UserError(
            f"{flag}: {str(folder)!r} has no {SINGLE} (nor {INDEX} naming its shards); a LoRA adapter folder "
            "needs its base model merged in: save the merged model with save_pretrained"
        )
    return [folder / name for name in _shards(index)]


def _shards(index: Path) -> list[str]:
    try:
        if index.stat().st_size > MAX_INDEX_BYTES:
            raise UserError(
                f"{index}: over {MAX_INDEX_BYTES} bytes; not an index of shards: save the model again"
            )
        data = read_json(index, MAX_INDEX_BYTES)
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise UserError(f"{index}: not valid JSON ({_first_line(exc)}); save the model again") from None
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if (
        not isinstance(weight_map, dict)
        or not weight_map
        or not all(isinstance(v, str) for v in weight_map.values())
    ):
        raise UserError(
            f"{index}: weight_map: expected an object of tensor name → shard file; save the model again"
        )
    names = sorted(set(weight_map.values()))
    for name in names:
        if Path(name).name != name or name in ("", ".", ".."):
            raise UserError(
                f"{index}: weight_map names {name}, which is not a file name in the folder; save the model again"
            )
        if not (index.parent / name).is_file():
            raise UserError(
                f"{index}: weight_map names {name}, which is not in the folder; copy every shard of the model"
            )
    return names


def _skipped(folder: Path, config: dict) -> bool:
    """A folder left to transformers: its own code defines it, or its weights are quantized."""
    if config.get("auto_map") or config.get("quantization_config"):
        return True
    try:
        tokenizer_config = read_json(folder / "tokenizer_config.json")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return False
    return isinstance(tokenizer_config, dict) and bool(tokenizer_config.get("auto_map"))


def _skeleton(folder: Path, config: dict):
    """The model config.json describes, built on the meta device (no weights, no memory)."""
    import torch
    import transformers

    archs = config.get("architectures") or []
    cls = getattr(transformers, archs[0], None) if archs and isinstance(archs[0], str) else None
    try:
        with _quiet_transformers(), torch.device("meta"):
            built = transformers.AutoConfig.from_pretrained(str(folder))
            if isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel):
                return cls(built)
            return transformers.AutoModelForCausalLM.from_config(built)
    except Exception as exc:  # noqa: BLE001 - whatever transformers raises for a config it cannot build
        raise UserError(
            f"{folder / 'config.json'}: transformers cannot build the model it describes ({_first_line(exc)}); "
            "fix that field, or save the model again with save_pretrained"
        ) from None


def _renamed(keys: set[str], expected: set[str], prefix: str) -> dict[str, str]:
    """file key → model key under the naming that matches most (as is, or with/without the base prefix)."""
    ways = [lambda k: k]
    if prefix:
        ways += [lambda k: f"{prefix}.{k}", lambda k: k.removeprefix(f"{prefix}.")]
    best = max(({k: way(k) for k in keys} for way in ways), key=lambda m: len(set(m.values()) & expected))
    return best


def check_structure(folder: Path, config: dict, tensors: dict[str, dict[str, Any]]) -> None:
    """Every parameter of the model config.json describes is in the weights, with its shape (one line)."""
    if _skipped(folder, config):
        return
    model = _skeleton(folder, config)
    expected = {k: list(v.shape) for k, v in model.state_dict().items()}
    names = _renamed(set(tensors), set(expected), getattr(model, "base_model_prefix", "") or "")
    if len(set(names.values()) & set(expected)) * 2 < len(tensors):
        return  # another naming (an older or converted checkpoint): transformers maps it, we cannot judge
    wrong = [
        (key, tensors[key]["shape"], expected[names[key]])
        for key in sorted(tensors)
        if names[key] in expected and list(tensors[key]["shape"]) != expected[names[key]]
    ]
    if wrong:
        key, held, wanted = wrong[0]
        more = f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""
        raise UserError(
            f"{folder}: tensor {key!r}: the weights hold {held}, config.json describes {wanted}{more}; the "
            "config does not belong to these weights, or they were saved wrong: save the model again"
        )
    present = set(names.values())
    ignored = [re.compile(p) for p in getattr(model, "_keys_to_ignore_on_load_missing", None) or []]
    missing = [
        name
        for name, _ in model.named_parameters()  # tied parameters appear once, under their source
        if name not in present and not any(p.search(name) for p in ignored)
    ]
    if missing:
        shown = ", ".join(missing[:SHOWN]) + (
            f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        )
        raise UserError(
            f"{folder}: the weights lack {shown}, which config.json describes (num_hidden_layers "
            f"{config.get('num_hidden_layers', '?')}); the config does not belong to these weights, or a shard "
            "is missing"
        )


def check_tokenizer_loads(folder: Path) -> None:
    """The tokenizer loads (no remote code) and its chat template compiles, or one line naming the file."""
    try:
        config = read_json(folder / "config.json")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        config = {}
    if _skipped(folder, config if isinstance(config, dict) else {}):
        return
    from transformers import AutoTokenizer

    try:
        with _quiet_transformers():
            tok = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
    except Exception as exc:  # noqa: BLE001 - the tokenizer libraries raise many kinds
        raise UserError(
            f"{folder}: the tokenizer does not load ({_first_line(exc)}); save the tokenizer again with "
            "save_pretrained"
        ) from None
    templates = tok.chat_template if isinstance(tok.chat_template, dict) else {"": tok.chat_template}
    for name, template in templates.items():
        if isinstance(template, str):
            from ark_trainer.core.models.template_check import check_chat_template

            # first in a bounded child process: compiling alone folds {{ 'x' * 10**10 }} into 10 GB
            tokens = [t if isinstance(t, str) else "" for t in (tok.bos_token, tok.eos_token)]
            check_chat_template(template, str(_template_file(folder, name)), *tokens)
            _check_template(folder, name, template)


def _template_file(folder: Path, name: str) -> Path:
    for candidate in (f"chat_template{'_' + name if name else ''}.jinja", "chat_template.json"):
        if (folder / candidate).is_file():
            return folder / candidate
    return folder / "tokenizer_config.json"


def _check_template(folder: Path, name: str, template: str) -> None:
    import jinja2

    try:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        _compile_jinja_template(template)  # as transformers compiles it: its sandbox, filters, extensions
    except ImportError:
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        try:
            ImmutableSandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"]).parse(template)
        except jinja2.TemplateError as exc:
            _template_error(folder, name, exc)
    except jinja2.TemplateError as exc:
        _template_error(folder, name, exc)


def _template_error(folder: Path, name: str, exc: Exception) -> None:
    line = getattr(exc, "lineno", None)
    where = f" (line {line} of the template)" if line else ""
    raise UserError(
        f"{_template_file(folder, name)}: the chat template is not valid Jinja{where}: {getattr(exc, 'message', None) or exc}; "
        "fix it, or save the tokenizer again with save_pretrained"
    ) from None
