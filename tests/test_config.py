"""Tests for ark_trainer.core.config: flags (exact reference spellings), YAML, validation, run.yaml round trip.

Each train flag is declared once, as a field of the frozen TrainConfig; the rest is derived from it.
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import (
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
from ark_trainer.cli import build_parser, train_flags
from ark_trainer.core.config import (
    TrainConfig,
    choice_problems,
    learning_rates,
    load_yaml_config,
    normalize_strategy,
    range_of,
    resolve_config,
    to_yaml,
    train_groups,
)
from ark_trainer.rewards.composite import preset_path
from ark_trainer.stages.registry import config_class

# The reference report's two templates, verbatim except for the paths.
TEMPLATE_1 = (
    "train --strategy RFT+GRPO --task_name 客服质检_agent_training "
    "--model_path M --data_path D.jsonl --output_dir OUT --openclaw_env True --eval_auto True "
    "--max_train_steps 10000 --batch_size 8 --log_dir LOGS"
)
TEMPLATE_2 = (
    "train --strategy RFT+GRPO --task_name 智能客服_RFT_GRPO_v2 "
    "--model_path M --data_path D.jsonl --output_dir OUT --openclaw_env True --eval_auto True "
    "--eval_dataset E --max_train_steps 15000 --rft_steps 5000 --grpo_learning_rate 5e-6 "
    "--batch_size 8 --gradient_accumulation_steps 2 --warmup_ratio 0.1 --save_steps 2000 "
    "--log_dir LOGS --device cuda:0 --fp16 True --rm_model_path RM --auto_heartbeat True"
)
REQUIRED = ["--model_path", "M", "--data_path", "D.jsonl", "--output_dir", "OUT"]


def parse(argv: list[str] | str) -> TrainConfig:
    """What ``ark-trainer train ARGV`` resolves to, without running anything."""
    if isinstance(argv, str):
        argv = shlex.split(argv)
    args = build_parser().parse_args(argv)
    return resolve_config(config_class(), train_flags(args))


def train(*flags: str) -> TrainConfig:
    return parse(["train", *REQUIRED, *flags])


def messages_of(excinfo: pytest.ExceptionInfo[UserError]) -> str:
    return "\n".join(excinfo.value.messages)


# --- the reference templates ---


def steps(cfg) -> tuple[int, int]:
    """(RFT steps, GRPO steps) as the run's plan resolves them (the config keeps what the user gave)."""
    from ark_trainer.stages.plan import resolve_plan

    plan = resolve_plan(cfg)
    return plan.steps("rft"), plan.steps("grpo")


plan_steps = steps  # for the test whose parameter is named ``steps``


