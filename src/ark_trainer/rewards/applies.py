"""Does the reward grade this data at all? A cheap check that ``train`` runs before anything is written.

Rows collected from OpenClaw carry no ``label`` or ``reference``: the default QC preset's verdict grader
then returns ``None`` (not applicable) for every answer, and a run would "finish" having learnt only the
answer format. So each grader is asked whether it applies to a sample of the rows, answered by the row's
own first answer (a candidate, ``chosen`` or the reference; else a placeholder). Judges and reward models
answer without a request or a model load (their ``applies`` method); other graders are called, and one
that raises is taken to apply. When none of the graders that carry the task applies to any sampled row,
the run is refused in one line naming the kinds of grader that need no label.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.rewards.composite import CompositeReward, reward_columns
from ark_trainer.rewards.graders import applies

SAMPLE_ROWS = 32
PLACEHOLDER = "OK"
HINT = (
    "pass --reward_config with graders that need no label (an llm_judge, a reward_model, or label-free rules "
    "such as string_check, regex, keywords or length on {{sample.output_text}}), or --rm_model_path, or add "
    "label/reference to the rows"
)


def sample_batch(rows: Sequence[dict], n: int = SAMPLE_ROWS) -> tuple[list, list[str], dict[str, list]]:
    """Prompts, one answer each and the reward columns of up to ``n`` rows spread over the data."""
    picked = list(rows[:: max(1, len(rows) // n)])[:n]
    names = sorted({k for r in picked for k in reward_columns(r)})
    columns = {k: [r.get(k) for r in picked] for k in names}
    return [r["prompt"] for r in picked], [_answer(r) for r in picked], columns


def _answer(row: dict[str, Any]) -> str:
    for value in (*(row.get("candidates") or []), row.get("chosen"), row.get("reference")):
        if isinstance(value, str) and value.strip():
            return value
    return PLACEHOLDER


def check_applies(
    reward: CompositeReward, rows: Sequence[dict], where: str, task: Sequence[str] | None = None
) -> list[str]:
    """The weighted graders that apply to some sampled row; a UserError when none of ``task`` does.

    ``task`` names the graders that carry the task (default: every grader with a weight > 0): for the
    default preset, its verdict/reference grader, since its format rules apply to any text at all.
    """
    prompts, completions, columns = sample_batch(rows)
    weighted = [c for c in reward.components if c.weight > 0]
    needed = [c for c in weighted if task is None or c.name in task] or weighted
    applying = [c.name for c in weighted if any(applies(c.fn, prompts, completions, columns))]
    if not set(applying) & {c.name for c in needed}:
        names = ", ".join(repr(c.name) for c in needed)
        raise UserError(
            f"{where}: the reward grades nothing: {names} {'is' if len(needed) == 1 else 'are'} not applicable "
            f"to any of the {len(prompts)} rows checked (the rows lack a column it needs, such as label or "
            f"reference); {HINT}"
        )
    return applying
