"""``ark-trainer diagnose OUT``: what went wrong in a run and what to change (see ``ark_trainer/stages/diagnose``)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ark_trainer.app.commands.args import add_command, opt


@dataclass
class DiagnoseOptions:
    run_dir: str = opt(
        None, "the --output_dir of a run (finished, failed, killed or running)", positional=True
    )
    json: bool = opt(
        False,
        'print {"status", "findings": [{"code", "severity", "stage", "evidence", "fix"}]}',
        switch=True,
    )


def register(sub) -> None:
    add_command(
        sub,
        "diagnose",
        DiagnoseOptions,
        _diagnose,
        help="diagnose a run folder: findings, most severe first, each with evidence and the fix",
        description="Read a run folder (events.jsonl, heartbeat.json, run.yaml, checkpoints, eval/*.json, "
        "train.log) and print what went wrong, most severe first, with the evidence (steps, values) and the "
        "fix (a flag and a value, or the resume command). Exit code 0 when nothing is above info, 1 otherwise.",
    )


def _diagnose(args: DiagnoseOptions) -> int:
    from ark_trainer.base.errors import UserError
    from ark_trainer.stages.diagnose import diagnose, render_text, to_json, worst

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such run folder; pass the --output_dir of a train run")
    from ark_trainer.core.runfolder import EVENTS, HEARTBEAT, RUN_CONFIG, RunFolder

    if not RunFolder(run_dir).is_run():
        raise UserError(f"{run_dir}: not a run folder (no {RUN_CONFIG}, {EVENTS} or {HEARTBEAT})")
    result = diagnose(run_dir)
    if args.json:
        print(json.dumps(to_json(result), ensure_ascii=False, indent=2))
    else:
        print(render_text(result, run_dir))
    return 0 if worst(result) in ("none", "info") else 1