def test_template_1_parses_with_exact_spellings():
    cfg = parse(TEMPLATE_1)
    assert cfg.strategy == "RFT+GRPO"
    assert cfg.task_name == "客服质检_agent_training"
    assert (cfg.model_path, cfg.data_path, cfg.output_dir, cfg.log_dir) == ("M", "D.jsonl", "OUT", "LOGS")
    assert cfg.openclaw_env is True and cfg.eval_auto is True
    assert cfg.max_train_steps == 10000 and cfg.batch_size == 8
    assert cfg.rft_steps is None  # the user gave none; the plan resolves it (plan.py)
    assert steps(cfg) == (10000 // 3, 10000 - 10000 // 3)


def test_template_2_parses_with_exact_spellings():
    cfg = parse(TEMPLATE_2)
    assert cfg.task_name == "智能客服_RFT_GRPO_v2"
    assert cfg.eval_dataset == "E"
    assert cfg.max_train_steps == 15000 and steps(cfg) == (5000, 10000)
    assert cfg.grpo_learning_rate == pytest.approx(5e-6)
    assert cfg.batch_size == 8 and cfg.gradient_accumulation_steps == 2
    assert cfg.warmup_ratio == pytest.approx(0.1)
    assert cfg.save_steps == 2000
    assert cfg.log_dir == "LOGS" and cfg.device == "cuda:0"
    assert cfg.fp16 is True and cfg.bf16 is False
    assert cfg.rm_model_path == "RM"
    assert cfg.auto_heartbeat is True and cfg.openclaw_env is True and cfg.eval_auto is True


def test_every_template_flag_is_a_config_field():
    names = {f.name for f in fields(config_class())}
    for template in (TEMPLATE_1, TEMPLATE_2):
        flags = {tok[2:] for tok in shlex.split(template) if tok.startswith("--")}
        assert flags <= names, flags - names


@pytest.mark.parametrize(
    ("text", "expected"),
    [("True", True), ("False", False), ("true", True), ("false", False), ("1", True), ("0", False)],
)
def test_boolean_flags(text, expected):
    cfg = train("--openclaw_env", text, "--eval_auto", text, "--auto_heartbeat", text, "--fp16", text)
    assert (cfg.openclaw_env, cfg.eval_auto, cfg.auto_heartbeat, cfg.fp16) == (expected,) * 4


def test_boolean_flag_without_value_means_true():
    assert train("--fp16").fp16 is True


def test_defaults_when_only_required_flags():
    cfg = train()
    assert cfg.strategy == "RFT+GRPO"
    assert cfg.openclaw_env is False and cfg.eval_auto is True and cfg.fp16 is False
    assert steps(cfg)[0] == cfg.max_train_steps // 3


def test_lora_makes_the_learning_rates_not_set_ten_times_their_defaults(tmp_path):
    full = train()
    lora = train("--lora_r", "8", "--grpo_learning_rate", "3e-6")
    assert lora.rft_learning_rate == pytest.approx(10 * full.rft_learning_rate)
    assert lora.dpo_learning_rate == pytest.approx(10 * full.dpo_learning_rate)
    assert lora.grpo_learning_rate == 3e-6  # given: kept as given
    (tmp_path / "c.yaml").write_text("rft_learning_rate: 1.0e-5\nlora_r: 4\n")
    from_file = train("--config", str(tmp_path / "c.yaml"))
    assert from_file.rft_learning_rate == 1e-5  # set in --config: kept
    assert from_file.kto_learning_rate == pytest.approx(10 * full.kto_learning_rate)
    assert train("--lora_r", "0").rft_learning_rate == full.rft_learning_rate


# --- strategy ---


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("RFT+GRPO", "RFT+GRPO"),
        ("RFTGRPO", "RFT+GRPO"),
        ("rft+grpo", "RFT+GRPO"),
        ("rft_grpo", "RFT+GRPO"),
        ("RFT-GRPO", "RFT+GRPO"),
        ("GRPO", "GRPO"),
        ("Only GRPO", "GRPO"),
        ("only  grpo", "GRPO"),
        ("ONLY_GRPO", "GRPO"),
        ("auto", "auto"),
        ("Auto", "auto"),
    ],
)
def test_strategy_aliases(alias, canonical):
    assert normalize_strategy(alias) == canonical
    assert train("--strategy", alias).strategy == canonical


def test_unknown_strategy_names_the_flag():
    with pytest.raises(UserError) as exc:
        train("--strategy", "PPO")
    assert "--strategy" in messages_of(exc) and "PPO" in messages_of(exc)


def test_only_grpo_has_no_rft_steps():
    cfg = train("--strategy", "Only GRPO", "--max_train_steps", "90")
    assert steps(cfg) == (0, 90)


def test_only_grpo_ignores_rft_steps_beyond_its_steps():
    """A preset's RFT steps (demo_real.yaml: 140) do not block --strategy GRPO with fewer steps; RFT+GRPO still
    refuses them."""
    assert steps(train("--strategy", "GRPO", "--max_train_steps", "40", "--rft_steps", "140")) == (0, 40)
    with pytest.raises(UserError) as exc:
        train("--strategy", "RFT+DPO", "--max_train_steps", "40", "--rft_steps", "140")
    assert "--rft_steps" in messages_of(exc)


@pytest.mark.parametrize(("steps", "rft"), [(9, 3), (10000, 3333), (15000, 5000), (2, 1), (1, 1)])
def test_rft_steps_default_to_a_third(steps, rft):
    cfg = train("--max_train_steps", str(steps))
    assert plan_steps(cfg) == (rft, steps - rft)


