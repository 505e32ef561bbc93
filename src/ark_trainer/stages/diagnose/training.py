"""Checks of the training dynamics, from the metrics TRL logs (``events.jsonl`` ``metrics`` lines).

The checks of sampled groups run on every online-RL stage of the run (``RunData.reward_stages``: those that
logged a training reward, GRPO, RLOO or a plug-in's), each finding naming its stage. TRL 1.16's GRPOTrainer
and RLOOTrainer log, per logging step: ``reward``/``reward_std``, ``rewards/<grader>/mean``,
``frac_reward_zero_std`` (share of groups whose completions all got the same reward: no advantage, no
gradient), ``kl`` (to the reference, when ``--beta`` > 0), ``entropy``, ``completions/clipped_ratio``
(share of completions cut at ``--max_completion_length``), ``learning_rate`` and ``step_time``; GRPO
adds ``generation_time`` (see :mod:`ark_trainer.stages.diagnose.timing`). The thresholds are rules of thumb from
GRPO practice, written as constants so they can be read and argued with.
"""

from __future__ import annotations

from ark_trainer.stages.diagnose.finding import Finding, lower, lr_flag, mean, stage_label, steps_text, thirds
from ark_trainer.stages.diagnose.rundata import RunData, num
from ark_trainer.stages.grpo.auto import DECISION_BASIS

FLAT_SHARE = 0.5  # mean frac_reward_zero_std at or above this: most groups teach nothing
TRUNCATED_SHARE = 0.3  # mean completions/clipped_ratio at or above this: the length limit shapes answers
KL_LIMIT = 1.0  # a KL to the reference above this: the policy has run far from where it started
ENTROPY_FLOOR, ENTROPY_DROP = 0.05, 0.2  # below the floor, or below this share of its first value
STILL_KL, STILL_REWARD = 1e-6, 0.02  # the policy did not move: KL below this and reward within this
GENERATION_SHARE = 0.8  # generation takes this share of a training step or more
TINY_LR = 1e-9
SOLVED_REWARD = 0.9  # a [0, 1] training reward whose last third averages this or more: the groups are solved


def check_flat_reward(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _flat_reward(run, stage)]


def _flat_reward(run: RunData, stage: str) -> list[Finding]:
    points = run.series(stage, "frac_reward_zero_std")  # TRL's, of the groups it sampled first
    share = mean(points)
    informative = run.series(stage, "dynamic_sampling/frac_informative")  # of the groups trained on
    sampled = ""
    if informative and share is not None:  # dynamic sampling replaced flat groups: judge what was trained on
        sampled = f" after dynamic sampling replaced flat ones ({share:.0%} of the groups first sampled)"
        points = [(step, 1 - value) for step, value in informative]
        share = mean(points)
    if share is None or share < FLAT_SHARE:
        return []
    constant = [
        g
        for g in _graders(run, stage)
        if max((v for _, v in run.series(stage, f"rewards/{g}/std")), default=1) == 0
    ]
    evidence = (
        f"on average {share:.0%} of {stage_label(stage)} groups had zero reward variance over "
        f"{steps_text(points)}{sampled} (≥ {FLAT_SHARE:.0%}: those groups give no gradient)"
    )
    if constant:
        evidence += f"; graders constant within every group: {', '.join(constant)}"
    if not informative and (solved := solved_reward(run, stage)) is not None:
        evidence += (
            f"; the sampled reward averaged {solved:.2f} of 1 over the last third: most groups were flat "
            "because every answer in them earned full reward (solved), not because none differed"
        )
        fix = "nothing to fix: the stage solved most of its prompts; harder training prompts would give it more to learn"
        return [Finding("flat_reward", "info", stage, evidence, fix)]
    n, temp = int(run.cfg("num_generations", 4)), float(run.cfg("temperature", 1.0))
    fix = (
        f"raise --num_generations from {n} to {n * 2} and --temperature from {temp:g} to {temp + 0.3:g}, "
        "or give partial credit in --reward_config (a graded, not all-or-nothing, reward); check it first "
        "with: ark-trainer score --reward_config SPEC --data_path DATA --model_path MODEL"
    )
    if not constant and (more := _stage_fix(stage, run.config)):
        fix += f"; or {more}"
    return [Finding("flat_reward", "error" if share >= 0.9 else "warning", stage, evidence, fix)]


