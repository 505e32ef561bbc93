"""``--report_to``: where training metrics also go, spelled as transformers spells it.

``tensorboard`` (the default) writes event files under ``--log_dir/tensorboard/<stage>``; ``trackio``,
``wandb`` and ``mlflow`` hand the Trainer's logs to that tracker through transformers' own integration
callbacks (each configured the usual way: ``WANDB_PROJECT``/``WANDB_MODE``, ``MLFLOW_TRACKING_URI``,
``TRACKIO_PROJECT``...). Several are comma-separated; ``none`` turns them all off. ``events.jsonl``, the
report, ``diagnose`` and the dashboard do not depend on any of them.
"""

from __future__ import annotations

import importlib.util

PACKAGES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb", "mlflow": "mlflow"}


def parse_report_to(value: str) -> list[str]:
    """``"tensorboard,wandb"`` → ``["tensorboard", "wandb"]``; ``none`` (or empty) → ``[]``."""
    names = [n.strip().lower() for n in str(value or "").split(",") if n.strip()]
    return [] if names in ([], ["none"]) else names


def report_to_problems(value: str) -> list[str]:
    """One line per tracker that is unknown or not installed (for the config's validation)."""
    problems = []
    for name in parse_report_to(value):
        if name not in PACKAGES:
            problems.append(f"--report_to: unknown tracker {name!r}; use {', '.join(PACKAGES)} or none")
        elif importlib.util.find_spec(PACKAGES[name]) is None:
            problems.append(
                f"--report_to: {name} is not installed; pip install {PACKAGES[name]}, or --report_to tensorboard"
            )
    return problems


def trainer_report_to(value: str) -> list[str] | str:
    """The Trainer's own ``report_to``: every tracker but tensorboard (added by the stage with our log layout)."""
    others = [n for n in parse_report_to(value) if n != "tensorboard"]
    return others or "none"


def wants_tensorboard(value: str) -> bool:
    return "tensorboard" in parse_report_to(value)
