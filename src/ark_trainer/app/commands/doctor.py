"""``ark-trainer doctor [--json]``: check Python, torch/CUDA, disk, libraries and OpenClaw.

Exit code 1 only when a check fails; warnings (no GPU, no OpenClaw, no login) exit 0. The JSON schema
is documented in :mod:`ark_trainer.services.openclaw.doctor`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ark_trainer.app.commands.args import add_command, opt


@dataclass
class DoctorOptions:
    json: bool = opt(False, "machine-readable output (schema ark-trainer.doctor/1)", switch=True)
    model_path: str | None = opt(None, "size the disk check for this model")
    output_dir: str | None = opt(None, "check free disk where the run will write (default: .)")
    save_total_limit: int = opt(2, "checkpoints kept per stage (default: 2)", low=0)


def register(sub) -> None:
    add_command(
        sub,
        "doctor",
        DoctorOptions,
        _cmd_doctor,
        help="check the environment: Python, torch, CUDA, disk, libraries, OpenClaw",
    )


def _cmd_doctor(args: DoctorOptions) -> int:
    from ark_trainer.services.openclaw.doctor import format_text, run_checks, to_json

    checks = run_checks(args.output_dir, args.model_path, args.save_total_limit)
    doc = to_json(checks)
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else format_text(checks))
    return 0 if doc["ok"] else 1
