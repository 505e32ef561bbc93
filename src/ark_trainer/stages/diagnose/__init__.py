"""Automatic diagnosis of a run: what went wrong, the evidence, and what to change.

    ark-trainer diagnose OUT            # findings, most severe first
    ark-trainer diagnose OUT --json     # {"status", "findings": [{"code","severity","stage","evidence","fix"}]}

Reads the run folder alone (events.jsonl, heartbeat.json, run.yaml, plan.json, checkpoints, eval/*.json,
train.log), so it works on any run, finished, failed, killed or still going. It also runs by itself at the
end of every ``train`` run: the report has a Diagnosis section and the console gets the findings. A
healthy run gets nothing above ``info``. The codes are listed in :data:`CODES` (and in docs/long-runs.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ark_trainer.stages.diagnose.finding import SEVERITIES, Finding
from ark_trainer.stages.diagnose.rundata import RunData, load

CODES = {
    "non_finite": "a loss or gradient became NaN/inf (the step was skipped, or the run stopped)",
    "oom": "out of memory (the run failed, or --auto_resume restarted it)",
    "stalled": "no progress for --stall_timeout seconds (watchdog), or the heartbeat stopped",
    "dead": "the process is gone without finishing (killed)",
    "disk_full": "too little free disk to save a checkpoint",
    "failed": "the run failed for another reason (the error and the resume command)",
    "flat_reward": "most sampled groups (GRPO, RLOO) had zero reward variance: no learning signal",
    "no_learning": "reward and weights barely moved (learning rate ~0, KL ~0, same answers as before)",
    "kl_blowup": "the KL to the reference grew past 1",
    "entropy_collapse": "token entropy fell near zero: every sample is the same answer",
    "truncation": "many completions hit --max_completion_length",
    "reward_hacking": "training reward up while held-out metrics fall, or one grader up while others fall",
    "eval_regression": "a stage ends worse than the one before on a headline metric",
    "no_improvement": "the final model is no better than the base on the main metric (not deployed)",
    "gain_within_noise": "the final model beats the base on the main metric, but not beyond the noise (paired test)",
    "slow_generation": "generation takes most of each GRPO step",
}


def all_checks() -> tuple:
    from ark_trainer.stages.diagnose import evals, failures, training

    return failures.CHECKS + training.CHECKS + evals.CHECKS


def diagnose(run_dir: Path) -> dict[str, Any]:
    """``{"status": ..., "findings": [Finding, ...]}`` for the run folder, most severe first."""
    run = load(Path(run_dir))
    findings: list[Finding] = []
    for check in all_checks():
        findings += check(run)
    return {"status": run.final_status(), "findings": _most_severe_first(findings)}


def _most_severe_first(findings: list[Finding]) -> list[Finding]:
    """Sorted by severity (stable: checks run in the order of :data:`CODES`); one per code and stage."""
    kept: dict[tuple[str, str], Finding] = {}
    for f in sorted(findings, key=lambda f: f.rank):
        kept.setdefault((f.code, f.stage), f)
    return list(kept.values())


def to_json(result: dict[str, Any]) -> dict[str, Any]:
    return {"status": result["status"], "findings": [f.to_dict() for f in result["findings"]]}


def worst(result: dict[str, Any]) -> str:
    """The most severe severity among the findings, or ``"none"``."""
    return result["findings"][0].severity if result["findings"] else "none"


def render_text(result: dict[str, Any], run_dir: Path) -> str:
    findings = result["findings"]
    lines = [f"{run_dir}: {result['status']}; {_summary(findings)}"]
    for f in findings:
        lines += [f"{f.severity.upper()} {f.code} ({f.stage}): {f.evidence}", f"  fix: {f.fix}"]
    return "\n".join(lines)


def _summary(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    counts = [f"{sum(f.severity == s for f in findings)} {s}" for s in SEVERITIES]
    return ", ".join(c for c in counts if not c.startswith("0 "))


__all__ = ["CODES", "Finding", "RunData", "diagnose", "render_text", "to_json", "worst"]
