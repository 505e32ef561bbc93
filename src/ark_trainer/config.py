"""The one typed config of a training run: every ``train`` flag declared once, as a field.

:class:`TrainConfig` is the single source of truth. Each field is one flag, spelled exactly as the reference
tool ``ark-trainer-inner`` spells it, declared with :func:`flag`: its default, its help, its ``--help``
group, and where it has them its valid range (``ranges.py``'s :class:`~ark_trainer.ranges.Range`) and its
allowed values. Everything else is derived from those declarations: the ``train`` parser and its grouped
``--help`` (:data:`TRAIN_GROUPS`), ``docs/cli.md``, the range checks (:data:`RANGES`), the choice checks,
``--config run.yaml`` (the same keys; unknown keys are an error) and ``OUT/run.yaml`` (the resolved config,
so a run can be repeated with ``ark-trainer train --config OUT/run.yaml``).

The config is frozen. What needs normalising (the canonical strategy name, precision aliases, the launcher
an accelerate config implies) is normalised while it is built (:meth:`TrainConfig.__post_init__`), so every
way of making one (flags, YAML, ``dataclasses.replace``, a test) gives the same normal form; after that it
is read, never written. To add a flag: add one field in its group's section below (see
``docs/contributing.md``, "Add a flag").
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from ark_trainer.errors import UserError
from ark_trainer.ranges import (
    ANY,
    COUNT,
    DEFAULT,
    LEARNING_RATE,
    MAX_BATCH,
    MAX_NEW_TOKENS,
    MAX_SAMPLES,
    MAX_WEIGHT,
    NON_NEGATIVE,
    PORT,
    POSITIVE,
    POSITIVE_SECONDS,
    PROB,
    SECONDS,
    SHARE,
    ZERO_OK,
    Range,
    range_problems,
)
from ark_trainer.strategies import canonical_strategy, normalize_strategy
from ark_trainer.trackers import PACKAGES as TRACKERS

_TRUE, _FALSE = {"true", "1", "yes", "y", "on"}, {"false", "0", "no", "n", "off"}


def parse_bool(value: Any, flag: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise UserError(f"{flag}: expected True or False, got {value!r}")


def flag(
    default: Any,
    help: str,
    *,
    group: str,
    range: Range | None = None,
    choices: tuple[str, ...] | None = None,
    noun: str = "value",
    comma_list: bool = False,
    cli_only: bool = False,
) -> Any:
    """One flag, declared once: a dataclass field whose metadata says all there is to know about it.

    ``help`` and ``group`` (its heading in ``train --help``) are required. ``range``: the valid values of
    a number (a numeric flag without one gets :data:`~ark_trainer.ranges.DEFAULT`, ≥ 0). ``choices``: the
    values a text flag takes (``noun`` names one in the error, ``unknown mode 'x'``; ``comma_list``: a
    comma-separated list of them). ``cli_only``: a command-line switch, not a setting of the run (left out
    of ``run.yaml`` and ``--config``).
    """
    meta: dict[str, Any] = {"help": help, "group": group}
    if range is not None:
        meta["range"] = range
    if choices is not None:
        meta.update(choices=tuple(choices), noun=noun, comma_list=comma_list)
    if cli_only:
        meta["cli_only"] = True
    return field(default=default, metadata=meta)


DPO_LOSS_TYPES = (
    "sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot", "aot_unpaired",
    "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm",
)  # fmt: skip  # TRL 1.16 DPOConfig.loss_type
KTO_LOSS_TYPES = ("kto", "apo_zero_unpaired")  # TRL 1.16 KTOConfig.loss_type
LAUNCHERS = ("auto", "accelerate")
PRECISIONS = ("auto", "fp16", "bf16", "bf16_weights", "no")
PRECISION_ALIASES = {"fp32": "no", "none": "no", "false": "no"}
VLLM_MODES = ("colocate", "server")
FINAL_MODEL_CHOICES = ("best", "last")  # --final_model: which stage's model OUT/model is (final_model.py)
SCALE_REWARDS = ("group", "batch", "none")  # TRL 1.16 GRPOConfig.scale_rewards


@dataclass(frozen=True)
class TrainConfig:
    """Every setting of a ``train`` run. Field names are the flag names; fields in ``--help`` order."""

    # --- run ---
    config: str | None = flag(
        None, "YAML file with any of these keys; flags override it", group="run", cli_only=True
    )
    task_name: str = flag("ark_training", "name of the run, shown in the report and logs", group="run")
    output_dir: str | None = flag(
        None, "run directory: checkpoints, final model, eval, report (required)", group="run"
    )
    overwrite_output_dir: bool = flag(
        False, "allow a run into an output_dir that holds a previous run", group="run"
    )
    seed: int = flag(42, "random seed", group="run", range=Range(0, 2**32 - 1))  # numpy's seed range

    # --- data ---
    data_path: str | None = flag(None, "training data, JSONL (required)", group="data")
    eval_dataset: str | None = flag(
        None, "eval data (JSONL file, or a folder holding eval.jsonl/test.jsonl)", group="data"
    )
    eval_ratio: float = flag(
        0.1, "held-out share of --data_path when no --eval_dataset is given", group="data", range=SHARE
    )

    # --- model ---
    model_path: str | None = flag(
        None,
        "the base model: a local Hugging Face folder, a .gguf file or ollama:NAME[:TAG] (required)",
        group="model",
    )
    device: str = flag(
        "auto", "auto, cpu, cuda or cuda:N; with no GPU, a cuda request falls back to CPU", group="model"
    )
    fp16: bool = flag(
        False, "float16 mixed precision (GPU only; ignored with a warning on CPU)", group="model"
    )
    bf16: bool = flag(False, "bfloat16 mixed precision (GPU only)", group="model")
    trust_remote_code: bool = flag(
        False, "run the model folder's own Python code (off: never)", group="model"
    )

    # --- strategy ---
    strategy: str = flag(
        "RFT+GRPO",
        "RFT+GRPO (two steps), GRPO / 'Only GRPO' (one step), DPO, RFT+DPO, KTO, RLOO or auto "
        "(docs/getting-started.md, 'Strategies')",
        group="strategy",
    )
    max_train_steps: int = flag(1000, "total optimizer steps, RFT + GRPO", group="strategy", range=COUNT)
    batch_size: int = flag(
        8,
        "per-device batch size (completions per step for GRPO)",
        group="strategy",
        range=Range(1, MAX_BATCH),
    )
    gradient_accumulation_steps: int = flag(
        1, "micro-batches per optimizer step", group="strategy", range=COUNT
    )
    warmup_ratio: float = flag(
        0.0, "share of each stage's steps spent warming up the learning rate", group="strategy", range=SHARE
    )
    max_completion_length: int | None = flag(
        None,
        "max new tokens per completion (sampling, GRPO and eval); default: from the data's answers in this "
        "model's tokenizer (95th percentile plus a margin), 64 for a toy model (docs/real-models.md)",
        group="strategy",
        range=Range(1, MAX_NEW_TOKENS),
    )
    auto_probe_prompts: int = flag(
        32, "--strategy auto: training prompts the base model is probed on", group="strategy", range=COUNT
    )
    auto_probe_samples: int = flag(
        4,
        "--strategy auto: answers sampled per probe prompt (a GRPO group)",
        group="strategy",
        range=Range(2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: a group needs at least 2 answers"),
    )
    auto_min_pass_rate: float = flag(
        0.3,
        "--strategy auto: below this probe pass rate RFT+GRPO is chosen, at or above it Only GRPO",
        group="strategy",
        range=PROB,
    )
    auto_max_zero_std: float = flag(
        0.5,
        "--strategy auto: RFT+GRPO when at least this share of probe groups has zero reward variance",
        group="strategy",
        range=PROB,
    )

    # --- RFT ---
    rft_steps: int | None = flag(
        None, "RFT steps (default: a third of --max_train_steps)", group="RFT", range=ZERO_OK
    )
    rft_learning_rate: float = flag(2e-5, "RFT (supervised) learning rate", group="RFT", range=LEARNING_RATE)
    rft_num_samples: int = flag(
        4,
        "completions sampled from the model per training prompt for RFT (0: only the data's own answers)",
        group="RFT",
        range=Range(
            0, MAX_SAMPLES, why=f"must be in [0, {MAX_SAMPLES}] (answers sampled per prompt at once)"
        ),
    )
    rft_temperature: float = flag(1.0, "sampling temperature for RFT candidates", group="RFT", range=POSITIVE)
    rft_min_reward: float = flag(
        0.5, "a prompt's best completion is kept for RFT only at or above this reward", group="RFT", range=ANY
    )

    # --- GRPO ---
    grpo_learning_rate: float = flag(1e-6, "GRPO learning rate", group="GRPO", range=LEARNING_RATE)
    num_generations: int = flag(
        4,
        "GRPO group size: completions per prompt",
        group="GRPO",
        range=Range(
            2, MAX_SAMPLES, why=f"must be in [2, {MAX_SAMPLES}]: GRPO needs at least 2 completions per prompt"
        ),
    )
    rollout_steps: int | None = flag(
        None,
        "GRPO: optimizer steps whose rollouts one generate call makes (default 1; on a GPU up to 4)",
        group="GRPO",
        range=Range(1, 64),  # each step's rollouts are held in memory until it runs
    )
    temperature: float = flag(1.0, "GRPO sampling temperature", group="GRPO", range=POSITIVE)
    beta: float = flag(
        0.04,
        "GRPO and RLOO KL coefficient (0 disables the reference model)",
        group="GRPO",
        range=NON_NEGATIVE,
    )
    loss_type: str = flag("dapo", "GRPO loss: grpo, dr_grpo, dapo, bnpo, ...", group="GRPO")
    dynamic_sampling_rounds: int = flag(
        0,
        "GRPO: extra sampling rounds per step that replace zero-reward-variance groups (DAPO; 0 = off)",
        group="GRPO",
        range=Range(0, 64),
    )
    grpo_reward_weights: str | None = flag(
        None,
        "GRPO's own reward weights by name, e.g. 'qc_verdict=1,qc_compliance=0' (other names keep the run's "
        "weights; 'run': the run's weights); default: the task's decision grader alone where the reward is a "
        "built-in preset that has one (the QC verdict), else the run's (docs/rewards.md)",
        group="GRPO",
    )
    scale_rewards: str = flag(
        "group",
        "GRPO advantage scaling (TRL's scale_rewards): group (divide by each group's reward std), batch, or "
        "none (Dr. GRPO: no scaling)",
        group="GRPO",
        choices=SCALE_REWARDS,
        noun="scaling",
    )
    grpo_max_completion_length: int | None = flag(
        None,
        "GRPO: max new tokens per sampled completion; default: what the GRPO reward reads (the QC decision "
        "lines: their 95th percentile plus a margin), else --max_completion_length; with --env the whole "
        "episode, tool results included (docs/real-models.md)",
        group="GRPO",
        range=Range(1, MAX_NEW_TOKENS),
    )
    grpo_eval_steps: int | None = flag(
        None,
        "GRPO: evaluate the policy on the held-out set every N steps and keep the best step (0: off); "
        "default: 4 evaluations a stage for a real model, off for a toy or an agent run",
        group="GRPO",
        range=ZERO_OK,
    )
    grpo_prompts_per_step: int | None = flag(
        None,
        "GRPO: prompts per optimizer step (× --num_generations completions, by gradient accumulation); "
        "default: one per label of the data (4..16) for a real model, --batch_size / --num_generations for a "
        "toy",
        group="GRPO",
        range=Range(1, 1024),
    )

    # --- DPO ---
    dpo_learning_rate: float = flag(
        1e-6, "DPO learning rate (TRL's default; the demo uses 5e-4)", group="DPO", range=LEARNING_RATE
    )
    dpo_beta: float = flag(
        0.1,
        "DPO beta: how far from the reference model the policy may move (lower: further)",
        group="DPO",
        range=POSITIVE,
    )
    dpo_loss_type: str = flag(
        "sigmoid",
        "DPO loss (TRL's loss_type): sigmoid, ipo, hinge, robust, apo_zero, ...; a comma list adds them up, "
        "e.g. sigmoid,sft (DPO plus a fine-tuning term on the chosen answers, which keeps their likelihood up)",
        group="DPO",
        choices=DPO_LOSS_TYPES,
        noun="loss",
        comma_list=True,
    )
    dpo_min_margin: float = flag(
        0.1,
        "sampled DPO pairs: drop a pair whose chosen answer's reward beats the rejected one's by less",
        group="DPO",
        range=NON_NEGATIVE,
    )

    # --- KTO ---
    kto_learning_rate: float = flag(
        1e-6, "KTO learning rate (TRL's default; the demo uses 5e-4)", group="KTO", range=LEARNING_RATE
    )
    kto_beta: float = flag(
        0.1, "KTO beta: how far from the reference model the policy may move", group="KTO", range=POSITIVE
    )
    kto_loss_type: str = flag(
        "kto",
        "KTO loss (TRL's loss_type): kto or apo_zero_unpaired",
        group="KTO",
        choices=KTO_LOSS_TYPES,
        noun="loss",
    )
    kto_threshold: float | None = flag(
        None,
        "sampled KTO answers: desirable at or above this reward, undesirable below (default: --pass_threshold)",
        group="KTO",
        range=ANY,
    )

    # --- RLOO ---
    rloo_learning_rate: float = flag(
        1e-6,
        "RLOO learning rate (group size, temperature, KL: the GRPO flags)",
        group="RLOO",
        range=LEARNING_RATE,
    )

    # --- reward ---
    reward_config: str | None = flag(
        None, "grader spec YAML (see docs/rewards.md); default: QC preset", group="reward"
    )
    reward_weights: str = flag(
        "",
        "re-weight rewards by name, e.g. 'qc_compliance=1,qc_satisfaction=0.5' (default: the spec's)",
        group="reward",
    )
    rm_model_path: str | None = flag(
        None, "reward model: local HF sequence-classification checkpoint", group="reward"
    )
    rm_weight: float = flag(
        1.0,
        "weight of the reward model in the composite reward",
        group="reward",
        range=Range(0.0, MAX_WEIGHT),
    )
    reward_timeout: float = flag(
        60.0,
        "seconds a reward call may take before its samples are skipped",
        group="reward",
        range=SECONDS,
    )

    # --- evaluation ---
    eval_auto: bool = flag(
        True, "evaluate the base model and each stage's model, and write the report", group="evaluation"
    )
    pass_threshold: float = flag(
        0.8, "a completion passes when its composite reward reaches this", group="evaluation", range=ANY
    )
    max_eval_samples: int | None = flag(
        None, "cap on eval prompts (default: all)", group="evaluation", range=COUNT
    )
    final_model: str = flag(
        "best",
        "which stage's model OUT/model is: best (the best stage on the held-out set by the main metric, "
        "ties to the later) or last",
        group="evaluation",
        choices=FINAL_MODEL_CHOICES,
        noun="choice",
    )

    # --- agent ---
    env: str | dict | None = flag(
        None,
        "agent environment: module:factory or path/to/file.py:factory (tools, reset, get_reward); MCP "
        "servers: mcp:servers.json, or openclaw (the agent's own mcp.servers); docs/agents.md",
        group="agent",
    )
    max_turns: int = flag(
        4,
        "--env: assistant turns per episode (the last turn's tool calls are not run)",
        group="agent",
        range=Range(1, 64),
    )
    tool_timeout: float = flag(
        5.0,
        "--env: seconds a tool call may take; then the model reads an error",
        group="agent",
        range=POSITIVE_SECONDS,
    )
    max_tool_output: int = flag(
        500,
        "--env: characters of a tool's result the model reads (longer: cut)",
        group="agent",
        range=Range(1, 1_000_000),
    )

    # --- scale ---
    num_processes: int = flag(
        1,
        "training processes on this machine (>1 relaunches through accelerate)",
        group="scale",
        range=Range(1, 1024),
    )
    launcher: str = flag(
        "auto",
        "auto (accelerate when --num_processes > 1) or accelerate (always)",
        group="scale",
        choices=LAUNCHERS,
        noun="launcher",
    )
    accelerate_config: str | None = flag(
        None,
        "accelerate config YAML (multi-node, DeepSpeed ZeRO, FSDP); see examples/accelerate/",
        group="scale",
    )
    main_process_port: int | None = flag(
        None, "rendezvous port of the main process (default: a free one)", group="scale", range=PORT
    )
    mixed_precision: str = flag(
        "auto",
        "auto (bf16 autocast on GPUs that support it, else fp16 autocast, both with fp32 weights; on CPU, "
        "bf16 autocast for a real model where the CPU computes bf16 natively, else fp32), fp16, bf16, "
        "bf16_weights (pure bf16 weights: less memory, less stable) or no",
        group="scale",
        choices=PRECISIONS,
    )
    gradient_checkpointing: bool = flag(
        False, "recompute activations in the backward pass (less memory)", group="scale"
    )
    lora_r: int | None = flag(
        None,
        "LoRA rank; 0 trains all weights; default: 0, or 16 when full fine-tuning would not fit the device's "
        "memory (docs/real-models.md). With LoRA, each learning rate you do not set is 10× its default",
        group="scale",
        range=Range(0, 4096),
    )
    lora_alpha: int | None = flag(None, "LoRA alpha (default: 2 × --lora_r)", group="scale", range=COUNT)
    lora_dropout: float = flag(0.05, "LoRA dropout", group="scale", range=SHARE)
    lora_target_modules: str = flag(
        "all-linear", "LoRA target modules: all-linear or a comma list", group="scale"
    )
    load_in_4bit: bool = flag(
        False, "QLoRA: load the base model in 4-bit (needs bitsandbytes and a GPU)", group="scale"
    )
    save_adapter_only: bool = flag(
        False, "with LoRA, export only the adapter as OUT/model (default: merged)", group="scale"
    )
    use_vllm: bool = flag(
        False, "generate rollouts (RFT sampling, GRPO) with vLLM (needs vllm and a GPU)", group="scale"
    )
    vllm_mode: str = flag(
        "colocate",
        "colocate (vLLM inside the training process) or server (trl vllm-serve)",
        group="scale",
        choices=VLLM_MODES,
        noun="mode",
    )
    vllm_server_host: str = flag("127.0.0.1", "host of `trl vllm-serve` in server mode", group="scale")
    vllm_server_port: int = flag(8000, "port of `trl vllm-serve` in server mode", group="scale", range=PORT)
    vllm_gpu_memory_utilization: float = flag(
        0.3,
        "GPU memory share vLLM may take in colocate mode",
        group="scale",
        range=Range(0.0, 1.0, lo_open=True),
    )
    vllm_tensor_parallel_size: int = flag(
        1, "tensor parallel size of the colocated vLLM engine", group="scale", range=Range(1, 64)
    )

    # --- reliability ---
    resume: bool = flag(
        False,
        "continue the run in --output_dir from its newest complete checkpoint",
        group="reliability",
        cli_only=True,
    )
    auto_resume: int = flag(
        0,
        "restart a failed run from its last checkpoint up to N times",
        group="reliability",
        range=Range(0, 100),
        cli_only=True,
    )
    save_steps: int = flag(
        500, "save a checkpoint every N steps (0 = only the final model)", group="reliability", range=ZERO_OK
    )
    save_total_limit: int = flag(
        2, "checkpoints kept per stage (older ones are deleted)", group="reliability", range=ZERO_OK
    )
    stall_timeout: float = flag(
        0.0,
        "exit non-zero after this many seconds without progress (0 = off)",
        group="reliability",
        range=SECONDS,
    )
    max_bad_steps: int = flag(
        3,
        "NaN/inf steps in a row (each skipped) before the stage rolls back to its last checkpoint",
        group="reliability",
        range=Range(1, None),
    )
    max_rollbacks: int = flag(
        2,
        "rollbacks at half the learning rate before a NaN/inf stage stops (exit 2)",
        group="reliability",
        range=Range(0, None),
    )
    min_free_disk_gb: float = flag(
        1.0,
        "refuse to start or save a checkpoint with less free disk (GB)",
        group="reliability",
        range=NON_NEGATIVE,
    )
    auto_heartbeat: bool = flag(True, "rewrite OUT/heartbeat.json every few seconds", group="reliability")
    heartbeat_interval: float = flag(
        5.0, "seconds between heartbeat writes", group="reliability", range=POSITIVE_SECONDS
    )

    # --- OpenClaw ---
    openclaw_env: bool = flag(
        False, "link with the local OpenClaw install (check it; deploy when present)", group="OpenClaw"
    )
    deploy_if_not_better: bool = flag(
        False,
        "with --openclaw_env True, deploy even a final model no better than the base (diagnose)",
        group="OpenClaw",
    )

    # --- logging ---
    report_to: str = flag(
        "tensorboard",
        f"metrics also to: {', '.join(TRACKERS)} (comma-separated, installed) or none",
        group="logging",
    )
    log_dir: str | None = flag(None, "text log and TensorBoard events (default: OUT/logs)", group="logging")
    logging_steps: int = flag(5, "log metrics every N steps", group="logging", range=COUNT)

    def __post_init__(self) -> None:
        """Normalise while the config is built; it is frozen afterwards, so no one can write it later.

        These are the only writes a config ever sees, made before anyone holds it (``object.__setattr__``
        is how a frozen dataclass sets what it derives); the checks are :func:`validate`'s.
        """
        for name, value in _normal_form(self).items():
            object.__setattr__(self, name, value)

    def flag_items(self) -> dict[str, Any]:
        """The config as a flat dict, without CLI-only keys (what run.yaml holds)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.metadata.get("cli_only")}


