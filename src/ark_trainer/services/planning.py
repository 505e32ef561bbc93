"""The ``train`` run planned once: the one place after the command line that reads the whole config.

:func:`prepare` takes the validated config (``core/config.py``) from ``services/train.py``, checks every input
(flags, model folder, data file, reward spec) before the run directory is touched, so a refused run leaves
nothing behind, chooses the automatic settings, settles the config and resolves the plan. What it returns,
:class:`Prepared`, holds no config: the shared run flags (``RunFlags``), each stage's own options
instance, the plan, the data splits, the reward and the run's paths; the execution (``services/pipeline.py``)
takes only that. Where the run changes its own settings once it has started (``--time_budget`` sizing the
steps, ``--strategy auto``'s probe choosing the strategy), it asks this module again
(:func:`settle_chosen`, :func:`probe_plan`). Run it with::

    ark-trainer-inner train --strategy RFT+GRPO --model_path M --data_path D.jsonl --output_dir OUT ...
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, TypeVar

from ark_trainer.base.errors import UserError
from ark_trainer.base.run_options import RunFlags
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.config import TrainConfig, settle, to_yaml
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.source import ResolvedModel
from ark_trainer.core.runfolder import RunFolder
from ark_trainer.core.runtime.launch import LaunchSettings, child_flags
from ark_trainer.core.runtime.resume import Progress
from ark_trainer.data.length import check_prompt_lengths
from ark_trainer.data.loader import load_jsonl, resolve_eval_path
from ark_trainer.data.split import Splits, divide_eval, drop_overlap, split_three
from ark_trainer.rewards.builder import build_reward  # the one reward builder (train, score, plan)
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.stages.eval_length import RECORD as EVAL_RECORD
from ark_trainer.stages.eval_length import EvalLength, eval_length
from ark_trainer.stages.plan import Plan, ProbeChoice, resolve_plan
from ark_trainer.stages.registry import get_stage, stage_names_in_order, stages

log = logging.getLogger("ark_trainer")

_Options = TypeVar("_Options")


@dataclass
class Prepared:
    """A checked, planned run: data split, reward built, nothing written yet. It holds no config: the shared
    run flags, each registered stage's own options and what the run writes of its flags (``run.yaml``)."""

    run: RunFlags  # the shared run flags, settled (the automatic values chosen): read, never written
    options: dict[str, Any]  # each registered stage's own options instance, by stage name (StageContext)
    run_yaml: str  # OUT/run.yaml: every flag as settled, so ``train --config OUT/run.yaml`` repeats the run
    launch: LaunchSettings  # what relaunching ``train`` through accelerate needs (``core/runtime/launch.py``)
    out: Path
    log_dir: Path
    train: list[dict]
    eval: list[dict]  # the test split: every reported figure; no choice reads it
    eval_source: str  # where dev and test come from (``data/split.py``)
    reward: CompositeReward
    plan: Plan  # resolved once (plan.py); under --strategy auto replaced once, by the probe's choice
    plan_extra: dict  # what plan.json holds besides the plan: the rewards, this attempt's precision
    rt: Runtime
    model: (
        ResolvedModel  # the base model as an HF folder (a GGUF or Ollama model converted into OUT/base_model)
    )
    done: Progress | None = None  # under --resume: what the earlier attempts finished (read once)
    last_model: tuple[str, str] | None = None  # (stage, folder) of the last stage that finished
    warnings: tuple[str, ...] = ()  # shown once the run has started (e.g. a toy preset on a real model)
    dev: list[dict] = field(default_factory=list)  # the dev split: every choice reads it, no report shows it
    flags_class: type[TrainConfig] = (
        TrainConfig  # the class the flags were parsed into (:func:`settle_chosen`)
    )

    @property
    def model_path(self) -> str:
        """The base model's HF folder: what every stage loads (``run.model_path`` is what the user gave)."""
        return str(self.model.path)

    @property
    def eval_tokens(self) -> int:
        """The new tokens an evaluation answer may take (``stages/eval_length.py``; plan.json's record)."""
        chosen = EvalLength.from_json(self.plan_extra.get(EVAL_RECORD))
        return chosen.value if chosen else new_tokens(self.run.max_completion_length)

    def options_as(self, cls: type[_Options]) -> _Options:
        """This run's instance of the options class ``cls`` (one registered stage's: the probe samples as
        GRPO does, ``stages/probe.py``)."""
        found = next((o for o in self.options.values() if type(o) is cls), None)
        if found is None:
            raise TypeError(f"{cls.__name__} is not a registered stage's options")
        return found


