"""The metrics of a run: their names, in one place, and how they are computed from per-answer scores.

Every model a run trains is evaluated on the held-out set (``stages/evaluate.py``; an agent run's episodes in
``stages/agent/evaluate.py``) and its metrics written to ``OUT/eval/<model>.json``. The report, the diagnosis,
the dashboard, ``status``'s glance and the live loop's gate read them by the names below.

- ``reward_mean``: mean composite reward.
- ``pass_rate``: share of answers whose composite reward reaches ``--pass_threshold``.
- ``task_accuracy``: share of labelled prompts answered exactly right (QC: verdict and violation type;
  free-text tasks: equal to ``reference``); ``null`` without labels.
- ``compliance_rate``: share of answers whose suggested reply keeps all five compliance rules (QC data
  only: ``null`` on a ``reference`` task, :func:`reference_task`).
- ``preference_alignment``: share of prompts where the composite reward prefers this model's answer to the
  base model's (a tie counts one half, so the base model scores 50% against itself).
- an agent run's episodes (:func:`agent_metrics`): ``task_success`` (share of tasks whose
  environment reward is 1), ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls``.
- the live loop's gate (``services/loop/gate.py``) adds ``heldout_reward_mean``: the mean reward on its frozen
  held-out rows alone.

Each rate is the mean of per-answer outcomes (:func:`prompt_outcomes`, :func:`task_outcomes`), which the
eval file keeps next to each answer's reward (``answers[i].outcomes``): two models answered the same
prompts, and ``core/stats.py`` compares them prompt by prompt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ark_trainer.base.chat.episode import EpisodeView

TOTAL = "total"  # the composite reward's name among its components' scores
REWARD_MEAN = "reward_mean"
PASS_RATE = "pass_rate"
TASK_ACCURACY = "task_accuracy"
COMPLIANCE_RATE = "compliance_rate"
PREFERENCE_ALIGNMENT = "preference_alignment"
TASK_SUCCESS = "task_success"
TOOL_CALL_VALIDITY = "tool_call_validity"
MEAN_TURNS = "mean_turns"
MEAN_TOOL_CALLS = "mean_tool_calls"
HELDOUT_REWARD_MEAN = "heldout_reward_mean"

# what a GRPO step logs about its groups (TRL's metric, and the one dynamic sampling adds)
ZERO_STD_SHARE = (
    "frac_reward_zero_std"  # TRL: the share of the groups first sampled whose rewards are all equal
)
INFORMATIVE_SHARE = "dynamic_sampling/frac_informative"  # of the groups trained on, after dynamic sampling


def flat_group_share(log: dict[str, Any]) -> float | None:
    """The share of a GRPO step's groups that gave no gradient: of the groups trained on where dynamic sampling
    replaced flat ones (1 − ``dynamic_sampling/frac_informative``), else TRL's ``frac_reward_zero_std`` (of
    the groups it sampled); None where the step logged neither."""
    informative = log.get(INFORMATIVE_SHARE)
    if isinstance(informative, int | float):
        return 1.0 - float(informative)
    share = log.get(ZERO_STD_SHARE)
    return float(share) if isinstance(share, int | float) else None


def reference_task(table: dict[str, list]) -> bool:
    """Whether scored rows (a table of per-answer scores by grader) are a ``reference`` task, not QC data:
    ``reference_match`` applies to some and ``qc_verdict`` to none. Its answers are no QC verdicts with a
    suggested reply, so the QC reply rules measure nothing there: ``scoring.metric_scores`` leaves the
    ``qc_compliance`` verifier out, and ``compliance_rate`` is null."""
    applies = {
        name: any(v is not None for v in table.get(name, [])) for name in ("qc_verdict", "reference_match")
    }
    return applies["reference_match"] and not applies["qc_verdict"]


RATES = (PASS_RATE, TASK_ACCURACY, COMPLIANCE_RATE, PREFERENCE_ALIGNMENT)  # shares in [0, 1]
HEADLINE = (REWARD_MEAN, *RATES)  # what every eval file has, in the order a table shows them
AGENT_METRICS = (TASK_SUCCESS, TOOL_CALL_VALIDITY, MEAN_TURNS, MEAN_TOOL_CALLS)  # --env runs only
PERCENTS = (*RATES, TASK_SUCCESS, TOOL_CALL_VALIDITY)  # shown as percentages
# the metric a run is judged by: the first the evals compared all have (an agent run: tasks solved)
MAIN = (TASK_SUCCESS, TASK_ACCURACY, PASS_RATE, REWARD_MEAN)

# What each metric means, for the report's readers (one line each; ``docs`` and the report say the same).
DEFINITIONS = {
    REWARD_MEAN: "the mean composite reward (the weighted mean of the graders that apply to an answer)",
    PASS_RATE: "the share of answers whose composite reward reaches --pass_threshold",
    TASK_ACCURACY: "the share of labelled prompts answered exactly right (QC: verdict and violation type; "
    "free text: equal to the reference)",
    COMPLIANCE_RATE: "the share of answers whose suggested reply keeps all five compliance rules "
    "(qc_compliance = 1)",
    PREFERENCE_ALIGNMENT: "the share of prompts where the composite reward prefers this model's answer to the "
    "base model's (a tie counts one half: the base model scores 50%)",
    TASK_SUCCESS: "the share of episodes whose environment reward is 1",
    TOOL_CALL_VALIDITY: "the share of tool-call attempts that parse and fit a tool's schema",
    MEAN_TURNS: "the mean turns per episode",
    MEAN_TOOL_CALLS: "the mean tool-call attempts per episode",
}
COMPONENTS_DEFINITION = (
    "components.NAME: grader NAME's mean score over the answers it applies to, partial credit included (a "
    "mean, not a share: components.qc_compliance averages the share of the five rules each reply keeps, "
    "where compliance_rate counts the replies that keep all five)"
)

ACCURACY_GRADERS = ("qc_verdict", "reference_match")  # the first that applies gives task_accuracy
COMPLIANCE_GRADER = "qc_compliance"
VERIFIERS = (*ACCURACY_GRADERS, COMPLIANCE_GRADER)  # scored on every eval, in the reward or not
N_EXAMPLES = 5  # answers kept in full in an eval file for the report
# each answer of an eval file keeps, under this key, its outcome on every rate (``prompt_outcomes``), so
# two models are compared prompt by prompt (``core/stats.py``)
OUTCOMES = "outcomes"


def main_metric(evals: list[dict[str, Any]]) -> str | None:
    """The first of :data:`MAIN` that every one of ``evals`` measured; None when there is none."""
    return next((m for m in MAIN if evals and all(_is_number(e.get(m)) for e in evals)), None)


def shown(metric: str, value: Any) -> str:
    """A metric's value for people: ``66.7%`` for a share, ``0.4321`` for the others, ``n/a`` without one."""
    if not _is_number(value):
        return "n/a"
    return f"{value * 100:.1f}%" if metric in PERCENTS else f"{value:.4g}"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value


