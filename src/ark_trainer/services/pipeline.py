"""The ``train`` pipeline: check → plan → data → eval base → each stage of the plan, evaluated → report.

Everything a user can get wrong (flags, model folder, data file, reward spec) is checked before the run
directory is touched, so a refused run leaves nothing behind. Run it with::

    ark-trainer-inner train --strategy RFT+GRPO --model_path M --data_path D.jsonl --output_dir OUT ...
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, cast

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_text, write_json, write_jsonl
from ark_trainer.base.run_options import RunFlags
from ark_trainer.core.auto_defaults import new_tokens
from ark_trainer.core.config import TrainConfig, settle, to_yaml
from ark_trainer.core.final_model import trained_dir
from ark_trainer.core.models.device import Runtime
from ark_trainer.core.models.source import ResolvedModel
from ark_trainer.core.runfolder import DATA_STATS, RunFolder
from ark_trainer.core.runtime.launch import LaunchSettings, child_flags
from ark_trainer.core.runtime.monitor import Monitor, setup_logging
from ark_trainer.core.runtime.resume import Progress
from ark_trainer.data.length import check_prompt_lengths
from ark_trainer.data.loader import load_jsonl, resolve_eval_path
from ark_trainer.data.split import (
    Splits,
    describe,
    divide_eval,
    drop_overlap,
    mde_points,
    small_test_warning,
    split_three,
)
from ark_trainer.rewards.builder import build_reward  # the one reward builder (train, score, plan)
from ark_trainer.rewards.composite import CompositeReward
from ark_trainer.stages.eval_length import RECORD as EVAL_RECORD
from ark_trainer.stages.eval_length import EvalLength, eval_length
from ark_trainer.stages.plan import Plan, ProbeChoice, resolve_plan
from ark_trainer.stages.registry import get_stage, stage_context, stage_names_in_order, stages

log = logging.getLogger("ark_trainer")


@dataclass
class Prepared:
    """A checked run: data split, reward built, nothing written yet."""

    cfg: TrainConfig
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

    @property
    def model_path(self) -> str:
        """The base model's HF folder: what every stage loads (``cfg.model_path`` is what the user gave)."""
        return str(self.model.path)

    @property
    def eval_tokens(self) -> int:
        """The new tokens an evaluation answer may take (``stages/eval_length.py``; plan.json's record)."""
        from ark_trainer.stages.eval_length import RECORD, EvalLength

        chosen = EvalLength.from_json(self.plan_extra.get(RECORD))
        return chosen.value if chosen else new_tokens(self.cfg.max_completion_length)


