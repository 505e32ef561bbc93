"""Export a trained model so ``AutoModelForCausalLM.from_pretrained(dest)`` loads it.

- Full fine-tuning: ``trainer.save_model`` (safetensors; under several processes, ZeRO-3 or FSDP it gathers
  the weights and writes from the main process only).
- LoRA, merged (default): the adapter is saved through the trainer (so sharded runs gather it), then the
  main process loads the base weights plus the adapter on CPU, merges them (``merge_and_unload``) and
  writes a plain full model. Nothing of peft is needed to load the result.
- LoRA, ``--save_adapter_only True``: ``dest`` holds ``adapter_model.safetensors`` + ``adapter_config.json``
  whose ``base_model_name_or_path`` is made absolute, so transformers' peft integration loads base plus
  adapter with ``AutoModelForCausalLM.from_pretrained(dest)`` (peft must be installed; it is a dependency).

The tokenizer is saved next to the weights; every process waits until the export is complete.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ark_trainer.base.fileio import read_json


def _is_peft(model) -> bool:
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency
        return False
    return isinstance(model, PeftModel)


def export_model(trainer, tokenizer, dest: Path, adapter_only: bool = False) -> None:
    dest = Path(dest)
    acc = trainer.accelerator
    model = acc.unwrap_model(trainer.model)
    peft = _is_peft(model)
    if peft and not adapter_only:
        staging = dest.parent / f".{dest.name}.adapter"
        trainer.save_model(str(staging))
        if acc.is_main_process:
            merge_adapter(staging, dest)
            shutil.rmtree(staging, ignore_errors=True)
    else:
        trainer.save_model(str(dest))
        if peft and acc.is_main_process:
            absolutize_base(dest)
    if acc.is_main_process:
        dest.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(str(dest))
    acc.wait_for_everyone()


def absolutize_base(adapter_dir: Path) -> None:
    """Point the adapter at its base model by absolute path (a relative one breaks from another cwd)."""
    from ark_trainer.base.fileio import write_json

    path = Path(adapter_dir) / "adapter_config.json"
    cfg = read_json(path)
    base = cfg.get("base_model_name_or_path")
    if base and Path(base).exists():
        cfg["base_model_name_or_path"] = str(Path(base).resolve())
        write_json(path, cfg)


def merge_adapter(adapter_dir: Path, dest: Path) -> None:
    """Load base + adapter on CPU in the base's own dtype, merge, save a plain model into ``dest``."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM

    base_path = PeftConfig.from_pretrained(str(adapter_dir)).base_model_name_or_path
    base = AutoModelForCausalLM.from_pretrained(base_path, dtype="auto", use_safetensors=True)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload()
    dest.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(str(dest), safe_serialization=True)
