"""The promotion gate: a candidate is served only if it is better on the main metric and no worse elsewhere.

Both models are evaluated by the round's own ``train`` run on the same prompts (the loop's frozen
held-out set plus a slice of the newest turns): ``eval/base.json`` is the model being served (the round
started from it), the last stage's ``eval/<stage>.json`` is the candidate. The candidate is promoted
when

- its main metric (``--main_metric``) is higher than the served model's by more than
  ``--min_improvement`` (default 0: any gain; 1 or more on a share is refused when the loop starts), and
- no tracked metric (``reward_mean``, ``pass_rate``, ``task_accuracy``, ``compliance_rate``, and
  ``heldout_reward_mean``: the mean reward on the frozen held-out rows alone, so the newest turns cannot
  hide a drift; those both evaluations report) is lower by more than ``--max_regression`` (absolute,
  default 0.02), and none fell beyond the noise of the prompts both answered (the paired test of
  ``core/stats.py``: exact McNemar on a rate, Wilcoxon on the mean reward; two-sided p < 0.05), so a fall of
  1.5 points on 600 prompts that all went one way is refused even though it is within ``--max_regression``.

A fall on part of the traffic is refused too, though the overall figure rose (:func:`kind_falls`): a round
that learns a new kind of case can forget the others while the overall accuracy still climbs, as the new
kind is a share of the dev rows. For each label the dev rows carry (``label``: the QC violation type)
held by at least :data:`MIN_KIND_ROWS` dev rows, the gate compares the served model and the candidate on
that label's rows and on the rows of every other label together (the traffic the label's cases are not),
paired, with the exact one-sided McNemar test of ``core/stats.py`` (the prompts lost against those gained); a
group whose binary main metric (``task_accuracy`` when the main metric is not a share) fell with one-sided
p < 0.05 refuses the round, and the refusal names the group, its n, both values, the change with its 95%
interval, the prompts lost and gained and p. With k labels of enough rows that is up to 2k tests, so a
round that changes nothing is refused by chance more often than 5%; each test is exact, and a round that
loses 5 of a group's prompts and gains none is refused.

Anything else (a missing evaluation, a failed training) keeps the served model; the reasons are written
to ``LOOP/rounds/N/decision.json``.

The main metric must be one the frozen held-out set can measure (:func:`heldout_measures`), or no round
could ever pass. ``--main_metric auto`` (the default) is ``task_accuracy`` when the held-out rows are
labelled (``label`` or ``reference``: the accuracy graders ``qc_verdict``/``reference_match`` grade them,
whatever reward a round trains with), else ``reward_mean``. A metric the held-out set cannot measure is
refused when the loop starts: ``task_accuracy`` or ``compliance_rate`` without rows those graders apply
to, ``reward_mean``/``pass_rate`` when no grader of the loop's reward applies to a held-out row.
(``reward_mean`` is the round's own reward: a round without ``--reward_config`` picks its preset from its
turns, so on a labelled held-out set it may grade every answer alike, as 0; ``task_accuracy`` does not.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.metrics import (
    COMPLIANCE_RATE,
    HELDOUT_REWARD_MEAN,
    PASS_RATE,
    RATES,
    REWARD_MEAN,
    TASK_ACCURACY,
)
from ark_trainer.core.stats import ALPHA, BINARY, Comparison, binary, compare_evals, per_prompt

# preference_alignment is left out: it compares with the base model, not with the model being served
TRACKED = (REWARD_MEAN, PASS_RATE, TASK_ACCURACY, COMPLIANCE_RATE, HELDOUT_REWARD_MEAN)
MAIN_METRICS = ("auto", *TRACKED)
_REWARD_METRICS = (REWARD_MEAN, PASS_RATE, HELDOUT_REWARD_MEAN)
MIN_KIND_ROWS = 10  # dev rows a label needs before the gate tests it on its own


def heldout_measures(rows: list[dict], reward: Any, task: list[str] | None = None) -> dict[str, bool]:
    """For each main metric, whether the held-out ``rows`` (loaded) can measure it: a grader behind it
    applies to one of them (asked with the row's own answer, as ``train``'s applicability check does).
    ``task``: the reward's graders that carry the task (a preset's format rules apply to any text and
    measure nothing of it); default every weighted one."""
    from ark_trainer.core.metrics import ACCURACY_GRADERS, COMPLIANCE_GRADER
    from ark_trainer.rewards.applies import sample_batch
    from ark_trainer.rewards.graders import applies
    from ark_trainer.rewards.registry import get_reward

    if not rows:
        return dict.fromkeys(TRACKED, False)
    prompts, answers, columns = sample_batch(rows)

    def any_applies(fn) -> bool:
        return any(applies(fn, prompts, answers, columns))

    graded = reward is not None and any(
        any_applies(c.fn) for c in reward.components if c.weight > 0 and (task is None or c.name in task)
    )
    return {
        **dict.fromkeys(_REWARD_METRICS, graded),
        TASK_ACCURACY: any(any_applies(get_reward(n)) for n in ACCURACY_GRADERS),
        COMPLIANCE_RATE: any_applies(get_reward(COMPLIANCE_GRADER)),
    }


def resolve_main_metric(
    wanted: str, measures: dict[str, bool], where: str, min_improvement: float = 0.0
) -> str:
    """``wanted`` (``auto``: task_accuracy on labelled rows, else reward_mean), refused in one line when
    the held-out set cannot measure it, or when it is a share that ``min_improvement`` asks to gain 1 or
    more of: a gate on it could never pass."""
    if wanted not in MAIN_METRICS:
        raise UserError(f"--main_metric: unknown metric {wanted!r}; use one of {', '.join(MAIN_METRICS)}")
    asked = wanted
    if wanted == "auto":
        wanted = TASK_ACCURACY if measures.get(TASK_ACCURACY) else REWARD_MEAN
        asked = f"auto ({wanted}: the held-out rows are not labelled)"
    if not measures.get(wanted):
        need = {
            TASK_ACCURACY: "rows with a label or reference the accuracy graders (qc_verdict, reference_match) read",
            COMPLIANCE_RATE: "rows the qc_compliance grader applies to",
        }.get(wanted, "rows a grader of the loop's reward applies to (see --reward_config)")
        can = [m for m in TRACKED if measures.get(m)]
        raise UserError(
            f"--main_metric {asked}: the held-out set {where} cannot measure it (it needs {need}), so no round "
            f"could ever pass the gate; choose one it measures ({', '.join(can) or 'none'}), or give "
            "--eval_dataset rows that carry it"
        )
    check_gain(wanted, min_improvement)
    return wanted


def check_gain(metric: str, min_improvement: float) -> None:
    """Refuse a ``--min_improvement`` no round could reach on ``metric`` (a share gains less than 1)."""
    if metric in RATES and min_improvement >= 1:  # a share in [0, 1] never improves by 1 or more
        raise UserError(
            f"--min_improvement {min_improvement:g}: {metric} is a share (0 to 1), so it can never improve by "
            f"more than {min_improvement:g} and no round could ever pass the gate; give a smaller "
            "--min_improvement (e.g. 0.02)"
        )


@dataclass
class Decision:
    promote: bool
    reasons: list[str] = field(default_factory=list)
    current: dict = field(default_factory=dict)
    candidate: dict = field(default_factory=dict)
    kinds: list[dict] = field(default_factory=list)  # each tested group of labels: its paired comparison

    def as_json(self) -> dict:
        return {"promoted": self.promote, "reasons": self.reasons, "current": self.current,
                "candidate": self.candidate, "kinds": self.kinds}  # fmt: skip


def kind_groups(labels: list[str | None]) -> dict[str, list[int]]:
    """The groups of dev rows the gate tests on their own: each label with :data:`MIN_KIND_ROWS` rows or
    more, and the rows of every other label together (``all but L``), when those are as many and are not
    one label's rows already; rows without a label are in no group."""
    by_label: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        if label is not None:
            by_label.setdefault(str(label), []).append(i)
    groups: dict[str, list[int]] = {}
    for label, idx in sorted(by_label.items()):
        if len(idx) < MIN_KIND_ROWS:
            continue
        groups[repr(label)] = idx
        rest = sorted(i for other, j in by_label.items() if other != label for i in j)
        others = [o for o in by_label if o != label]
        if len(rest) >= MIN_KIND_ROWS and len(others) > 1:
            groups[f"all but {label!r}"] = rest
    return groups


