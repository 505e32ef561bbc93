"""The one typed config of a training run.

:class:`TrainConfig` is the single source of truth: the ``train`` command's flags are generated from its
fields (spelled exactly as the reference tool ``ark-trainer-inner`` spells them), ``--config run.yaml``
gives defaults for the same keys (unknown keys are an error), and the resolved config is written back to
``OUT/run.yaml`` so a run can be repeated with ``ark-trainer train --config OUT/run.yaml``.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from ark_trainer.errors import UserError
from ark_trainer.fileio import yaml_error

_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def normalize_strategy(value: str) -> str:
    """Canonical strategy name (a name of the strategy table, or ``auto``) for any accepted spelling."""
    from ark_trainer.stages.registry import STRATEGIES, strategy_aliases

    key = " ".join(str(value).strip().lower().split())
    if re.search(r"(?<![a-z])ppo(?![a-z])", key):
        raise UserError(
            f"--strategy: {value!r}: TRL, the training library, no longer ships PPO; use GRPO or RLOO, "
            "its critic-free successors here (or RFT+GRPO)"
        )
    aliases = strategy_aliases()  # the strategy table (stages/registry.py) is the one list of strategies
    if key not in aliases:
        raise UserError(f"--strategy: unknown strategy {value!r}; use {', '.join(STRATEGIES)} or auto")
    return aliases[key]


def parse_bool(value: Any, flag: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UserError(f"{flag}: expected True or False, got {value!r}")


def _opt(default: Any = None, help: str = "", **kw: Any) -> Any:
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class TrainConfig:
    """Every setting of a ``train`` run. Field names are the flag names."""

    # --- the reference tool's flags ---
    strategy: str = _opt(
        "RFT+GRPO",
        "RFT+GRPO (two steps), GRPO / 'Only GRPO' (one step), DPO, RFT+DPO, KTO, RLOO or auto "
        "(docs/getting-started.md, 'Strategies')",
    )
    task_name: str = _opt("ark_training", "name of the run, shown in the report and logs")
    model_path: str | None = _opt(None, "local Hugging Face checkpoint of the base model (required)")
    data_path: str | None = _opt(None, "training data, JSONL (required)")
    output_dir: str | None = _opt(None, "run directory: checkpoints, final model, eval, report (required)")
    openclaw_env: bool = _opt(False, "link with the local OpenClaw install (check it; deploy when present)")
    deploy_if_not_better: bool = _opt(
        False, "with --openclaw_env True, deploy even a final model no better than the base (diagnose)"
    )
    report_to: str = _opt(
        "tensorboard",
        "metrics also to: tensorboard, trackio, wandb, mlflow (comma-separated, installed) or none",
    )
    eval_auto: bool = _opt(True, "evaluate the base model and each stage's model, and write the report")
    eval_dataset: str | None = _opt(None, "eval data (JSONL file, or a folder holding eval.jsonl/test.jsonl)")
    max_train_steps: int = _opt(1000, "total optimizer steps, RFT + GRPO")
    rft_steps: int | None = _opt(None, "RFT steps (default: a third of --max_train_steps)")
    grpo_learning_rate: float = _opt(1e-6, "GRPO learning rate")
    batch_size: int = _opt(8, "per-device batch size (completions per step for GRPO)")
    gradient_accumulation_steps: int = _opt(1, "micro-batches per optimizer step")
    warmup_ratio: float = _opt(0.0, "share of each stage's steps spent warming up the learning rate")
    save_steps: int = _opt(500, "save a checkpoint every N steps (0 = only the final model)")
    log_dir: str | None = _opt(None, "text log and TensorBoard events (default: OUT/logs)")
    device: str = _opt("auto", "auto, cpu, cuda or cuda:N; with no GPU, a cuda request falls back to CPU")
    fp16: bool = _opt(False, "float16 mixed precision (GPU only; ignored with a warning on CPU)")
    rm_model_path: str | None = _opt(None, "reward model: local HF sequence-classification checkpoint")
    auto_heartbeat: bool = _opt(True, "rewrite OUT/heartbeat.json every few seconds")
    # --- knobs TRL users expect ---
    config: str | None = _opt(None, "YAML file with any of these keys; flags override it", cli_only=True)
    bf16: bool = _opt(False, "bfloat16 mixed precision (GPU only)")
    seed: int = _opt(42, "random seed")
    rft_learning_rate: float = _opt(2e-5, "RFT (supervised) learning rate")
    rft_num_samples: int = _opt(
        4, "completions sampled from the model per training prompt for RFT (0: only the data's own answers)"
    )
    rft_temperature: float = _opt(1.0, "sampling temperature for RFT candidates")
    rft_min_reward: float = _opt(
        0.5, "a prompt's best completion is kept for RFT only at or above this reward"
    )
    num_generations: int = _opt(4, "GRPO group size: completions per prompt")
    rollout_steps: int | None = _opt(
        None, "GRPO: optimizer steps whose rollouts one generate call makes (default 1; on a GPU up to 4)"
    )
    max_completion_length: int | None = _opt(
        None,
        "max new tokens per completion (sampling, GRPO and eval); default: from the data's answers in this "
        "model's tokenizer (95th percentile plus a margin), 64 for a toy model (docs/real-models.md)",
    )
    temperature: float = _opt(1.0, "GRPO sampling temperature")
    beta: float = _opt(0.04, "GRPO and RLOO KL coefficient (0 disables the reference model)")
    loss_type: str = _opt("dapo", "GRPO loss: grpo, dr_grpo, dapo, bnpo, ...")
    dynamic_sampling_rounds: int = _opt(
        0, "GRPO: extra sampling rounds per step that replace zero-reward-variance groups (DAPO; 0 = off)"
    )
    # --- preference strategies: DPO, KTO, RLOO (stages/dpo.py, kto.py, rloo.py) ---
    dpo_learning_rate: float = _opt(1e-6, "DPO learning rate (TRL's default; the demo uses 5e-4)")
    dpo_beta: float = _opt(
        0.1, "DPO beta: how far from the reference model the policy may move (lower: further)"
    )
    dpo_loss_type: str = _opt(
        "sigmoid",
        "DPO loss (TRL's loss_type): sigmoid, ipo, hinge, robust, apo_zero, ...; a comma list adds them up, "
        "e.g. sigmoid,sft (DPO plus a fine-tuning term on the chosen answers, which keeps their likelihood up)",
    )
    dpo_min_margin: float = _opt(
        0.1, "sampled DPO pairs: drop a pair whose chosen answer's reward beats the rejected one's by less"
    )
    kto_learning_rate: float = _opt(1e-6, "KTO learning rate (TRL's default; the demo uses 5e-4)")
    kto_beta: float = _opt(0.1, "KTO beta: how far from the reference model the policy may move")
    kto_loss_type: str = _opt("kto", "KTO loss (TRL's loss_type): kto or apo_zero_unpaired")
    kto_threshold: float | None = _opt(
        None,
        "sampled KTO answers: desirable at or above this reward, undesirable below (default: --pass_threshold)",
    )
    rloo_learning_rate: float = _opt(1e-6, "RLOO learning rate (group size, temperature, KL: the GRPO flags)")
    logging_steps: int = _opt(5, "log metrics every N steps")
    save_total_limit: int = _opt(2, "checkpoints kept per stage (older ones are deleted)")
    reward_config: str | None = _opt(None, "grader spec YAML (see docs/rewards.md); default: QC preset")
    rm_weight: float = _opt(1.0, "weight of the reward model in the composite reward")
    pass_threshold: float = _opt(0.8, "a completion passes when its composite reward reaches this")
    eval_ratio: float = _opt(0.1, "held-out share of --data_path when no --eval_dataset is given")
    max_eval_samples: int | None = _opt(None, "cap on eval prompts (default: all)")
    heartbeat_interval: float = _opt(5.0, "seconds between heartbeat writes")
    overwrite_output_dir: bool = _opt(False, "allow a run into an output_dir that holds a previous run")
    # --- long runs: resume, watchdog, supervisor, guards (docs/long-runs.md) ---
    resume: bool = _opt(
        False, "continue the run in --output_dir from its newest complete checkpoint", cli_only=True
    )
    auto_resume: int = _opt(0, "restart a failed run from its last checkpoint up to N times", cli_only=True)
    stall_timeout: float = _opt(0.0, "exit non-zero after this many seconds without progress (0 = off)")
    reward_timeout: float = _opt(60.0, "seconds a reward call may take before its samples are skipped")
    max_bad_steps: int = _opt(
        3, "NaN/inf steps in a row (each skipped) before the stage rolls back to its last checkpoint"
    )
    max_rollbacks: int = _opt(2, "rollbacks at half the learning rate before a NaN/inf stage stops (exit 2)")
    min_free_disk_gb: float = _opt(1.0, "refuse to start or save a checkpoint with less free disk (GB)")
    trust_remote_code: bool = _opt(False, "run the model folder's own Python code (off: never)")
    reward_weights: str = _opt(
        "", "re-weight rewards by name, e.g. 'qc_compliance=1,qc_satisfaction=0.5' (default: the spec's)"
    )
    auto_probe_prompts: int = _opt(32, "--strategy auto: training prompts the base model is probed on")
    auto_probe_samples: int = _opt(4, "--strategy auto: answers sampled per probe prompt (a GRPO group)")
    auto_min_pass_rate: float = _opt(
        0.3, "--strategy auto: below this probe pass rate RFT+GRPO is chosen, at or above it Only GRPO"
    )
    auto_max_zero_std: float = _opt(
        0.5, "--strategy auto: RFT+GRPO when at least this share of probe groups has zero reward variance"
    )
    # --- agents: tool-using episodes (docs/agents.md) ---
    env: str | None = _opt(
        None, "agent environment: module:factory or path/to/file.py:factory (tools, reset, get_reward)"
    )
    max_turns: int = _opt(4, "--env: assistant turns per episode (the last turn's tool calls are not run)")
    tool_timeout: float = _opt(5.0, "--env: seconds a tool call may take; then the model reads an error")
    max_tool_output: int = _opt(500, "--env: characters of a tool's result the model reads (longer: cut)")
    # --- scale and speed (issue 7): processes, low memory, vLLM; logic in launch.py / scale.py ---
    num_processes: int = _opt(1, "training processes on this machine (>1 relaunches through accelerate)")
    launcher: str = _opt("auto", "auto (accelerate when --num_processes > 1) or accelerate (always)")
    accelerate_config: str | None = _opt(
        None, "accelerate config YAML (multi-node, DeepSpeed ZeRO, FSDP); see examples/accelerate/"
    )
    main_process_port: int | None = _opt(None, "rendezvous port of the main process (default: a free one)")
    mixed_precision: str = _opt(
        "auto",
        "auto (bf16 autocast on GPUs that support it, else fp16 autocast, both with fp32 weights; fp32 on "
        "CPU), fp16, bf16, bf16_weights (pure bf16 weights: less memory, less stable) or no",
    )
    gradient_checkpointing: bool = _opt(False, "recompute activations in the backward pass (less memory)")
    lora_r: int | None = _opt(
        None,
        "LoRA rank; 0 trains all weights; default: 0, or 16 when full fine-tuning would not fit the device's "
        "memory (docs/real-models.md). With LoRA, each learning rate you do not set is 10× its default",
    )
    lora_alpha: int | None = _opt(None, "LoRA alpha (default: 2 × --lora_r)")
    lora_dropout: float = _opt(0.05, "LoRA dropout")
    lora_target_modules: str = _opt("all-linear", "LoRA target modules: all-linear or a comma list")
    load_in_4bit: bool = _opt(False, "QLoRA: load the base model in 4-bit (needs bitsandbytes and a GPU)")
    save_adapter_only: bool = _opt(False, "with LoRA, export only the adapter as OUT/model (default: merged)")
    use_vllm: bool = _opt(False, "generate rollouts (RFT sampling, GRPO) with vLLM (needs vllm and a GPU)")
    vllm_mode: str = _opt(
        "colocate", "colocate (vLLM inside the training process) or server (trl vllm-serve)"
    )
    vllm_server_host: str = _opt("127.0.0.1", "host of `trl vllm-serve` in server mode")
    vllm_server_port: int = _opt(8000, "port of `trl vllm-serve` in server mode")
    vllm_gpu_memory_utilization: float = _opt(0.3, "GPU memory share vLLM may take in colocate mode")
    vllm_tensor_parallel_size: int = _opt(1, "tensor parallel size of the colocated vLLM engine")

    def flag_items(self) -> dict[str, Any]:
        """The config as a flat dict, without CLI-only keys (what run.yaml holds)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.metadata.get("cli_only")}


