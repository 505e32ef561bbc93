"""What the training stages share: trainer settings, the settings their helpers read (built here from the
run's config, so the helpers below the stages never take the whole config), callbacks, the final save, and
the one helper every stage trains through. Model loading, device and prompts live below, in
``ark_trainer.core.models``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ark_trainer.base.scale import VLLMSettings
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.generation import SamplingSettings
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.loading import model_init_kwargs

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags
    from ark_trainer.stages.plan import PlanStage
    from ark_trainer.stages.registry import StageContext

log = logging.getLogger("ark_trainer")


class TrainerSettings(Protocol):
    """The run flags :func:`trainer_kwargs` reads. The shared run flags have them all: a stage (a plug-in's
    too) passes ``ctx.run``."""

    @property
    def batch_size(self) -> int: ...
    @property
    def gradient_accumulation_steps(self) -> int: ...
    @property
    def warmup_ratio(self) -> float: ...
    @property
    def logging_steps(self) -> int: ...
    @property
    def save_steps(self) -> int: ...
    @property
    def save_total_limit(self) -> int: ...
    @property
    def seed(self) -> int: ...
    @property
    def report_to(self) -> str: ...
    @property
    def load_in_4bit(self) -> bool: ...
    @property
    def gradient_checkpointing(self) -> bool: ...


def trainer_kwargs(run: TrainerSettings, rt: Runtime, out_dir: Path, steps: int, lr: float) -> dict[str, Any]:
    """Settings shared by the SFT (RFT) and GRPO trainers."""
    from ark_trainer.base.scale import trainer_extras, trainer_model_kwargs
    from ark_trainer.base.trackers import trainer_report_to

    return {
        "output_dir": str(out_dir),
        "max_steps": steps,
        "learning_rate": lr,
        "per_device_train_batch_size": run.batch_size,
        "gradient_accumulation_steps": run.gradient_accumulation_steps,
        "warmup_steps": warmup_steps(run.warmup_ratio, steps),
        "lr_scheduler_type": "linear",
        "logging_steps": run.logging_steps,
        "save_strategy": "steps" if run.save_steps > 0 else "no",
        "save_steps": run.save_steps or 500,
        "save_total_limit": run.save_total_limit,
        "seed": run.seed,
        "report_to": trainer_report_to(run.report_to),  # tensorboard is added by stage_callbacks
        "use_cpu": rt.use_cpu,
        "fp16": rt.fp16,
        "bf16": rt.bf16,
        "dataloader_num_workers": 0,
        "model_init_kwargs": {**model_init_kwargs(rt), **trainer_model_kwargs(run.load_in_4bit, rt)},
        "disable_tqdm": False,
        **trainer_extras(run.gradient_checkpointing),
    }


def vllm_settings(run: RunFlags) -> VLLMSettings:
    """The run's vLLM flags (``--use_vllm``, ``--vllm_*``)."""
    return VLLMSettings(
        use_vllm=run.use_vllm,
        mode=run.vllm_mode,
        server_host=run.vllm_server_host,
        server_port=run.vllm_server_port,
        gpu_memory_utilization=run.vllm_gpu_memory_utilization,
        tensor_parallel_size=run.vllm_tensor_parallel_size,
    )


def rft_sampling(run: RunFlags, num_samples: int, temperature: float) -> SamplingSettings:
    """How RFT (and DPO/KTO without pairs of their own) samples candidates: ``num_samples`` per prompt
    (``--rft_num_samples``) at ``temperature`` (``--rft_temperature``), the run's completion length and
    seed, through vLLM under ``--use_vllm``."""
    return SamplingSettings(
        num_samples=num_samples,
        temperature=temperature,
        max_new_tokens=new_tokens(run.max_completion_length),
        seed=run.seed,
        vllm=vllm_settings(run),
    )


def warmup_steps(ratio: float, steps: int) -> int:
    """The warm-up in whole steps: ``--warmup_ratio`` of the stage's steps, rounded down. (transformers would
    round a ratio up: a 5% warm-up of a 4-step stage would have been a quarter of it.)"""
    return int(ratio * steps)


def warm_from_step_one(warmup: int, steps: int) -> Callable[[int], float]:
    """The learning-rate factor of each optimizer step (0-based ``step``): a linear warm-up of ``warmup``
    steps whose first step already moves the weights (1/(warmup+1), 2/(warmup+1), ..., then 1), then the
    linear decay to the last step. transformers' linear schedule starts its warm-up at 0, so the first
    optimizer step of every warmed-up stage trained at learning rate 0 (5% of 40 steps: 0, 0.5, 1.0);
    this is that schedule one step ahead, with one more warm-up step and one more step in all."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        return max(0.0, (steps - step) / max(1, steps - warmup))

    return factor


def first_step_warm(trainer_cls: Callable[..., Any]) -> Callable[..., Any]:
    """``trainer_cls`` (a transformers ``Trainer`` class) whose linear warm-up is :func:`warm_from_step_one`;
    as it is where it is not a class, or its run has no warm-up or another schedule."""
    if not isinstance(trainer_cls, type):
        return trainer_cls

    class FirstStepWarm(trainer_cls):  # type: ignore[misc, valid-type]
        def create_scheduler(self, num_training_steps: int, optimizer=None):
            warmup = self.args.get_warmup_steps(num_training_steps)
            if (
                getattr(self, "lr_scheduler", None) is None
                and self.args.lr_scheduler_type == "linear"
                and warmup
            ):
                from torch.optim.lr_scheduler import LambdaLR

                factor = warm_from_step_one(warmup, num_training_steps)
                self.lr_scheduler = LambdaLR(optimizer or self.optimizer, factor)
                self._created_lr_scheduler = True
            return super().create_scheduler(num_training_steps, optimizer)

    FirstStepWarm.__name__ = FirstStepWarm.__qualname__ = trainer_cls.__name__
    return FirstStepWarm


def without_dropout(kwargs: dict[str, Any], model_in: str, trust_remote_code: bool) -> dict[str, Any]:
    """Trainer ``kwargs`` whose model loads with every dropout rate of its config at 0 (attention_dropout,
    hidden_dropout, attn_pdrop, ...). The RL stages sample and score one policy: TRL's ``disable_dropout``
    zeroes the ``nn.Dropout`` modules only, and Llama's or Qwen2's attention applies its config's
    ``attention_dropout`` as a number in training mode, so a config with one kept it on."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(model_in, trust_remote_code=trust_remote_code)
    except (OSError, ValueError):  # not a transformers folder: TRL reports that itself when it loads it
        return kwargs
    rates = {
        key: 0.0
        for key, value in config.to_dict().items()
        if ("dropout" in key or "pdrop" in key) and isinstance(value, float) and value > 0
    }
    return {**kwargs, "model_init_kwargs": {**kwargs.get("model_init_kwargs", {}), **rates}}