def test_explicit_rft_steps_win():
    assert steps(train("--max_train_steps", "100", "--rft_steps", "50")) == (50, 50)


def test_scientific_notation_for_steps():
    assert train("--max_train_steps", "1e4").max_train_steps == 10000


# --- bad values: one UserError naming the flag ---


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--batch_size", "0"], "--batch_size"),
        (["--batch_size", "-4"], "--batch_size"),
        (["--fp16", "maybe"], "--fp16"),
        (["--eval_auto", "yes please"], "--eval_auto"),
        (["--max_train_steps", "abc"], "--max_train_steps"),
        (["--max_train_steps", "1.5"], "--max_train_steps"),
        (["--grpo_learning_rate", "fast"], "--grpo_learning_rate"),
        (["--grpo_learning_rate", "0"], "--grpo_learning_rate"),
        (["--warmup_ratio", "1.5"], "--warmup_ratio"),
        (["--save_steps", "-1"], "--save_steps"),
        (["--rft_steps", "200", "--max_train_steps", "100"], "--rft_steps"),
        (["--strategy", "RLOO", "--num_generations", "3"], "--num_generations"),
        (["--num_generations", "1"], "--num_generations"),
        (
            ["--strategy", "RLOO", "--batch_size", "6", "--gradient_accumulation_steps", "1"]
            + ["--num_generations", "4"],
            "--num_generations",
        ),
        (["--fp16", "True", "--bf16", "True"], "--fp16"),
        (["--batch_size", "None"], "--batch_size"),
        (["--strategy", "none"], "--strategy"),
    ],
)
def test_bad_values_name_the_flag(flags, flag):
    with pytest.raises(UserError) as exc:
        train(*flags)
    assert flag in messages_of(exc)
    assert all("\n" not in m for m in exc.value.messages), "each problem is one line"


def test_num_generations_divides_batch_times_accumulation_where_rloo_batches_the_groups():
    rloo = ("--strategy", "RLOO", "--num_generations", "4")
    cfg = train(*rloo, "--batch_size", "6", "--gradient_accumulation_steps", "2")
    assert cfg.num_generations == 4
    with pytest.raises(UserError) as exc:
        train(*rloo, "--batch_size", "6", "--gradient_accumulation_steps", "1")
    assert "6" in messages_of(exc)


@pytest.mark.parametrize("strategy", ["RFT+GRPO", "GRPO", "auto"])
def test_grpo_takes_any_batch_size_as_it_accumulates_whole_groups(strategy):
    """A resume with a smaller --batch_size (docs/long-runs.md: resources may change) is not refused: the
    GRPO stage chooses its own accumulation, in whole groups, for the same prompts per step."""
    from ark_trainer.stages.grpo.auto import grpo_accumulation

    cfg = train("--strategy", strategy, "--batch_size", "2", "--num_generations", "4")
    assert cfg.batch_size == 2
    for batch in (1, 2, 4, 8):
        steps, prompts = grpo_accumulation(batch, 4, 4)
        assert (batch * steps) % 4 == 0 and prompts == 4


def test_missing_required_flags_all_reported():
    args = build_parser().parse_args(["train"])
    with pytest.raises(UserError) as exc:
        resolve_config(config_class(), train_flags(args))
    text = messages_of(exc)
    assert "--model_path" in text and "--data_path" in text and "--output_dir" in text


def test_several_problems_reported_at_once():
    with pytest.raises(UserError) as exc:
        train("--batch_size", "0", "--warmup_ratio", "2", "--save_steps", "-3")
    text = messages_of(exc)
    assert "--batch_size" in text and "--warmup_ratio" in text and "--save_steps" in text


# --- --config YAML ---


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_yaml_gives_defaults_and_flags_override(tmp_path):
    run = write(
        tmp_path / "run.yaml",
        "strategy: Only GRPO\nbatch_size: 4\nmax_train_steps: 30\nfp16: true\ntask_name: from_yaml\n"
        "grpo_learning_rate: 5e-6\nnum_generations: 2\n",
    )
    cfg = parse(["train", "--config", run, *REQUIRED, "--batch_size", "8", "--task_name", "from_flag"])
    assert cfg.batch_size == 8 and cfg.task_name == "from_flag"
    assert cfg.max_train_steps == 30 and cfg.fp16 is True and cfg.strategy == "GRPO"
    assert cfg.grpo_learning_rate == pytest.approx(5e-6)
    assert cfg.config == run