REQUIRED = ("model_path", "data_path", "output_dir")


def field_types() -> dict[str, type]:
    """Map each field to its base type (``int | None`` → ``int``)."""
    hints = typing.get_type_hints(TrainConfig)
    out = {}
    for name, hint in hints.items():
        if isinstance(hint, types.UnionType):
            hint = next(a for a in typing.get_args(hint) if a is not type(None))
        out[name] = hint
    return out


def optional_fields() -> set[str]:
    """Fields that may be ``None`` (typed ``X | None``)."""
    hints = typing.get_type_hints(TrainConfig)
    return {
        n for n, h in hints.items() if isinstance(h, types.UnionType) and type(None) in typing.get_args(h)
    }


def coerce(name: str, value: Any, where: str) -> Any:
    """Convert a raw flag or YAML value to the field's type, or raise a one-line UserError."""
    kind = field_types()[name]
    if value is None or (
        isinstance(value, str) and value.strip().lower() in ("none", "null") and kind is not str
    ):
        if name not in optional_fields():
            raise UserError(f"{where}: expected {kind.__name__}, got {value!r}; this setting cannot be empty")
        return None
    try:
        if kind is bool:
            return parse_bool(value, where)
        if kind in (int, float):
            return _number(name, kind, value, where)
    except (TypeError, ValueError):
        raise UserError(f"{where}: expected {kind.__name__}, got {value!r}") from None
    return str(value)


