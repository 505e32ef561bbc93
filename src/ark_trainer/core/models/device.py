"""Where and how a run computes: the device and the precision, resolved once from the config.

Device policy (documented in docs/getting-started.md): ``--device cuda…`` or ``--fp16/--bf16 True`` on a machine
without a GPU is not an error; the run falls back to CPU in fp32 and says so in one warning line, so the
reference templates run as written on any machine.

On CPU, bf16 is worth it only where the processor computes it natively (``scale.native_cpu_bf16``: x86
AVX512-BF16 or AMX, Arm's BF16 extension); elsewhere it is emulated and slower than fp32. There
``--mixed_precision bf16`` is honoured, and ``auto`` picks bf16 autocast for a real model
(``auto_defaults.cpu_precision``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Runtime:
    """Where and how the run computes."""

    device: str  # "cpu" or "cuda:N"
    fp16: bool
    bf16: bool
    warnings: list[str]
    trust_remote_code: bool = False  # --trust_remote_code: off unless the user turns it on
    bf16_weights: bool = False  # --mixed_precision bf16_weights: train in bf16 weights, no fp32 master copy

    @property
    def precision(self) -> str:
        """e.g. ``bf16 autocast, fp32 weights`` (see ``scale.precision_name``)."""
        from ark_trainer.base.scale import precision_name

        return precision_name(self.fp16, self.bf16, self.bf16_weights)

    @property
    def use_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def dtype(self):
        import torch

        return torch.float16 if self.fp16 else torch.bfloat16 if self.bf16 else torch.float32


class RuntimeFlags(Protocol):
    """The flags the runtime is resolved from (the run's config has them all)."""

    @property
    def device(self) -> str: ...
    @property
    def fp16(self) -> bool: ...
    @property
    def bf16(self) -> bool: ...
    @property
    def mixed_precision(self) -> str: ...
    @property
    def trust_remote_code(self) -> bool: ...
    @property
    def load_in_4bit(self) -> bool: ...
    @property
    def use_vllm(self) -> bool: ...


def resolve_runtime(flags: RuntimeFlags) -> Runtime:
    from ark_trainer.core.runtime.system import resolve_device

    warnings: list[str] = []
    device = resolve_device(flags.device, fallback=warnings.append)
    fp16, bf16 = flags.fp16, flags.bf16
    if device == "cpu" and (fp16 or bf16):
        flag = "--fp16" if fp16 else "--bf16"
        warnings.append(f"{flag} True: half precision needs a GPU; training in fp32 on CPU instead")
        fp16 = bf16 = False
    if flags.trust_remote_code:
        warnings.append("--trust_remote_code True: the model folder's own Python code will run")
    from ark_trainer.base.scale import auto_precision, check_hardware  # precision, QLoRA, vLLM

    check_hardware(device, flags.load_in_4bit, flags.use_vllm)
    fp16, bf16, note = auto_precision(flags.mixed_precision, device, fp16, bf16)
    if note and device == "cpu":
        warnings.append(note)
    return Runtime(
        device=device,
        fp16=fp16,
        bf16=bf16,
        warnings=warnings,
        trust_remote_code=flags.trust_remote_code,
        bf16_weights=bf16 and flags.mixed_precision == "bf16_weights",
    )
