"""What a run will cost on this machine, said before it is paid: the expected seconds of each part.

A part is what the heartbeat calls a stage (``eval_base``, ``eval_base_dev``, ``rft_sampling``, ``rft``,
``grpo``, ...). Its seconds come from two things measured on this machine before the run
(``core/runtime/measure.py``, :class:`Timings`) and the run's plan:

- generation: a batch of ``batch`` sequences costs one prompt pass (``prefill_s``) plus one decoding step
  (``decode_step_s``) per new token; every generation (evaluation, RFT sampling, GRPO's groups) is counted
  as whole batches of the measured size, each answer at the full completion length (an upper bound: a
  model that stops early costs less);
- training: one forward and backward pass over a micro-batch of the run's ``--batch_size`` at its sequence
  length (``micro_step_s``); an optimizer step is ``gradient_accumulation_steps`` of them.

The formulas are small pure functions (:func:`generation_seconds`, :func:`rft_parts`, :func:`grpo_parts`,
...); ``stages/estimate.py`` feeds them the run's plan and flags. :func:`fit_steps` scales the step counts a
run did not set explicitly so that the estimate fits ``--time_budget``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

KEEP_RATE_GUESS = 0.5  # RFT's first round samples twice the prompts it trains on (``scoring.next_round``)
REFERENCE_PASS = 1 / 3  # a reference model's forward pass, against a forward and backward pass
PAIR_PASSES = 2.0  # a DPO micro-step: chosen and rejected answers
KTO_PASSES = 1.5  # a KTO micro-step: the answer and a mismatched one for its KL term


@dataclass(frozen=True)
class Timings:
    """What one generation batch and one training micro-step take on this machine."""

    prefill_s: float  # one generation batch's prompt pass
    decode_step_s: float  # one decoding step of that batch
    batch: int  # sequences in the measured generation batch
    micro_step_s: float  # one forward + backward pass over a training micro-batch
    precision: str = ""  # what it was measured in, e.g. "fp32"
    prompt_tokens: int = 0  # the micro-batch's sequences: this many prompt tokens ...
    completion_tokens: int = 0  # ... and this many answer tokens

    def micro_at(self, tokens: int) -> float:
        """A micro-step's seconds over sequences with ``tokens`` answer tokens (in proportion to length)."""
        measured = self.prompt_tokens + self.completion_tokens
        if measured <= 0:
            return self.micro_step_s
        return self.micro_step_s * (self.prompt_tokens + tokens) / measured

    def to_json(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


@dataclass(frozen=True)
class RunSize:
    """The rows a run works on: training prompts, dev and test prompts; whether the data carries the
    answers a stage would otherwise sample (DPO's and KTO's: their ``given_answers`` hook)."""

    train: int
    dev: int
    test: int
    given_preferences: bool = False
    eval_tokens: int = 0  # new tokens an evaluation answer may take (plan.json: eval_length); 0: the run's


@dataclass(frozen=True)
class Part:
    """One stage of the heartbeat and what it is expected to take."""

    name: str
    seconds: float
    what: str  # how it was counted, for people

    def to_json(self) -> dict:
        return {"stage": self.name, "seconds": round(self.seconds, 1), "what": self.what}


def generation_seconds(t: Timings, sequences: int, tokens: int) -> float:
    """Seconds to generate ``sequences`` answers of ``tokens`` new tokens, in batches of ``t.batch``."""
    if sequences <= 0 or tokens <= 0:
        return 0.0
    return math.ceil(sequences / max(t.batch, 1)) * (t.prefill_s + tokens * t.decode_step_s)


def eval_parts(t: Timings, model: str, dev: int, test: int, tokens: int) -> list[Part]:
    """A model's evaluation: greedy answers to the test split (``eval_<model>``) and the dev split."""
    parts = []
    for name, n in ((f"eval_{model}", test), (f"eval_{model}_dev", dev)):
        if n:
            what = f"{n} prompts × {tokens} tokens"
            parts.append(Part(name, generation_seconds(t, n, tokens), what))
    return parts


def training_seconds(micro_s: float, steps: int, accumulation: int, passes: float = 1.0) -> float:
    """Seconds of ``steps`` optimizer steps of ``accumulation`` micro-steps, each ``passes`` × ``micro_s``."""
    return max(steps, 0) * accumulation * passes * micro_s


def rft_prompts(steps: int, batch: int, accumulation: int, available: int) -> int:
    """Prompts RFT samples for ``steps``: twice those it trains on (half are expected to fall below the
    threshold), at most the training prompts there are."""
    return min(math.ceil(steps * batch * accumulation / KEEP_RATE_GUESS), available)


def rft_parts(
    t: Timings, steps: int, batch: int, accumulation: int, samples: int, available: int, tokens: int
) -> list[Part]:
    """RFT: ``samples`` answers per prompt it needs (``rft_sampling``), then its supervised steps (``rft``)."""
    prompts = rft_prompts(steps, batch, accumulation, available)
    sampling = generation_seconds(t, prompts * samples, tokens)
    what = f"{prompts} prompts × {samples} samples × {tokens} tokens" if samples else "the data's own answers"
    return [
        Part("rft_sampling", sampling, what),
        Part(
            "rft",
            training_seconds(t.micro_step_s, steps, accumulation),
            f"{steps} steps × {accumulation} micro-steps",
        ),
    ]


@dataclass(frozen=True)
class GRPOWork:
    """What a GRPO (or RLOO) stage does each step, and how often it evaluates itself on dev."""

    steps: int
    prompts_per_step: int
    generations: int
    tokens: int  # GRPO's completion length
    accumulation: int  # micro-steps per optimizer step
    eval_every: int  # 0: no evaluation during the stage
    dev: int  # prompts of each evaluation
    reference: bool  # a reference model's forward pass too (--beta > 0)


def grpo_evaluations(steps: int, every: int) -> int:
    """Evaluations during a stage: the starting model, every ``every`` steps, and after the last step."""
    if every <= 0 or steps <= 0:
        return 0
    return 1 + math.ceil(steps / every)


def grpo_eval_seconds(t: Timings, w: GRPOWork) -> float:
    """What a GRPO stage's evaluations on dev cost (``--grpo_eval_steps``; GRPO's completion length)."""
    return grpo_evaluations(w.steps, w.eval_every) * generation_seconds(t, w.dev, w.tokens)


def grpo_parts(t: Timings, name: str, w: GRPOWork) -> list[Part]:
    """GRPO: each step generates its groups and runs its loss passes; plus its evaluations on dev."""
    gen = generation_seconds(t, w.prompts_per_step * w.generations, w.tokens)
    passes = 1 + (REFERENCE_PASS if w.reference else 0.0)
    per_step = gen + training_seconds(t.micro_at(w.tokens), 1, w.accumulation, passes)
    evals = grpo_evaluations(w.steps, w.eval_every)
    eval_s = grpo_eval_seconds(t, w)
    what = (
        f"{w.steps} steps × ({w.prompts_per_step} prompts × {w.generations} completions × {w.tokens} tokens "
        f"+ {w.accumulation} micro-steps)"
    )
    if evals:
        what += f" + {evals} dev evaluations of {w.dev} prompts × {w.tokens} tokens, {duration(eval_s)}"
    return [Part(name, w.steps * per_step + eval_s, what)]


def preference_parts(
    t: Timings, name: str, steps: int, accumulation: int, sampled_prompts: int, samples: int, tokens: int
) -> list[Part]:
    """DPO or KTO: answers sampled for every training prompt (none when the data carries them), then
    steps of pair (DPO) or paired-KL (KTO) passes."""
    parts = []
    if sampled_prompts and samples:
        what = f"{sampled_prompts} prompts × {samples} samples × {tokens} tokens"
        parts.append(Part(f"{name}_sampling", generation_seconds(t, sampled_prompts * samples, tokens), what))
    passes = PAIR_PASSES if name == "dpo" else KTO_PASSES
    what = f"{steps} steps × {accumulation} micro-steps × {passes:g} passes"
    parts.append(Part(name, training_seconds(t.micro_step_s, steps, accumulation, passes), what))
    return parts


def total_seconds(parts: list[Part]) -> float:
    return sum(p.seconds for p in parts)


def duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``1 h 05 min``: a time for people."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def estimate_lines(parts: list[Part], t: Timings) -> list[str]:
    """The estimate as the log shows it: how it was measured, each part, the whole run."""
    lines = [
        f"expected time on this machine ({t.precision or 'as run'}; measured: a generation batch of {t.batch} "
        f"sequences {t.prefill_s:.2f} s + {t.decode_step_s:.3f} s a token, a training micro-step "
        f"{t.micro_step_s:.2f} s):"
    ]
    lines += [f"  {p.name}: {duration(p.seconds)} ({p.what})" for p in parts if p.seconds > 0]
    lines.append(
        f"  whole run: {duration(total_seconds(parts))} (every answer at full length: at most about)"
    )
    return lines


def record(parts: list[Part], t: Timings, **extra: object) -> dict:
    """``plan.json``'s ``estimate``: the measured timings, each part, the total."""
    out = {"timings": t.to_json(), "parts": [p.to_json() for p in parts]}
    return {**out, "total_seconds": round(total_seconds(parts), 1), **extra}


def remaining_seconds(
    estimate: dict, finished: set[str], current: str | None, elapsed: float, eta: float | None = None
) -> float | None:
    """Expected seconds left of a run from its ``estimate`` record: the parts not ``finished``; of the
    ``current`` one, its heartbeat's ``eta`` where it has one, else its estimate less the ``elapsed``
    seconds (never below nothing). None without parts."""
    parts = estimate.get("parts") if isinstance(estimate, dict) else None
    if not isinstance(parts, list) or not parts:
        return None
    left = 0.0
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("seconds"), int | float):
            continue
        if part.get("stage") in finished:
            continue
        if part.get("stage") == current:
            left += eta if eta is not None else max(part["seconds"] - elapsed, 0.0)
        else:
            left += part["seconds"]
    return left