def _normal_form(cfg: TrainConfig) -> dict[str, Any]:
    """The fields whose accepted spellings have one canonical value: the strategy table's name for an alias
    (``only grpo`` → ``GRPO``), ``no`` for the fp32 aliases of ``--mixed_precision``, and ``accelerate`` as
    the launcher of a run given an ``--accelerate_config`` (a config file only makes sense through it).
    Unknown values stay as given, for :func:`validate` to name."""
    precision = str(cfg.mixed_precision).strip().lower()
    launcher = "accelerate" if cfg.accelerate_config and cfg.launcher == "auto" else cfg.launcher
    normal = {
        "strategy": canonical_strategy(cfg.strategy),
        "mixed_precision": PRECISION_ALIASES.get(precision, precision),
        "launcher": launcher,
    }
    return {k: v for k, v in normal.items() if v != getattr(cfg, k)}


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
    if name == "env" and isinstance(value, dict):  # MCP servers given in the YAML: env: {mcp_servers: ...}
        from ark_trainer.agent.mcp_config import servers_from_source

        servers_from_source(value, where)  # the shape, checked before anything starts
        return value
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
    if not p.exists():
        raise UserError(f"--config: no such file {path!r}")
    from ark_trainer.yamlsafe import read_yaml_file

    data = read_yaml_file(p) or {}  # a regular file; size, depth and alias expansion bounded
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
    from ark_trainer.auto_defaults import toy_settings  # the demo's toy: the rates it is trained at

    toy = toy_settings(values.get("model_path"))
    values.update({name: value for name, value in toy.items() if name not in values})
    values.update(lora_learning_rates(values))
    cfg = TrainConfig(**values)
    try:
        validate(cfg)
    except UserError as exc:
        raise UserError(*bad, *exc.messages) from None
    if bad:
        raise UserError(*bad)
    return cfg


