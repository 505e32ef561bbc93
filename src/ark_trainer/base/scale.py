"""Scale and speed settings: precision choice, LoRA/QLoRA, gradient checkpointing, vLLM rollouts.

Everything here maps our flags onto the engines' own options (peft ``LoraConfig``, transformers
``BitsAndBytesConfig``, TRL ``GRPOConfig``'s ``use_vllm``/``vllm_*``); nothing is re-implemented.

- Precision: ``--mixed_precision auto`` (default) trains with bf16 autocast on a GPU that supports it,
  fp16 autocast on an older GPU (both with fp32 master weights, as transformers' Trainer does mixed
  precision), fp32 on CPU. Pure bf16 weights (half the weight and optimizer memory, less precise updates:
  the demo's GRPO diverged in them on an H200) only with ``--mixed_precision bf16_weights``.
  ``--fp16 True``/``--bf16 True`` always win; ``--mixed_precision no`` forces fp32.
- LoRA: ``--lora_r R`` (> 0) trains adapters on ``--lora_target_modules``; the final model is merged into
  full weights (``OUT/model``, plain ``AutoModelForCausalLM``) unless ``--save_adapter_only True``.
- QLoRA: ``--load_in_4bit True`` loads the frozen base in NF4; it needs ``--lora_r`` > 0, bitsandbytes and a
  CUDA GPU, and is refused in one line otherwise.
- vLLM: ``--use_vllm True`` needs the ``vllm`` package and a CUDA GPU; refused in one line otherwise.
- Generation on a GPU (no-op on CPU and under vLLM): one transformers ``generate`` call is launch-bound on
  a GPU (869 completion tokens/s at 16 sequences vs 1,941 at 128 on an H200, measured in November 2026), so GRPO generates
  the rollouts of up to ``MAX_ROLLOUT_ROUNDS`` optimizer steps at once (TRL's ``steps_per_generation``;
  the later steps learn from slightly older rollouts, which TRL's importance-sampling ratio corrects),
  and evaluation decodes ``GPU_GENERATION_SEQUENCES`` prompts per call. ``bench/gpu_generation.py``
  measures the options side by side.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError

GPU_GENERATION_SEQUENCES = 128  # sequences per generate call on a GPU
MAX_ROLLOUT_ROUNDS = 4  # optimizer steps one GRPO generation may feed (staleness ≤ 3 steps)


def validate_scale(load_in_4bit: bool, save_adapter_only: bool, lora_r: int | None) -> list[str]:
    """Problems between the scale/speed flags (no hardware needed); each flag's own range and allowed values
    are declared with it (``core/config.py``) and checked there."""
    problems = []
    if load_in_4bit and not lora_r:
        problems.append("--load_in_4bit: QLoRA trains adapters on a 4-bit base; also pass --lora_r (e.g. 16)")
    if save_adapter_only and not lora_r:
        problems.append("--save_adapter_only: there is no adapter without LoRA; pass --lora_r (e.g. 16)")
    return problems


def lora_problems(lora_r: int | None, lora_alpha: int | None, lora_dropout: float) -> list[str]:
    """What is wrong with ``--lora_r/--lora_alpha/--lora_dropout`` of ``rm train`` (``train`` declares the
    same limits as ranges of its fields)."""
    problems = []
    if lora_r is not None and lora_r < 0:
        problems.append(f"--lora_r: must be ≥ 0, got {lora_r}")
    if lora_alpha is not None and lora_alpha <= 0:
        problems.append("--lora_alpha: must be > 0")
    if not 0 <= lora_dropout < 1:
        problems.append(f"--lora_dropout: must be in [0, 1), got {lora_dropout}")
    return problems


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def check_hardware(device: str, load_in_4bit: bool, use_vllm: bool) -> None:
    """Refuse, in one line, what this machine cannot do (called before anything is written)."""
    on_gpu = device.startswith("cuda")
    if load_in_4bit:
        _require(
            "--load_in_4bit: QLoRA needs bitsandbytes and a CUDA GPU",
            {"bitsandbytes": _installed("bitsandbytes"), "a CUDA GPU": on_gpu},
            "use --lora_r alone for LoRA in full precision",
        )
    if use_vllm:
        _require(
            "--use_vllm: vLLM rollouts need the vllm package and a CUDA GPU",
            {"the vllm package": _installed("vllm"), "a CUDA GPU": on_gpu},
            "drop --use_vllm to generate with transformers",
        )


def _require(what: str, needs: dict[str, bool], fix: str) -> None:
    missing = [name for name, ok in needs.items() if not ok]
    if missing:
        raise UserError(f"{what}; missing {' and '.join(missing)} ({fix})")


CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # /proc/cpuinfo: x86 AVX512-BF16 and AMX; Arm (Features)


@cache
def native_cpu_bf16() -> bool:
    """Whether this CPU computes bf16 natively (read once from ``/proc/cpuinfo``)."""
    try:
        return cpuinfo_has_bf16(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False


CPU_CLASSES = ("bf16", "AVX-512 fp32", "AVX2 fp32", "fp32 without AVX2")  # the docs' time columns


def cpu_class_of(capability: str, cpuinfo: str) -> str:
    """The CPU class the docs give times for (:data:`CPU_CLASSES`), from torch's kernel path
    (``torch.backends.cpu.get_cpu_capability()``: ``AVX512``, ``AVX2``, ``DEFAULT``, ...; what
    ``ATEN_CPU_CAPABILITY`` sets) and ``/proc/cpuinfo``: ``bf16`` where the CPU computes bf16 natively
    (``auto`` then trains a real model in bf16 autocast), else the widest vector path torch uses, in fp32."""
    if cpuinfo_has_bf16(cpuinfo):
        return "bf16"
    path = capability.upper()
    if path.startswith("AVX512"):
        return "AVX-512 fp32"
    if path.startswith("AVX2"):
        return "AVX2 fp32"
    return "fp32 without AVX2"


def cpu_class() -> tuple[str, str]:
    """(this machine's :func:`cpu_class_of`, what it was read from) for ``doctor``."""
    import torch

    capability = str(torch.backends.cpu.get_cpu_capability())
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    bf16 = [f for f in CPU_BF16_FLAGS if f in cpu_flags(cpuinfo)]
    found = f"torch's kernels: {capability}; native bf16: {', '.join(bf16) if bf16 else 'no'}"
    return cpu_class_of(capability, cpuinfo), found


def cpu_flags(cpuinfo: str) -> set[str]:
    """The flags a ``/proc/cpuinfo`` text names in its ``flags`` (x86) / ``Features`` (Arm) lines."""
    found: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() in ("flags", "features"):
            found.update(value.split())
    return found


def cpuinfo_has_bf16(cpuinfo: str) -> bool:
    """Whether a ``/proc/cpuinfo`` text names one of ``CPU_BF16_FLAGS`` in its ``flags``/``Features`` lines."""
    return bool(cpu_flags(cpuinfo) & set(CPU_BF16_FLAGS))


def auto_precision(
    mixed_precision: str, device: str, fp16: bool, bf16: bool
) -> tuple[bool, bool, str | None]:
    """(fp16, bf16, note): explicit --fp16/--bf16 win; otherwise ``--mixed_precision`` decides.

    On CPU (where ``--fp16/--bf16 True`` have already fallen back to fp32) only ``--mixed_precision bf16`` or
    ``bf16_weights`` computes in bf16, and only on a CPU with native bf16 (the note says why not otherwise);
    ``auto`` stays fp32 here: ``auto_defaults.cpu_precision`` decides it once the model is known."""
    if fp16 or bf16:
        return fp16, bf16, None
    if device == "cpu":
        if mixed_precision not in ("bf16", "bf16_weights"):
            return False, False, None
        if native_cpu_bf16():
            return False, True, None
        note = (
            f"--mixed_precision {mixed_precision}: this CPU has no native bf16 (AVX512-BF16, AMX or Arm "
            "BF16), where bf16 is emulated and slower; training in fp32"
        )
        return False, False, note
    mode = mixed_precision
    if mode == "auto":
        import torch

        index = int(device.split(":", 1)[1]) if ":" in device else 0
        mode = (
            "bf16"
            if torch.cuda.is_bf16_supported() and torch.cuda.get_device_capability(index)[0] >= 8
            else "fp16"
        )
        return mode == "fp16", mode == "bf16", f"--mixed_precision auto: {mode} on {device}"
    return mode == "fp16", mode in ("bf16", "bf16_weights"), None


def precision_name(fp16: bool, bf16: bool, bf16_weights: bool) -> str:
    """How a run computes, as recorded in plan.json, the ``scale`` event, the report and error messages."""
    if fp16:
        return "fp16 autocast, fp32 weights"
    if bf16:
        return "bf16 weights" if bf16_weights else "bf16 autocast, fp32 weights"
    return "fp32"


def peft_config(
    lora_r: int | None,
    lora_alpha: int | None,
    lora_dropout: float,
    lora_target_modules: str,
    task_type: str = "CAUSAL_LM",
):
    """peft ``LoraConfig`` for ``--lora_r`` > 0, else None (``SEQ_CLS``: the score head trains in full)."""
    if not lora_r or lora_r <= 0:
        return None
    from peft import LoraConfig

    targets = lora_target_modules.strip()
    modules: Any = (
        targets if targets == "all-linear" else [m.strip() for m in targets.split(",") if m.strip()]
    )
    return LoraConfig(
        r=lora_r,
        lora_alpha=lora_alpha or 2 * lora_r,
        lora_dropout=lora_dropout,
        target_modules=modules,
        task_type=task_type,
        bias="none",
    )


def trainer_extras(gradient_checkpointing: bool) -> dict[str, Any]:
    """Extra TrainingArguments: gradient checkpointing and the 4-bit loading of QLoRA.

    Checkpointing is off unless ``--gradient_checkpointing`` turns it on: TRL's SFT and GRPO configs default
    it to on, which recomputes every activation in the backward pass (a quarter more compute per step on
    CPU, where memory is seldom the limit) that the flag did not ask for."""
    extras: dict[str, Any] = {"gradient_checkpointing": False}
    if gradient_checkpointing:
        extras["gradient_checkpointing"] = True
        extras["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    return extras


def trainer_model_kwargs(load_in_4bit: bool, rt) -> dict[str, Any]:
    """``model_init_kwargs`` additions for the trainers: fp32 master weights under mixed precision (the
    Trainer then autocasts; the fp16 grad scaler refuses fp16 parameters, and bf16 weights lose small
    updates), unless ``--mixed_precision bf16_weights`` asks for bf16 weights; and QLoRA."""
    import torch

    master = (rt.fp16 or rt.bf16) and not rt.bf16_weights and not load_in_4bit
    extra: dict[str, Any] = {"dtype": torch.float32} if master else {}
    return {**extra, **quantization_kwargs(load_in_4bit, rt)}


def quantization_kwargs(load_in_4bit: bool, rt) -> dict[str, Any]:
    """``model_init_kwargs`` additions for QLoRA (NF4, double quantisation, compute in the run's dtype)."""
    if not load_in_4bit:
        return {}
    from transformers import BitsAndBytesConfig

    return {
        "quantization_config": BitsAndBytesConfig(
            load_in_4bit=True,
            bnb_4bit_quant_type="nf4",
            bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=rt.dtype,
        )
    }


@dataclass(frozen=True)
class VLLMSettings:
    """The vLLM flags (``--use_vllm``, ``--vllm_*``): what vLLM rollouts and RFT's vLLM sampling read."""

    use_vllm: bool
    mode: str  # colocate or server
    server_host: str
    server_port: int
    gpu_memory_utilization: float
    tensor_parallel_size: int


def vllm_grpo_kwargs(vllm: VLLMSettings) -> dict[str, Any]:
    """TRL ``GRPOConfig`` options for vLLM rollouts (empty without ``--use_vllm``)."""
    if not vllm.use_vllm:
        return {}
    kwargs: dict[str, Any] = {"use_vllm": True, "vllm_mode": vllm.mode}
    if vllm.mode == "server":
        kwargs.update(vllm_server_host=vllm.server_host, vllm_server_port=vllm.server_port)
    else:
        kwargs.update(
            vllm_gpu_memory_utilization=vllm.gpu_memory_utilization,
            vllm_tensor_parallel_size=vllm.tensor_parallel_size,
        )
    return kwargs


SUMMARY_FLAGS = (
    "launcher",
    "accelerate_config",
    "lora_r",
    "load_in_4bit",
    "gradient_checkpointing",
    "save_adapter_only",
    "use_vllm",
    "vllm_mode",
    "rollout_steps",
    "batch_size",
    "gradient_accumulation_steps",
)
"""The flags :func:`scale_summary` reads: its keyword arguments, named as the flags are."""


def scale_summary(
    rt,
    processes: int,
    *,
    launcher: str,
    accelerate_config: str | None,
    lora_r: int | None,
    load_in_4bit: bool,
    gradient_checkpointing: bool,
    save_adapter_only: bool,
    use_vllm: bool,
    vllm_mode: str,
    rollout_steps: int | None,
    batch_size: int,
    gradient_accumulation_steps: int,
) -> dict[str, Any]:
    """What the run chose, for ``events.jsonl`` (``scale`` event): processes, precision, LoRA, vLLM; the
    keyword arguments are the flags of :data:`SUMMARY_FLAGS`."""
    return {
        "processes": processes,
        "launcher": "accelerate" if processes > 1 or launcher == "accelerate" else "none",
        "accelerate_config": accelerate_config,
        "device": rt.device,
        "precision": rt.precision,
        "lora_r": lora_r or None,
        "load_in_4bit": load_in_4bit,
        "gradient_checkpointing": gradient_checkpointing,
        "export": "adapter" if save_adapter_only else "merged" if lora_r else "full",
        "rollouts": f"vllm-{vllm_mode}" if use_vllm else "transformers",
        **rollout_kwargs(rt.device, rollout_steps, batch_size, gradient_accumulation_steps, use_vllm),
    }


def rollout_kwargs(
    device: str, rollout_steps: int | None, batch_size: int, gradient_accumulation_steps: int, use_vllm: bool
) -> dict[str, Any]:
    """TRL ``GRPOConfig`` options for faster transformers rollouts on a GPU (empty on CPU or with vLLM).

    Generates the rollouts of several optimizer steps in one ``generate`` call (``steps_per_generation``, a
    multiple of ``--gradient_accumulation_steps`` so every batch holds whole prompt groups) until about
    ``GPU_GENERATION_SEQUENCES`` sequences are decoded together, at most ``MAX_ROLLOUT_ROUNDS`` steps.
    ``--rollout_steps N`` sets the number of optimizer steps itself (1: TRL's default, on any device).
    """
    if rollout_steps:  # the user's choice; 1 is TRL's default (one generation per optimizer step)
        steps = rollout_steps * gradient_accumulation_steps
        return {"steps_per_generation": steps} if rollout_steps > 1 else {}
    if not device.startswith("cuda") or use_vllm:
        return {}
    per_step = max(1, batch_size * gradient_accumulation_steps)
    rounds = min(MAX_ROLLOUT_ROUNDS, -(-GPU_GENERATION_SEQUENCES // per_step))
    if rounds <= 1:
        return {}
    return {"steps_per_generation": gradient_accumulation_steps * rounds}


def generation_batch(device: str, cpu_batch: int) -> int:
    """Prompts per ``generate`` call for evaluation: ``cpu_batch`` on CPU, more on a GPU (launch-bound)."""
    return max(cpu_batch, GPU_GENERATION_SEQUENCES) if device.startswith("cuda") else cpu_batch
