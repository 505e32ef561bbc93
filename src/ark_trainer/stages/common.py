"""What the training stages share: device choice, model loading, prompt rendering, trainer settings.

Device policy (documented in docs/getting-started.md): ``--device cuda…`` or ``--fp16/--bf16 True`` on a machine
without a GPU is not an error; the run falls back to CPU in fp32 and says so in one warning line, so the
reference templates run as written on any machine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ark_trainer.config import TrainConfig
from ark_trainer.errors import UserError

log = logging.getLogger("ark_trainer")


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
        from ark_trainer.scale import precision_name

        return precision_name(self.fp16, self.bf16, self.bf16_weights)

    @property
    def use_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def dtype(self):
        import torch

        return torch.float16 if self.fp16 else torch.bfloat16 if self.bf16 else torch.float32


def resolve_runtime(cfg: TrainConfig) -> Runtime:
    from ark_trainer.runtime.system import resolve_device

    warnings: list[str] = []
    device = resolve_device(cfg.device, fallback=warnings.append)
    fp16, bf16 = cfg.fp16, cfg.bf16
    if device == "cpu" and (fp16 or bf16):
        flag = "--fp16" if fp16 else "--bf16"
        warnings.append(f"{flag} True: half precision needs a GPU; training in fp32 on CPU instead")
        fp16 = bf16 = False
    if cfg.trust_remote_code:
        warnings.append("--trust_remote_code True: the model folder's own Python code will run")
    from ark_trainer.scale import auto_precision, check_hardware  # issue 7: precision, QLoRA, vLLM

    check_hardware(cfg, device)
    fp16, bf16, _ = auto_precision(cfg, device, fp16, bf16)
    return Runtime(
        device=device,
        fp16=fp16,
        bf16=bf16,
        warnings=warnings,
        trust_remote_code=cfg.trust_remote_code,
        bf16_weights=bf16 and cfg.mixed_precision == "bf16_weights",
    )


def model_init_kwargs(rt: Runtime) -> dict[str, Any]:
    """How every causal LM is loaded: safetensors only, no remote code unless --trust_remote_code."""
    return {"dtype": rt.dtype, "use_safetensors": True, "trust_remote_code": rt.trust_remote_code}


def check_policy_dir(path: str, flag: str = "--model_path") -> Path:
    from ark_trainer.rewards.reward_model import check_model_dir

    p = check_model_dir(path, flag)
    if not any((p / n).is_file() for n in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise UserError(f"{flag}: {path!r} has no tokenizer files; save the tokenizer next to the model")
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
    model = model.to(rt.device)  # type: ignore[arg-type]  # transformers' @wraps(Module.to) hides the bound self
    model.eval()
    return model, tok


def is_conversational(tokenizer) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def model_prompt(messages: list[dict[str, str]], conversational: bool) -> Any:
    """The prompt as TRL should see it: the chat list, or plain text for a model without a chat template."""
    if conversational:
        return messages
    return "\n".join(m["content"] for m in messages) + "\n"


def render_prompt(tokenizer, messages: list[dict[str, str]]) -> str:
    """The exact text the model is conditioned on (chat template with the generation prompt)."""
    if is_conversational(tokenizer):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return model_prompt(messages, False)


def trainer_kwargs(cfg: TrainConfig, rt: Runtime, out_dir: Path, steps: int, lr: float) -> dict[str, Any]:
    """Settings shared by the SFT (RFT) and GRPO trainers."""
    from ark_trainer.scale import trainer_extras, trainer_model_kwargs
    from ark_trainer.trackers import trainer_report_to

    return {
        "output_dir": str(out_dir),
        "max_steps": steps,
        "learning_rate": lr,
        "per_device_train_batch_size": cfg.batch_size,
        "gradient_accumulation_steps": cfg.gradient_accumulation_steps,
        "warmup_steps": cfg.warmup_ratio,  # transformers reads a value < 1 as a ratio of max_steps
        "lr_scheduler_type": "linear",
        "logging_steps": cfg.logging_steps,
        "save_strategy": "steps" if cfg.save_steps > 0 else "no",
        "save_steps": cfg.save_steps or 500,
        "save_total_limit": cfg.save_total_limit,
        "seed": cfg.seed,
        "report_to": trainer_report_to(cfg.report_to),  # tensorboard is added by stage_callbacks
        "use_cpu": rt.use_cpu,
        "fp16": rt.fp16,
        "bf16": rt.bf16,
        "dataloader_num_workers": 0,
        "model_init_kwargs": {**model_init_kwargs(rt), **trainer_model_kwargs(cfg, rt)},
        "disable_tqdm": False,
        **trainer_extras(cfg, rt),
    }


def no_checkpointing(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with gradient checkpointing off unless ``--gradient_checkpointing`` turned it on: TRL's
    DPO, KTO and RLOO configs default it to on, which costs a second forward pass the flag did not ask for."""
    return {"gradient_checkpointing": False, **kwargs}


def stage_callbacks(monitor, log_dir: Path, stage: str, report_to: str = "tensorboard") -> list:
    """Trainer callbacks of a stage: progress/metrics to the monitor, TensorBoard events to ``--log_dir``."""
    from ark_trainer.runtime.distributed import ranks
    from ark_trainer.runtime.monitor import trainer_callback
    from ark_trainer.trackers import wants_tensorboard

    if not ranks().is_main or not wants_tensorboard(report_to):  # only the main process writes TensorBoard
        return [trainer_callback(monitor, stage)]
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    writer = SummaryWriter(log_dir=str(log_dir / "tensorboard" / stage))
    return [trainer_callback(monitor, stage), TensorBoardCallback(tb_writer=writer)]


def save_final(trainer, tokenizer, dest: Path, adapter_only: bool = False) -> None:
    """Save the trained model (safetensors) and its tokenizer so AutoModelForCausalLM loads them.

    A LoRA model is merged into full weights unless ``adapter_only``; under several processes only the
    main one writes (see ``ark_trainer.export``).
    """
    from ark_trainer.export import export_model

    export_model(trainer, tokenizer, dest, adapter_only=adapter_only)
    log.info("saved model to %s", dest)


def train_and_save(ctx, plan, name: str, trainer_cls, tok, final_dir: Path, **trainer_kw: Any) -> Path:
    """What every TRL preference/RL stage does once its data and config are ready: a fresh
    ``trainer_cls(**trainer_kw)`` per attempt under ``run_trainer`` (resume, crash-safe saves, guards,
    rollbacks), the replica check, then the final model (or adapter) saved to ``final_dir``.

    The stage module passes its own TRL trainer class: it stays the one place that names it."""
    from ark_trainer.runtime.distributed import check_replicas
    from ark_trainer.runtime.resume import run_trainer
    from ark_trainer.scale import peft_config

    cfg = ctx.cfg
    with ctx.monitor.stage(name, total=plan.steps):
        trainer = run_trainer(
            lambda: trainer_cls(
                processing_class=tok,
                callbacks=stage_callbacks(ctx.monitor, ctx.log_dir, name, cfg.report_to),
                peft_config=peft_config(cfg),
                **trainer_kw,
            ),
            cfg,
            ctx.monitor,
            name,
            ctx.out / name,
        )
        check_replicas(trainer, name)
        save_final(trainer, tok, final_dir, adapter_only=cfg.save_adapter_only and plan.last)
    return final_dir
