"""The ``train`` pipeline's execution: data → eval base → each stage of the plan, evaluated → report.

It runs a run planned by ``services/planning.py`` (:class:`~ark_trainer.services.planning.Prepared`), and
takes nothing else: the shared run flags, each stage's own options, the plan, the data splits and the
reward; never the whole config. A stage is handed the shared flags and its own options
(:class:`~ark_trainer.stages.registry.StageContext`). Where the run changes its own settings once started
(``--time_budget``, ``--strategy auto``), it asks the planning again.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from pathlib import Path
from typing import Any, cast

from ark_trainer.base.errors import UserError
from ark_trainer.base.fileio import atomic_write_text, write_json, write_jsonl
from ark_trainer.core.final_model import trained_dir
from ark_trainer.core.runfolder import DATA_STATS, RunFolder
from ark_trainer.core.runtime.monitor import Monitor, setup_logging
from ark_trainer.data.loader import resolve_eval_path
from ark_trainer.data.split import describe, mde_points, small_test_warning
from ark_trainer.services.planning import Prepared, probe_plan, settle_chosen
from ark_trainer.stages.eval_length import RECORD as EVAL_RECORD
from ark_trainer.stages.registry import StageContext, get_stage

log = logging.getLogger("ark_trainer")


def run_prepared(p: Prepared) -> Path:
    """Run the planned run ``p`` (:func:`~ark_trainer.services.planning.prepare`); returns the run directory."""
    from ark_trainer.core.runtime.launch import is_child
    from ark_trainer.core.runtime.runlock import RunLock
    from ark_trainer.core.runtime.signals import ctrl_c_stops, sigterm_raises

    with contextlib.nullcontext() if is_child() else RunLock(p.out), sigterm_raises(), ctrl_c_stops():
        return _run_prepared(p)  # the launching process holds OUT/.lock; accelerate's children do not


def split_line(p: Prepared) -> str:
    """One line: each split's n and where it comes from (the log, ``data/stats.json``)."""
    return (
        f"splits: train {len(p.train)} (--data_path), dev {len(p.dev)} (every choice), "
        f"test {len(p.eval)} (every reported figure); dev and test: {p.eval_source}"
    )


def plan_json(p: Prepared) -> dict:
    """``OUT/plan.json``: the plan (strategy, requested, reason, task_name, stages), the rewards, the precision."""
    return {**p.plan.to_json(), **p.plan_extra}


def write_run_files(p: Prepared) -> None:
    from ark_trainer.core.folders import claim_folder

    claim_folder(p.out)  # marked ours before its first file: a later run may continue or replace it
    folder = RunFolder(p.out)
    data_dir = folder.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(folder.config_path, p.run_yaml)
    folder.write_plan(plan_json(p))
    assert p.run.data_path  # validate() refuses a config without it (config.REQUIRED)
    inputs = {Path(p.run.data_path).resolve()}
    if p.run.eval_dataset:
        inputs.add(resolve_eval_path(p.run.eval_dataset).resolve())
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


def _run_prepared(p: Prepared) -> Path:
    run = p.run
    from ark_trainer.core.runtime import launch
    from ark_trainer.core.runtime.distributed import QuietMonitor, init_ranks, run_device

    # several processes: accelerate starts them, each runs this pipeline
    if launch.wants_relaunch(run.num_processes, run.launcher):
        launch.relaunch(p.launch, p.rt.use_cpu)
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
        if not run.resume and ranks.num_processes == 1:  # said (and fitted to --time_budget) once
            _estimate(p)
            run = p.run
        if run.resume:
            log.info("resuming the run in %s: finished parts are skipped", p.out)
    ranks.wait()
    monitor = cast(  # QuietMonitor: Monitor's interface (through __getattr__), writing nothing
        Monitor,
        (Monitor if ranks.is_main else QuietMonitor)(
            p.out, heartbeat=run.auto_heartbeat, interval=run.heartbeat_interval
        ),
    )
    ranks.monitor = monitor
    monitor.start(task_name=run.task_name, strategy=p.plan.strategy, resume=run.resume)
    from ark_trainer.base.scale import SUMMARY_FLAGS, scale_summary
    from ark_trainer.core.runtime.watchdog import Watchdog
    from ark_trainer.rewards.guards import attach_monitor, warn_skipped
    from ark_trainer.stages.diagnose.run_end import after_run, may_deploy

    flags = _declared(p, SUMMARY_FLAGS)  # the shared flags, and a stage's (--rollout_steps: GRPO's, RLOO's)
    monitor.event("scale", **scale_summary(p.rt, ranks.num_processes, **flags))
    attach_monitor(p.reward, monitor)
    watchdog = Watchdog(monitor, run.stall_timeout if ranks.is_main else 0).start()
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
    if ranks.is_main and run.openclaw_env and may_deploy(diagnosis, run.deploy_if_not_better):
        from ark_trainer.services.deploy.targets import get_target  # not when no better than base

        target = get_target(run.deploy_target)
        if target.deploy_after_train(p.out, log.info, log.warning) is not None:
            _parity_after_deploy(p, target)
    return p.out


def _declared(p: Prepared, names: tuple[str, ...]) -> dict[str, Any]:
    """The values of the flags ``names``: the shared flags', else those of the stage options that declare
    them (stages sharing a flag declare it alike: ``stages/registry.py``); None where none does."""
    sources = (p.run, *p.options.values())
    return {name: next((getattr(s, name) for s in sources if hasattr(s, name)), None) for name in names}


