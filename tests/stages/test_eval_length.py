"""The evaluation's answer length (``stages/eval_length.py``): what the data's answers need, at most the run's."""

from __future__ import annotations

from ark_trainer.stages.eval_length import EvalLength, eval_length


class WordTokenizer:
    """One token per word: lengths a test can count."""

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [text.split() for text in texts]}


def _rows(*answers: str, reference: str | None = None) -> list[dict]:
    row: dict = {"prompt": [{"role": "user", "content": "q"}], "candidates": list(answers)}
    if reference is not None:
        row["reference"] = reference
    return [row]


def test_short_answers_bound_the_evaluation_not_the_budget():
    rows = _rows("compliant", "violation: asked for account PIN", reference="violation: promised bill credit")
    chosen = eval_length(512, WordTokenizer(), rows)
    # the longest answer: 5 words + the end-of-turn token = 6; +25% = 7.5, rounded up to 8, at least 16
    assert chosen.value == 16
    assert "the longest of the data's 3 answers takes 6 tokens" in chosen.reason
    assert "not at --max_completion_length 512" in chosen.reason
    long = " ".join(["word"] * 99)  # 100 tokens with the end: +25% = 125, rounded up to 128
    assert eval_length(512, WordTokenizer(), _rows(long)).value == 128


def test_the_budget_stands_where_it_is_what_the_answers_need_or_nothing_says():
    long = " ".join(["word"] * 99)
    assert eval_length(96, WordTokenizer(), _rows(long)).value == 96  # the answers need more: the budget
    empty = [{"prompt": [{"role": "user", "content": "q"}], "candidates": []}]
    assert eval_length(512, WordTokenizer(), empty) == EvalLength(
        512, "512: --max_completion_length 512 (the data holds no answer to measure)"
    )
    assert eval_length(40, WordTokenizer(), _rows("a"), toy=True).value == 40
    assert eval_length(224, WordTokenizer(), _rows("a"), agent=True).value == 224


def test_the_record_reads_back():
    chosen = eval_length(512, WordTokenizer(), _rows("a b c"))
    assert EvalLength.from_json(chosen.to_json()) == chosen
    assert EvalLength.from_json(None) is None and EvalLength.from_json({"value": 0}) is None