def expected_left(out_dir: str | Path, beat: dict) -> float | None:
    """Seconds a running run is expected to need still (``plan.json``'s ``estimate``, the stages its events
    say ended, the heartbeat's stage); None for a run without an estimate."""
    from ark_trainer.core.runfolder import RunFolder

    folder = RunFolder(out_dir)
    finished = {
        str(e.get("stage"))
        for e in folder.events()
        if e.get("event") == "stage_end" and e.get("status") == "ok"
    }
    current = beat.get("stage") if isinstance(beat.get("stage"), str) else None
    elapsed, eta = beat.get("stage_elapsed_seconds"), beat.get("eta_seconds")
    return remaining_seconds(
        folder.plan().get("estimate") or {},
        finished,
        current,
        float(elapsed) if isinstance(elapsed, int | float) else 0.0,
        float(eta) if isinstance(eta, int | float) else None,
    )


def fit_steps(
    cost: Callable[[dict[str, int]], float], steps: dict[str, int], scalable: set[str], budget: float
) -> dict[str, int]:
    """The step counts (by stage) whose run ``cost`` fits ``budget`` seconds: the ``scalable`` stages'
    steps scaled down by one common factor (each keeps at least one step), the others as given. Unchanged
    when the run fits already; the smallest run when nothing fits (the caller warns)."""
    if cost(steps) <= budget or not scalable:
        return dict(steps)

    def scaled(factor: float) -> dict[str, int]:
        return {
            name: max(int(n * factor), 1) if name in scalable and n > 0 else n for name, n in steps.items()
        }

    lo, hi = 0.0, 1.0  # cost(scaled(lo)) is the smallest run; find the largest factor that fits
    for _ in range(40):
        mid = (lo + hi) / 2
        if cost(scaled(mid)) <= budget:
            lo = mid
        else:
            hi = mid
    return scaled(lo)


def budget_sized(name: str, before: dict, now: dict) -> bool:
    """Whether ``run.yaml``'s (``before``) ``name`` is a step count ``--time_budget`` sized and the run's
    flags (``now``) leave it unset again under the same budget: the same run, not a changed flag."""
    from ark_trainer.base.run_options import RunOptions

    unset = {"max_train_steps": RunOptions.max_train_steps, "rft_steps": None}
    budget = before.get("time_budget")
    return (
        name in unset and bool(budget) and now.get("time_budget") == budget and now.get(name) == unset[name]
    )
