"""Tests for the synthetic QC data set (ark_trainer.app.demo.data): determinism, proportions, splits, answers.

Run: PYTHONPATH=src python -m pytest tests/demo/test_data.py -q
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ark_trainer.app.demo import data
from ark_trainer.rewards import qc


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def train_rows():
    return data.generate_rows(600, seed=0, split="train", with_candidates=True)


def _dialogue(row: dict) -> str:
    return row["question"].split("\n", 1)[1]


def test_same_seed_same_rows_other_seed_other_rows():
    first = data.generate_rows(50, seed=3, split="train", with_candidates=True)
    assert first == data.generate_rows(50, seed=3, split="train", with_candidates=True)
    assert first != data.generate_rows(50, seed=4, split="train", with_candidates=True)


def test_row_shape(train_rows):
    for row in train_rows:
        assert row["id"].startswith("qc-train-")
        instruction, *lines = row["question"].split("\n")
        assert instruction == data.INSTRUCTION
        assert 2 <= len(lines) <= 5 and all(line[:3] in ("顾客：", "客服：") for line in lines)
        assert row["label"] in qc.VIOLATION_TYPES
        assert row["scenario"] in data.SCENARIOS
        low, high = data.DIALOGUE_CHARS
        assert low <= len(_dialogue(row)) <= high


def test_proportions_follow_type_weights(train_rows):
    counts = Counter(row["label"] for row in train_rows)
    assert set(counts) == set(qc.VIOLATION_TYPES)
    assert sum(data.TYPE_WEIGHTS.values()) == pytest.approx(1.0)
    for label, weight in data.TYPE_WEIGHTS.items():
        assert counts[label] / len(train_rows) == pytest.approx(weight, abs=0.02)


def test_questions_are_distinct_and_varied(train_rows):
    questions = [row["question"] for row in train_rows]
    assert len(set(questions)) == len(questions)
    assert len({row["scenario"] for row in train_rows}) >= 6
    agent_lines = {line for q in questions for line in q.split("\n") if line.startswith("客服：")}
    assert len(agent_lines) > 200


def test_clean_dialogues_apologise_and_no_apology_ones_do_not(train_rows):
    for row in train_rows:
        agent = " ".join(line for line in row["question"].split("\n") if line.startswith("客服："))
        apologises = any(p in agent for p in qc.APOLOGY_PATTERNS)
        if row["label"] == qc.CLEAN:
            assert apologises
        elif row["label"] == "未致歉":
            assert not apologises


def test_candidates_only_on_some_train_rows(train_rows):
    share = sum("candidates" in row for row in train_rows) / len(train_rows)
    assert share == pytest.approx(data.CANDIDATE_SHARE, abs=0.06)
    eval_rows = data.generate_rows(100, seed=1, split="eval", with_candidates=False)
    assert not any("candidates" in row for row in eval_rows)


def test_candidates_parse_and_are_noisy(train_rows):
    answers, labels = [], []
    for row in train_rows:
        for answer in row.get("candidates", []):
            assert qc.parse_answer(answer).well_formed, answer
            answers.append(answer)
            labels.append(row["label"])
    assert {len(row["candidates"]) for row in train_rows if "candidates" in row} == {data.N_CANDIDATES}
    right_type = sum(s == 1.0 for s in qc.qc_verdict(None, answers, label=labels)) / len(answers)
    compliant = sum(s == 1.0 for s in qc.qc_compliance(None, answers)) / len(answers)
    assert right_type == pytest.approx(data.CANDIDATE_TYPE_ACCURACY, abs=0.07)
    assert compliant == pytest.approx(data.CANDIDATE_COMPLIANT_SHARE, abs=0.07)


def test_gold_answers_score_full_marks(train_rows):
    golds = [data.gold_answer(row) for row in train_rows]
    labels = [row["label"] for row in train_rows]
    assert qc.qc_verdict(None, golds, label=labels) == [1.0] * len(golds)
    assert qc.qc_compliance(None, golds) == [1.0] * len(golds)
    assert qc.qc_format(None, golds) == [1.0] * len(golds)
    replies = [qc.parse_answer(g).reply for g in golds]
    assert all(10 <= len(r) <= 30 for r in replies)
    assert len(set(replies)) > 30
    assert data.gold_answer(train_rows[0]) == golds[0]


@pytest.mark.parametrize("kind", data.FLAW_KINDS)
def test_flawed_replies_break_a_rule(kind):
    import random

    rng = random.Random(kind)
    for scenario in data.SCENARIOS:
        reply = data.flawed_reply(rng, scenario, "顾客：我电话13812345678。", kind=kind)
        assert qc.compliance_breaches(reply), reply


def test_write_demo_data_splits_without_overlap(tmp_path):
    train_path, eval_path = data.write_demo_data(tmp_path / "d", n_train=200, n_eval=80, seed=5)
    train = [json.loads(line) for line in train_path.read_text(encoding="utf-8").splitlines()]
    eval_rows = [json.loads(line) for line in eval_path.read_text(encoding="utf-8").splitlines()]
    assert (len(train), len(eval_rows)) == (200, 80)
    assert not {r["question"] for r in train} & {r["question"] for r in eval_rows}
    assert {r["label"] for r in eval_rows} == set(qc.VIOLATION_TYPES)
    assert not any("candidates" in r for r in eval_rows)
    assert "顾客" in train_path.read_text(encoding="utf-8")  # written as UTF-8, not \\u escapes


def test_exclude_is_respected():
    first = data.generate_rows(30, seed=0, split="eval", with_candidates=False)
    taken = {row["question"] for row in first[:10]}
    again = data.generate_rows(30, seed=0, split="eval", with_candidates=False, exclude=taken)
    assert not taken & {row["question"] for row in again}


# --- the English data (lang="en") ---

CUE_BREACH = {
    "辱骂": "abuse",
    "泄露隐私": "personal_data",
    "违规承诺": "unauthorised_promise",
    "推诿": "deflection",
}


@pytest.fixture(scope="module")
def english_rows():
    return data.generate_rows(600, seed=0, split="train", with_candidates=True, lang="en")


def _agent_text(row: dict, prefix: str = "Agent: ") -> str:
    return " ".join(line[len(prefix) :] for line in row["question"].split("\n") if line.startswith(prefix))


def test_english_rows_are_deterministic_with_the_chinese_labels():
    first = data.generate_rows(50, seed=3, split="train", with_candidates=True, lang="en")
    assert first == data.generate_rows(50, seed=3, split="train", with_candidates=True, lang="en")
    assert first != data.generate_rows(50, seed=4, split="train", with_candidates=True, lang="en")
    chinese = data.generate_rows(50, seed=3, split="train", with_candidates=True)
    assert [r["label"] for r in first] == [r["label"] for r in chinese]  # one label plan per seed


def test_english_row_shape(english_rows):
    from ark_trainer.app.demo import data_en

    for row in english_rows:
        assert row["id"].startswith("qc-train-") and row["lang"] == "en" and data.row_lang(row) == "en"
        instruction, *lines = row["question"].split("\n")
        assert instruction == data_en.ENGLISH.instruction
        assert 2 <= len(lines) <= 5 and all(line.startswith(("Customer: ", "Agent: ")) for line in lines)
        assert not any(line.split(": ", 1)[1][0].islower() for line in lines)  # sentences start capitalised
        assert row["label"] in qc.VIOLATION_TYPES  # the canonical type, as in the Chinese rows
        assert row["scenario"] in data_en.SCENARIOS
        low, high = data_en.ENGLISH.dialogue_chars
        assert low <= len(_dialogue(row)) <= high
        assert not qc._CJK.search(json.dumps(row, ensure_ascii=False).replace(row["label"], ""))
    assert "lang" not in data.generate_rows(5, seed=0, split="train", with_candidates=False)[0]


def test_english_tables_have_the_chinese_structure():
    from ark_trainer.app.demo import data_en

    chinese, english = data.CHINESE, data_en.ENGLISH
    assert len(english.scenarios) == len(chinese.scenarios)
    for zh, en in zip(chinese.scenarios.values(), english.scenarios.values(), strict=True):
        for part in ("complaints", "follow_ups", "helps", "fixes"):
            assert len(getattr(en, part)) == len(getattr(zh, part)), part
    assert {k: len(v) for k, v in english.cues.items()} == {k: len(v) for k, v in chinese.cues.items()}
    assert {k: len(v) for k, v in english.flawed_replies.items()} == {
        k: len(v) for k, v in chinese.flawed_replies.items()
    }
    assert set(english.type_apologies) == set(chinese.type_apologies)


def test_english_proportions_follow_type_weights(english_rows):
    counts = Counter(row["label"] for row in english_rows)
    assert set(counts) == set(qc.VIOLATION_TYPES)
    for label, weight in data.TYPE_WEIGHTS.items():
        assert counts[label] / len(english_rows) == pytest.approx(weight, abs=0.02)
    assert len({row["question"] for row in english_rows}) == len(english_rows)
    assert len({row["scenario"] for row in english_rows}) == 6


def test_english_cues_break_their_rule_and_clean_dialogues_break_none(english_rows):
    # the graders' compliance rules, applied to the agent's lines of the dialogue
    for row in english_rows:
        breaches = set(qc.compliance_breaches(_agent_text(row))) - {"missing_apology"}
        want = {CUE_BREACH[row["label"]]} if row["label"] in CUE_BREACH else set()
        assert breaches == want, (row["label"], row["question"])
        apologises = "missing_apology" not in qc.compliance_breaches(_agent_text(row))
        if row["label"] == qc.CLEAN:
            assert apologises
        elif row["label"] == "未致歉":
            assert not apologises


def test_every_english_cue_breaks_its_rule():
    import random

    from ark_trainer.app.demo import data_en

    slots = data._slots(random.Random(0), data_en.ENGLISH)
    for label, cues in data_en.CUES.items():
        for cue in cues:
            assert CUE_BREACH[label] in qc.compliance_breaches(cue.format(**slots)), cue


def test_english_gold_answers_score_as_the_chinese_ones(english_rows, train_rows):
    for rows in (english_rows, train_rows):
        golds = [data.gold_answer(row) for row in rows]
        labels = [row["label"] for row in rows]
        assert qc.qc_verdict(None, golds, label=labels) == [1.0] * len(golds)
        assert qc.qc_compliance(None, golds) == [1.0] * len(golds)
        assert qc.qc_format(None, golds) == [1.0] * len(golds)
        assert qc.qc_satisfaction(None, golds) == [1.0] * len(golds)
    golds = [data.gold_answer(row) for row in english_rows]
    assert all(
        g.startswith(("Verdict: compliant\nType: none\n", "Verdict: violation\nType: ")) for g in golds
    )
    replies = [qc.parse_answer(g).reply or "" for g in golds]
    assert all(8 <= len(r.split()) <= 25 and r[0].isupper() and r.endswith(".") for r in replies)
    assert len(set(replies)) > 30


def _candidate_scores(rows: list[dict]) -> dict[str, float]:
    answers = [a for row in rows for a in row.get("candidates", [])]
    labels = [row["label"] for row in rows for _ in row.get("candidates", [])]
    scores = {
        "verdict": qc.qc_verdict(None, answers, label=labels),
        "compliance": qc.qc_compliance(None, answers),
        "satisfaction": qc.qc_satisfaction(None, answers),
        "format": qc.qc_format(None, answers),
    }
    return {name: sum(s) / len(s) for name, s in scores.items()}


def test_english_candidates_score_like_the_chinese_ones(english_rows, train_rows):
    for row in english_rows:
        for answer in row.get("candidates", []):
            assert qc.parse_answer(answer).well_formed, answer
            assert answer.startswith("Verdict: ")
    share = sum("candidates" in row for row in english_rows) / len(english_rows)
    assert share == pytest.approx(data.CANDIDATE_SHARE, abs=0.06)
    english, chinese = _candidate_scores(english_rows), _candidate_scores(train_rows)
    assert english["format"] == chinese["format"] == 1.0
    for name in ("verdict", "compliance", "satisfaction"):
        assert english[name] == pytest.approx(chinese[name], abs=0.05), name


@pytest.mark.parametrize(
    ("kind", "breach"),
    [
        ("no_apology", "missing_apology"),
        ("phone", "personal_data"),
        ("deflection", "deflection"),
        ("promise", "unauthorised_promise"),
    ],
)
def test_english_flawed_replies_break_their_rule(kind, breach):
    import random

    from ark_trainer.app.demo import data_en

    rng = random.Random(kind)
    for scenario in data_en.SCENARIOS:
        for _ in range(10):
            reply = data.flawed_reply(
                rng, scenario, "Customer: my number is 13812345678.", kind=kind, lang="en"
            )
            assert breach in qc.compliance_breaches(reply), reply
            assert not reply[0].islower()  # a sentence's start (or a figure: 100%)


def test_write_demo_data_in_english(tmp_path):
    train_path, eval_path = data.write_demo_data(tmp_path / "d", n_train=60, n_eval=12, seed=5, lang="en")
    train = [json.loads(line) for line in train_path.read_text(encoding="utf-8").splitlines()]
    eval_rows = [json.loads(line) for line in eval_path.read_text(encoding="utf-8").splitlines()]
    assert (len(train), len(eval_rows)) == (60, 12)
    assert {r["lang"] for r in train + eval_rows} == {"en"}
    assert {r["label"] for r in eval_rows} == set(qc.VIOLATION_TYPES)
    assert not {r["question"] for r in train} & {r["question"] for r in eval_rows}


def test_unknown_language_is_a_user_error():
    from ark_trainer.base.errors import UserError

    with pytest.raises(UserError, match="--lang: 'fr'"):
        data.generate_rows(3, seed=0, split="train", with_candidates=False, lang="fr")


# --- demo --lang ---


def test_demo_lang_en_writes_english_data_and_makes_the_toy_from_it(tmp_path, monkeypatch, capsys):
    import ark_trainer.core.config
    import ark_trainer.services.train
    from ark_trainer.app.demo import model
    from ark_trainer.cli import main

    built, trained = [], []
    monkeypatch.setattr(model, "build_base_model", lambda base, rows, **kw: built.append(rows))
    monkeypatch.setattr(ark_trainer.core.config, "resolve_config", lambda cls, flags: flags)
    monkeypatch.setattr(
        ark_trainer.services.train, "run_train", lambda flags: trained.append(flags) or tmp_path
    )
    out = tmp_path / "demo"
    assert main(["demo", "--lang", "en", "--output_dir", str(out), "--n_train", "12", "--n_eval", "6"]) == 0
    rows = [
        json.loads(line) for line in (out / "data" / "train.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert len(rows) == 12 and all(r["lang"] == "en" for r in rows)
    assert built == [rows]  # the toy is made from the English rows (its warm-up follows their language)
    assert trained[0]["max_completion_length"] == 48
    assert trained[0]["data_path"] == str(out / "data" / "train.jsonl")


def test_demo_lang_is_checked(tmp_path):
    from tests.conftest import run_cli

    for args, message in (
        (("--lang", "fr"), "argument --lang: invalid choice: 'fr'"),
        (("--lang", "en", "--task", "agent"), "--lang: only with --task qc"),
    ):
        done = run_cli("demo", *args, "--output_dir", str(tmp_path / "o"), cwd=tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("kind", data.FLAW_KINDS)
def test_flawed_replies_score_the_same_in_both_languages(kind):
    import random

    means = []
    for lang in data.LANGS:
        rng = random.Random(kind)
        book = data.phrasebook(lang)
        replies = [
            data.flawed_reply(rng, s, kind=kind, lang=lang) for s in sorted(book.scenarios) for _ in range(50)
        ]
        answers = [qc.format_answer(qc.CLEAN, r, lang=lang) for r in replies]
        means.append([sum(fn(None, answers)) / len(answers) for fn in (qc.qc_compliance, qc.qc_satisfaction)])
    assert means[0] == pytest.approx(means[1])
