"""The composite reward: named graders with weights, from a grader spec (``rewards/spec.py``).

The total for a completion is the weighted mean of the graders that apply to it (``None`` = not
applicable is left out of both sums), so a task without labels is not punished for them. The same
:class:`CompositeReward` scores RFT candidates, drives GRPO and computes the evaluation metrics.

Every score is checked here: a grader that returns something other than a list with one score per
completion is a :class:`UserError`; a score that is not a finite number within ±``SCORE_LIMIT`` (inf, nan,
1e308, 10**400) is refused for that sample (``None``), counted in :attr:`CompositeReward.rejected`, logged,
and passed to ``on_reject`` (``train`` records a ``reward_skipped`` event).

Spec file (``--reward_config``), in short (every grader type is described in ``rewards/spec.py``)::

    graders:
      - name: qc_verdict            # type: rule (the default): a built-in reward by name
        weight: 1.0
      - name: apologises
        type: string_check
        input: "{{sample.output_text}}"
        reference: "抱歉"
        operation: like
        weight: 0.2
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.core.metrics import TOTAL
from ark_trainer.rewards.contract import SCORE_LIMIT, RewardFn, as_score
from ark_trainer.rewards.spec import GraderSpec, load_graders

NON_COLUMNS = ("prompt", "candidates", "chosen", "rejected", "_line")  # a row's fields that are no column
log = logging.getLogger("ark_trainer")


@dataclass
class Component:
    name: str
    fn: RewardFn
    weight: float
    params: dict[str, Any] = field(default_factory=dict)


def reward_columns(row: dict[str, Any]) -> dict[str, Any]:
    """The row's extra columns, as the reward functions receive them."""
    return {k: v for k, v in row.items() if k not in NON_COLUMNS}


def preset_path(name: str) -> Path:
    return Path(str(resources.files("ark_trainer") / "presets" / f"{name}.yaml"))


def default_preset(rows: Sequence[dict]) -> str:
    """The preset that fits the data: ``qc`` for QC violation labels, ``reference`` for free-text answers."""
    from ark_trainer.rewards.qc import normalize_label

    labels = [r.get("label") for r in rows if r.get("label") is not None]
    if any(normalize_label(v) is not None for v in labels):
        return "qc"
    if labels or any(r.get("reference") is not None for r in rows):
        return "reference"
    return "qc"


def load_spec(path: str | Path | None, run_code: bool = True, code_timeout: float = 60.0) -> list[GraderSpec]:
    """Parse, validate and build the graders of a spec file (default: the QC preset); ``run_code=False``
    leaves user code (python graders, ``module:function`` rules) unimported (see ``spec.load_graders``);
    ``code_timeout`` bounds loading a python grader (``--reward_timeout``)."""
    return load_graders(path if path else preset_path("qc"), run_code=run_code, code_timeout=code_timeout)


def _key(completion: Any) -> str:
    """A completion's identity for the per-batch cache (an episode is more than its final text)."""
    return completion if isinstance(completion, str) else repr(completion)