def share(values: list[float | None], target: float = 1.0) -> float | None:
    """The share of applicable values that reach ``target``; ``None`` when none applies."""
    return mean_outcome(reached(values, target))


def reached(values: list[float | None], target: float = 1.0, slack: float = 1e-9) -> list[float | None]:
    """1 where a value reaches ``target`` (less ``slack``), 0 where it does not, None where it does not
    apply."""
    return [None if v is None else float(v >= target - slack) for v in values]


def mean_outcome(outcomes: list[float | None]) -> float | None:
    """A rate: the mean of the per-prompt outcomes that apply (rounded as every metric is); None if none."""
    applicable = [o for o in outcomes if o is not None]
    return round(sum(applicable) / len(applicable), 4) if applicable else None


def preference(mine: list[float | None], base: list[float | None]) -> float | None:
    """How often ``mine`` beats ``base`` answer by answer (a tie counts one half)."""
    return mean_outcome(preferred(mine, base))


def preferred(mine: list[float | None], base: list[float | None]) -> list[float | None]:
    """Per answer: 1 when ``mine`` beats ``base``, ½ on a tie, 0 when it loses, None without both."""
    return [
        None if m is None or b is None else 1.0 if m > b + 1e-9 else 0.5 if abs(m - b) <= 1e-9 else 0.0
        for m, b in zip(mine, base, strict=True)
    ]


def prompt_outcomes(
    table: dict[str, list], base_totals: list[float | None], pass_threshold: float
) -> list[dict[str, float | None]]:
    """Per answer, its outcome on every rate of :func:`compute_metrics`: ``pass_rate``, ``task_accuracy``,
    ``compliance_rate`` 1/0 (None where it does not apply: an unlabelled prompt), ``preference_alignment``
    1/½/0 against the base model's answer. Each rate is the mean of its outcomes."""
    accuracy_grader = next((g for g in ACCURACY_GRADERS if share(table.get(g, [])) is not None), None)
    columns = {
        PASS_RATE: reached(table[TOTAL], pass_threshold, slack=0.0),
        TASK_ACCURACY: reached(table[accuracy_grader]) if accuracy_grader else [None] * len(table[TOTAL]),
        COMPLIANCE_RATE: reached(table.get(COMPLIANCE_GRADER) or [None] * len(table[TOTAL])),
        PREFERENCE_ALIGNMENT: preferred(table[TOTAL], base_totals),
    }
    return [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def compute_metrics(table: dict[str, list], base_totals: list[float | None], pass_threshold: float) -> dict:
    """The metrics of one model from its per-answer scores (``scoring.metric_scores``); each rate is the
    mean of the per-answer outcomes of :func:`prompt_outcomes`."""
    totals = table[TOTAL]
    applicable = [t for t in totals if t is not None]
    outcomes = prompt_outcomes(table, base_totals, pass_threshold)
    components = {}
    for name, values in table.items():
        vals = [v for v in values if v is not None]
        if name != TOTAL and vals:
            components[name] = round(sum(vals) / len(vals), 4)
    return {
        "n": len(totals),
        REWARD_MEAN: round(sum(applicable) / len(applicable), 4) if applicable else None,
        **{rate: mean_outcome([o[rate] for o in outcomes]) for rate in RATES},
        "components": components,
    }


def task_outcomes(env_rewards: list[float | None]) -> list[float | None]:
    """Per episode: 1 when its environment reward is 1.0, else 0; None without a reward."""
    return reached(env_rewards, 1.0, slack=0.0)


def agent_metrics(views: list[EpisodeView], env_rewards: list[float | None]) -> dict[str, Any]:
    """``task_success``, ``tool_call_validity``, ``mean_turns``, ``mean_tool_calls`` and ``n`` of episodes.

    ``task_success`` is the share of episodes whose environment reward is 1.0 (``get_reward() >= 1.0``);
    ``null`` when the environment has no ``get_reward``. ``tool_call_validity`` is the share of call attempts
    that parse and fit a tool's schema (``null`` when no episode tried a call).
    """
    n = len(views)
    attempts = sum(v.attempts for v in views)
    return {
        TASK_SUCCESS: mean_outcome(task_outcomes(env_rewards)),
        TOOL_CALL_VALIDITY: round(sum(v.n_valid for v in views) / attempts, 4) if attempts else None,
        MEAN_TURNS: round(sum(v.turns for v in views) / n, 4) if n else None,
        MEAN_TOOL_CALLS: round(attempts / n, 4) if n else None,
        "n": n,
    }
