"""bench/own_data.py without training: the command it runs carries no tuning flag, and its figures are read
from a run folder as the benchmark reports them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.fixtures import own_data

BENCH = Path(__file__).resolve().parents[2] / "bench" / "own_data.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_own_data", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_dry_run_writes_the_data_and_the_bare_command(bench, tmp_path, capsys):
    assert bench.main(["--model_path", "m.gguf", "--work", str(tmp_path), "--dry_run"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed[printed.index("train") + 1 :] == [
        "--model_path", "m.gguf", "--data_path", str(tmp_path / "own" / "train.jsonl"),
        "--eval_dataset", str(tmp_path / "own" / "heldout.jsonl"), "--output_dir", str(tmp_path / "run"),
    ]  # fmt: skip
    lines = (tmp_path / "own" / "train.jsonl").read_text().splitlines()
    assert len(lines) == 240 and json.loads(lines[0]) == own_data.own_rows()[0][0]
    assert not (tmp_path / "run").exists()


def _run(tmp_path: Path, answers: dict[str, list[str]], shipped: str) -> Path:
    """A run folder: the test split of 10 held-out rows, each stage's answers, the shipped stage."""
    test = own_data.own_rows()[1][:10]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in test))
    (tmp_path / "eval").mkdir()
    for name, said in answers.items():
        right = sum(a.lower().rstrip(".") == r["reference"] for a, r in zip(said, test, strict=True))
        record = {
            "task_accuracy": right / 10,
            "compliance_rate": None,
            "answers": [{"completion": a} for a in said],
        }
        (tmp_path / "eval" / f"{name}.json").write_text(json.dumps(record))
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "ark_final_model.json").write_text(json.dumps({"stage": shipped}))
    return tmp_path


def test_the_figures_compare_the_shipped_model_with_the_majority_label(bench, tmp_path):
    test = own_data.own_rows()[1][:10]
    right = [r["reference"] for r in test]
    rft = [own_data.COMPLIANT] * 10
    folder = _run(
        tmp_path, {"base": ["I can't tell."] * 10, "rft": rft, "grpo": [*right[:9], "Compliant."]}, "rft"
    )
    f = bench.figures(folder)
    majority = sum(r == own_data.COMPLIANT for r in right) / 10
    assert f["majority_label"] == own_data.COMPLIANT and f["majority_share"] == majority
    assert f["shipped"] == "rft" and f["task_accuracy"]["base"] == 0.0
    assert f["points_over_majority"] == 0.0  # always answering the majority label is no gain
    assert f["labels_answered"][own_data.COMPLIANT] == 10 and not f["every_label_answered"]
    lines = "\n".join(bench.summary_lines(f, 12.5))
    assert "Ships: rft; 0.0 points" in lines and "every label: no" in lines and "12.5 min" in lines


def test_every_label_answered_counts_spellings_of_a_label(bench):
    said = [*own_data.LABELS[:4], "  Violation: Disclosed another line. "]
    assert all(bench._labels_answered(said).values())
    assert bench._labels_answered(["violation"]) == dict.fromkeys(own_data.LABELS, 0)