class CompositeReward:
    """Weighted mean of reward components; callable with TRL's reward contract."""

    __name__ = TOTAL

    def __init__(self, components: Sequence[Component]) -> None:
        from ark_trainer.base.ranges import MAX_WEIGHT

        for c in components:  # weights from code or flags: the spec and --reward_weights refuse these already
            if not 0 <= c.weight <= MAX_WEIGHT:
                raise UserError(
                    f"rewards: {c.name!r}: weight {c.weight!r} is not a number in [0, {MAX_WEIGHT:g}]"
                )
        if not components or sum(c.weight for c in components) <= 0:
            raise UserError("rewards: at least one reward needs a weight > 0")
        names = [c.name for c in components]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:  # scores are kept and logged by name, so two graders may not share one
            raise UserError(
                f"rewards: {twice[0]!r} is the name of two graders (--rm_model_path adds 'reward_model'); "
                "rename one"
            )
        self.components = list(components)
        self.rejected: dict[str, int] = {}  # per grader: scores refused as not finite or out of bounds
        self.on_reject: Callable[..., None] | None = None
        self.source = "(built in code)"  # the spec file it came from
        self._cache_key: tuple | None = None
        self._cache: dict[str, list[float | None]] = {}

    @classmethod
    def from_spec(cls, path: str | Path | None, extra: Sequence[Component] = ()) -> CompositeReward:
        comps = [Component(s.name, s.fn, s.weight, s.params) for s in load_spec(path)]
        reward = cls([*comps, *extra])
        reward.source = str(path or preset_path("qc"))
        return reward

    def reweighted(self, weights: dict[str, float]) -> CompositeReward:
        """The same graders (and guards, counters, monitor) combined with other ``weights`` by name: the
        reward of a stage that trains on part of the run's (GRPO on the task's decision)."""
        if weights == {c.name: c.weight for c in self.components}:
            return self
        other = CompositeReward(
            [replace(c, weight=float(weights.get(c.name, c.weight))) for c in self.components]
        )
        other.source, other.on_reject, other.rejected = self.source, self.on_reject, self.rejected
        if hasattr(self, "guard_stats"):
            other.guard_stats = self.guard_stats  # type: ignore[attr-defined]  # set by rewards/guards.py
        return other

    def describe(self) -> dict[str, Any]:
        """What the run is graded by, for plan.json and the report."""
        return {"spec": self.source, "graders": {c.name: c.weight for c in self.components}}

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.components]

    def score(self, prompts: list, completions: list, **columns: Any) -> dict[str, list[float | None]]:
        """Per-component scores plus ``total`` for a batch; computed once per batch and cached."""
        key = (tuple(map(_key, completions)), tuple(map(str, prompts)))
        if key != self._cache_key:
            table = {c.name: self._call(c, prompts, completions, columns) for c in self.components}
            table[TOTAL] = self._combine(table, len(completions))
            self._cache_key, self._cache = key, table
        return self._cache

    def _call(self, comp: Component, prompts: list, completions: list, columns: dict) -> list[float | None]:
        scores = comp.fn(prompts=prompts, completions=completions, **columns)
        if isinstance(scores, str | bytes | dict) or not hasattr(scores, "__iter__"):
            raise UserError(
                f"reward {comp.name!r} returned {type(scores).__name__}, not a list; it must return one float "
                "or None per completion"
            )
        scores = list(scores)
        if len(scores) != len(completions):
            raise RuntimeError(
                f"reward {comp.name!r} returned {len(scores)} scores for {len(completions)} completions"
            )
        out, bad = [], []
        for s in scores:
            try:
                value = None if s is None else as_score(s)
            except (TypeError, ValueError):
                raise UserError(
                    f"reward {comp.name!r} returned the score {s!r}; return a number or None"
                ) from None
            if value is None and s is not None:
                bad.append(s)
            out.append(value)
        if bad:
            self._reject(comp.name, bad, len(scores))
        return out

    def _reject(self, name: str, bad: list, n: int) -> None:
        total = self.rejected[name] = self.rejected.get(name, 0) + len(bad)
        example = repr(bad[0]) if len(repr(bad[0])) <= 40 else f"a {len(repr(bad[0]))}-digit number"
        log.warning(
            "reward %r: %d of %d scores refused (%s is not a finite number within ±%g); those samples are "
            "skipped, %d so far",
            *(name, len(bad), n, example, SCORE_LIMIT, total),
        )
        if self.on_reject is not None:
            self.on_reject(name=name, n=len(bad), example=example, total=total)

    def _combine(self, table: dict[str, list[float | None]], n: int) -> list[float | None]:
        totals: list[float | None] = []
        for i in range(n):
            pairs = [(c.weight, s) for c in self.components if (s := table[c.name][i]) is not None]
            weight = sum(w for w, _ in pairs)
            totals.append(sum(w * s for w, s in pairs) / weight if weight > 0 else None)
        bad = [t for t in totals if t is not None and as_score(t) is None]
        if bad:  # bounded weights and scores cannot get here; a total that is not a number never trains
            totals = [None if t is not None and as_score(t) is None else t for t in totals]
            self._reject(TOTAL, bad, n)
        return totals

    def __call__(self, prompts: list, completions: list, **columns: Any) -> list[float | None]:
        return self.score(prompts, completions, **columns)[TOTAL]

    def trl_reward_funcs(self) -> tuple[list[Callable], list[float]]:
        """Reward functions and weights for TRL's GRPOTrainer.

        The composite total is the only one that counts (weight 1); each component is passed with weight 0
        so that TRL logs it as ``rewards/<name>/mean``. Components read the composite's per-batch cache, so
        nothing is scored twice.
        """
        funcs: list[Callable] = [self]
        for comp in self.components:
            funcs.append(self._component_view(comp.name))
        return funcs, [1.0] + [0.0] * len(self.components)

    def _component_view(self, name: str) -> Callable:
        def view(prompts, completions, **columns):
            return self.score(prompts, completions, **columns)[name]

        view.__name__ = name
        return view