def stage_options_of(cfg: TrainConfig) -> dict[str, Any]:
    """Each registered stage's own options instance, by stage name, with ``cfg``'s values."""
    registered = type(cfg).stage_options
    return {
        name: cfg.options(cls)
        for name, stage in stages().items()
        if (cls := getattr(stage, "options", None)) is not None and cls in registered
    }


def _parts_of(cfg: TrainConfig) -> dict[str, Any]:
    """What :class:`Prepared` holds of the settled config ``cfg``: its shared flags, stages' options, run.yaml."""
    return {"run": cfg.run_flags(), "options": stage_options_of(cfg), "run_yaml": to_yaml(cfg)}


def _config_of(p: Prepared) -> TrainConfig:
    """The settled config again, built from the parts ``p`` holds (the shared flags and every stage's options:
    together every flag of ``p.flags_class``)."""
    values = {f.name: getattr(p.run, f.name) for f in fields(p.run)}
    for options in p.options.values():
        values.update({f.name: getattr(options, f.name) for f in fields(options)})
    return p.flags_class(**values)


def settle_chosen(p: Prepared, chosen: dict[str, Any]) -> None:
    """``p`` with more chosen settings (``--time_budget``'s step counts, ``stages/estimate.py``): the config
    settled again (validated), its flags, options, run.yaml and plan replaced."""
    cfg = settle(_config_of(p), chosen)
    for name, value in _parts_of(cfg).items():
        setattr(p, name, value)
    p.plan = resolve_plan(cfg)


def probe_plan(p: Prepared, probe: ProbeChoice) -> Plan:
    """``--strategy auto``: the plan of the strategy the probe chose (``stages/probe.py``)."""
    return resolve_plan(_config_of(p), probe)


def launch_settings(cfg: TrainConfig) -> LaunchSettings:
    """What relaunching ``train`` through accelerate reads of the run's config (``core/runtime/launch.py``)."""
    return LaunchSettings(
        num_processes=cfg.num_processes,
        accelerate_config=cfg.accelerate_config,
        main_process_port=cfg.main_process_port,
        resume=cfg.resume,
        child_flags=tuple(child_flags(cfg.flag_items())),
    )


