"""Checks for runs that broke: non-finite numbers, out of memory, stalls, dead processes, a full disk.

Each reads the events the runtime writes (``diverged``, ``bad_step``, ``error``, ``restart``, ``stalled``),
the heartbeat and the end of ``train.log``, and answers with the command that continues the run.
"""

from __future__ import annotations

import math
import re

from ark_trainer.core.runtime.resume import latest_complete
from ark_trainer.stages.diagnose.finding import RERUN, Finding, lower, lr_flag, resume_command
from ark_trainer.stages.diagnose.rundata import RunData, num

OOM_WORDS = re.compile(r"OutOfMemoryError|out of memory|MemoryError", re.IGNORECASE)
DISK_WORDS = re.compile(r"DiskFullError|No space left on device|disk full", re.IGNORECASE)


def _errors(run: RunData, pattern: re.Pattern) -> list[dict]:
    return [e for e in run.of("error") if pattern.search(f"{e.get('kind', '')} {e.get('message', '')}")]


def _checkpoint_note(run: RunData) -> str:
    from ark_trainer.stages.registry import stage_names_in_order

    found = [latest_complete(run.out / stage) for stage in reversed(stage_names_in_order())]
    newest = next((p for p in found if p is not None), None)
    return f"; it continues from {newest.relative_to(run.out)}" if newest else ""


def check_non_finite(run: RunData) -> list[Finding]:
    findings = []
    for e in run.of("diverged"):
        stage = str(e.get("stage", "?"))
        flag = lr_flag(stage)
        fix = f"lower --{flag} from {run.cfg(flag)} to {lower(run.cfg(flag))}"
        if run.cfg("fp16"):
            fix += " and train in --bf16 True (or fp32) instead of --fp16 True"
        fix += f"; {RERUN}"
        evidence = f"step {e.get('step')}: {e.get('message', 'NaN/inf')}"
        findings.append(Finding("non_finite", "error", stage, evidence, fix))
    bad, rollbacks = run.of("bad_step") + run.of("skipped_step"), run.of("rollback")
    if bad or rollbacks:  # with a diverged event too, the error above is the one kept
        stage = str((bad or rollbacks)[-1].get("stage", "?"))
        flag = lr_flag(stage)
        steps = ", ".join(f"{e.get('step', '?')} ({e.get('what', 'NaN/inf')})" for e in bad[:5])
        evidence = f"{len(bad)} step(s) skipped for NaN/inf" + (f": {steps}" if bad else "")
        if len(bad) > 5:
            evidence += ", …"
        if rollbacks:
            last = rollbacks[-1]
            evidence += (
                f"; {len(rollbacks)} rollback(s), the last from step {last.get('at_step')} to step "
                f"{last.get('to_step')} with learning rate {last.get('learning_rate')}"
            )
        precision = (bad or rollbacks)[-1].get("precision")
        fix = f"lower --{flag} from {run.cfg(flag)} to {lower(run.cfg(flag), 2)}"
        fix += " and use --bf16 True instead of fp16" if precision == "fp16" or run.cfg("fp16") else ""
        findings.append(Finding("non_finite", "warning", stage, evidence, f"{fix}; {RERUN}"))
    if not findings:
        findings += _non_finite_metrics(run)
    return findings


def _non_finite_metrics(run: RunData) -> list[Finding]:
    for e in run.of("metrics"):
        for key in ("loss", "grad_norm"):
            value = num(e.get(key))
            if value is not None and not math.isfinite(value):
                stage = str(e.get("stage", "?"))
                flag = lr_flag(stage)
                return [
                    Finding(
                        "non_finite",
                        "error",
                        stage,
                        f"step {e.get('step')}: {key} = {value}",
                        f"lower --{flag} from {run.cfg(flag)} to {lower(run.cfg(flag))}",
                    )
                ]
    return []