def prepare(cfg: TrainConfig) -> Prepared:
    """All user-facing checks; raises UserError before anything is written."""
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
        resume.append(check_resume(cfg, out, list(stages().values())))

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
        model = _converted(cfg, out, model)
    reward = build_reward(cfg, rows, rt.device)  # a stage's automatic settings are chosen from it too
    chosen, auto, warnings = auto_defaults(cfg, rows, rt, str(model.path), reward)
    if resume[-1] != cfg.resume:
        chosen["resume"] = resume[-1]
    cfg = settle(
        cfg, chosen
    )  # the config is frozen: this run's is built once, and validated, chosen values too
    rt = with_cpu_precision(cfg, rt, auto, str(model.path))
    sources = [(Path(data_path), rows)]
    if cfg.eval_dataset:
        sources.append((resolve_eval_path(cfg.eval_dataset), eval_rows))
    tools = _env_tools(cfg)
    check_prompt_lengths(
        str(model.path), new_tokens(cfg.max_completion_length), sources, rt.trust_remote_code, tools
    )
    check_reward_applies(cfg, reward, rows)
    splits, source = _splits(cfg, rows, eval_rows)
    plan = resolve_plan(cfg)
    extra: dict[str, object] = {"rewards": reward.describe(), "auto_defaults": auto}
    from ark_trainer.data.loader import episode_candidate_problems

    if not cfg.env and (problems := episode_candidate_problems(splits.train, data_path)):
        raise UserError(*problems)  # episode candidates need --env
    for planned in plan.stages:  # each stage's own check of the data it trains on (its ``check_data``)
        stage = get_stage(planned.name)
        if (check := getattr(stage, "check_data", None)) is not None:
            options = getattr(stage, "options", None)
            check(cfg.run_flags(), cfg.options(options) if options else None, splits.train)
    folder = RunFolder(out)
    resumed = bool(cfg.resume and folder.plan_path.is_file())
    if resumed:  # the first attempt's plan (and an auto probe's choice)
        saved = folder.saved_plan()
        plan = Plan.from_json(saved, cfg)
        extra = {k: v for k, v in saved.items() if k not in (*plan.to_json(), "schema")}
    extra["precision"] = rt.precision  # what this attempt computes in (the device may differ on resume)
    extra[EVAL_RECORD] = _eval_length(
        cfg.run_flags(), rt, str(model.path), rows, extra if resumed else None
    ).to_json()
    extra["base_model"] = model.to_json()  # what was given, its kind and checksum, the folder trained from
    log_dir = folder.log_dir(cfg.log_dir)
    done = Progress(out) if cfg.resume else None
    return Prepared(
        cfg,
        out,
        log_dir,
        splits.train,
        splits.test,
        source,
        reward,
        plan,
        extra,
        rt,
        model,
        done,
        warnings=tuple(warnings),
        dev=splits.dev,
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


def split_line(p: Prepared) -> str:
    """One line: each split's n and where it comes from (the log, ``data/stats.json``)."""
    return (
        f"splits: train {len(p.train)} (--data_path), dev {len(p.dev)} (every choice), "
        f"test {len(p.eval)} (every reported figure); dev and test: {p.eval_source}"
    )


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


def plan_json(p: Prepared) -> dict:
    """``OUT/plan.json``: the plan (strategy, requested, reason, task_name, stages), the rewards, the precision."""
    return {**p.plan.to_json(), **p.plan_extra}


def write_run_files(p: Prepared) -> None:
    from ark_trainer.core.folders import claim_folder

    claim_folder(p.out)  # marked ours before its first file: a later run may continue or replace it
    folder = RunFolder(p.out)
    data_dir = folder.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder.config_path, to_yaml(p.cfg))
    folder.write_plan(plan_json(p))
    assert p.cfg.data_path  # validate() refuses a config without it (config.REQUIRED)
    inputs = {Path(p.cfg.data_path).resolve()}
    if p.cfg.eval_dataset:
        inputs.add(resolve_eval_path(p.cfg.eval_dataset).resolve())
    # the test rows as test.jsonl, and as eval.jsonl (what older readers know) unless that is an input
    files = (("train.jsonl", p.train), ("dev.jsonl", p.dev), ("test.jsonl", p.eval), ("eval.jsonl", p.eval))
    for name, rows in files:
        if (data_dir / name).resolve() not in inputs:  # never overwrite the user's own input file
            write_jsonl(data_dir / name, [{k: v for k, v in r.items() if k != "_line"} for r in rows])
    write_json(
        data_dir / DATA_STATS,
        {
            "train": describe(p.train),
            "eval": describe(p.eval) if p.eval else None,  # the test split (the name readers know)
            "dev": describe(p.dev) if p.dev else None,
            "eval_source": p.eval_source,
            "splits": {
                "train": len(p.train),
                "dev": len(p.dev),
                "test": len(p.eval),
                "line": split_line(p),
                "test_mde_points": round(mde_points(len(p.eval)), 1) if p.eval else None,
                "dev_mde_points": round(mde_points(len(p.dev)), 1) if p.dev else None,
            },  # fmt: skip
        },
    )


