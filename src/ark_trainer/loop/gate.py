"""The promotion gate: a candidate is served only if it is better on the main metric and no worse elsewhere.

Both models are evaluated by the round's own ``train`` run on the same prompts (the loop's frozen
held-out set plus a slice of the newest turns): ``eval/base.json`` is the model being served (the round
started from it), the last stage's ``eval/<stage>.json`` is the candidate. The candidate is promoted
when

- its main metric (``--main_metric``, default ``reward_mean``) is higher than the served model's by more
  than ``--min_improvement`` (default 0: any gain), and
- no tracked metric (``reward_mean``, ``pass_rate``, ``task_accuracy``, ``compliance_rate``, and
  ``heldout_reward_mean``: the mean reward on the frozen held-out rows alone, so the newest turns cannot
  hide a drift; those both evaluations report) is lower by more than ``--max_regression`` (absolute,
  default 0.02).

Anything else (a missing evaluation, a failed training) keeps the served model; the reasons are written
to ``LOOP/rounds/N/decision.json``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ark_trainer.metrics import COMPLIANCE_RATE, PASS_RATE, REWARD_MEAN, TASK_ACCURACY

# preference_alignment is left out: it compares with the base model, not with the model being served
TRACKED = (REWARD_MEAN, PASS_RATE, TASK_ACCURACY, COMPLIANCE_RATE, "heldout_reward_mean")


@dataclass
class Decision:
    promote: bool
    reasons: list[str] = field(default_factory=list)
    current: dict = field(default_factory=dict)
    candidate: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"promoted": self.promote, "reasons": self.reasons, "current": self.current,
                "candidate": self.candidate}  # fmt: skip


def with_heldout(metrics: dict, n_heldout: int) -> dict:
    """``metrics`` plus ``heldout_reward_mean``: the mean reward of the first ``n_heldout`` answers (the
    evaluation set is the frozen held-out rows first, then the newest turns)."""
    rewards = [a.get("reward") for a in (metrics.get("answers") or [])[:n_heldout]]
    scored = [r for r in rewards if r is not None]
    return {**metrics, "heldout_reward_mean": round(sum(scored) / len(scored), 4) if scored else None}


def decide(
    current: dict, candidate: dict, main: str = REWARD_MEAN, max_regression: float = 0.02,
    min_improvement: float = 0.0,
) -> Decision:  # fmt: skip
    """Promote ``candidate`` over ``current`` (metric dicts as ``eval/*.json`` hold them), or say why not."""
    tracked = sorted({main, *TRACKED})
    now: dict[str, float] = {k: current[k] for k in tracked if current.get(k) is not None}
    new: dict[str, float] = {k: candidate[k] for k in tracked if candidate.get(k) is not None}
    reasons = []
    if main not in now or main not in new:
        reasons.append(
            f"{main}: missing from an evaluation (current {now.get(main)}, candidate {new.get(main)})"
        )
    elif new[main] - now[main] <= min_improvement:
        reasons.append(
            f"{main}: {new[main]:.4f} does not improve on {now[main]:.4f} (by > {min_improvement})"
        )
    for key in tracked:
        if key in now and key in new and now[key] - new[key] > max_regression:
            reasons.append(f"{key}: regressed {now[key]:.4f} -> {new[key]:.4f} (more than {max_regression})")
    if not reasons:
        reasons.append(
            f"{main}: {now[main]:.4f} -> {new[main]:.4f}; nothing regressed beyond {max_regression}"
        )
        return Decision(True, reasons, now, new)
    return Decision(False, reasons, now, new)
