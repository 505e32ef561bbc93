"""Report blocks for what went wrong: the failure at the top, and the bad steps and rollbacks of a run.

A run that stops (a fault, a NaN stage after its rollbacks, a kill ``--auto_resume`` gave up on, Ctrl-C)
still gets its report (``services/train.run_train`` and ``supervisor.supervise`` build it), and the first thing
it says is why it stopped, which stages finished, and where the model of the last finished stage is.
Read only from ``events.jsonl``, like the rest of the report.
"""

from __future__ import annotations

from typing import Any

from ark_trainer.stages.report.render import Block, Bullets, Heading, Para, Table

MAX_ROWS = 40


def _last_attempt(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    starts = [i for i, e in enumerate(events) if e.get("event") == "run_start"]
    return events[starts[-1] :] if starts else events


def _stopped(events: list[dict[str, Any]]) -> bool:
    """True when the run ended without finishing, or the supervisor gave up on it."""
    if any(e.get("event") == "gave_up" for e in _last_attempt(events)):
        return True
    ends = [e for e in events if e.get("event") == "run_end"]
    return bool(ends) and str(ends[-1].get("status")) != "finished"


def _cause(attempt: list[dict[str, Any]]) -> str:
    """The most telling message: a diverged stage, else the supervisor's verdict, else the last error, else
    the user's stop (Ctrl-C)."""
    for name in ("diverged", "gave_up", "error", "stopped", "stalled"):
        found = [e for e in attempt if e.get("event") == name]
        if found:
            e = found[-1]
            kind = f" ({e['kind']})" if e.get("kind") and name == "error" else ""
            return f"{e.get('message', name)}{kind}"
    return "the process ended without saying why (killed?); see train.log"


def _failed_stage(attempt: list[dict[str, Any]]) -> str:
    open_stages: list[str] = []
    for e in attempt:
        stage = str(e.get("stage", "?"))
        if e.get("event") == "stage_start":
            open_stages.append(stage)
        elif e.get("event") == "stage_end":
            if e.get("status") != "ok":
                return stage
            if stage in open_stages:
                open_stages.remove(stage)
    return open_stages[-1] if open_stages else "—"


def failure_blocks(events: list[dict[str, Any]]) -> list[Block]:
    """The Failure section (empty for a run that finished or is still going)."""
    if not _stopped(events):
        return []
    attempt = _last_attempt(events)
    finished: list[str] = []
    for e in events:
        if e.get("event") == "stage_end" and e.get("status") == "ok" and e.get("stage") not in finished:
            finished.append(str(e.get("stage")))
    models = [e for e in events if e.get("event") in ("error", "gave_up", "stopped") and e.get("last_model")]
    items = [
        f"Stopped in stage {_failed_stage(attempt)}: {_cause(attempt)}",
        f"Finished before it: {', '.join(finished) if finished else 'nothing'}",
    ]
    if models:
        last = models[-1]
        items.append(f"Model of the last finished stage ({last.get('last_stage')}): {last['last_model']}")
    items.append("Continue it with the same command and --resume True (finished stages are skipped)")
    by_user = any(e.get("event") == "run_end" and e.get("status") == "stopped" for e in attempt)
    return [Heading("Stopped by the user" if by_user else "Failure"), Bullets(items)]


def bad_step_blocks(events: list[dict[str, Any]]) -> list[Block]:
    """Skipped (NaN/inf) steps and rollbacks, counted per stage; shown only when there were any."""
    bad = [e for e in events if e.get("event") == "bad_step"]
    rollbacks = [e for e in events if e.get("event") == "rollback"]
    if not bad and not rollbacks:
        return []
    per_stage: dict[str, int] = {}
    for e in bad:
        per_stage[str(e.get("stage"))] = per_stage.get(str(e.get("stage")), 0) + 1
    counts = ", ".join(f"{stage} {n}" for stage, n in per_stage.items()) or "none"
    rows = [_incident_row(e) for e in events if e.get("event") in ("bad_step", "rollback")]
    if len(rows) > MAX_ROWS:  # a long run can skip many steps: the first ones and the last ones
        rows = [
            *rows[: MAX_ROWS // 2],
            ["…", f"{len(rows) - MAX_ROWS} more", "", ""],
            *rows[-MAX_ROWS // 2 :],
        ]
    precision = bad[-1].get("precision") if bad else rollbacks[-1].get("precision")
    summary = (
        f"Bad steps skipped (no update applied): {len(bad)} ({counts}); rollbacks: {len(rollbacks)}; "
        f"precision: {precision}."
    )
    return [Heading("Bad steps"), Para(summary), Table(["time", "what", "why", "action"], rows)]


def _incident_row(e: dict[str, Any]) -> list[str]:
    if e.get("event") == "bad_step":
        return [
            e.get("time", ""),
            f"{e.get('stage')} step {e.get('step')}",
            f"{e.get('what')} NaN/inf",
            "skipped",
        ]
    return [
        e.get("time", ""),
        f"{e.get('stage')} rollback {e.get('attempt')}",
        f"bad steps in a row up to step {e.get('at_step')}",
        f"back to step {e.get('to_step')}, learning rate {e.get('learning_rate')}",
    ]