def _number(name: str, kind: type, value: Any, where: str) -> int | float:
    """An int or a finite float; ``nan``, ``inf`` and ``1e999`` are refused here, naming the valid range."""
    from ark_trainer.ranges import range_of

    number = float(value)  # ValueError/TypeError: not a number at all (the caller says so)
    if not math.isfinite(number):
        rng = range_of(name)
        limits = "" if rng.lo is None and rng.hi is None else f"; must be {rng.text()}"
        raise UserError(f"{where}: {value!r} is not a finite number{limits}")
    if kind is float:
        return number
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip())  # exact, also for big ints
    except ValueError:
        if not number.is_integer():  # 2.5 is not an int; 1e3 is
            raise
        return int(number)


def load_yaml_config(path: str) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"--config: no such file {path!r}")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise UserError(yaml_error(path, exc)) from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of config keys, got {type(data).__name__}")
    known = {f.name for f in fields(TrainConfig) if not f.metadata.get("cli_only")}
    unknown = sorted(set(data) - known)
    if unknown:
        raise UserError(
            *(f"{path}: {k}: unknown key; known keys are the train flags (see --help)" for k in unknown)
        )
    values, problems = {}, []
    for key, value in data.items():  # every bad value at once
        try:
            values[key] = coerce(key, value, f"{path}: {key}")
        except UserError as exc:
            problems += exc.messages
    if problems:
        raise UserError(*problems)
    return values


