"""The GRPO stage's automatic defaults: the values of its flags a run leaves unset, chosen from the model,
the data and the run's graders (``plan.json: auto_defaults``, said at the start of the run).

What GRPO learns from is the spread of rewards inside each group of answers to one prompt. After RFT the
reply graders (compliance, satisfaction, format) are near their ceiling: in the run's weighted mean they
only add small differences that per-group scaling blows up to full-size advantages, and the completions
spend most of their tokens on a reply the task's decision does not depend on. So for a built-in preset
whose first grader is the task's decision (the QC verdict) and says which part of an answer it reads
(``decision_text``), GRPO is scored by that grader alone and samples only that part; several prompts
(one per label of the data) go into each optimizer step. :func:`choose` is the stage's ``auto_defaults``
hook (``stages/registry.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ark_trainer.core.auto_defaults import (
    LENGTH_BOUNDS,
    LENGTH_MARGIN,
    LENGTH_SAMPLE,
    AutoDefault,
    ModelFacts,
    StageFacts,
    answer_texts,
    new_tokens,
)

if TYPE_CHECKING:
    from ark_trainer.base.run_options import RunFlags, RunOptions, RunOptionsAfterStages
    from ark_trainer.stages.grpo.options import GRPOOptions

AUTO_FLAGS = (
    "grpo_reward_weights",
    "grpo_max_completion_length",
    "grpo_prompts_per_step",
    "grpo_eval_steps",
)  # the flags chosen here when a run leaves them unset
GRPO_EVALS = 4  # evaluations during a GRPO stage on a real model
RUN_WEIGHTS = "run"  # --grpo_reward_weights: GRPO is scored by the run's own weights
GRPO_PROMPT_BOUNDS = (4, 16)  # prompts per GRPO optimizer step chosen for a real model
GRPO_PROMPTS_FALLBACK = 8  # ... when the data has no labels to count
DECISION_MIN_LENGTH = 16
DECISION_BASIS = "decision"  # GRPO samples only the decision part of an answer, which its reward reads
INDICATOR_COVERAGE = 0.9  # share of the data a task indicator must grade to be GRPO's reward


def choose(run: RunFlags, grpo: GRPOOptions, facts: StageFacts) -> dict[str, AutoDefault]:
    """The GRPO stage's automatic flags its options (``grpo``) leave unset (:data:`AUTO_FLAGS`), chosen with
    the run's shared flags (``run``, its completion length as resolved) and ``facts``."""
    chosen = resolve_grpo_defaults(run, run, grpo, facts.tokenizer, facts.rows, facts.components, facts.model)
    if grpo.grpo_eval_steps is None:
        chosen["grpo_eval_steps"] = grpo_eval_every(run, facts.steps, facts.model)
    return chosen


def grader_with(fn: Any, name: str) -> Any:
    """The grader (``fn`` or one it wraps: the reward guards keep the grader as ``.fn``) that has the
    attribute ``name`` (e.g. ``decision_text``); else None."""
    for _ in range(4):
        if fn is None or getattr(fn, name, None) is not None:
            break
        fn = getattr(fn, "fn", None)
    return fn if fn is not None and getattr(fn, name, None) is not None else None


def decision_reader(fn: Any) -> Any:
    """The grader's ``decision_text(answer) -> str | None`` (the part of an answer its score depends on),
    through the wrappers a run puts around it; else None."""
    reader = getattr(grader_with(fn, "decision_text"), "decision_text", None)
    return reader if callable(reader) else None


def parse_grpo_weights(spec: str, components: list) -> dict[str, float]:
    """``--grpo_reward_weights`` as weights by name over the run's graders (``run``: theirs, unchanged)."""
    weights = {c.name: c.weight for c in components}
    if spec.strip() == RUN_WEIGHTS:
        return weights
    from ark_trainer.base.ranges import parse_weights

    given = parse_weights(spec, flag="--grpo_reward_weights")
    from ark_trainer.base.errors import UserError

    unknown = [n for n in given if n not in weights]
    if unknown:
        raise UserError(
            f"--grpo_reward_weights: unknown reward {', '.join(map(repr, unknown))}; this run's rewards are "
            f"{', '.join(weights)} (or 'run' for the run's own weights)"
        )
    weights.update(given)
    if sum(weights.values()) <= 0:
        raise UserError("--grpo_reward_weights: at least one reward needs a weight > 0")
    return weights


def task_indicator(components: list, rows: list[dict]) -> Any:
    """The run's grader marked as the task's own 0/1 indicator (``task_indicator``: 1 exactly when the answer
    is what task accuracy counts, e.g. ``qc_type``), if it grades most of ``rows`` (their columns as its
    keyword arguments; a row it cannot grade scores None); else None."""
    sample = rows[:LENGTH_SAMPLE]
    for component in components:
        fn = grader_with(component.fn, "task_indicator")
        if fn is None or not fn.task_indicator or not sample:
            continue
        columns = {
            key: [row.get(key) for row in sample] for key in sample[0] if key not in ("prompt", "messages")
        }
        scores = fn([""] * len(sample), [""] * len(sample), **columns)
        if sum(score is not None for score in scores) >= INDICATOR_COVERAGE * len(sample):
            return component
    return None