LEARNING_RATES = tuple(f.name for f in fields(TrainConfig) if f.metadata.get("range") is LEARNING_RATE)
"""The stages' learning-rate flags: the fields declared with the :data:`~ark_trainer.ranges.LEARNING_RATE` range."""
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
    from ark_trainer.runfolder import RunFolder

    path = RunFolder(output_dir or "").config_path
    return load_yaml_config(str(path)) if output_dir and path.is_file() else {}


def validate(cfg: TrainConfig) -> None:
    """Check values (every problem at once); derived values (steps per stage) are the plan's (plan.py)."""
    problems = [f"--{name}: required" for name in REQUIRED if not getattr(cfg, name)]
    normalize_strategy(cfg.strategy)  # an unknown strategy (or PPO) is refused here, in one line
    numeric = [n for n, kind in field_types().items() if kind in (int, float)]
    out_of_range = range_problems(vars(cfg), {n: range_of(n) for n in numeric})
    problems += out_of_range
    if not out_of_range:  # checks across flags only make sense once each one is in its range
        problems += _cross_problems(cfg)
    if cfg.fp16 and cfg.bf16:
        problems.append("--fp16/--bf16: choose one")
    from ark_trainer.scale import validate_scale
    from ark_trainer.trackers import report_to_problems

    problems += validate_scale(cfg)
    problems += report_to_problems(cfg.report_to)
    problems += choice_problems(cfg)
    if problems:
        raise UserError(*problems)