def run_train(cfg: TrainConfig) -> Path:
    """Run the whole pipeline; returns the run directory."""
    if cfg.auto_resume > 0:
        from ark_trainer.core.runtime.supervisor import SupervisedRun, supervise
        from ark_trainer.stages.report import build_report

        return supervise(SupervisedRun(cfg.resume, cfg.auto_resume, cfg.flag_items()), build_report)
    p = prepare(cfg)
    from ark_trainer.core.runtime.launch import is_child
    from ark_trainer.core.runtime.runlock import RunLock
    from ark_trainer.core.runtime.signals import ctrl_c_stops, sigterm_raises

    with contextlib.nullcontext() if is_child() else RunLock(p.out), sigterm_raises(), ctrl_c_stops():
        return _run_prepared(p)  # the launching process holds OUT/.lock; accelerate's children do not


def launch_settings(cfg: TrainConfig) -> LaunchSettings:
    """What relaunching ``train`` through accelerate reads of the run's config (``core/runtime/launch.py``)."""
    return LaunchSettings(
        num_processes=cfg.num_processes,
        accelerate_config=cfg.accelerate_config,
        main_process_port=cfg.main_process_port,
        resume=cfg.resume,
        child_flags=tuple(child_flags(cfg.flag_items())),
    )


def _run_prepared(p: Prepared) -> Path:
    cfg = p.cfg
    from ark_trainer.core.runtime import launch
    from ark_trainer.core.runtime.distributed import QuietMonitor, init_ranks, run_device

    # several processes: accelerate starts them, each runs this pipeline
    if launch.wants_relaunch(cfg.num_processes, cfg.launcher):
        launch.relaunch(launch_settings(cfg), p.rt.use_cpu)
        return p.out
    ranks = init_ranks(p.rt.use_cpu)
    p.rt.device = run_device(p.rt.device)
    if ranks.is_main:  # only the main process writes the run directory
        write_run_files(p)
        setup_logging(p.log_dir)
        from ark_trainer.core.auto_defaults import announce

        announce(p.plan_extra.get("auto_defaults") or {}, log.info)  # chosen before logging was set up
        log.info(
            "evaluation answers: at most %s (plan.json: eval_length)", p.plan_extra[EVAL_RECORD]["reason"]
        )
        if not cfg.resume and ranks.num_processes == 1:  # said (and fitted to --time_budget) once
            _estimate(p)
            cfg = p.cfg
        if cfg.resume:
            log.info("resuming the run in %s: finished parts are skipped", p.out)
    ranks.wait()
    monitor = cast(  # QuietMonitor: Monitor's interface (through __getattr__), writing nothing
        Monitor,
        (Monitor if ranks.is_main else QuietMonitor)(
            p.out, heartbeat=cfg.auto_heartbeat, interval=cfg.heartbeat_interval
        ),
    )
    ranks.monitor = monitor
    monitor.start(task_name=cfg.task_name, strategy=p.plan.strategy, resume=cfg.resume)
    from ark_trainer.base.scale import SUMMARY_FLAGS, scale_summary
    from ark_trainer.core.runtime.watchdog import Watchdog
    from ark_trainer.rewards.guards import attach_monitor, warn_skipped
    from ark_trainer.stages.diagnose.run_end import after_run, may_deploy

    flags = {name: getattr(cfg, name) for name in SUMMARY_FLAGS}
    monitor.event("scale", **scale_summary(p.rt, ranks.num_processes, **flags))
    attach_monitor(p.reward, monitor)
    watchdog = Watchdog(monitor, cfg.stall_timeout if ranks.is_main else 0).start()
    try:
        _run_stages(p, monitor)
    except BaseException as exc:
        watchdog.stop()
        stage, model = p.last_model or ("none", "")
        from ark_trainer.core.runtime.signals import stopped_by_user

        if stopped_by_user(exc):  # Ctrl-C: not an error; the checkpoints stay for --resume True
            monitor.event(
                "stopped", message="stopped by the user", last_stage=stage, last_model=model or None
            )
            monitor.finish("stopped")
        else:
            monitor.event(
                "error", message=f"{type(exc).__name__}: {exc}", kind=type(exc).__name__, last_stage=stage,
                last_model=model or None,
            )  # fmt: skip
            monitor.finish("failed")
        if ranks.is_main:
            after_run(
                p.out
            )  # diagnosis: console and OUT/diagnosis.json (ark_trainer/stages/diagnose/run_end.py)
            _report_anyway(p.out)  # what finished, and why it stopped, at the top
        raise
    watchdog.stop()
    warn_skipped(p.reward, monitor)
    diagnosis: dict | None = None

    def _diagnose_and_report() -> None:  # diagnosis first: the report and the deploy gate read it
        nonlocal diagnosis
        diagnosis = after_run(p.out)
        _build_report(p.out)

    # "finished" only once the report is written: a kill while it is built leaves the run not finished
    monitor.finish("finished", before_final=_diagnose_and_report if ranks.is_main else None)
    if ranks.is_main and cfg.openclaw_env and may_deploy(diagnosis, cfg.deploy_if_not_better):
        from ark_trainer.services.deploy.targets import get_target  # not when no better than base

        target = get_target(cfg.deploy_target)
        if target.deploy_after_train(p.out, log.info, log.warning) is not None:
            _parity_after_deploy(p, target)
    return p.out