def kind_falls(
    current: dict, candidate: dict, labels: list[str | None], metric: str
) -> list[tuple[str, Comparison]]:
    """Each group of :func:`kind_groups` compared on ``metric`` (a binary one), paired on the prompts both
    evaluations have an outcome for."""
    before, after = per_prompt(current, metric), per_prompt(candidate, metric)
    if before is None or after is None or not (len(before) == len(after) == len(labels)):
        return []
    answered = [
        lab if before[i] is not None and after[i] is not None else None for i, lab in enumerate(labels)
    ]
    return [
        (name, binary(metric, [float(before[i] or 0) for i in idx], [float(after[i] or 0) for i in idx]))
        for name, idx in kind_groups(answered).items()
    ]


def kind_reason(name: str, c: Comparison) -> str:
    """The refusal line of a group that fell."""
    return (
        f"{c.metric} on the dev rows of {name} fell beyond the noise, paired on the same {c.n} prompts: "
        f"{100 * c.before:.1f}% → {100 * c.after:.1f}%, {c.change()}, {c.lost} lost and {c.gained} gained, "
        f"one-sided exact p = {c.p_fall:.3g} < {ALPHA}"
    )


def with_heldout(metrics: dict, frozen: list[bool]) -> dict:
    """``metrics`` plus ``heldout_reward_mean``: the mean reward of the answers to the loop's frozen
    held-out rows (``frozen[i]``: answer i is one of them, not one of the newest turns; the round's dev and
    test splits each hold some of both, in hash order: :func:`rounds.frozen_flags`)."""
    answers = metrics.get("answers") or []
    rewards = [a.get("reward") for a, kept in zip(answers, frozen, strict=False) if kept]
    scored = [r for r in rewards if r is not None]
    return {**metrics, HELDOUT_REWARD_MEAN: round(sum(scored) / len(scored), 4) if scored else None}