def test_yaml_can_hold_required_paths(tmp_path):
    run = write(tmp_path / "run.yaml", "model_path: M\ndata_path: D.jsonl\noutput_dir: OUT\n")
    cfg = parse(["train", "--config", run])
    assert (cfg.model_path, cfg.data_path, cfg.output_dir) == ("M", "D.jsonl", "OUT")


def test_yaml_unknown_key_names_file_and_key(tmp_path):
    run = write(tmp_path / "run.yaml", "batch_size: 8\nbatch_sise: 4\n")
    with pytest.raises(UserError) as exc:
        parse(["train", "--config", run, *REQUIRED])
    text = messages_of(exc)
    assert run in text and "batch_sise" in text and "unknown key" in text


def test_yaml_config_key_itself_is_unknown(tmp_path):
    run = write(tmp_path / "run.yaml", "config: other.yaml\n")
    with pytest.raises(UserError) as exc:
        load_yaml_config(config_class(), run)
    assert "config" in messages_of(exc)


def test_yaml_bad_value_names_file_and_key(tmp_path):
    run = write(tmp_path / "run.yaml", "batch_size: many\n")
    with pytest.raises(UserError) as exc:
        load_yaml_config(config_class(), run)
    assert run in messages_of(exc) and "batch_size" in messages_of(exc)


def test_yaml_null_for_a_required_number_is_an_error(tmp_path):
    run = write(tmp_path / "run.yaml", "batch_size: null\n")
    with pytest.raises(UserError) as exc:
        parse(["train", "--config", run, *REQUIRED])
    assert "batch_size" in messages_of(exc)


def test_yaml_invalid_syntax_names_line(tmp_path):
    run = write(tmp_path / "run.yaml", "batch_size: 8\nfp16: [true\n")
    with pytest.raises(UserError) as exc:
        load_yaml_config(config_class(), run)
    assert messages_of(exc).startswith(f"{run}:")


def test_yaml_not_a_mapping(tmp_path):
    run = write(tmp_path / "run.yaml", "- batch_size\n- 8\n")
    with pytest.raises(UserError) as exc:
        load_yaml_config(config_class(), run)
    assert run in messages_of(exc)


def test_yaml_missing_file(tmp_path):
    with pytest.raises(UserError) as exc:
        parse(["train", "--config", str(tmp_path / "nope.yaml"), *REQUIRED])
    assert "--config" in messages_of(exc)


def test_to_yaml_round_trips(tmp_path):
    cfg = parse(TEMPLATE_2)
    text = to_yaml(cfg)
    assert "config" not in yaml.safe_load(text)
    run = write(tmp_path / "run.yaml", text)
    again = parse(["train", "--config", run])
    assert again.flag_items() == cfg.flag_items()
    assert load_yaml_config(config_class(), run) == cfg.flag_items()


def test_to_yaml_round_trips_defaults_and_unicode(tmp_path):
    cfg = train("--task_name", "客服质检", "--strategy", "auto", "--max_eval_samples", "7")
    text = to_yaml(cfg)
    assert "客服质检" in text
    again = parse(["train", "--config", write(tmp_path / "run.yaml", text)])
    assert again.flag_items() == cfg.flag_items()


# --- shipped configs parse against the real TrainConfig (litgpt-style) ---

SHIPPED_RUN_CONFIGS = ["demo"]


@pytest.mark.parametrize("name", SHIPPED_RUN_CONFIGS)
def test_shipped_run_config_parses(name):
    path = preset_path(name)
    assert path.is_file()
    values = load_yaml_config(config_class(), str(path))
    assert values, "a shipped config sets something"
    cfg = parse(["train", "--config", str(path), *REQUIRED])
    for key, value in values.items():
        if key == "strategy":
            value = normalize_strategy(value)
        assert getattr(cfg, key) == value, key