def no_checkpointing(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with gradient checkpointing off unless ``--gradient_checkpointing`` turned it on: TRL's
    DPO, KTO and RLOO configs default it to on, which costs a second forward pass the flag did not ask for."""
    return {"gradient_checkpointing": False, **kwargs}


def stage_callbacks(
    monitor, log_dir: Path, stage: str, report_to: str = "tensorboard", save_minutes: float = 0.0
) -> list:
    """Trainer callbacks of a stage: progress/metrics to the monitor, Ctrl-C's stop points, checkpoints
    every ``--save_minutes`` too, TensorBoard events to ``--log_dir``."""
    from ark_trainer.base.trackers import wants_tensorboard
    from ark_trainer.core.runtime.distributed import ranks
    from ark_trainer.core.runtime.monitor import trainer_callback
    from ark_trainer.core.runtime.save_timer import save_timer_callback
    from ark_trainer.core.runtime.stop_points import stop_callback

    timer = save_timer_callback(save_minutes)
    callbacks = [trainer_callback(monitor, stage), stop_callback(), *([timer] if timer else [])]
    if not ranks().is_main or not wants_tensorboard(report_to):  # only the main process writes TensorBoard
        return callbacks
    from torch.utils.tensorboard import SummaryWriter
    from transformers.integrations import TensorBoardCallback

    writer = SummaryWriter(log_dir=str(log_dir / "tensorboard" / stage))
    return [*callbacks, TensorBoardCallback(tb_writer=writer)]


def save_final(trainer, tokenizer, dest: Path, adapter_only: bool = False) -> None:
    """Save the trained model (safetensors) and its tokenizer so AutoModelForCausalLM loads them.

    A LoRA model is merged into full weights unless ``adapter_only``; under several processes only the
    main one writes (see ``ark_trainer.core.export``).
    """
    from ark_trainer.core.export import export_model

    export_model(trainer, tokenizer, dest, adapter_only=adapter_only)
    log.info("saved model to %s", dest)


def train_and_save(
    ctx: StageContext,
    plan: PlanStage,
    name: str,
    trainer_cls: Callable[..., Any],
    tok: Any,
    final_dir: Path,
    *,
    wrap: Callable[[Any], Any] | None = None,
    **trainer_kw: Any,
) -> Any:
    """How every stage trains once its data and TRL config are ready: a fresh ``trainer_cls(**trainer_kw)``
    per attempt under ``run_trainer`` (resume, crash-safe saves into ``OUT/<name>/``, guards, rollbacks),
    inside the monitor's stage ``name``, the replica check, then the final model (or adapter) saved to
    ``final_dir``. ``wrap`` adjusts each new trainer (GRPO times its generation). Returns the trainer that
    finished (its ``state.log_history`` holds what TRL logged).

    The stage module passes its own TRL trainer class: it stays the one place that names it."""
    from ark_trainer.base.scale import peft_config
    from ark_trainer.core.runtime.distributed import check_replicas
    from ark_trainer.core.runtime.resume import AttemptSettings, run_trainer
    from ark_trainer.stages.fused_head import score_labelled_positions_on_cpu
    from ark_trainer.stages.registry import get_stage

    run = ctx.run
    score_labelled_positions_on_cpu()  # TRL's LM head: only the labelled positions, on CPU as on CUDA

    trainer_cls = first_step_warm(trainer_cls)

    def make_trainer():
        trainer = trainer_cls(
            processing_class=tok,
            callbacks=stage_callbacks(ctx.monitor, ctx.log_dir, name, run.report_to, run.save_minutes),
            peft_config=peft_config(run.lora_r, run.lora_alpha, run.lora_dropout, run.lora_target_modules),
            **trainer_kw,
        )
        return wrap(trainer) if wrap else trainer

    with ctx.monitor.stage(name, total=plan.steps):
        attempts = AttemptSettings(
            resume=run.resume,
            max_bad_steps=run.max_bad_steps,
            max_rollbacks=run.max_rollbacks,
            min_free_disk_gb=run.min_free_disk_gb,
            save_total_limit=run.save_total_limit,
        )
        trainer = run_trainer(make_trainer, attempts, ctx.monitor, get_stage(name), ctx.out / name)
        check_replicas(trainer, name)
        save_final(trainer, tok, final_dir, adapter_only=run.save_adapter_only and plan.last)
    return trainer