def prepare(cfg: TrainConfig) -> Prepared:
    """All user-facing checks, then the run planned (:class:`Prepared`); raises UserError before anything
    is written."""
    from ark_trainer.core.models.device import resolve_runtime
    from ark_trainer.core.models.source import model_kind
    from ark_trainer.core.runtime.launch import is_child
    from ark_trainer.core.runtime.resume import check_checkpoints, check_disk, check_resume
    from ark_trainer.core.runtime.runlock import check_free
    from ark_trainer.data.inputs import check_log_dir, check_output_dir, collect, model_checks
    from ark_trainer.stages.agent.env import check_agent

    # validate() refuses a config without them (config.REQUIRED)
    assert cfg.output_dir and cfg.data_path and cfg.model_path
    out = Path(cfg.output_dir)
    data_path, model_path = cfg.data_path, cfg.model_path  # locals: mypy narrows them, in lambdas too
    parent = not is_child()  # the parent of an accelerate launch checked the folder and passes --resume on
    if parent:
        check_free(out)  # a live run in this folder: refused, naming its pid
    loads = [
        lambda: resolve_runtime(cfg),  # a device that does not exist is refused before anything is written
        lambda: load_jsonl(data_path, "--data_path"),
        lambda: load_jsonl(resolve_eval_path(cfg.eval_dataset), "--eval_dataset") if cfg.eval_dataset else [],
    ]
    checks: list[Callable[[], object]] = []
    resume = [cfg.resume]  # the last entry is the decision: check_resume's when it answers

    def check_folder() -> None:  # a folder of other files: refused; one holding a run: refused, or continued
        check_output_dir(str(cfg.output_dir))
        resume.append(check_resume(cfg.resume, cfg.flag_items(), type(cfg), out, list(stages().values())))

    if parent:
        checks.append(check_folder)
    if cfg.log_dir:
        checks.append(lambda: check_log_dir(cfg.log_dir))
    checks.append(lambda: check_disk(out, cfg.min_free_disk_gb, "--output_dir"))
    # a poisoned checkpoint is refused now, before anything is written
    checks.append(lambda: check_checkpoints(out, stage_names_in_order()) if resume[-1] else None)
    model_checked = model_checks(cfg.model_path, cfg.trust_remote_code)
    loads += model_checked[:1]  # the model named: checked, not converted
    checks += model_checked[1:]
    given_hf = model_kind(cfg.model_path) == "hf"
    if (env := cfg.env) and given_hf:  # an agent run: the environment loads, the chat template shows tools
        # (a GGUF's tokenizer: checked once converted, below)
        checks.append(lambda: check_agent(env, model_path, cfg.trust_remote_code))
    results, problems = collect([*loads, *checks])  # every problem of every input at once
    if problems:
        raise UserError(*problems)
    rt, rows, eval_rows, model = results[: len(loads)]
    if not given_hf:  # every input is good: convert the GGUF once into the run folder
        model = _converted(cfg.run_flags(), out, model)
    reward = build_reward(
        cfg.run_flags(), rows, rt.device
    )  # a stage's automatic settings are chosen from it too
    chosen, auto, warnings = auto_defaults(cfg, rows, rt, str(model.path), reward)
    if resume[-1] != cfg.resume:
        chosen["resume"] = resume[-1]
    cfg = settle(
        cfg, chosen
    )  # the config is frozen: this run's is built once, and validated, chosen values too
    run, options = cfg.run_flags(), stage_options_of(cfg)
    rt = with_cpu_precision(run, rt, auto, str(model.path))
    sources = [(Path(data_path), rows)]
    if cfg.eval_dataset:
        sources.append((resolve_eval_path(cfg.eval_dataset), eval_rows))
    tools = _env_tools(run)
    check_prompt_lengths(
        str(model.path), new_tokens(cfg.max_completion_length), sources, rt.trust_remote_code, tools
    )
    check_reward_applies(run, reward, rows)
    splits, source = _splits(run, rows, eval_rows)
    plan = resolve_plan(cfg)
    extra: dict[str, object] = {"rewards": reward.describe(), "auto_defaults": auto}
    from ark_trainer.data.loader import episode_candidate_problems

    if not cfg.env and (problems := episode_candidate_problems(splits.train, data_path)):
        raise UserError(*problems)  # episode candidates need --env
    for planned in plan.stages:  # each stage's own check of the data it trains on (its ``check_data``)
        stage = get_stage(planned.name)
        if (check := getattr(stage, "check_data", None)) is not None:
            check(run, options.get(planned.name), splits.train)
    folder = RunFolder(out)
    resumed = bool(cfg.resume and folder.plan_path.is_file())
    if resumed:  # the first attempt's plan (and an auto probe's choice)
        saved = folder.saved_plan()
        plan = Plan.from_json(saved, cfg)
        extra = {k: v for k, v in saved.items() if k not in (*plan.to_json(), "schema")}
    extra["precision"] = rt.precision  # what this attempt computes in (the device may differ on resume)
    extra[EVAL_RECORD] = _eval_length(run, rt, str(model.path), rows, extra if resumed else None).to_json()
    extra["base_model"] = model.to_json()  # what was given, its kind and checksum, the folder trained from
    log_dir = folder.log_dir(cfg.log_dir)
    done = Progress(out) if cfg.resume else None
    return Prepared(
        **_parts_of(cfg),
        launch=launch_settings(cfg),
        out=out,
        log_dir=log_dir,
        train=splits.train,
        eval=splits.test,
        eval_source=source,
        reward=reward,
        plan=plan,
        plan_extra=extra,
        rt=rt,
        model=model,
        done=done,
        warnings=tuple(warnings),
        dev=splits.dev,
        flags_class=type(cfg),
    )


