"""One finding of a diagnosis, and the small helpers every check uses to word its evidence and fix."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass
from typing import Any

from ark_trainer.stages.diagnose.rundata import RunData

SEVERITIES = ("error", "warning", "info")  # most severe first


@dataclass(frozen=True)
class Finding:
    """``code`` from :data:`ark_trainer.stages.diagnose.CODES`; ``evidence`` names steps and values; ``fix`` a flag."""

    code: str
    severity: str
    stage: str
    evidence: str
    fix: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def rank(self) -> int:
        return SEVERITIES.index(self.severity)


def resume_command(run: RunData, **flags: Any) -> str:
    """The command that continues this run from its newest complete checkpoint (the rest comes from run.yaml).

    Only resource flags (batch size, accumulation, device, precision, timeouts) may change on a resume.
    """
    extra = "".join(f" --{k} {shlex.quote(str(v))}" for k, v in flags.items())
    return f"ark-trainer train --output_dir {shlex.quote(str(run.out))} --resume True{extra}"


# How to train again with a changed training flag (a resume refuses those).
RERUN = "rerun with it into a new --output_dir (or the same one with --overwrite_output_dir True)"


def lr_flag(stage: str) -> str:
    """The learning-rate flag of a training stage (``rft`` → ``rft_learning_rate``); the last stage's otherwise."""
    from ark_trainer.stages.registry import lr_flags, stage_names_in_order

    flags = lr_flags()
    return flags.get(stage, flags[stage_names_in_order()[-1]]).removeprefix("--")


def stage_label(stage: str) -> str:
    """A stage's name for people (``grpo`` → ``GRPO``); the name itself for a stage not registered here (a
    plug-in that is not installed where the run is diagnosed)."""
    from ark_trainer.stages.registry import stages

    found = stages().get(stage)
    return found.label if found is not None else stage


def lower(value: Any, factor: float = 10.0, fallback: float = 1e-6) -> str:
    """``value / factor`` written briefly (``1e-05``), for a fix that lowers a rate."""
    number = value if isinstance(value, int | float) and value > 0 else fallback * factor
    return f"{number / factor:.2g}"


def steps_text(points: list[tuple[float, float]]) -> str:
    """``steps 1–20`` for the range a series covers."""
    if not points:
        return "no steps"
    first, last = int(points[0][0]), int(points[-1][0])
    return f"step {first}" if first == last else f"steps {first}–{last}"


def thirds(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Mean of the first and of the last third of a series (None under 3 points): its trend, noise-damped."""
    if len(points) < 3:
        return None
    k = max(1, len(points) // 3)
    head, tail = [v for _, v in points[:k]], [v for _, v in points[-k:]]
    return sum(head) / len(head), sum(tail) / len(tail)


def mean(points: list[tuple[float, float]]) -> float | None:
    return sum(v for _, v in points) / len(points) if points else None
