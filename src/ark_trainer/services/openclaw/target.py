"""The OpenClaw deploy target (``--deploy_target openclaw``, ``deploy --target openclaw``): the functions of
:class:`~ark_trainer.services.deploy.targets.DeployTarget`, from :mod:`ark_trainer.services.openclaw.deploy`, and the two optional
ones, the check before training and the parity evaluation after the end-of-run deploy. It is a module of its
own because the parity evaluation (``services/openclaw/parity.py``) imports the deploy module.
"""

from __future__ import annotations

from pathlib import Path

from ark_trainer.services.openclaw.deploy import (
    current,
    deploy,
    deploy_after_train,
    rollback,
    status,
    stop,
    swap,
)

__all__ = ["current", "deploy", "deploy_after_train", "rollback", "status", "stop", "swap"]

label = "OpenClaw"  # the client's name for people (``loop --stop``'s line)


def check_before_train(warn, output_dir: str | None, model_path: str | None, checkpoints: int) -> dict:
    """``train --openclaw_env True``'s check before training: ``doctor``'s checks, problems as warnings."""
    from ark_trainer.services.openclaw import check_openclaw

    return check_openclaw(warn, output_dir, model_path, checkpoints)


def evaluate_through(out: Path, log=print) -> None:
    """After the end-of-run deploy: the run's held-out set asked through the deployment in OpenClaw's request
    shape; the report gets the table (``services/openclaw/parity.py``)."""
    from ark_trainer.services.openclaw.parity import evaluate_through_openclaw

    evaluate_through_openclaw(out, log=log)
