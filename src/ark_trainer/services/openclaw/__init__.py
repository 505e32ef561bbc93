"""OpenClaw integration: environment checks (doctor), deploy/rollback, trajectory collection, the skill.

Modules: ``cli`` (find and run the ``openclaw`` CLI), ``doctor``, ``deploy`` (the OpenClaw deploy target: serve
OUT/model through :mod:`ark_trainer.services.deploy` and register it in OpenClaw's config, with rollback),
``config_edit``, ``skill/``. Collecting sessions as training JSONL is data code: :mod:`ark_trainer.data.collect`
and :mod:`ark_trainer.data.scrub`.
"""

from __future__ import annotations

from collections.abc import Callable


def check_openclaw(
    warn: Callable[[str], None],
    output_dir: str | None = None,
    model_path: str | None = None,
    checkpoints: int = 2,
) -> dict:
    """``doctor``'s checks for ``--openclaw_env True`` (disk sized for ``output_dir``, ``model_path`` and
    ``checkpoints`` kept, ``--save_total_limit``); problems are warnings here."""
    from ark_trainer.services.openclaw.doctor import run_checks

    checks = run_checks(output_dir, model_path, checkpoints)
    for c in checks:
        if c.status != "ok":
            warn(f"--openclaw_env True: {c.name}: {c.detail}" + (f" (fix: {c.fix})" if c.fix else ""))
    cli = next(c for c in checks if c.name == "openclaw_cli")
    found = cli.status == "ok"
    return {
        "found": found,
        "version": cli.detail.split(" at ")[0] if found else None,
        "checks": {c.name: c.status for c in checks},
    }