def _estimate(p: Prepared) -> None:
    """The run's expected time, measured and said (``stages/estimate.py``), its steps sized to
    ``--time_budget``: ``run.yaml`` and ``plan.json`` (its ``estimate``) written again."""
    from ark_trainer.stages.estimate import estimate_run

    def settled(chosen: dict) -> tuple:  # the steps sized to the budget: settled as the run's own choice
        settle_chosen(p, chosen)
        return p.run, p.options, p.plan

    record = estimate_run(
        p.run, p.options, p.plan, p.plan_extra, p.rt, p.model_path, (p.train, p.dev, p.eval), settled
    )
    if record is None:
        return
    p.plan_extra["estimate"] = record
    folder = RunFolder(p.out)
    atomic_write_text(folder.config_path, p.run_yaml)
    folder.write_plan(plan_json(p))


def _parity_after_deploy(p: Prepared, target: object) -> None:
    """The held-out set asked through the deployment in its client's request shape, for a deploy target that
    can (its ``evaluate_through``; OpenClaw's: ``services/openclaw/parity.py``); the report gets the table. A failure
    is a warning: the run and the deploy stand."""
    from ark_trainer.stages.agent.env import env_for

    evaluate = getattr(target, "evaluate_through", None)
    if evaluate is None or not (p.run.eval_auto and p.eval) or env_for(p.run) is not None:
        return
    try:
        evaluate(p.out, log=log.info)
        _build_report(p.out)
    except (UserError, OSError) as exc:
        log.warning("%s: the parity evaluation failed (the deployment stands): %s", p.run.deploy_target, exc)


def _run_stages(p: Prepared, monitor: Monitor) -> None:
    """Evaluate the base model, then run and evaluate each stage of the plan (resume skips finished ones)."""
    run, rt = p.run, p.rt
    assert run.model_path  # validate() refuses a config without it (config.REQUIRED)
    for message in (*rt.warnings, *p.warnings):
        monitor.warn(message)
    if run.openclaw_env:  # the deploy target's own check before training, when it has one
        from ark_trainer.services.deploy.targets import get_target

        check = getattr(get_target(run.deploy_target), "check_before_train", None)
        if check is not None:
            found = check(monitor.warn, run.output_dir, run.model_path, run.save_total_limit)
            monitor.event(run.deploy_target, **found)
    log.info(
        "task %s: %s, %d train / %d dev / %d test prompts, device %s",
        run.task_name,
        p.plan.strategy,
        len(p.train),
        len(p.dev),
        len(p.eval),
        rt.device,
    )
    log.info("%s", split_line(p))
    if run.eval_auto and p.eval and (small := small_test_warning(len(p.eval))):
        log.warning("%s", small)
    if p.plan.pending:
        _choose_strategy(p, monitor)
    evaluator = _Evaluator(p, rt, monitor)
    p.last_model = ("base", p.model_path)
    evaluator.run("base", p.model_path)
    held_out = p.dev if run.eval_auto else []  # a stage's own choices (its best step) read dev only
    current = p.model_path
    for planned in (s for s in p.plan.stages if s.steps > 0):
        stage = get_stage(planned.name)
        final_dir = trained_dir(RunFolder(p.out), planned.name, planned.last)  # OUT/model for the last
        if p.done and p.done.model_done(planned.name, final_dir):
            log.info("resume: %s already done (%s)", stage.label, final_dir)
            current = str(final_dir)  # its evaluation may still be missing: run below
        else:
            ctx = (
                StageContext(  # the shared flags and the stage's own options, as TRL hands a trainer its args
                    run,
                    p.options.get(planned.name),
                    rt,
                    monitor,
                    p.train,
                    p.reward,
                    p.out,
                    p.log_dir,
                    p.done,
                    held_out,
                )
            )
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
        dev = folder.dev_evals(names) if p.run.eval_auto and p.dev else {}
        test = folder.evals(names) if p.run.eval_auto and p.eval else {}
        choice = choose(dev, trained, p.run.final_model, test)
        ship(folder, choice, trained[-1])
        _record_prompt_shape(p, folder.model_dir)
        monitor.event("final_model", **choice.to_json())
        log.info("final model: OUT/model is %s, %s", choice.stage, choice.reason)
        if said := shipped_line(test, choice.stage):  # on the test split: its change, interval, n and p
            log.info("final model: %s", said)
    ranks().wait()


def _choose_strategy(p: Prepared, monitor: Monitor) -> None:
    """``--strategy auto``: probe the base model, resolve the plan with its choice, rewrite plan.json."""
    from ark_trainer.stages.plan import ProbeChoice
    from ark_trainer.stages.probe import SAMPLES_AS, decide, probe_record, probe_settings, run_probe

    run = p.run
    assert run.model_path  # validate() refuses a config without it (config.REQUIRED)
    settings = probe_settings(run, p.options_as(SAMPLES_AS))
    with monitor.stage("probe", total=min(len(p.train), run.auto_probe_prompts)):
        result, scored = run_probe(settings, p.rt, p.model_path, p.train, p.reward, on_batch=monitor.progress)
    strategy, reason = decide(result)  # every process probes the same prompts with the same seed
    p.plan = probe_plan(p, ProbeChoice(strategy, reason, probe_record(result)))
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
        shape = shape_of_rows(p.train, with_tools=env_for(p.run) is not None)
        write_shape(model_dir, shape.with_reply_tokens(p.run.max_completion_length))
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
        if not (self.p.run.eval_auto and self.p.eval):
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

        run = self.p.run
        tokens, env = self.p.eval_tokens, env_for(run)
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
                max_new_tokens=tokens, pass_threshold=run.pass_threshold,
                base_totals=self.base_totals.get(split), seed=run.seed, on_batch=self.monitor.progress,
                env=env, measurement=settings, answer_cache=run.eval_answer_cache,
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