def _estimate(p: Prepared) -> None:
    """The run's expected time, measured and said (``stages/estimate.py``), its steps sized to
    ``--time_budget``: ``run.yaml`` and ``plan.json`` (its ``estimate``) written again."""
    from ark_trainer.stages.estimate import estimate_run

    done = estimate_run(p.cfg, p.plan, p.plan_extra, p.rt, p.model_path, (p.train, p.dev, p.eval))
    if done is None:
        return
    p.cfg, p.plan = done.cfg, done.plan
    p.plan_extra["estimate"] = done.record
    folder = RunFolder(p.out)
    atomic_write_text(folder.config_path, to_yaml(p.cfg))
    folder.write_plan(plan_json(p))


def _parity_after_deploy(p: Prepared, target: object) -> None:
    """The held-out set asked through the deployment in its client's request shape, for a deploy target that
    can (its ``evaluate_through``; OpenClaw's: ``services/openclaw/parity.py``); the report gets the table. A failure
    is a warning: the run and the deploy stand."""
    from ark_trainer.stages.agent.env import env_for

    evaluate = getattr(target, "evaluate_through", None)
    if evaluate is None or not (p.cfg.eval_auto and p.eval) or env_for(p.cfg) is not None:
        return
    try:
        evaluate(p.out, log=log.info)
        _build_report(p.out)
    except (UserError, OSError) as exc:
        log.warning("%s: the parity evaluation failed (the deployment stands): %s", p.cfg.deploy_target, exc)


def _run_stages(p: Prepared, monitor: Monitor) -> None:
    """Evaluate the base model, then run and evaluate each stage of the plan (resume skips finished ones)."""
    cfg, rt = p.cfg, p.rt
    assert cfg.model_path  # validate() refuses a config without it (config.REQUIRED)
    for message in (*rt.warnings, *p.warnings):
        monitor.warn(message)
    if cfg.openclaw_env:  # the deploy target's own check before training, when it has one
        from ark_trainer.services.deploy.targets import get_target

        check = getattr(get_target(cfg.deploy_target), "check_before_train", None)
        if check is not None:
            found = check(monitor.warn, cfg.output_dir, cfg.model_path, cfg.save_total_limit)
            monitor.event(cfg.deploy_target, **found)
    log.info(
        "task %s: %s, %d train / %d dev / %d test prompts, device %s",
        cfg.task_name,
        p.plan.strategy,
        len(p.train),
        len(p.dev),
        len(p.eval),
        rt.device,
    )
    log.info("%s", split_line(p))
    if cfg.eval_auto and p.eval and (small := small_test_warning(len(p.eval))):
        log.warning("%s", small)
    if p.plan.pending:
        _choose_strategy(p, monitor)
    evaluator = _Evaluator(p, rt, monitor)
    p.last_model = ("base", p.model_path)
    evaluator.run("base", p.model_path)
    held_out = p.dev if cfg.eval_auto else []  # a stage's own choices (its best step) read dev only
    parts = {"rt": rt, "monitor": monitor, "train": p.train, "reward": p.reward, "out": p.out}
    parts.update(log_dir=p.log_dir, done=p.done, held_out=held_out)
    current = p.model_path
    for planned in (s for s in p.plan.stages if s.steps > 0):
        stage = get_stage(planned.name)
        final_dir = trained_dir(RunFolder(p.out), planned.name, planned.last)  # OUT/model for the last
        if p.done and p.done.model_done(planned.name, final_dir):
            log.info("resume: %s already done (%s)", stage.label, final_dir)
            current = str(final_dir)  # its evaluation may still be missing: run below
        else:
            ctx = stage_context(cfg, planned.name, **parts)  # the shared flags and the stage's own options
            current = stage.run(ctx, planned, current, final_dir)
            gc.collect()
        _record_prompt_shape(p, Path(current))
        p.last_model = (planned.name, current)
        evaluator.run(planned.name, current)
    trained = [s.name for s in p.plan.stages if s.steps > 0]
    if trained:
        _ship_final_model(p, monitor, trained)


