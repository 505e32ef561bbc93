"""Each train flag is declared once, as a field of the frozen TrainConfig; the rest is derived from it."""

from __future__ import annotations

import dataclasses

import pytest

from ark_trainer.config import RANGES, TRAIN_GROUPS, TrainConfig, choice_problems, resolve_config
from ark_trainer.ranges import (
    ANY,
    BIG,
    COUNT,
    MAX_NEW_TOKENS,
    NON_NEGATIVE,
    PORT,
    POSITIVE,
    PROB,
    SHARE,
    ZERO_OK,
    Range,
)

# The range table as ranges.py declared it before each range moved to its field: the derived one is equal.
# A range changed on purpose is a change of behaviour: change it here too, in the same commit.
BEFORE: dict[str, Range] = {
    "max_train_steps": COUNT,
    "rft_steps": ZERO_OK,
    "grpo_max_completion_length": Range(1, MAX_NEW_TOKENS),
    "grpo_prompts_per_step": Range(1, 1024),
    "grpo_eval_steps": ZERO_OK,
    "grpo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "rft_learning_rate": Range(0.0, 1.0, lo_open=True),
    "batch_size": COUNT,
    "gradient_accumulation_steps": COUNT,
    "warmup_ratio": SHARE,
    "save_steps": ZERO_OK,
    "seed": Range(0, 2**32 - 1),  # numpy's seed range
    "rft_num_samples": ZERO_OK,  # since: 0 trains on the data's own answers only
    "rft_temperature": POSITIVE,
    "rft_min_reward": ANY,
    "num_generations": Range(2, BIG, why="GRPO needs at least 2 completions per prompt"),
    "max_completion_length": COUNT,
    "temperature": POSITIVE,
    "beta": NON_NEGATIVE,
    "dynamic_sampling_rounds": Range(0, 64),  # extra generation batches per GRPO step
    "dpo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "dpo_beta": POSITIVE,
    "dpo_min_margin": NON_NEGATIVE,
    "kto_learning_rate": Range(0.0, 1.0, lo_open=True),
    "kto_beta": POSITIVE,
    "kto_threshold": ANY,
    "rloo_learning_rate": Range(0.0, 1.0, lo_open=True),
    "logging_steps": COUNT,
    "save_total_limit": ZERO_OK,
    "rm_weight": NON_NEGATIVE,
    "pass_threshold": ANY,
    "eval_ratio": SHARE,
    "max_eval_samples": COUNT,
    "heartbeat_interval": POSITIVE,
    "auto_resume": Range(0, 100),
    "max_bad_steps": Range(1, None),
    "max_rollbacks": Range(0, None),
    "rollout_steps": Range(1, None),
    "stall_timeout": NON_NEGATIVE,
    "max_turns": Range(1, 64),
    "tool_timeout": POSITIVE,
    "max_tool_output": Range(1, 1_000_000),
    "reward_timeout": NON_NEGATIVE,
    "min_free_disk_gb": NON_NEGATIVE,
    "auto_probe_prompts": COUNT,
    "auto_probe_samples": Range(2, BIG, why="a group needs at least 2 answers"),
    "auto_min_pass_rate": PROB,
    "auto_max_zero_std": PROB,
    "num_processes": COUNT,
    "main_process_port": PORT,
    "lora_r": ZERO_OK,
    "lora_alpha": COUNT,
    "lora_dropout": SHARE,
    "vllm_server_port": PORT,
    "vllm_gpu_memory_utilization": Range(0.0, 1.0, lo_open=True),
    "vllm_tensor_parallel_size": COUNT,
}

# the counts that multiply memory (or a weight that could overflow a total) are bounded since; the rest as before
BEFORE.update(
    {
        "batch_size": Range(lo=1, hi=8192, lo_open=False, hi_open=False, why=""),
        "max_completion_length": Range(lo=1, hi=131072, lo_open=False, hi_open=False, why=""),
        "auto_probe_samples": Range(
            lo=2,
            hi=256,
            lo_open=False,
            hi_open=False,
            why="must be in [2, 256]: a group needs at least 2 answers",
        ),
        "rft_num_samples": Range(
            lo=0,
            hi=256,
            lo_open=False,
            hi_open=False,
            why="must be in [0, 256] (answers sampled per prompt at once)",
        ),
        "num_generations": Range(
            lo=2,
            hi=256,
            lo_open=False,
            hi_open=False,
            why="must be in [2, 256]: GRPO needs at least 2 completions per prompt",
        ),
        "rollout_steps": Range(lo=1, hi=64, lo_open=False, hi_open=False, why=""),
        "rm_weight": Range(lo=0.0, hi=1000000.0, lo_open=False, hi_open=False, why=""),
        "num_processes": Range(lo=1, hi=1024, lo_open=False, hi_open=False, why=""),
        "lora_r": Range(lo=0, hi=4096, lo_open=False, hi_open=False, why=""),
        "vllm_tensor_parallel_size": Range(lo=1, hi=64, lo_open=False, hi_open=False, why=""),
    }
)
# seconds are bounded too (threading refuses a timeout of 1e300 s with an OverflowError)
BEFORE.update(
    {
        "reward_timeout": Range(lo=0.0, hi=1e6),
        "stall_timeout": Range(lo=0.0, hi=1e6),
        "tool_timeout": Range(lo=0.0, hi=1e6, lo_open=True),
        "heartbeat_interval": Range(lo=0.0, hi=1e6, lo_open=True),
    }
)