def _stage_fix(stage: str, config: dict) -> str | None:
    """The stage's own extra fix for flat groups (GRPO: dynamic sampling), when it has one."""
    from ark_trainer.stages.registry import stages

    found = getattr(stages().get(stage), "flat_reward_fix", None)
    return found(config) if callable(found) else None


def _graders(run: RunData, stage: str) -> list[str]:
    keys = {k for e in run.metrics(stage) for k in e}
    return sorted(
        k[len("rewards/") : -len("/mean")]
        for k in keys
        if k.startswith("rewards/") and k.endswith("/mean") and k != "rewards/total/mean"
    )


def check_no_learning(run: RunData) -> list[Finding]:
    findings = []
    for stage in run.training_stages():
        lrs = [v for _, v in run.series(stage, "learning_rate")]
        flag = lr_flag(stage)
        if len(lrs) >= 2 and max(lrs) <= TINY_LR:  # one point may be warm-up's 0
            evidence = f"{stage} learning rate never above {max(lrs):.2g} ({steps_text(run.series(stage, 'learning_rate'))})"
            fix = (
                f"raise --{flag} from {run.cfg(flag)} to a working value (e.g. 1e-6 for a real checkpoint, "
                "5e-4 for the demo's tiny model)"
            )
            findings.append(Finding("no_learning", "error", stage, evidence, fix))
    if not findings:
        findings += [f for stage in run.reward_stages() for f in _policy_still(run, stage)]
    return findings


def _policy_still(run: RunData, stage: str) -> list[Finding]:
    """An online-RL stage whose KL to the start stays ~0 and whose reward does not move: the weights did not
    change."""
    kl = [(s, v) for s, v in run.series(stage, "kl") if s > 1]  # step 1 is measured before any update
    trend = thirds(run.series(stage, "reward"))
    if (
        not kl
        or trend is None
        or max(abs(v) for _, v in kl) > STILL_KL
        or abs(trend[1] - trend[0]) > STILL_REWARD
    ):
        return []
    flag = lr_flag(stage)
    lr = run.cfg(flag)
    evidence = (
        f"{stage_label(stage)} KL to the starting model stayed ≤ {max(abs(v) for _, v in kl):.1g} over "
        f"{steps_text(kl)} and the reward moved {trend[0]:.3f} → {trend[1]:.3f}: the weights barely changed"
    )
    fix = f"raise --{flag} from {lr} to {float(lr or 1e-6) * 10:.2g}, or train longer (--max_train_steps)"
    return [Finding("no_learning", "warning", stage, evidence, fix)]


def check_kl_blowup(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _kl_blowup(run, stage)]


def _kl_blowup(run: RunData, stage: str) -> list[Finding]:
    points = run.series(stage, "kl")
    if not points:
        return []
    step, peak = max(points, key=lambda p: p[1])
    if peak <= KL_LIMIT:
        return []
    flag = lr_flag(stage)
    beta, lr = float(run.cfg("beta", 0.04)), run.cfg(flag)
    evidence = (
        f"{stage_label(stage)} KL to the reference reached {peak:.3g} at step {int(step)} (limit {KL_LIMIT:g}); "
        f"last {points[-1][1]:.3g}"
    )
    fix = f"lower --{flag} from {lr} to {lower(lr, 2)} and raise --beta from {beta:g} to {max(beta * 2, 0.04):g}"
    return [Finding("kl_blowup", "warning", stage, evidence, fix)]


def check_entropy_collapse(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _entropy_collapse(run, stage)]


def _entropy_collapse(run: RunData, stage: str) -> list[Finding]:
    points = run.series(stage, "entropy")
    if len(points) < 3:
        return []
    first, last = points[0][1], points[-1][1]
    if last >= ENTROPY_FLOOR and (first <= 0 or last >= ENTROPY_DROP * first):
        return []
    flag = lr_flag(stage)
    temp, lr = float(run.cfg("temperature", 1.0)), run.cfg(flag)
    evidence = (
        f"{stage_label(stage)} token entropy fell from {first:.3g} to {last:.3g} over {steps_text(points)}: "
        "the policy samples almost the same answer every time, so groups stop differing"
    )
    fix = f"raise --temperature from {temp:g} to {temp + 0.2:g}, lower --{flag} to {lower(lr, 2)}, or raise --beta"
    if (solved := solved_reward(run, stage)) is not None:
        evidence += (
            f"; the sampled reward averaged {solved:.2f} of 1 over the last third: the policy settled on "
            "answers that earn full reward (convergence, not a collapse onto wrong ones)"
        )
        return [Finding("entropy_collapse", "info", stage, evidence, "nothing to fix while the reward holds")]
    return [Finding("entropy_collapse", "warning", stage, evidence, fix)]