def resolve_config(flags: dict[str, Any]) -> TrainConfig:
    """Merge ``--config`` YAML (defaults) with explicit flags (override) and validate the result."""
    values: dict[str, Any] = {}
    if flags.get("config"):
        values.update(load_yaml_config(flags["config"]))
    bad: list[str] = []  # every unreadable flag is reported together with every other problem
    for name, raw in flags.items():
        if name != "config":
            try:
                values[name] = coerce(name, raw, f"--{name}")
            except UserError as exc:
                bad += exc.messages
    values["config"] = flags.get("config")
    if values.get("resume") and not flags.get("config"):
        values = {**_previous_run(values.get("output_dir")), **values}
    values.update(lora_learning_rates(values))
    cfg = TrainConfig(**values)
    try:
        validate(cfg)
    except UserError as exc:
        raise UserError(*bad, *exc.messages) from None
    if bad:
        raise UserError(*bad)
    return cfg


LEARNING_RATES = (
    "rft_learning_rate", "grpo_learning_rate", "dpo_learning_rate", "kto_learning_rate", "rloo_learning_rate"
)  # fmt: skip
LORA_LR_SCALE = 10


def lora_learning_rates(values: dict[str, Any]) -> dict[str, float]:
    """With LoRA (``lora_r`` > 0), the learning rates neither a flag nor ``--config`` set: 10× their defaults.

    Full fine-tuning defaults barely move a LoRA adapter; LoRA's best learning rate is about 10× full
    fine-tuning's (Thinking Machines, "LoRA Without Regret", 2025), and ms-swift defaults to 1e-4 with LoRA
    against 1e-5 without. The values land in ``run.yaml`` like any other.
    """
    lora_r = values.get("lora_r")
    if not isinstance(lora_r, int) or isinstance(lora_r, bool) or lora_r <= 0:
        return {}
    return {name: getattr(TrainConfig, name) * LORA_LR_SCALE for name in LEARNING_RATES if name not in values}