def check_oom(run: RunData) -> list[Finding]:
    errors = _errors(run, OOM_WORDS)
    restarts = [e for e in run.of("restart") if OOM_WORDS.search(str(e.get("reason", "")))]
    in_log = bool(OOM_WORDS.search(run.log_text))
    if not (errors or restarts or in_log):
        return []
    batch, accum = int(run.cfg("batch_size", 8)), int(run.cfg("gradient_accumulation_steps", 1))
    half = max(1, batch // 2)
    flags = {"batch_size": half, "gradient_accumulation_steps": accum * batch // half}
    failed = run.final_status() in ("failed", "dead")
    stage = str(run.beat.get("stage") or "?")
    if errors:
        evidence = f"{errors[-1].get('kind', 'error')}: {str(errors[-1].get('message', ''))[:200]}"
    elif restarts:
        evidence = f"{len(restarts)} restart(s) after running out of memory; the run recovered"
    else:
        evidence = f"'out of memory' in {run.log_path}"
    fix = (
        f"halve the micro-batch and keep the effective batch: --batch_size {half} "
        f"--gradient_accumulation_steps {flags['gradient_accumulation_steps']}, or --gradient_checkpointing True"
        f"; continue: {resume_command(run, **flags)}{_checkpoint_note(run)}"
        "; --auto_resume 2 does this by itself"
    )
    return [Finding("oom", "error" if failed else "warning", stage, evidence, fix)]


def check_stalled(run: RunData) -> list[Finding]:
    events = run.of("stalled")
    if not events and run.state != "stalled":
        return []
    e = events[-1] if events else {}
    stage = str(e.get("stage") or run.beat.get("stage") or "?")
    evidence = str(e.get("message") or f"heartbeat stopped at {run.beat.get('updated_at')} (pid alive)")
    fix = (
        f"the Python stack of every thread is in {run.log_path}: fix what hung (a reward calling a slow "
        f"service: --reward_timeout), then continue: {resume_command(run)}{_checkpoint_note(run)}"
    )
    return [Finding("stalled", "error", stage, evidence, fix)]


def check_dead(run: RunData) -> list[Finding]:
    if run.state != "dead":
        return []
    beat = run.beat
    evidence = (
        f"process {beat.get('pid')} is gone without finishing: last beat {beat.get('updated_at')}, "
        f"stage {beat.get('stage')}, step {beat.get('step')}/{beat.get('total')}"
    )
    logged = run.of("metrics")
    if logged:
        evidence += f"; last logged step: {logged[-1].get('stage')} {logged[-1].get('step')}"
    fix = f"continue it: {resume_command(run)}{_checkpoint_note(run)}; --auto_resume 2 restarts by itself"
    return [Finding("dead", "error", str(beat.get("stage") or "?"), evidence, fix)]


def check_disk_full(run: RunData) -> list[Finding]:
    errors = _errors(run, DISK_WORDS)
    if not errors and not DISK_WORDS.search(run.log_text):
        return []
    evidence = (
        str(errors[-1].get("message", ""))[:240] if errors else f"'No space left on device' in {run.log_path}"
    )
    stage = str(run.beat.get("stage") or "?")
    fix = (
        f"free disk on {run.out} (at least --min_free_disk_gb {run.cfg('min_free_disk_gb', 1)} GB), then "
        f"continue: {resume_command(run)}{_checkpoint_note(run)}; next time keep fewer checkpoints "
        "(--save_total_limit 1)"
    )
    return [Finding("disk_full", "error", stage, evidence, fix)]


def check_failed(run: RunData) -> list[Finding]:
    """A run that failed for a reason none of the checks above names: the error, and how to continue."""
    if (
        run.final_status() != "failed"
        or run.of("diverged")
        or _errors(run, OOM_WORDS)
        or _errors(run, DISK_WORDS)
    ):
        return []
    errors = run.of("error")
    evidence = (
        f"{errors[-1].get('kind', 'error')}: {str(errors[-1].get('message', ''))[:240]}"
        if errors
        else "the run ended with status failed"
    )
    fix = f"the traceback is in {run.log_path}; once fixed, continue: {resume_command(run)}{_checkpoint_note(run)}"
    return [Finding("failed", "error", str(run.beat.get("stage") or "?"), evidence, fix)]


CHECKS = (check_non_finite, check_oom, check_stalled, check_dead, check_disk_full, check_failed)