def solved_reward(run: RunData, stage: str) -> float | None:
    """The mean training reward of the stage's last third where the reward is on a 0..1 scale (every logged
    value within it) and that mean is at least ``SOLVED_REWARD``: nearly every sampled answer earned full
    reward. None otherwise: a reward on another scale, or one that never told two answers of a group apart
    (its spread always 0: a constant grader, not a solved task)."""
    points = run.series(stage, "reward")
    trend = thirds(points)
    if trend is None or any(not 0.0 <= v <= 1.0 for _, v in points) or trend[1] < SOLVED_REWARD:
        return None
    if max((v for _, v in run.series(stage, "reward_std")), default=0.0) <= 0.0:
        return None
    return trend[1]


def decision_only(run: RunData) -> bool:
    """Whether GRPO sampled only the decision lines its reward reads: its completion length was chosen
    that way (``plan.json``'s ``auto_defaults``) and not changed since."""
    chosen = (run.plan.get("auto_defaults") or {}).get("grpo_max_completion_length")
    return (
        isinstance(chosen, dict)
        and chosen.get("basis") == DECISION_BASIS
        and chosen.get("value") == run.cfg("grpo_max_completion_length")
    )


def check_truncation(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _truncation(run, stage)]


def _truncation(run: RunData, stage: str) -> list[Finding]:
    points = run.series(stage, "completions/clipped_ratio")
    share = mean(points)
    if share is None or share < TRUNCATED_SHARE:
        return []
    flag = "max_completion_length"
    grpo_length = run.cfg("grpo_max_completion_length") if stage == "grpo" else None
    if grpo_length and decision_only(run):
        return []  # cut after the decision lines on purpose: GRPO's reward reads nothing after them
    if grpo_length and grpo_length != run.cfg(flag):
        flag = "grpo_max_completion_length"  # GRPO's own length, not the run's
    limit = int(run.cfg(flag, 64))
    lengths = run.series(stage, "completions/mean_length")
    length = f"; mean length {mean(lengths):.1f} tokens" if lengths else ""
    evidence = (
        f"{share:.0%} of {stage_label(stage)} completions were cut at --{flag} {limit} on "
        f"average over {steps_text(points)}{length}"
    )
    fix = f"raise --{flag} from {limit} to {limit * 2} (cut answers are graded unfinished)"
    severity = "error" if share >= 0.9 else "warning"
    return [Finding("truncation", severity, stage, evidence, fix)]


def check_slow_generation(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _slow_generation(run, stage)]


def _slow_generation(run: RunData, stage: str) -> list[Finding]:
    gen, step = mean(run.series(stage, "generation_time")), mean(run.series(stage, "step_time"))
    if gen is None or not step or gen / step < GENERATION_SHARE:
        return []
    scale = (run.of("scale") or [{}])[-1]
    on_cpu, vllm = scale.get("device") == "cpu", scale.get("rollouts") == "vllm" or run.cfg("use_vllm")
    evidence = f"generation took {gen:.2f}s of each {step:.2f}s {stage_label(stage)} step ({gen / step:.0%})"
    if on_cpu:
        evidence += " (on CPU generation always dominates)"
    n, limit = int(run.cfg("num_generations", 4)), int(run.cfg("max_completion_length", 64))
    fix = (
        "" if vllm else "generate with vLLM: --use_vllm True (needs vllm and a GPU); or "
    ) + f"lower --num_generations ({n}) or --max_completion_length ({limit})"
    severity = "info" if on_cpu or vllm else "warning"
    return [Finding("slow_generation", severity, stage, evidence, fix)]


CHECKS = (
    check_flat_reward,
    check_no_learning,
    check_kl_blowup,
    check_entropy_collapse,
    check_truncation,
    check_slow_generation,
)

__all__ = ["CHECKS", "num"]