def _eval_length(
    run: RunFlags, rt: Runtime, model_dir: str, rows: list[dict], saved: dict | None
) -> EvalLength:
    """The evaluations' answer length (``stages/eval_length.py``): a resumed run's first attempt's (``saved``:
    what its plan.json holds besides the plan; the run's completion length where it recorded none), else
    measured on ``rows``."""
    budget = new_tokens(run.max_completion_length)
    if saved is not None:
        kept = EvalLength.from_json(saved.get(EVAL_RECORD))
        return kept or EvalLength(
            budget, f"{budget}: --max_completion_length (as the first attempt evaluated)"
        )
    from ark_trainer.core.auto_defaults import model_facts
    from ark_trainer.core.models.loading import load_tokenizer

    tok = load_tokenizer(model_dir, rt.trust_remote_code)
    return eval_length(budget, tok, rows, toy=model_facts(model_dir).toy, agent=bool(run.env))


def _splits(run: RunFlags, rows: list[dict], eval_rows: list[dict]) -> tuple[Splits, str]:
    """The train / dev / test rows (``data/split.py``; each capped at ``--max_eval_samples``) and where dev
    and test come from."""
    if run.eval_dataset:
        train, dropped = drop_overlap(rows, eval_rows)
        dev, test = divide_eval(eval_rows)
        source = f"--eval_dataset {run.eval_dataset}, divided by prompt hash into dev and test"
        if dropped:
            log.warning("%d training rows share a prompt with --eval_dataset; dropped from training", dropped)
        splits = Splits(train, dev, test)
    elif run.eval_auto:
        splits = split_three(rows, run.eval_ratio)
        source = (
            f"held-out {run.eval_ratio:.0%} split of --data_path (by prompt hash), half dev and half test"
        )
    else:
        splits, source = Splits(rows, [], []), "none (--eval_auto False)"
    if not splits.train:
        raise UserError(f"--data_path: {run.data_path}: no training rows left after holding out the eval set")
    if run.max_eval_samples:
        cap = run.max_eval_samples
        splits = Splits(splits.train, splits.dev[:cap], splits.test[:cap])
    return splits, source


def _env_tools(run: RunFlags) -> list[dict] | None:
    """The tool schemas every prompt of an ``--env`` run shows (loaded once: checked above)."""
    if not run.env:
        return None
    from ark_trainer.stages.agent.env import load_env

    return load_env(run.env).schemas


def _converted(run: RunFlags, out: Path, model):
    """A GGUF / Ollama model converted once into ``OUT/base_model`` (reused when the folder holds it; under
    accelerate the parent converted and the children reuse it), its tokenizer checked for an agent run."""
    from ark_trainer.core.folders import claim_folder
    from ark_trainer.core.models.source import convert
    from ark_trainer.stages.agent.env import check_agent

    claim_folder(out)  # ours before its first file
    model = convert(model, RunFolder(out).base_model_dir)
    if run.env:
        check_agent(run.env, str(model.path), run.trust_remote_code)
    return model


def with_auto_defaults(
    cfg: TrainConfig,
    rows: list[dict],
    rt: Runtime,
    model_dir: str | None = None,
    reward: CompositeReward | None = None,
) -> tuple[TrainConfig, dict, list[str]]:
    """The config with the automatic flags it left unset filled in (:func:`auto_defaults`), a new object,
    validated; plus ``plan.json``'s ``auto_defaults`` record and the warnings to show."""
    chosen, record, warnings = auto_defaults(cfg, rows, rt, model_dir, reward)
    return settle(cfg, chosen), record, warnings


