"""``ark-trainer doctor [--json]``: check Python, torch/CUDA, disk, libraries and OpenClaw.

Exit code 1 only when a check fails; warnings (no GPU, no OpenClaw, no login) exit 0. The JSON schema
is documented in :mod:`ark_trainer.openclaw.doctor`.
"""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("doctor", help="check the environment: Python, torch, CUDA, disk, libraries, OpenClaw")
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (schema ark-trainer.doctor/1)"
    )
    p.add_argument("--model_path", default=None, help="size the disk check for this model")
    p.add_argument("--output_dir", default=None, help="check free disk where the run will write (default: .)")
    p.add_argument("--save_total_limit", type=int, default=2, help="checkpoints kept per stage (default: 2)")
    p.set_defaults(func=_cmd_doctor)


def _cmd_doctor(args) -> int:
    from ark_trainer.openclaw.doctor import format_text, run_checks, to_json

    checks = run_checks(args.output_dir, args.model_path, args.save_total_limit)
    doc = to_json(checks)
    print(json.dumps(doc, ensure_ascii=False, indent=2) if args.json else format_text(checks))
    return 0 if doc["ok"] else 1