def grpo_reward_choice(
    after: RunOptionsAfterStages, components: list, rows: list[dict], facts: ModelFacts
) -> AutoDefault:
    """GRPO's reward. On a real model with the QC preset's graders and labelled data: the task's exact
    indicator alone (``qc_type=1``, the others 0), which also sizes what GRPO samples to the decision lines;
    else the run's own weights (``run``)."""
    if after.env:
        return AutoDefault(RUN_WEIGHTS, "run: with --env the episode's reward is the task's decision")
    if after.reward_config:
        return AutoDefault(RUN_WEIGHTS, "run: your --reward_config's graders and weights")
    if after.reward_weights or after.rm_model_path:
        return AutoDefault(
            RUN_WEIGHTS, "run: the rewards you gave the run (--reward_weights, --rm_model_path)"
        )
    indicator = task_indicator(components, rows)
    if indicator is None:
        return AutoDefault(RUN_WEIGHTS, "run: the run's graders and weights")
    if facts.toy:
        return AutoDefault(
            RUN_WEIGHTS,
            f"run: the run's graders and weights for {facts.why} (on the toy QC demo a decision-only reward "
            "cost the reply's compliance, 100% → 83.7%; docs/real-models.md)",
        )
    weights = ",".join(f"{c.name}={1 if c is indicator else 0}" for c in components)
    return AutoDefault(
        weights,
        f"{weights}: the task's own indicator ({indicator.name}: 1 when the answer is what task accuracy "
        "counts, else 0) for a real model; the run's composite gives part credit (a right verdict with a "
        "wrong type earns half), which on SmolLM2 moved GRPO away from task accuracy (45% → 47% in 40 steps) "
        "while the indicator gave +11 and +13 points in 20 (bench/results/real_demo.md)",
    )


def grpo_completion_length(
    run_length: int,
    after: RunOptionsAfterStages,
    tokenizer,
    rows: list[dict],
    components: list,
    weights: dict,
) -> AutoDefault:
    """What GRPO samples: the whole episode under ``--env``; the decision part of an answer where every
    grader GRPO is scored by says which part it reads; else the run's ``--max_completion_length``
    (``run_length``, as :func:`new_tokens` gives it)."""
    if after.env:
        turns, tool = after.max_turns, after.max_tool_output
        value = min(turns * run_length + (turns - 1) * tool, LENGTH_BOUNDS[1] * 8)
        return AutoDefault(
            value,
            f"{value}: a whole episode, as evaluation allows it: {turns} turns × {run_length} tokens plus "
            f"{turns - 1} tool results of up to {tool} characters (TRL counts the episode, tool results "
            "included, against this budget)",
        )
    readers = [decision_reader(c.fn) for c in components if weights.get(c.name, 0) > 0]
    texts = answer_texts(rows)
    parts = [p for p in (r(t) for r in readers if r for t in texts[:LENGTH_SAMPLE]) if p]
    if not readers or None in readers or not parts:
        return AutoDefault(
            run_length, f"{run_length}: --max_completion_length (GRPO's reward reads the whole answer)"
        )
    lengths = sorted(len(ids) for ids in tokenizer(parts, add_special_tokens=False)["input_ids"])
    p95 = lengths[min(len(lengths) - 1, math.ceil(0.95 * len(lengths)) - 1)]
    value = min(max(math.ceil(p95 * (1 + LENGTH_MARGIN) / 8) * 8, DECISION_MIN_LENGTH), run_length)
    return AutoDefault(
        value,
        f"{value}: GRPO's reward reads only the decision at the start of an answer; 95% of the data's "
        f"{len(lengths)} decisions take at most {p95} tokens (p95 + {LENGTH_MARGIN:.0%}, rounded up to 8); "
        f"evaluation still writes whole answers ({run_length} tokens)",
        basis=DECISION_BASIS,
    )


CLASS_VALUES_MAX = 16  # a reference column with at most this many distinct values ...
CLASS_VALUE_CHARS = 48  # ... each at most this long ...
CLASS_VALUE_REPEATS = 2  # ... and on average this many rows each holds class labels, not answers


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def class_references(rows: list[dict]) -> bool:
    """Whether the rows' ``reference`` answers are class labels (``compliant``, ``violation: promised
    refund``): few distinct short values, each repeated across rows, rather than one free answer per row."""
    refs = [ref for row in rows if (ref := _text(row.get("reference"))) is not None]
    distinct = set(refs)
    return (
        2 <= len(distinct) <= CLASS_VALUES_MAX
        and len(refs) >= CLASS_VALUE_REPEATS * len(distinct)
        and all(len(value) <= CLASS_VALUE_CHARS for value in distinct)
    )