def auto_defaults(
    cfg: TrainConfig,
    rows: list[dict],
    rt: Runtime,
    model_dir: str | None = None,
    reward: CompositeReward | None = None,
) -> tuple[dict[str, object], dict, list[str]]:
    """The values of the automatic flags the config left unset (``core/auto_defaults.py``), by flag; plus
    ``plan.json``'s ``auto_defaults`` record and the warnings to show. A resumed run's ``run.yaml`` holds
    the values chosen the first time, so nothing is chosen again. Each stage the strategy may run chooses
    its own (its ``auto_defaults`` hook, :func:`stage_auto_defaults`), from ``reward`` too."""
    from ark_trainer.core.auto_defaults import AutoDefault, describe, resolve_auto_defaults, toy_choices
    from ark_trainer.core.config import LORA_LR_SCALE, learning_rates
    from ark_trainer.core.models.loading import load_tokenizer

    model_dir = model_dir or cfg.model_path  # the HF folder (a GGUF's conversion), not what was given
    assert model_dir
    tok = load_tokenizer(model_dir, rt.trust_remote_code)
    given = replace(cfg, model_path=model_dir).run_flags()
    chosen, warnings = resolve_auto_defaults(given, given, tok, rows, rt.device)
    chosen.update(
        toy_choices(model_dir, cfg.flag_items(), type(cfg).stage_options)
    )  # the demo's toy: the rates it is trained at
    if chosen.get("lora_r") and chosen["lora_r"].value > 0:  # an automatic LoRA: its learning rates too
        defaults: dict[str, Any] = {f.name: f.default for f in fields(cfg)}
        for name in learning_rates(type(cfg)):
            default = defaults[name]
            if getattr(cfg, name) == default:  # left at its default (a flag or YAML key set to it counts too)
                chosen[name] = AutoDefault(
                    default * LORA_LR_SCALE,
                    f"{LORA_LR_SCALE}× the full fine-tuning default {default:g}: LoRA",
                )
    if reward is not None:
        length = chosen.get("max_completion_length")
        sized = replace(cfg, max_completion_length=length.value if length else cfg.max_completion_length)
        chosen.update(stage_auto_defaults(sized, tok, rows, reward.components, model_dir))
    values = {name: value.value for name, value in chosen.items()}
    return values, describe(chosen, model_facts_of(model_dir)), warnings


def stage_auto_defaults(cfg: TrainConfig, tok, rows: list[dict], components: list, model_dir: str) -> dict:
    """What each stage the strategy may run (under ``auto``: every stage of a strategy the probe may choose)
    chooses for its own flags (its ``auto_defaults(run, options, facts)`` hook), by flag, in plan order."""
    from ark_trainer.base.strategies import stages_it_may_run
    from ark_trainer.core.auto_defaults import StageFacts

    chosen: dict = {}
    plan = resolve_plan(cfg)
    run = cfg.run_flags()
    for name in stages_it_may_run(cfg.strategy):
        stage = get_stage(name)
        hook, options = getattr(stage, "auto_defaults", None), getattr(stage, "options", None)
        if hook is None or options is None:
            continue
        facts = StageFacts(tok, rows, components, model_facts_of(model_dir), plan.steps(name))
        chosen.update(hook(run, cfg.options(options), facts))
    return chosen


def model_facts_of(model_dir: str):
    from ark_trainer.core.auto_defaults import model_facts

    return model_facts(model_dir)


def with_cpu_precision(run: RunFlags, rt: Runtime, auto: dict, model_dir: str) -> Runtime:
    """``rt`` computing in bf16 autocast where ``--mixed_precision auto`` on CPU chooses it for this model
    (``auto_defaults.cpu_precision``), the choice added to ``auto`` (plan.json's ``auto_defaults``)."""
    from ark_trainer.core.auto_defaults import cpu_precision, model_facts

    chosen = cpu_precision(run.mixed_precision, run.fp16, run.bf16, model_facts(model_dir), rt.device)
    if chosen is None:
        return rt
    auto["mixed_precision"] = {"value": chosen.value, "reason": chosen.reason}
    return replace(rt, bf16=chosen.value == "bf16")


def check_reward_applies(run: RunFlags, reward: CompositeReward, rows: list[dict]) -> None:
    """Refuse a reward that grades none of the data (``rewards/applies.py``), before anything is written.

    With the default preset, its first grader (QC verdict, reference match) must apply: the preset's
    format rules apply to any text, so they alone would train the answer's format and call it done.
    """
    from ark_trainer.rewards.applies import check_applies

    where, task = f"--data_path {run.data_path}", None
    if not run.reward_config:
        where += f" (default reward: {Path(reward.source).stem} preset)"
        task = [reward.components[0].name, *(["reward_model"] if run.rm_model_path else [])]
    check_applies(reward, rows, where, task)