def test_demo_preset_header_shows_the_command():
    text = preset_path("demo").read_text(encoding="utf-8")
    assert "ark-trainer-inner train --config" in text


def test_parser_has_a_flag_for_every_field():
    train_parser = build_parser()._subparsers._group_actions[0].choices["train"]
    options = {s for action in train_parser._actions for s in action.option_strings}
    for f in fields(config_class()):
        assert f"--{f.name}" in options


@pytest.mark.parametrize(
    ("flags", "flag"),
    [
        (["--strategy", "DPO"], "--strategy: DPO does not train agent episodes"),
        (["--strategy", "KTO"], "--strategy: KTO does not train agent episodes"),
        (["--strategy", "RLOO"], "--strategy: RLOO does not train agent episodes"),
        (["--dynamic_sampling_rounds", "2"], "--dynamic_sampling_rounds: not with agent episodes"),
    ],
)
def test_agent_runs_refuse_what_does_not_play_episodes(flags, flag):
    """A stage that trains on single answers would silently ignore --env: refused instead, in one line."""
    with pytest.raises(UserError) as exc:
        train("--env", "my_env.py:make_env", *flags)
    assert flag in messages_of(exc)
    assert train("--env", "my_env.py:make_env", "--strategy", "GRPO").env == "my_env.py:make_env"


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
        "save_minutes": Range(lo=0.0, hi=1e6),
        "time_budget": Range(lo=0.0, hi=1e6),
        "tool_timeout": Range(lo=0.0, hi=1e6, lo_open=True),
        "heartbeat_interval": Range(lo=0.0, hi=1e6, lo_open=True),
    }
)


def test_the_config_is_frozen():
    cfg = config_class()(model_path="m", data_path="d", output_dir="o")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.max_train_steps = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.resume = True  # type: ignore[misc]


def test_every_flag_declares_its_help_and_group():
    groups = train_groups(config_class())
    for f in dataclasses.fields(config_class()):
        assert f.metadata.get("help"), f.name
        assert f.metadata.get("group") in groups, f.name
    listed = [name for names in groups.values() for name in names]
    assert listed == [f.name for f in dataclasses.fields(config_class())]  # the fields are in --help order


def test_the_derived_ranges_are_the_ones_declared_before():
    cls = config_class()
    declared = {f.name: f.metadata["range"] for f in dataclasses.fields(cls) if "range" in f.metadata}
    assert declared == BEFORE
    assert {name: range_of(cls, name) for name in BEFORE} == BEFORE


def test_normalising_happens_while_the_config_is_built():
    cfg = config_class()(strategy="only grpo", mixed_precision=" FP32 ", accelerate_config="zero3.yaml")
    assert (cfg.strategy, cfg.mixed_precision, cfg.launcher) == ("GRPO", "no", "accelerate")
    again = dataclasses.replace(config_class()(), strategy="rft-grpo", mixed_precision="BF16_Weights")
    assert (again.strategy, again.mixed_precision, again.launcher) == ("RFT+GRPO", "bf16_weights", "auto")
    assert config_class()(strategy="nope").strategy == "nope"  # an unknown value stays, for validate to name


def test_the_allowed_values_are_declared_with_the_flag():
    cfg = config_class()(
        launcher="slurm", vllm_mode="remote", dpo_loss_type="sigmoid,nope", kto_loss_type="x"
    )
    problems = choice_problems(cfg)
    assert problems[0].startswith("--dpo_loss_type: unknown loss 'nope'; use one of sigmoid, hinge")
    assert "--kto_loss_type: unknown loss 'x'; use kto or apo_zero_unpaired" in problems
    assert "--launcher: unknown launcher 'slurm'; use auto or accelerate" in problems
    assert "--vllm_mode: unknown mode 'remote'; use colocate or server" in problems
    assert choice_problems(config_class()()) == []


def test_a_resumed_run_gets_a_new_config_not_a_written_one(tmp_path):
    cfg = resolve_config(config_class(), {"model_path": "m", "data_path": "d", "output_dir": str(tmp_path)})
    assert not cfg.resume and dataclasses.replace(cfg, resume=True).resume and not cfg.resume