def decide(
    current: dict, candidate: dict, main: str = REWARD_MEAN, max_regression: float = 0.02,
    min_improvement: float = 0.0, labels: list[str | None] | None = None,
) -> Decision:  # fmt: skip
    """Promote ``candidate`` over ``current`` (metric dicts as ``eval/*.json`` hold them), or say why not.
    ``labels``: each evaluated row's label (None: none), for the per-label test (:func:`kind_falls`)."""
    tracked = sorted({main, *TRACKED})
    now: dict[str, float] = {k: current[k] for k in tracked if current.get(k) is not None}
    new: dict[str, float] = {k: candidate[k] for k in tracked if candidate.get(k) is not None}
    reasons = []
    if main not in now or main not in new:
        reasons.append(
            f"{main}: missing from an evaluation (current {now.get(main)}, candidate {new.get(main)})"
        )
    elif not new[main] - now[main] > min_improvement:  # written so that nan never promotes
        reasons.append(
            f"{main}: {new[main]:.4f} does not improve on {now[main]:.4f} (by > {min_improvement})"
        )
    for key in tracked:
        if key in now and key in new and not now[key] - new[key] <= max_regression:
            reasons.append(f"{key}: regressed {now[key]:.4f} -> {new[key]:.4f} (more than {max_regression})")
        elif (paired := compare_evals(current, candidate, key)) is not None and paired.fell:
            reasons.append(
                f"{key}: fell beyond the noise, paired on the same prompts: {paired.text(values=True)}"
            )
    kinds = kind_falls(current, candidate, labels or [], main if main in BINARY else TASK_ACCURACY)
    reasons += [kind_reason(name, c) for name, c in kinds if c.delta < 0 and c.p_fall < ALPHA]
    tested = [{"group": name, **c.to_json()} for name, c in kinds]
    if not reasons:
        gain = compare_evals(current, candidate, main)
        said = f" ({gain.text(values=True)})" if gain is not None else ""
        reasons.append(
            f"{main}: {now[main]:.4f} -> {new[main]:.4f}{said}; nothing regressed beyond {max_regression} "
            "or beyond the noise" + (f", overall or on any of {len(kinds)} groups of labels" if kinds else "")
        )
        return Decision(True, reasons, now, new, tested)
    return Decision(False, reasons, now, new, tested)
