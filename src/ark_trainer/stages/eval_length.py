"""How many new tokens an evaluation answer may take: what the data's answers need, not the whole budget.

Evaluation decodes greedily until the model ends its answer or the budget runs out, and a base model that
has not learnt the task's answers rarely ends early: it writes until the budget runs out. At a
``--max_completion_length`` of 512 for answers of ten tokens, the base model's evaluation then pays for
500 tokens a prompt that no grader needs. So a run's evaluations (base, each stage, dev and test alike)
decode at most the longest of the data's answers (``candidates``/``answers``, ``chosen``, ``rejected``,
a text ``reference``: ``auto_defaults.answer_texts``) in this model's tokenizer, plus ``EVAL_MARGIN``,
rounded up to a multiple of 8, at least ``EVAL_FLOOR``, and never more than the run's completion length.
An answer shaped like the data's is never cut; one longer than any of them by a quarter is cut there and
graded as written so far.

The run's completion length stands where nothing says what an answer looks like (no answers in the data),
for the demo's toy models (their figures are measured at it) and for an agent run (``--env``: an episode's
turns are bounded by ``--max_completion_length`` each). The choice and its reason go to ``plan.json``
(``eval_length``) and the console; a resumed run keeps its first attempt's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

EVAL_MARGIN = 0.25
EVAL_FLOOR = 16
EVAL_SAMPLE = 2000  # answers tokenized at most (a spread sample of a larger file)
RECORD = "eval_length"  # plan.json's key


@dataclass(frozen=True)
class EvalLength:
    """The new tokens each evaluation answer may take, and why."""

    value: int
    reason: str

    def to_json(self) -> dict:
        return {"value": self.value, "reason": self.reason}

    @classmethod
    def from_json(cls, data: object) -> EvalLength | None:
        """The record ``plan.json`` holds, or None where it holds none (an older run)."""
        if isinstance(data, dict) and isinstance(data.get("value"), int) and data["value"] > 0:
            return cls(data["value"], str(data.get("reason") or ""))
        return None


def longest_answer(tokenizer, rows: list[dict]) -> tuple[int, int]:
    """(tokens of the longest answer the data carries, with its end-of-turn token; answers counted); (0, 0)
    without answers."""
    from ark_trainer.core.auto_defaults import answer_texts

    texts = answer_texts(rows)
    if not texts:
        return 0, 0
    if len(texts) > EVAL_SAMPLE:
        step = len(texts) / EVAL_SAMPLE
        texts = [texts[int(i * step)] for i in range(EVAL_SAMPLE)]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return max(len(one) for one in ids) + 1, len(texts)


def eval_length(
    budget: int, tokenizer, rows: list[dict], toy: bool = False, agent: bool = False
) -> EvalLength:
    """The evaluation's answer length for a run whose completion length is ``budget`` (see the module's
    docstring); ``toy``: the base model is a toy (``auto_defaults.model_facts``), ``agent``: an ``--env``
    run."""
    run = f"--max_completion_length {budget}"
    if agent:
        return EvalLength(budget, f"{budget}: {run} (an agent run: each turn's budget)")
    if toy:
        return EvalLength(budget, f"{budget}: {run} (the fixed setting for a toy model)")
    longest, n = longest_answer(tokenizer, rows)
    if not n:
        return EvalLength(budget, f"{budget}: {run} (the data holds no answer to measure)")
    need = max(math.ceil(longest * (1 + EVAL_MARGIN) / 8) * 8, EVAL_FLOOR)
    measured = (
        f"the longest of the data's {n} answers takes {longest} tokens in this model's tokenizer "
        f"(+{EVAL_MARGIN:.0%}, rounded up to 8: {need})"
    )
    if need >= budget:
        return EvalLength(budget, f"{budget}: {run}; {measured}")
    return EvalLength(
        need,
        f"{need}: {measured}; an answer stops there, not at {run}, so a model that does not end its "
        "answer (a base model, often) costs no more than the task's answers need",
    )