def _ship_final_model(p: Prepared, monitor: Monitor, trained: list[str]) -> None:
    """``OUT/model`` becomes the model of the stage ``--final_model`` chooses on the dev split
    (``core/final_model.py``); the line and the record give its test-split figure."""
    from ark_trainer.core.final_model import choose, ship
    from ark_trainer.core.runtime.distributed import ranks
    from ark_trainer.core.stats import shipped_line

    if ranks().is_main:
        folder = RunFolder(p.out)
        names = ["base", *trained]
        dev = folder.dev_evals(names) if p.cfg.eval_auto and p.dev else {}
        test = folder.evals(names) if p.cfg.eval_auto and p.eval else {}
        choice = choose(dev, trained, p.cfg.final_model, test)
        ship(folder, choice, trained[-1])
        _record_prompt_shape(p, folder.model_dir)
        monitor.event("final_model", **choice.to_json())
        log.info("final model: OUT/model is %s, %s", choice.stage, choice.reason)
        if said := shipped_line(test, choice.stage):  # on the test split: its change, interval, n and p
            log.info("final model: %s", said)
    ranks().wait()


def _choose_strategy(p: Prepared, monitor: Monitor) -> None:
    """``--strategy auto``: probe the base model, resolve the plan with its choice, rewrite plan.json."""
    from ark_trainer.stages.probe import SAMPLES_AS, decide, probe_record, probe_settings, run_probe

    cfg = p.cfg
    assert cfg.model_path  # validate() refuses a config without it (config.REQUIRED)
    settings = probe_settings(cfg.run_flags(), cfg.options(SAMPLES_AS))
    with monitor.stage("probe", total=min(len(p.train), cfg.auto_probe_prompts)):
        result, scored = run_probe(settings, p.rt, p.model_path, p.train, p.reward, on_batch=monitor.progress)
    strategy, reason = decide(result)  # every process probes the same prompts with the same seed
    p.plan = resolve_plan(cfg, ProbeChoice(strategy, reason, probe_record(result)))
    from ark_trainer.core.runtime.distributed import ranks

    if ranks().is_main:
        write_jsonl(RunFolder(p.out).data_dir / "probe_scored.jsonl", scored)
        RunFolder(p.out).write_plan(plan_json(p))
    monitor.event("strategy", strategy=strategy, reason=reason, **probe_record(result))
    log.info("%s", reason)
    gc.collect()


def _record_prompt_shape(p: Prepared, model_dir: Path) -> None:
    """The prompt shape the model learnt and the precision it is evaluated in, in its folder: the server
    shows it the same in OpenClaw and computes as its evaluation did (``services/deploy/policy.py``,
    ``services/deploy/precision.py``)."""
    from ark_trainer.core.runtime.distributed import ranks
    from ark_trainer.services.deploy.policy import shape_of_rows, write_shape
    from ark_trainer.services.deploy.precision import write_precision
    from ark_trainer.stages.agent.env import env_for

    if ranks().is_main and model_dir.is_dir():
        shape = shape_of_rows(p.train, with_tools=env_for(p.cfg) is not None)
        write_shape(model_dir, shape.with_reply_tokens(p.cfg.max_completion_length))
        write_precision(model_dir, p.rt.dtype, p.rt.precision)


