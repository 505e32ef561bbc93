"""The own-data fixture (``tests/fixtures/own_data.py``): its shape, and that ``train`` reads its class-valued
``reference`` column as labels: balanced in GRPO's steps, scored exactly, and reported as a task accuracy
without the QC-only compliance rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.run_options import RunOptions
from ark_trainer.core.auto_defaults import ModelFacts
from ark_trainer.data.loader import load_jsonl
from ark_trainer.rewards.generic import reference_match
from ark_trainer.stages.grpo.auto import data_labels, grpo_prompts, label_column
from ark_trainer.stages.grpo.options import GRPOOptions
from ark_trainer.stages.grpo.stage import label_balanced
from ark_trainer.stages.registry import config_class
from tests.conftest import run_cli, save_tiny_qwen
from tests.fixtures import own_data

REAL = ModelFacts(135_000_000, False, "a real model")


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> tuple[Path, Path]:
    return own_data.write(tmp_path_factory.mktemp("own_data"))


def test_the_set_has_the_promised_shape():
    train, heldout = own_data.own_rows()
    assert (len(train), len(heldout)) == (240, 60)
    assert own_data.own_rows() == (train, heldout)  # the same rows on every call (a fixed seed)
    assert own_data.own_rows(seed=1) != (train, heldout)
    prompts = [json.dumps(r["prompt"]) for r in train + heldout]
    assert len(set(prompts)) == 300  # no prompt repeats within or across the files
    for row in train + heldout:
        system, user = row["prompt"]
        assert (system["role"], user["role"]) == ("system", "user")
        assert system["content"] == own_data.SYSTEM_PROMPT and "Customer (" in user["content"]
        assert (system["content"] + user["content"]).isascii()  # English
        assert row["reference"] in own_data.LABELS
        assert len(row["candidates"]) == 3 and len(set(row["candidates"])) == 3
        assert row["reference"] in row["candidates"]
    for rows in (train, heldout):
        assert {r["reference"] for r in rows} == set(own_data.LABELS)
    assert len(own_data.LABELS) >= 5
    label, share = own_data.majority_share(heldout)
    assert label == own_data.COMPLIANT and share == pytest.approx(0.3)
    # the labels' place in the answers does not give them away: each is a candidate on rows of other labels
    for label in own_data.LABELS:
        assert any(label in r["candidates"] and r["reference"] != label for r in train)


def test_the_files_load_and_the_reference_column_is_the_labels(written):
    train_path, heldout_path = written
    rows, held = load_jsonl(train_path), load_jsonl(heldout_path)
    assert (len(rows), len(held)) == (240, 60)
    assert label_column(rows) == "reference"
    assert sorted(data_labels(rows)) == sorted(own_data.LABELS)
    cfg = config_class()(model_path="m", data_path="d", output_dir="o", max_completion_length=32)
    chosen = grpo_prompts(cfg.options(RunOptions), cfg.options(GRPOOptions), rows, REAL)
    assert chosen.value == 5 and "class-valued reference" in chosen.reason
    ordered, balanced = label_balanced(rows, seed=0)
    assert balanced
    window = [r["reference"] for r in ordered[:10]]  # ten prompts: 3 compliant, the others about twice each
    assert 2 <= window.count(own_data.COMPLIANT) <= 4 and len(set(window)) == 5


def test_an_answer_is_scored_as_a_label():
    """Exactly one label scores 1 on each row; no label holds another, so a wrong label never earns the
    'contains' half credit."""
    for label in own_data.LABELS:
        others = [o for o in own_data.LABELS if o != label]
        scores = reference_match(None, [label, *others], reference=[label] * len(own_data.LABELS))
        assert scores == [1.0] + [0.0] * len(others)
    assert reference_match(None, ["Compliant"], reference=[own_data.COMPLIANT]) == [1.0]


def test_train_takes_the_set_as_it_is(written, tmp_path):
    """``train`` with no tuning flags but a short run on a tiny model: the reference grader, a task accuracy
    on the test split, no compliance rate (the QC reply rules are not this task's)."""
    train_path, heldout_path = written
    exchanges = [r["prompt"][1]["content"] for r in own_data.own_rows()[0][:40]]
    texts = [own_data.SYSTEM_PROMPT, *own_data.LABELS, *exchanges]
    model = save_tiny_qwen(tmp_path / "model", texts=texts, max_position_embeddings=2048)
    settings = json.loads((model / "tokenizer_config.json").read_text())  # 300 tokens: English runs long
    (model / "tokenizer_config.json").write_text(json.dumps({**settings, "model_max_length": 2048}))
    small = tmp_path / "small.jsonl"  # 30 training rows keep the tiny run short
    small.write_text("".join(train_path.read_text().splitlines(keepends=True)[:30]))
    out = tmp_path / "run"
    done = run_cli(
        "train", "--model_path", str(model), "--data_path", str(small), "--eval_dataset", str(heldout_path),
        "--output_dir", str(out), "--device", "cpu", "--max_train_steps", "2", "--max_eval_samples", "6",
        cwd=tmp_path, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    plan = json.loads((out / "plan.json").read_text())
    assert list(plan["rewards"]["graders"]) == ["reference_match"]
    base = json.loads((out / "eval" / "base.json").read_text())
    assert base["task_accuracy"] is not None and base["compliance_rate"] is None
