"""Checks that compare the evaluations of a run: the base model, then each stage's (``eval/<name>.json``).

- ``no_improvement``: the final model (the one ``OUT/model`` is: ``core/final_model.py``) is no better than the
  base on the run's main metric (the first of :data:`ark_trainer.core.metrics.MAIN` both evaluations have). The
  pipeline does not deploy such a model unless ``--deploy_if_not_better True``.
- ``gain_within_noise``: the final model beats the base on the main metric, but not beyond the sampling
  noise of the held-out prompts: the paired test finds no significant gain (info: it still deploys).
- ``eval_regression``: a stage ends worse than the one before it on a headline metric, by more than the
  sampling noise of the held-out prompts (``significance.py``: the paired test the report shows).
- ``reward_hacking``: an online-RL stage's training reward rises while its held-out evaluation falls (by
  more than the noise), or one grader rises while the others fall (the policy found what pays in one grader
  at the others' expense).
- ``no_learning``: the final model answers the held-out prompts exactly as the model before it did.
"""

from __future__ import annotations

import json

from ark_trainer.core.metrics import HEADLINE, TASK_SUCCESS, main_metric, shown
from ark_trainer.core.stats import compare_evals, untested
from ark_trainer.stages.diagnose.finding import Finding, lower, lr_flag, stage_label, thirds
from ark_trainer.stages.diagnose.rundata import RunData, num
from ark_trainer.stages.diagnose.significance import RULE, TESTS, falls

REWARD_RISE = 0.05  # training reward (or one grader) rising by more than this counts as rising
SAME_ANSWERS = 0.95  # this share of identical greedy answers: the model did not change
MOVED = 0.01  # ... unless a held-out metric moved by this much (a point): the answers that changed mattered


def judged(run: RunData) -> tuple[str, str, str] | None:
    """``(metric, base name, final name)`` the run is judged on; None without a base and a later eval."""
    final = run.final_name()
    if "base" not in run.evals or final is None:
        return None
    metric = main_metric([run.evals["base"], run.evals[final]])
    return (metric, "base", final) if metric else None


def not_better_than_base(run: RunData) -> Finding | None:
    """The ``no_improvement`` finding, or None when the final model beats the base (or nothing to compare)."""
    picked = judged(run)
    if picked is None or run.final_status() != "finished":  # a stopped run's last model is not its final one
        return None
    metric, base, final = picked
    before, after = num(run.evals[base].get(metric)), num(run.evals[final].get(metric))
    if after > before:  # type: ignore[operator]
        return None
    word = "below" if after < before else "no better than"  # type: ignore[operator]
    evidence = (
        f"final model ({final}) {word} the base on {metric}: {shown(metric, before)} → {shown(metric, after)} "
        f"(n={run.evals[final].get('n', '?')}){_paired(run, base, final, metric)}"
    )
    planned = [
        str(s.get("name")) for s in run.plan.get("stages") or [] if isinstance(s, dict) and s.get("steps")
    ]
    lrs = [f for f in dict.fromkeys(lr_flag(n) for n in planned or [final]) if run.cfg(f) is not None]
    now = ", ".join(f"--{f} {run.cfg(f)}" for f in lrs)
    if after < before:  # type: ignore[operator]  # training moved it, the wrong way: not a rate too small
        advice = f"training made it worse: lower the learning rates ({now}) or train fewer steps"
    else:
        advice = f"the learning rates ({now}) may suit another model: try ten times higher, or train longer"
        advice += " (--max_train_steps)"
    fix = f"{advice}; --openclaw_env True deploys such a model only with --deploy_if_not_better True"
    return Finding("no_improvement", "warning", final, evidence, fix)


def _paired(run: RunData, before: str, after: str, metric: str) -> str:
    """``; paired: +1.0 pts [−2.9, +4.9], n = 200, p = 0.62, not significant`` (or why it is not tested)."""
    found = compare_evals(run.evals[before], run.evals[after], metric)
    if found is None:
        return f"; no paired test: {untested(run.evals[before], run.evals[after], metric)}"
    return f"; paired: {found.change()}, {found.stats()}"


def check_no_improvement(run: RunData) -> list[Finding]:
    found = not_better_than_base(run)
    return [found] if found else [*within_noise(run)]


def within_noise(run: RunData) -> list[Finding]:
    """``gain_within_noise``: the final model is above the base on the main metric, by less than the noise."""
    picked = judged(run)
    if picked is None or run.final_status() != "finished":
        return []
    metric, base, final = picked
    found = compare_evals(run.evals[base], run.evals[final], metric)
    if found is None or found.rose or found.delta <= 0:
        return []
    evidence = (
        f"final model ({final}) vs base: {found.text(values=True)}: a gain this size comes by chance on "
        f"{found.n} held-out prompts ({TESTS})"
    )
    fix = (
        "evaluate on more held-out prompts (a larger eval set, --max_eval_samples) before relying on the gain"
    )
    return [Finding("gain_within_noise", "info", final, evidence, fix)]


