"""The RLOO stage's report section: "Training health (RLOO)", the last and mean of what TRL logged (when it
ran). The stage (``stage.py``) hands it to the report (``report_blocks``)."""

from __future__ import annotations

HEALTH_FIELDS = ("reward", "reward_std", "frac_reward_zero_std", "kl", "entropy", "completions/mean_length")


def blocks(run) -> list:
    """The report's "Training health (RLOO)" section: last and mean of what TRL logged (when it ran)."""
    from ark_trainer.stages.report import mean, num, short
    from ark_trainer.stages.report.render import Heading, Table

    logs = run.metrics("rloo")
    if not logs:
        return []
    rows = []
    for name in HEALTH_FIELDS:
        series = [log[name] for log in logs if num(log.get(name)) is not None]
        if series:
            rows.append([name, short(series[-1]), short(mean(series))])
    return [Heading("Training health (RLOO)"), Table(["metric", "last", "mean"], rows)]