def _previous_run(output_dir: str | None) -> dict[str, Any]:
    """``--resume`` needs no other flag: the run's own ``run.yaml`` gives the rest."""
    path = Path(output_dir or "") / "run.yaml"
    return load_yaml_config(str(path)) if output_dir and path.is_file() else {}


def validate(cfg: TrainConfig) -> None:
    """Check values (every problem at once); derived values (steps per stage) are the plan's (plan.py)."""
    problems = [f"--{name}: required" for name in REQUIRED if not getattr(cfg, name)]
    cfg.strategy = normalize_strategy(cfg.strategy)
    from ark_trainer.ranges import range_problems

    numeric = [n for n, kind in field_types().items() if kind in (int, float)]
    out_of_range = range_problems(vars(cfg), numeric)
    problems += out_of_range
    if not out_of_range:  # checks across flags only make sense once each one is in its range
        problems += _cross_problems(cfg)
    if cfg.fp16 and cfg.bf16:
        problems.append("--fp16/--bf16: choose one")
    from ark_trainer.scale import validate_scale  # issue 7: scale and speed flags
    from ark_trainer.trackers import report_to_problems

    flagged = {p.split(":", 1)[0] for p in out_of_range}
    problems += [p for p in validate_scale(cfg) if p.split(":", 1)[0] not in flagged]
    problems += report_to_problems(cfg.report_to)
    problems += _choice_problems(cfg)
    if problems:
        raise UserError(*problems)


DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired",
    "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)  # fmt: skip  # TRL 1.16 DPOConfig.loss_type
KTO_LOSS_TYPES = ("kto", "apo_zero_unpaired")  # TRL 1.16 KTOConfig.loss_type


def dpo_losses(value: str) -> list[str]:
    """``--dpo_loss_type sigmoid,sft`` → ``["sigmoid", "sft"]`` (TRL adds the losses up)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def _choice_problems(cfg: TrainConfig) -> list[str]:
    """Flags that take one of TRL's names: refused here, not deep inside a trainer an hour later."""
    problems = []
    for flag, values, choices in (
        ("dpo_loss_type", dpo_losses(cfg.dpo_loss_type), DPO_LOSS_TYPES),
        ("kto_loss_type", [cfg.kto_loss_type], KTO_LOSS_TYPES),
    ):
        for value in [v for v in values if v not in choices] or ([] if values else [""]):
            problems.append(f"--{flag}: unknown loss {value!r}; use one of {', '.join(choices)}")
    return problems


# The strategies whose stages play whole episodes when --env is set (stages/rft.py, stages/grpo.py).
EPISODE_STRATEGIES = ("RFT+GRPO", "GRPO")