def check_eval_regression(run: RunData) -> list[Finding]:
    names, findings = list(run.evals), []
    for prev, cur in zip(names, names[1:], strict=False):
        drops = falls(run.evals[prev], run.evals[cur])
        if not drops:
            continue
        flag = lr_flag(cur)
        said = "; ".join(d.text(values=True) for d in drops)
        evidence = f"{cur} ends worse than {prev}: {said}; {_beyond_noise()}"
        fix = f"lower --{flag} from {run.cfg(flag)} to {lower(run.cfg(flag), 2)} or train {cur} fewer steps"
        findings.append(Finding("eval_regression", "warning", cur, evidence, fix))
    return findings


def _beyond_noise() -> str:
    return f"beyond the noise of the held-out prompts ({RULE}: {TESTS})"


def check_reward_hacking(run: RunData) -> list[Finding]:
    return _train_up_eval_down(run) + _one_grader_dominates(run)


def _train_up_eval_down(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _reward_up_eval_down(run, stage)]


def _reward_up_eval_down(run: RunData, stage: str) -> list[Finding]:
    trend = thirds(run.series(stage, "reward"))
    if trend is None or trend[1] - trend[0] <= REWARD_RISE or stage not in run.evals:
        return []
    names = list(run.evals)
    prev = names[names.index(stage) - 1] if names.index(stage) else None
    if prev is None:
        return []
    drops = falls(run.evals[prev], run.evals[stage])
    if not drops:
        return []
    evidence = (
        f"{stage_label(stage)} training reward rose {trend[0]:.3f} → {trend[1]:.3f} while held-out "
        f"{'; '.join(d.text(values=True) for d in drops)} ({prev} → {stage}), {_beyond_noise()}: the policy "
        "learned what the reward pays for, not the task"
    )
    fix = (
        "check the graders on failing answers (ark-trainer score --reward_config SPEC --data_path "
        "eval.jsonl --model_path OUT/model), tighten the one that is fooled or lower its weight "
        "(--reward_weights NAME=0.5), and raise --beta to stay nearer the start"
    )
    return [Finding("reward_hacking", "warning", stage, evidence, fix)]


def _one_grader_dominates(run: RunData) -> list[Finding]:
    return [f for stage in run.reward_stages() for f in _grader_dominates(run, stage)]


def _grader_dominates(run: RunData, stage: str) -> list[Finding]:
    keys = {k for e in run.metrics(stage) for k in e if k.startswith("rewards/") and k.endswith("/mean")}
    moves = {}
    for key in sorted(keys - {"rewards/total/mean"}):
        trend = thirds(run.series(stage, key))
        if trend is not None:
            moves[key[len("rewards/") : -len("/mean")]] = trend[1] - trend[0]
    risers = [g for g, d in moves.items() if d > REWARD_RISE]
    fallers = [g for g, d in moves.items() if d < -REWARD_RISE]
    if len(risers) != 1 or not fallers:
        return []
    g = risers[0]
    changes = ", ".join(f"{name} {moves[name]:+.3f}" for name in [g, *fallers])
    evidence = f"during {stage_label(stage)} one grader rose while the others fell: {changes}"
    fix = (
        f"lower the weight of {g} (--reward_weights {g}=0.5) or make it harder to satisfy without the others"
    )
    return [Finding("reward_hacking", "warning", stage, evidence, fix)]


def _answer_key(answer: dict) -> tuple:
    """What a greedy answer is, for "same answer as before": its text and, in an agent episode, the tool
    calls it made, with their arguments and results (an agent's last text is often the same short sign-off
    whatever it did; ``stages/agent/evaluate.py`` keeps each task's calls in ``answers``)."""
    calls = answer.get("tool_calls")
    if isinstance(calls, list):
        calls = [{k: c.get(k) for k in ("name", "arguments", "result")} for c in calls if isinstance(c, dict)]
    return answer.get("completion"), json.dumps(calls, sort_keys=True, ensure_ascii=False)


def _moved(before: dict, after: dict) -> str:
    """A held-out metric that changed by at least ``MOVED`` between two models ("" when none did)."""
    for metric in (TASK_SUCCESS, *HEADLINE):
        a, b = before.get(metric), after.get(metric)
        if isinstance(a, int | float) and isinstance(b, int | float) and abs(b - a) >= MOVED:
            return metric
    return ""


def check_same_answers(run: RunData) -> list[Finding]:
    names = list(run.evals)
    if len(names) < 2:
        return []
    prev, cur = names[-2], names[-1]
    a = [_answer_key(x) for x in run.evals[prev].get("answers") or []]
    b = [_answer_key(x) for x in run.evals[cur].get("answers") or []]
    if not a or len(a) != len(b):
        return []
    same = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    if same < SAME_ANSWERS or _moved(run.evals[prev], run.evals[cur]):  # the few that changed moved a metric
        return []
    flag = lr_flag(cur)
    evidence = f"{cur} gives the same greedy answer as {prev} on {same:.0%} of {len(a)} held-out prompts"
    fix = f"raise --{flag} from {run.cfg(flag)} to {float(run.cfg(flag) or 1e-6) * 10:.2g}, or train longer"
    return [Finding("no_learning", "warning", cur, evidence, fix)]


CHECKS = (check_no_improvement, check_eval_regression, check_reward_hacking, check_same_answers)
