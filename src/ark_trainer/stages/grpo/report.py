"""The GRPO stage's report section: "Training health (GRPO)" (the last and mean of each health metric TRL
logged, each grader's mean), its warnings, and "Defaults that differ from TRL (GRPO)" (``trl_defaults.py``).
The stage (``stage.py``) hands them to the report (``report_blocks``, ``report_warnings``)."""

from __future__ import annotations

from ark_trainer.core.metrics import flat_group_share

NAME = "grpo"  # the stage whose logged metrics these read
ZERO_STD_LIMIT = 0.9  # a share of zero-variance groups at or above it: almost no learning signal
HEALTH_FIELDS = (
    "reward",
    "reward_std",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "clip_ratio/region_mean",
    "completions/mean_length",
)  # the report's health table (besides each grader's mean)


def blocks(run) -> list:
    """The report's "Training health (GRPO)" section: last and mean of each health metric TRL logged."""
    from ark_trainer.stages.report import mean, num, short
    from ark_trainer.stages.report.render import Heading, Para, Table

    logs = run.metrics(NAME)
    if not logs:
        return [Heading("Training health (GRPO)"), Para("Not run (no GRPO metrics logged).")]
    graders = sorted({k for log in logs for k in log if k.startswith("rewards/") and k.endswith("/mean")})
    rows = []
    for name in (*HEALTH_FIELDS, *graders):
        series = [log[name] for log in logs if num(log.get(name)) is not None]
        if series:
            rows.append([name, short(series[-1]), short(mean(series))])
    steps = [s for s in (num(log.get("step")) for log in logs) if s is not None]
    last_step = f", last step {int(max(steps))}" if steps else ""
    section = [Heading("Training health (GRPO)"), Para(f"{len(logs)} log lines{last_step}.")]
    section.append(Table(["metric", "last", "mean"], rows))
    if not any("kl" in log for log in logs) and num(run.config.get("beta")) == 0:
        section.append(Para("KL not measured: --beta 0 trains without a reference model."))
    alerts = [Para(w, alert=True) for w in warnings(run)]
    return [*section, *alerts, *trl_differences()]


def warnings(run) -> list[str]:
    """The report's warning when most of GRPO's groups had zero reward variance."""
    from ark_trainer.stages.report import mean

    share = mean([flat_group_share(log) for log in run.metrics(NAME)])
    if share is None or share < ZERO_STD_LIMIT:
        return []
    return [
        f"WARNING: on average {share * 100:.1f}% of GRPO groups had zero reward variance "
        f"(≥ {ZERO_STD_LIMIT:.0%} of the groups it trained on): the run got almost no learning signal. "
        "Use graded (not all-or-nothing) rewards, raise num_generations or the sampling temperature, "
        "or check that the reward functions apply to this data."
    ]


def trl_differences() -> list:
    """The report's "Defaults that differ from TRL" (``trl_defaults.py``: the table docs/real-models.md holds)."""
    from ark_trainer.stages.grpo import trl_defaults
    from ark_trainer.stages.report.render import Heading, Table

    return [Heading("Defaults that differ from TRL (GRPO)"), Table(trl_defaults.HEADER, trl_defaults.rows())]