def label_column(rows: list[dict]) -> str | None:
    """The column that holds the data's labels: ``label`` where rows have text in it, else ``reference``
    where its values are classes (:func:`class_references`), else None."""
    if any(_text(row.get("label")) for row in rows):
        return "label"
    return "reference" if class_references(rows) else None


def row_label(row: dict, column: str | None) -> str | None:
    """The row's label in ``column`` (:func:`label_column`), stripped; None without one."""
    return _text(row.get(column)) if column else None


def data_labels(rows: list[dict]) -> list[str]:
    """The distinct text labels of the data (``label``, or a class-valued ``reference``), in first-seen
    order."""
    column = label_column(rows)
    seen: dict[str, None] = {}
    for row in rows:
        if (label := row_label(row, column)) is not None:
            seen.setdefault(label, None)
    return list(seen)


def grpo_prompts(run: RunOptions, grpo: GRPOOptions, rows: list[dict], facts: ModelFacts) -> AutoDefault:
    per_batch = max(run.batch_size * run.gradient_accumulation_steps // grpo.num_generations, 1)
    if facts.toy:
        return AutoDefault(
            per_batch, f"{per_batch} (--batch_size / --num_generations): the fixed default for {facts.why}"
        )
    labels = data_labels(rows)
    lo, hi = GRPO_PROMPT_BOUNDS
    if len(labels) < 2:
        value = max(GRPO_PROMPTS_FALLBACK, per_batch)
        return AutoDefault(value, f"{value}: the data has no labels to balance; several prompts a step")
    value = min(max(len(labels), lo, per_batch), hi)
    column = "" if label_column(rows) == "label" else " in its class-valued reference column"
    return AutoDefault(
        value,
        f"{value}: one prompt per label of the data{column} ({len(labels)}: {', '.join(labels[:8])}"
        f"{' ...' if len(labels) > 8 else ''}) in each optimizer step, within {lo}..{hi}, through gradient "
        "accumulation; each step's prompts hold the labels in the data's proportions (stratified), not two "
        "prompts of one kind by chance",
    )


def resolve_grpo_defaults(
    run: RunOptions,
    after: RunOptionsAfterStages,
    grpo: GRPOOptions,
    tokenizer,
    rows: list[dict],
    components: list,
    facts: ModelFacts,
) -> dict[str, AutoDefault]:
    """The GRPO stage's automatic flags its options (``grpo``) leave unset (``GRPO_AUTO_FLAGS``), chosen with
    the run's shared flags (``run``, ``after``)."""
    chosen: dict[str, AutoDefault] = {}
    spec = grpo.grpo_reward_weights
    if spec is None:
        chosen["grpo_reward_weights"] = grpo_reward_choice(after, components, rows, facts)
        spec = chosen["grpo_reward_weights"].value
    weights = parse_grpo_weights(spec, components)
    if grpo.grpo_max_completion_length is None:
        chosen["grpo_max_completion_length"] = grpo_completion_length(
            new_tokens(run.max_completion_length), after, tokenizer, rows, components, weights
        )
    if grpo.grpo_prompts_per_step is None:
        chosen["grpo_prompts_per_step"] = grpo_prompts(run, grpo, rows, facts)
    return chosen


def grpo_accumulation(batch_size: int, num_generations: int, prompts_per_step: int | None) -> tuple[int, int]:
    """(gradient accumulation steps, prompts per step) of the GRPO stage: the smallest accumulation of
    ``batch_size`` completions (``--batch_size``) that holds ``prompts_per_step`` (``--grpo_prompts_per_step``)
    prompts' groups of ``num_generations`` (``--num_generations``), in whole groups."""
    prompts = prompts_per_step or max(batch_size // num_generations, 1)
    steps = max(math.ceil(prompts * num_generations / batch_size), 1)
    while (batch_size * steps) % num_generations:
        steps += 1
    return steps, batch_size * steps // num_generations


def grpo_eval_every(after: RunOptionsAfterStages, steps: int, facts: ModelFacts) -> AutoDefault:
    """How often the GRPO stage evaluates itself (``stages/grpo/grpo_eval.py``) over its ``steps``; ``after``
    gives the run's ``--eval_auto`` and ``--env``."""
    if not after.eval_auto:
        return AutoDefault(0, "0 (off): --eval_auto False")
    if facts.toy or after.env:
        what = "an agent run (episodes)" if after.env else facts.why
        return AutoDefault(0, f"0 (off): the fixed default for {what}")
    if steps < 2 * GRPO_EVALS:
        return AutoDefault(
            0,
            f"0 (off): a stage of {steps} steps; its evaluation after the stage decides which model ships "
            "(--final_model)",
        )
    value = math.ceil(steps / GRPO_EVALS)
    return AutoDefault(
        value,
        f"{value}: {GRPO_EVALS} held-out evaluations over the stage's {steps} steps (decision lines only); "
        "the best step is the stage's model",
    )
