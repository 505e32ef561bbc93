"""The one place a run's reward is built: ``train``, ``score`` and ``plan`` all call :func:`build_reward`.

So the reward a dry run scores with (``ark-trainer score``) is the reward ``train`` trains on, and the
rewards a plan maps the request's objectives onto are the ones the run will really have. In order:

1. the grader spec: ``--reward_config``, or the preset that fits the data (``qc`` for QC labels,
   ``reference`` for free-text answers; :func:`~ark_trainer.rewards.composite.default_preset`);
2. the reward model: ``--rm_model_path`` adds a ``reward_model`` component of weight ``--rm_weight``,
   loaded on first use on the run's device;
3. the weights: ``--reward_weights name=weight,...`` (what a request's objectives become) replace the
   spec's weights before the composite is made; an unknown name is a one-line error naming the rewards;
   ``--env`` adds the environment's ``get_reward`` as ``env_reward`` (weight 1) unless the spec has an
   ``env_reward`` grader; without ``--reward_config`` it is the only grader;
4. the guards (``guards.py``): a component that raises or runs past ``--reward_timeout`` on a sample skips
   that sample (``guarded=False`` for a reward that only lists its graders, as ``plan`` does);
5. the monitor hook: ``reward_skipped`` events go to ``monitor``, given here or attached later with
   :func:`~ark_trainer.rewards.guards.attach_monitor` (``train`` builds the reward before its run has a monitor).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from ark_trainer.base.errors import UserError
from ark_trainer.base.ranges import WEIGHTS_FLAG, parse_weights
from ark_trainer.rewards.composite import Component, CompositeReward, default_preset, load_spec, preset_path
from ark_trainer.rewards.guards import attach_monitor, guard_reward


@dataclass(frozen=True)
class RewardArgs:
    """The flags that decide a reward; the defaults are ``train``'s."""

    reward_config: str | None = None
    rm_model_path: str | None = None
    rm_weight: float = 1.0
    reward_weights: str = ""
    reward_timeout: float = 60.0
    env: str | None = None  # --env: an agent run, graded by the environment's reward (and the spec's graders)

    @classmethod
    def of(cls, source: Any) -> RewardArgs:
        """The reward flags of a TrainConfig, an argparse namespace or a dict; absent ones take defaults."""
        if isinstance(source, RewardArgs):
            return source
        get = source.get if isinstance(source, Mapping) else lambda k: getattr(source, k, None)
        values = {f.name: get(f.name) for f in fields(cls)}
        return cls(**{k: v for k, v in values.items() if v is not None})


def build_reward(
    source: Any,
    rows: Sequence[dict],
    device: str,
    *,
    weights: Mapping[str, float] | None = None,
    monitor: Any = None,
    guarded: bool = True,
    run_code: bool = True,
) -> CompositeReward:
    """The composite reward for ``rows``, from the reward flags of ``source`` (see the module docstring).

    ``weights`` (name → weight) replaces ``--reward_weights`` when given. Raises UserError for a bad spec,
    reward-model folder or weight, before anything is written or loaded. ``run_code=False`` (``plan``)
    checks the spec's code graders without importing or running them; they cannot score.
    """
    args = RewardArgs.of(source)
    spec = args.reward_config or preset_path(default_preset(rows))
    if args.env and not args.reward_config:  # an agent run without a spec: the environment's reward alone
        comps, spec = [], "(the environment's get_reward)"
    else:
        specs = load_spec(spec, run_code=run_code, code_timeout=args.reward_timeout)
        comps = [Component(s.name, s.fn, s.weight, s.params) for s in specs]
    if args.env:
        comps += env_reward_component(comps)
    if args.rm_model_path:
        comps.append(reward_model_component(args.rm_model_path, args.rm_weight, device))
    given = parse_weights(args.reward_weights) if weights is None else dict(weights)
    reward = CompositeReward(reweigh(comps, given))
    reward.source = str(spec)
    if guarded:
        guard_reward(reward, args.reward_timeout)
    if monitor is not None:
        attach_monitor(reward, monitor)
    return reward


def reweigh(components: Sequence[Component], weights: Mapping[str, float]) -> list[Component]:
    """Copies of ``components`` with the named weights replaced; unknown names and all-zero are errors."""
    names = [c.name for c in components]
    unknown = [name for name in weights if name not in names]
    if unknown:
        raise UserError(
            f"{WEIGHTS_FLAG}: unknown reward {', '.join(map(repr, unknown))}; this run's rewards are {', '.join(names)}"
        )
    out = [replace(c, weight=float(weights.get(c.name, c.weight))) for c in components]
    if weights and sum(c.weight for c in out) <= 0:
        raise UserError(f"{WEIGHTS_FLAG}: at least one reward needs a weight > 0")
    return out


def reward_model_component(path: str, weight: float, device: str) -> Component:
    """``--rm_model_path``: a reward model of weight ``--rm_weight``; its folder is checked now."""
    from ark_trainer.rewards.reward_model import LazyRewardModel, check_reward_model_dir

    check_reward_model_dir(path)
    return Component("reward_model", LazyRewardModel(path, device), weight)


def env_reward_component(components: Sequence[Component]) -> list[Component]:
    """``--env``: the environment's ``get_reward`` as ``env_reward`` (weight 1), unless the spec has one."""
    from ark_trainer.rewards.episode import EnvReward

    if any(isinstance(c.fn, EnvReward) for c in components):
        return []
    return [Component("env_reward", EnvReward(), 1.0)]
