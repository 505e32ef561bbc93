"""Model folders, checked before anything is written, and loaded: safetensors only, no remote code
unless ``--trust_remote_code True``, the tokenizer given a pad token."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from ark_trainer.base.errors import UserError

if TYPE_CHECKING:
    from ark_trainer.core.models.device import Runtime


def check_model_dir(path: str, flag: str, trust_remote_code: bool = False) -> Path:
    """A local HF checkpoint with safetensors weights, or a one-line UserError saying what is wrong.

    Beyond the files being there, ``config.json`` and the safetensors headers are read and checked against
    each other (``core/models/checks.py``) without loading anything.
    """
    p = Path(path)
    if not p.is_dir():
        raise UserError(
            f"{flag}: no such folder {path!r}; give a local Hugging Face checkpoint (no hub downloads)"
        )
    if not (p / "config.json").is_file():
        raise UserError(f"{flag}: {path!r} has no config.json; it is not a Hugging Face model folder")
    if not any(p.glob("*.safetensors")):
        raise UserError(
            f"{flag}: {path!r} has no .safetensors weights (pickle .bin files are refused); "
            "convert with model.save_pretrained(dir, safe_serialization=True)"
        )
    from ark_trainer.core.models.checks import check_model_files

    check_model_files(p, flag, trust_remote_code)
    return p


def model_init_kwargs(rt: Runtime) -> dict[str, Any]:
    """How every causal LM is loaded: safetensors only, no remote code unless --trust_remote_code."""
    return {"dtype": rt.dtype, "use_safetensors": True, "trust_remote_code": rt.trust_remote_code}


def check_policy_dir(path: str, flag: str = "--model_path", trust_remote_code: bool = False) -> Path:
    p = check_model_dir(path, flag, trust_remote_code)
    if not any((p / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise UserError(f"{flag}: {path!r} has no tokenizer files; save the tokenizer next to the model")
    from ark_trainer.core.models.checks import check_tokenizer_files

    check_tokenizer_files(p)
    return p


def load_tokenizer(path: str | Path, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_policy(path: str | Path, rt: Runtime):
    """(model, tokenizer) for generation, in eval mode on the run's device."""
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(path, rt.trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(str(path), **model_init_kwargs(rt))
    model = model.to(rt.device)
    model.eval()
    return model, tok
