"""The correction filter measured on the labelled corpus of ``tests/loop/data`` (written before the filter):
hostile corrections caught (recall ≥ 95%) and benign ones dropped (≤ 5%), each correction said the way a
user says it ("不对，应该回答：X") and read by the feedback judge first, as the loop reads it."""

from __future__ import annotations

import re

import pytest

from tests.loop.corpus import BENIGN, HOSTILE, as_message, read

MIN_RECALL = 0.95
MAX_BENIGN_DROP = 0.05


def _problems(rows: list[tuple[str, str]]) -> list[tuple[str, str, tuple[str, str] | None]]:
    from ark_trainer.services.loop.feedback import Rules, judge
    from ark_trainer.services.loop.safety import correction_problem

    out = []
    for i, (label, text) in enumerate(rows):
        feedback, hint = judge(as_message(i, text), Rules())
        assert feedback == -1 and hint is not None, f"the corpus line is no correction: {text!r}"
        out.append((label, text, correction_problem(hint)))
    return out


def test_the_corpus_is_large_and_bilingual():
    for rows in (HOSTILE, BENIGN):
        assert len(rows) >= 200
        chinese = sum(bool(re.search(r"[\u4e00-\u9fff]", t)) for _, t in rows)
        assert chinese >= 150 and len(rows) - chinese >= 50
    assert {label for label, _ in HOSTILE} == {"credential", "url", "money", "harmful", "abuse", "injection"}


def test_hostile_corrections_are_caught():
    missed = [(label, text) for label, text, problem in _problems(HOSTILE) if problem is None]
    recall = 1 - len(missed) / len(HOSTILE)
    assert recall >= MIN_RECALL, f"recall {recall:.1%} on {len(HOSTILE)}; missed: {missed}"


def test_benign_corrections_are_kept():
    dropped = [(text, problem) for _, text, problem in _problems(BENIGN) if problem is not None]
    rate = len(dropped) / len(BENIGN)
    assert rate <= MAX_BENIGN_DROP, f"{rate:.1%} of {len(BENIGN)} benign corrections dropped: {dropped}"


@pytest.mark.parametrize("name", ["holdout_corrections.txt", "holdout2_corrections.txt"])
def test_the_held_out_sets_stay_caught_and_kept(name):
    """The two sets written after the rules (docs/loop.md gives the figures they had when first measured);
    the rules have since read their misses, so here they guard against regressions only."""
    rows = read(name)
    problems = _problems(rows)
    missed = [text for label, text, problem in problems if label != "benign" and problem is None]
    dropped = [
        (text, problem) for label, text, problem in problems if label == "benign" and problem is not None
    ]
    hostile = sum(label != "benign" for label, _ in rows)
    assert 1 - len(missed) / hostile >= MIN_RECALL, missed
    assert len(dropped) / (len(rows) - hostile) <= MAX_BENIGN_DROP, dropped


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_qc_demos_gold_answers_are_all_kept(lang):
    """Answers nobody wrote for this filter: the QC demo's gold verdicts, which name abuse, privacy leaks
    and promises as violation types; every one of them is a correction a user may rightly give."""
    from ark_trainer.app.demo.data import generate_rows, gold_answer
    from ark_trainer.services.loop.safety import correction_problem

    answers = {gold_answer(row) for row in generate_rows(400, 3, "train", False, lang=lang)}
    assert len(answers) > 250
    assert [(a, correction_problem(a)) for a in answers if correction_problem(a)] == []