def dpo_losses(value: str) -> list[str]:
    """``--dpo_loss_type sigmoid,sft`` → ``["sigmoid", "sft"]`` (TRL adds the losses up)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def choice_problems(cfg: TrainConfig) -> list[str]:
    """Flags that take one of a few names (TRL's loss names, our modes): refused here, not deep inside a
    trainer an hour later. The names are the fields' ``choices``."""
    problems = []
    for f in fields(cfg):
        if "choices" not in f.metadata:
            continue
        choices, value = f.metadata["choices"], getattr(cfg, f.name)
        values = (dpo_losses(value) or [""]) if f.metadata["comma_list"] else [value]
        use = " or ".join(choices) if len(choices) == 2 else f"one of {', '.join(choices)}"
        for bad in (v for v in values if v not in choices):
            problems.append(f"--{f.name}: unknown {f.metadata['noun']} {bad!r}; use {use}")
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


def _groups() -> dict[str, tuple[str, ...]]:
    groups: dict[str, list[str]] = {}
    for f in fields(TrainConfig):
        groups.setdefault(f.metadata["group"], []).append(f.name)
    return {title: tuple(names) for title, names in groups.items()}


TRAIN_GROUPS: dict[str, tuple[str, ...]] = _groups()
"""The ``train --help`` headings, in order, and the flags under each: the fields' ``group``, in field order."""

RANGES: dict[str, Range] = {f.name: f.metadata["range"] for f in fields(TrainConfig) if "range" in f.metadata}
"""The valid range of each numeric flag that declares one (the others get :data:`~ark_trainer.ranges.DEFAULT`)."""


def range_of(name: str) -> Range:
    return RANGES.get(name, DEFAULT)
