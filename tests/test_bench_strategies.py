"""bench/strategies.py without training: its flags, unknown strategy names, and the results page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "strategies.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_strategies", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_defaults_and_bad_flags(bench, capsys):
    args = bench.parse_args([])
    assert args.strategies == ["RFT+GRPO", "GRPO", "RFT+DPO", "DPO", "KTO", "RLOO"]
    assert args.seeds == [0, 1, 2] and args.n_eval >= 300
    args = bench.parse_args(["--strategies", "GRPO", "rft grpo", "--seeds", "4", "--budget_s", "30"])
    assert args.strategies == ["GRPO", "rft grpo"] and args.seeds == [4] and args.budget_s == 30
    with pytest.raises(SystemExit) as exc:
        bench.parse_args(["--n_eval", "0"])
    assert exc.value.code == 2 and "--n_eval" in capsys.readouterr().err


def test_names_the_strategy_table_lacks_are_not_available(bench):
    found = bench.canonical(["rft grpo", "GRPO", "NoSuchStrategy", "auto"])
    assert found == {"rft grpo": "RFT+GRPO", "GRPO": "GRPO", "NoSuchStrategy": None, "auto": None}


def _data() -> dict:
    run = {
        "strategy": "GRPO",
        "train_seconds": 100.0,
        "wall_seconds": 110.0,
        "steps": [{"name": "grpo", "steps": 500}],
    }
    return {
        "strategies": ["RFT+GRPO", "GRPO", "NoSuch"],
        "not_available": ["NoSuch"],
        "n_eval": 300,
        "budget_rule": "the first strategy's",
        "label": "measurement",
        "machine": {"cpu": "CPU", "cores": 2, "ram_gib": 8, "gpu": None, "os": "Linux", "python": "3.11",
                    "torch": "t", "transformers": "tr", "trl": "trl", "accelerate": "a", "peft": "p",
                    "vllm": None, "load_average": None, "load_average_at_start": None},  # fmt: skip
        "command": "python bench/strategies.py",
        "seeds": [
            {"seed": s, "budget_seconds": 100.0, "runs": {
                "RFT+GRPO": {**run, "strategy": "RFT+GRPO", "steps": [{"name": "rft", "steps": 150}, {"name": "grpo", "steps": 300}],
                             "metrics": {"task_accuracy": 0.8 + s / 10, "preference_alignment": 0.9, "compliance_rate": 1.0}},
                "GRPO": {**run, "metrics": {"task_accuracy": 0.5, "preference_alignment": 0.6, "compliance_rate": None},
                         "pilot_seconds": 9.0, "seconds_per_step": 0.2, "fixed_seconds": 0.0},
            }}
            for s in (0, 1)
        ],
    }  # fmt: skip


def test_the_table_has_mean_and_std_and_says_what_is_not_available(bench):
    text = "\n".join(bench.render(_data()))
    assert (
        "| RFT+GRPO | 2 | 85.0 ± 7.1 | 90.0 ± 0.0 | 100.0 ± 0.0 | 100.0 ± 0.0 | rft 150+grpo 300, rft 150+grpo 300 |"
        in text
    )
    assert "| GRPO | 2 | 50.0 ± 0.0 | 60.0 ± 0.0 | — |" in text  # no compliance measured: a dash, not 0
    assert "| NoSuch | — | not available in this install |" in text
    assert "| 1 | 100.0 | GRPO | 50.0 | 60.0 | — | 100.0 | 9.0 / 0.2 / 0.0 |" in text
    assert "reference (sets the budget)" in text


def test_render_rebuilds_the_page_from_the_saved_json(bench, tmp_path):
    (tmp_path / "strategies.json").write_text(json.dumps(_data()), encoding="utf-8")
    assert bench.main(["--render", "--results", str(tmp_path)]) == 0
    page = (tmp_path / "strategies.md").read_text(encoding="utf-8")
    assert page.startswith("# Training strategies") and "Machine: CPU, 2 cores" in page
    assert "Command: `python bench/strategies.py`" in page and "not available in this install" in page


def test_one_pilot_calibrates_every_seed_and_unfinished_seeds_are_named(bench):
    calib = {"pilot_steps": 40, "pilot_seconds": 30.0, "fixed_seconds": 10.0, "seconds_per_step": 0.5}
    assert bench.calibrated_steps(calib, budget=210.0) == 400  # (210 - 10) / 0.5
    assert bench.calibrated_steps(calib, budget=20.0) == 40  # never fewer than the pilot's steps
    data = _data()
    data["seeds"][1]["runs"]["GRPO"]["pilot_seed"] = 0
    data["seeds_asked"] = [0, 1, 2]
    text = "\n".join(bench.render(data))
    assert "| 1 | 100.0 | GRPO | 50.0 | 60.0 | — | 100.0 | 9.0 / 0.2 / 0.0 (seed 0's pilot) |" in text
    assert "Seeds asked for but not (yet) finished: 2." in text