def test_the_learning_rate_flags_are_the_ones_the_stages_read():
    # LoRA's 10x learning rates (config.lora_learning_rates) apply to every stage's flag, found by its range
    from ark_trainer.stages.registry import stages

    assert learning_rates(config_class()) == (
        "rft_learning_rate", "grpo_learning_rate", "dpo_learning_rate", "kto_learning_rate", "rloo_learning_rate"
    )  # fmt: skip
    assert {stage.lr_flag for stage in stages().values()} == set(learning_rates(config_class()))


def test_each_stage_owns_its_options_and_the_config_is_made_of_them():
    from ark_trainer.base.plugins import DEFAULT_PLUGINS
    from ark_trainer.base.run_options import RunFlags, RunOptions, RunOptionsAfterStages
    from ark_trainer.core.config import config_fields
    from ark_trainer.services.planning import stage_options_of
    from ark_trainer.stages.grpo.options import GRPOOptions
    from ark_trainer.stages.registry import stage_options, stages
    from ark_trainer.stages.rloo.options import RLOOOptions

    by_module = {type(stage).__module__: stage for stage in stages().values()}
    built_in = {  # in DEFAULT_PLUGINS' order, as config_class takes them
        by_module[m].name: by_module[m] for m in DEFAULT_PLUGINS if m in by_module
    }
    assert list(built_in) == ["rft", "grpo", "dpo", "kto", "rloo"]
    shared = {f.name for f in dataclasses.fields(RunFlags)}
    for stage in built_in.values():  # its learning-rate flag is one of its own; no shared flag is
        own = {f.name for f in dataclasses.fields(stage.options)}
        assert stage.lr_flag in own and not own & shared, stage.name
        assert not issubclass(
            TrainConfig, stage.options
        )  # the shared config is made of the shared flags only
    assert set(stage_options()) >= {stage.options for stage in built_in.values()}
    assert {f.name for f in dataclasses.fields(TrainConfig)} == shared
    declared = [RunOptions, *(stage.options for stage in built_in.values()), RunOptionsAfterStages]
    once = list(dict.fromkeys(f.name for cls in declared for f in dataclasses.fields(cls)))
    assert [f.name for f in config_fields(config_class())] == once  # a flag two stages read: listed once
    cfg = config_class()(num_generations=8, rloo_learning_rate=2e-6)
    grpo, rloo = cfg.options(GRPOOptions), cfg.options(RLOOOptions)
    assert type(grpo) is GRPOOptions and type(rloo) is RLOOOptions  # each its own options, not the config
    assert grpo.num_generations == rloo.num_generations == cfg.num_generations == 8
    assert not hasattr(grpo, "rloo_learning_rate") and not hasattr(rloo, "grpo_learning_rate")
    assert type(cfg.run_flags()) is RunFlags and not hasattr(cfg.run_flags(), "num_generations")
    handed = stage_options_of(cfg)  # what the pipeline hands each stage beside the shared flags
    assert handed["rloo"] == rloo and handed["grpo"] == grpo and set(handed) == set(built_in)
    with pytest.raises(TypeError):
        TrainConfig().options(GRPOOptions)  # the shared config holds no stage's options
    assert {name for name, stage in built_in.items() if stage.plays_episodes} == {"rft", "grpo"}


def test_the_values_chosen_for_a_run_are_validated_as_given_ones_are():
    from ark_trainer.base.errors import UserError
    from ark_trainer.core.config import settle

    cfg = resolve_config(config_class(), {"model_path": "m", "data_path": "d", "output_dir": "o"})
    assert settle(cfg, {}) is cfg
    assert settle(cfg, {"grpo_prompts_per_step": 8, "resume": True}).grpo_prompts_per_step == 8
    with pytest.raises(UserError) as err:
        settle(cfg, {"grpo_prompts_per_step": 0})  # an automatic value out of its flag's range
    assert err.value.messages[0].startswith("--grpo_prompts_per_step: ")
    assert err.value.messages[-1] == "(the settings chosen for this run: --grpo_prompts_per_step 0)"