def _cross_problems(cfg: TrainConfig) -> list[str]:
    """Problems that involve two flags, each already within its own range."""
    problems = []
    if cfg.env and cfg.strategy == "auto":  # the probe samples single answers, not episodes
        problems.append("--strategy: auto does not probe agent episodes (--env) yet; choose RFT+GRPO or GRPO")
    elif cfg.env and cfg.strategy not in EPISODE_STRATEGIES:  # the other stages train on single answers
        problems.append(
            f"--strategy: {cfg.strategy} does not train agent episodes (--env) yet; choose "
            f"{' or '.join(EPISODE_STRATEGIES)}"
        )
    if cfg.env and cfg.rft_num_samples == 0:  # an episode is only ever the model's own
        problems.append("--rft_num_samples: agent episodes (--env) are sampled from the model; use 1 or more")
    if cfg.env and cfg.dynamic_sampling_rounds:  # its refill samples single answers, not episodes
        problems.append("--dynamic_sampling_rounds: not with agent episodes (--env) yet; use 0")
    if cfg.rft_steps is not None and cfg.rft_steps > cfg.max_train_steps:
        problems.append(f"--rft_steps: must be between 0 and --max_train_steps ({cfg.max_train_steps})")
    if (cfg.batch_size * cfg.gradient_accumulation_steps) % cfg.num_generations:
        problems.append(
            f"--num_generations: {cfg.num_generations} must divide --batch_size × --gradient_accumulation_steps "
            f"({cfg.batch_size * cfg.gradient_accumulation_steps}); e.g. --num_generations 4 with --batch_size 8"
        )
    if cfg.dynamic_sampling_rounds and cfg.num_processes > 1:
        problems.append(
            "--dynamic_sampling_rounds: works with one training process only (TRL splits a group across "
            "processes); use --num_processes 1 or --dynamic_sampling_rounds 0"
        )
    return problems


def to_yaml(cfg: TrainConfig) -> str:
    return yaml.safe_dump(cfg.flag_items(), allow_unicode=True, sort_keys=False)


def config_fields() -> list[dataclasses.Field]:
    return list(fields(TrainConfig))


TRAIN_GROUPS: dict[str, tuple[str, ...]] = {
    "run": ("config", "task_name", "output_dir", "overwrite_output_dir", "seed"),
    "data": ("data_path", "eval_dataset", "eval_ratio"),
    "model": ("model_path", "device", "fp16", "bf16", "trust_remote_code"),
    "strategy": (
        "strategy",
        "max_train_steps",
        "batch_size",
        "gradient_accumulation_steps",
        "warmup_ratio",
        "max_completion_length",
        "auto_probe_prompts",
        "auto_probe_samples",
        "auto_min_pass_rate",
        "auto_max_zero_std",
    ),
    "RFT": ("rft_steps", "rft_learning_rate", "rft_num_samples", "rft_temperature", "rft_min_reward"),
    "GRPO": (
        "grpo_learning_rate",
        "num_generations",
        "rollout_steps",
        "temperature",
        "beta",
        "loss_type",
        "dynamic_sampling_rounds",
    ),
    "DPO": ("dpo_learning_rate", "dpo_beta", "dpo_loss_type", "dpo_min_margin"),
    "KTO": ("kto_learning_rate", "kto_beta", "kto_loss_type", "kto_threshold"),
    "RLOO": ("rloo_learning_rate",),
    "reward": ("reward_config", "reward_weights", "rm_model_path", "rm_weight", "reward_timeout"),
    "evaluation": ("eval_auto", "pass_threshold", "max_eval_samples"),
    "agent": ("env", "max_turns", "tool_timeout", "max_tool_output"),
    "scale": (
        "num_processes",
        "launcher",
        "accelerate_config",
        "main_process_port",
        "mixed_precision",
        "gradient_checkpointing",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "lora_target_modules",
        "load_in_4bit",
        "save_adapter_only",
        "use_vllm",
        "vllm_mode",
        "vllm_server_host",
        "vllm_server_port",
        "vllm_gpu_memory_utilization",
        "vllm_tensor_parallel_size",
    ),
    "reliability": (
        "resume",
        "auto_resume",
        "save_steps",
        "save_total_limit",
        "stall_timeout",
        "max_bad_steps",
        "max_rollbacks",
        "min_free_disk_gb",
        "auto_heartbeat",
        "heartbeat_interval",
    ),
    "OpenClaw": ("openclaw_env", "deploy_if_not_better"),
    "logging": ("report_to", "log_dir", "logging_steps"),
}
"""The ``train --help`` headings, in order, and the flags under each (every field in exactly one)."""
