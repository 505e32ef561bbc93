"""The shared flags of a ``train`` run: what every run sets, whichever stages it runs.

:class:`RunOptions` holds the headings that come before the stages' own in ``train --help`` (run, data,
model, strategy), :class:`RunOptionsAfterStages` those after them (reward, evaluation, agent, scale,
reliability, OpenClaw, logging); :class:`RunFlags` is both, what a stage receives beside its own options.
The ``train`` config (:func:`~ark_trainer.core.config.config_class`) is made of them and every registered stage's
options (``stages/<name>/options.py``), in ``--help`` order. To add a shared flag: add one field in its
group's section (``docs/contributing.md``, "Add a flag").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from ark_trainer.base.flags import flag
from ark_trainer.base.ranges import (
    ANY,
    COUNT,
    MAX_BATCH,
    MAX_NEW_TOKENS,
    MAX_SAMPLES,
    MAX_WEIGHT,
    NON_NEGATIVE,
    PORT,
    POSITIVE_SECONDS,
    PROB,
    SECONDS,
    SHARE,
    ZERO_OK,
    Range,
)
from ark_trainer.base.strategies import DEFAULT_STRATEGY, strategies_text
from ark_trainer.base.trackers import PACKAGES as TRACKERS

LAUNCHERS = ("auto", "accelerate")
PRECISIONS = ("auto", "fp16", "bf16", "bf16_weights", "no")
PRECISION_ALIASES = {"fp32": "no", "none": "no", "false": "no"}
VLLM_MODES = ("colocate", "server")
FINAL_MODEL_CHOICES = ("best", "last")  # --final_model: which stage's model OUT/model is (final_model.py)
DEFAULT_DEPLOY_TARGET = "openclaw"
_TARGETS = "ark_trainer.services.deploy.targets"  # the deploy target registry, a floor above: imported by name when used


def deploy_targets() -> tuple[str, ...]:
    """The registered deploy targets' names (``services/deploy/targets.py``: built-in ones, then plug-ins')."""
    return tuple(importlib.import_module(_TARGETS).targets())


@dataclass(frozen=True)
class RunOptions:
    """The shared flags listed before the stages' own in ``train --help``."""

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
        None,
        "eval data (JSONL file, or a folder holding eval.jsonl/test.jsonl), divided by prompt hash into a "
        "dev half (every choice) and a test half (every reported figure)",
        group="data",
    )
    eval_ratio: float = flag(
        0.1,
        "held-out share of --data_path when no --eval_dataset is given, by prompt hash: half dev (what "
        "every choice reads), half test (what every reported figure comes from)",
        group="data",
        range=SHARE,
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
        DEFAULT_STRATEGY,
        lambda: (
            f"{strategies_text()}: a registered strategy (its stages, in order), in any case or another "
            "spelling such as 'Only GRPO' (docs/getting-started.md, 'Strategies')"
        ),
        group="strategy",
    )
    max_train_steps: int = flag(1000, "total optimizer steps, RFT + GRPO", group="strategy", range=COUNT)
    time_budget: float = flag(
        0.0,
        "minutes the run may take on this machine (0: no budget): before training, the expected time of each "
        "stage is measured and printed; over the budget, the step counts not set explicitly are scaled down "
        "to fit, and explicit ones get a warning (docs/long-runs.md)",
        group="strategy",
        range=SECONDS,
    )
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


@dataclass(frozen=True)
class RunOptionsAfterStages:
    """The shared flags listed after the stages' own in ``train --help``."""

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
    eval_answer_cache: str | None = flag(
        None,
        "folder keeping each model's greedy evaluation answers by prompt: a model evaluated before answers "
        "the prompts it has seen from it (the live loop's rounds share one)",
        group="evaluation",
    )
    final_model: str = flag(
        "best",
        "which stage's model OUT/model is: best (the best stage on the dev split by the main metric, "
        "ties to the later; its test-split figure is stated) or last",
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
    lora_dropout: float = flag(
        0.05,
        "LoRA dropout (GRPO and RLOO train with it off: they score what they sample)",
        group="scale",
        range=SHARE,
    )
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
        500,
        "save a checkpoint every N steps (0 = none by steps; --save_minutes still saves)",
        group="reliability",
        range=ZERO_OK,
    )
    save_minutes: float = flag(
        10.0,
        "also save a checkpoint once this many minutes have passed since the last save, so a stopped run "
        "resumes from minutes ago (0 = off)",
        group="reliability",
        range=SECONDS,
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
    deploy_target: str = flag(
        DEFAULT_DEPLOY_TARGET,
        lambda: (
            "where --openclaw_env True deploys the trained model, and what the live loop serves through: "
            f"a registered deploy target, {' or '.join(deploy_targets())}"
        ),
        group="OpenClaw",
        choices=deploy_targets,
        noun="deploy target",
    )

    # --- logging ---
    report_to: str = flag(
        "tensorboard",
        f"metrics also to: {', '.join(TRACKERS)} (comma-separated, installed) or none",
        group="logging",
    )
    log_dir: str | None = flag(None, "text log and TensorBoard events (default: OUT/logs)", group="logging")
    logging_steps: int = flag(5, "log metrics every N steps", group="logging", range=COUNT)


@dataclass(frozen=True)
class RunFlags(RunOptionsAfterStages, RunOptions):
    """Every shared flag of a run (:class:`RunOptions`, then :class:`RunOptionsAfterStages`): what a stage
    receives beside its own options (``StageContext.run``), without any stage's flags."""