def test_the_config_is_frozen():
    cfg = TrainConfig(model_path="m", data_path="d", output_dir="o")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_train_steps = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.resume = True  # type: ignore[misc]


def test_every_flag_declares_its_help_and_group():
    for f in dataclasses.fields(TrainConfig):
        assert f.metadata.get("help"), f.name
        assert f.metadata.get("group") in TRAIN_GROUPS, f.name
    listed = [name for names in TRAIN_GROUPS.values() for name in names]
    assert listed == [f.name for f in dataclasses.fields(TrainConfig)]  # the fields are in --help order


def test_the_derived_ranges_are_the_ones_declared_before():
    assert RANGES == BEFORE


def test_normalising_happens_while_the_config_is_built():
    cfg = TrainConfig(strategy="only grpo", mixed_precision=" FP32 ", accelerate_config="zero3.yaml")
    assert (cfg.strategy, cfg.mixed_precision, cfg.launcher) == ("GRPO", "no", "accelerate")
    again = dataclasses.replace(TrainConfig(), strategy="rft-grpo", mixed_precision="BF16_Weights")
    assert (again.strategy, again.mixed_precision, again.launcher) == ("RFT+GRPO", "bf16_weights", "auto")
    assert TrainConfig(strategy="nope").strategy == "nope"  # an unknown value stays, for validate to name


def test_the_allowed_values_are_declared_with_the_flag():
    cfg = TrainConfig(launcher="slurm", vllm_mode="remote", dpo_loss_type="sigmoid,nope", kto_loss_type="x")
    problems = choice_problems(cfg)
    assert problems[0].startswith("--dpo_loss_type: unknown loss 'nope'; use one of sigmoid, hinge")
    assert "--kto_loss_type: unknown loss 'x'; use kto or apo_zero_unpaired" in problems
    assert "--launcher: unknown launcher 'slurm'; use auto or accelerate" in problems
    assert "--vllm_mode: unknown mode 'remote'; use colocate or server" in problems
    assert choice_problems(TrainConfig()) == []


def test_a_resumed_run_gets_a_new_config_not_a_written_one(tmp_path):
    cfg = resolve_config({"model_path": "m", "data_path": "d", "output_dir": str(tmp_path)})
    assert not cfg.resume and dataclasses.replace(cfg, resume=True).resume and not cfg.resume


def test_the_learning_rate_flags_are_the_ones_the_stages_read():
    # LoRA's 10x learning rates (config.lora_learning_rates) apply to every stage's flag, found by its range
    from ark_trainer.config import LEARNING_RATES
    from ark_trainer.stages.registry import stages

    assert LEARNING_RATES == (
        "rft_learning_rate", "grpo_learning_rate", "dpo_learning_rate", "kto_learning_rate", "rloo_learning_rate"
    )  # fmt: skip
    assert {stage.lr_flag for stage in stages().values()} == set(LEARNING_RATES)


def test_each_stage_owns_its_options_and_the_config_is_made_of_them():
    from ark_trainer.config import config_class, config_fields, stage_options
    from ark_trainer.options.grpo import GRPOOptions
    from ark_trainer.run_options import RunOptions, RunOptionsAfterStages
    from ark_trainer.stages.registry import stages

    built_in = {
        name: stage for name, stage in stages().items() if name in ("rft", "grpo", "dpo", "kto", "rloo")
    }
    for stage in built_in.values():  # its learning-rate flag is one of its own
        assert stage.lr_flag in {f.name for f in dataclasses.fields(stage.options)}, stage.name
        assert issubclass(TrainConfig, stage.options)
    assert set(stage_options()) >= {stage.options for stage in built_in.values()}
    assert config_class() is TrainConfig  # no plug-in stage here
    declared = [RunOptions, *(stage.options for stage in built_in.values()), RunOptionsAfterStages]
    assert [f.name for f in config_fields()] == [f.name for cls in declared for f in dataclasses.fields(cls)]
    cfg = TrainConfig(num_generations=8)
    assert cfg.options(GRPOOptions).num_generations == cfg.num_generations == 8
    assert {name for name, stage in built_in.items() if stage.plays_episodes} == {"rft", "grpo"}


def test_the_values_chosen_for_a_run_are_validated_as_given_ones_are():
    from ark_trainer.config import settle
    from ark_trainer.errors import UserError

    cfg = resolve_config({"model_path": "m", "data_path": "d", "output_dir": "o"})
    assert settle(cfg, {}) is cfg
    assert settle(cfg, {"grpo_prompts_per_step": 8, "resume": True}).grpo_prompts_per_step == 8
    with pytest.raises(UserError) as err:
        settle(cfg, {"grpo_prompts_per_step": 0})  # an automatic value out of its flag's range
    assert err.value.messages[0].startswith("--grpo_prompts_per_step: ")
    assert err.value.messages[-1] == "(the settings chosen for this run: --grpo_prompts_per_step 0)"