class _Evaluator:
    """Evaluates each model of the run on the test split (``eval/<name>.json``, what reports read) and on the
    dev split (``eval/dev/<name>.json``, what choices read), through the same function and settings;
    remembers the base answers' rewards of each split. Under ``--resume`` an evaluation measured with other
    settings (the precision may change between attempts) is measured again, never compared as it is."""

    def __init__(self, p: Prepared, rt, monitor: Monitor) -> None:
        self.p, self.rt, self.monitor = p, rt, monitor
        self.base_totals: dict[str, list] = {}

    def run(self, name: str, model_path: str) -> None:
        from ark_trainer.core.runtime.distributed import ranks

        if ranks().is_main:  # the other processes wait at the barrier
            self._run(name, model_path)
        ranks().wait()

    def _run(self, name: str, model_path: str) -> None:
        if not (self.p.cfg.eval_auto and self.p.eval):
            return
        folder = RunFolder(self.p.out)
        for split, rows, path in (
            ("test", self.p.eval, folder.eval_path(name)),
            ("dev", self.p.dev, folder.dev_eval_path(name)),
        ):
            if rows:
                self._split(name, model_path, split, rows, path)
        gc.collect()

    def _split(self, name: str, model_path: str, split: str, rows: list[dict], path: Path) -> None:
        from ark_trainer.base.fileio import read_json
        from ark_trainer.core.metrics import AGENT_METRICS, HEADLINE
        from ark_trainer.stages.agent.env import env_for
        from ark_trainer.stages.evaluate import evaluate_model, measurement_of

        cfg = self.p.cfg
        tokens, env = self.p.eval_tokens, env_for(cfg)
        settings = measurement_of(split, rows, self.rt, tokens, env is not None)
        stage = f"eval_{name}" if split == "test" else f"eval_{name}_{split}"
        if self.p.done and self.p.done.stage_ok(stage) and path.is_file():
            done = read_json(path)
            if done.get("measurement") == settings:
                log.info("resume: eval %s (%s) already done", name, split)
                self.base_totals.setdefault(split, [a["reward"] for a in done["answers"]])
                return
            log.info("resume: eval %s (%s) was measured with other settings: measured again", name, split)
        with self.monitor.stage(stage, total=len(rows)):
            result = evaluate_model(
                model_path, name, rows, self.p.reward, self.rt, path,
                max_new_tokens=tokens, pass_threshold=cfg.pass_threshold,
                base_totals=self.base_totals.get(split), seed=cfg.seed, on_batch=self.monitor.progress,
                env=env, measurement=settings, answer_cache=cfg.eval_answer_cache,
            )  # fmt: skip
        self.base_totals.setdefault(split, [a["reward"] for a in result["answers"]])
        keys = HEADLINE + tuple(k for k in AGENT_METRICS if k in result)
        if split == "test":  # the figures every report shows; dev's are choices' and go to the log only
            self.monitor.event("eval", model=name, **{k: result[k] for k in keys})
        log.info(
            "eval %s (%s, n=%d): %s", name, split, len(rows), ", ".join(f"{k}={result[k]}" for k in keys)
        )


def _report_anyway(out: Path) -> None:
    """The report of a run that stopped; a failure to write it must not hide why the run stopped."""
    try:
        _build_report(out)
    except Exception as exc:  # noqa: BLE001 - the original error is what the user needs to see
        log.error("could not write the report of the stopped run: %s", exc)


def _build_report(out: Path) -> None:
    from ark_trainer.stages.report import build_report

    md, html = build_report(out)
    log.info("report: %s and %s", md, html)
