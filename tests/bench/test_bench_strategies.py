"""bench/strategies.py without training: its flags, unknown strategy names, and the results page."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "strategies.py"


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


def test_a_run_off_its_budget_is_rerun_at_its_measured_rate_and_finished_runs_are_reused(
    bench, tmp_path, monkeypatch
):
    """GRPO's pilot says 0.2 s a step, its long run takes 0.3: 500 steps miss the 100 s budget by 50%,
    so the run is set aside and rerun at 333 steps; the next seed starts from 0.3 s a step."""
    trained: list[tuple[str, int | None]] = []

    def fake_train(common, out, strategy, steps, evaluate=True):
        if bench._finished(out):
            return out
        trained.append((strategy, steps))
        stage = "grpo"
        seconds = 100.0 if steps is None else steps * (0.2 if steps <= 40 else 0.3)
        out.mkdir(parents=True)
        lines = [{"event": "stage_end", "stage": stage, "seconds": seconds},
                 {"event": "run_end", "status": "finished"}]  # fmt: skip
        (out / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
        (out / "plan.json").write_text(json.dumps({"stages": [{"name": stage, "steps": steps or 450}]}))
        (out / "eval").mkdir()
        (out / "eval" / "grpo.json").write_text(json.dumps({"task_accuracy": 0.5, "n": 300}))
        return out

    monkeypatch.setattr(bench, "_train", fake_train)
    monkeypatch.setattr(
        "ark_trainer.app.demo.data.write_demo_data", lambda folder, seed, n_eval: (folder, folder)
    )
    args = bench.parse_args(["--strategies", "RFT+GRPO", "GRPO"])
    pilots: dict = {}
    for seed in (0, 1):
        (tmp_path / f"s{seed}" / "base_model").mkdir(parents=True)
        (tmp_path / f"s{seed}" / "base_model" / "config.json").write_text("{}")
    found = bench.canonical(args.strategies)
    seed0 = bench.run_seed(0, tmp_path / "s0", found, args, pilots)
    assert trained == [("RFT+GRPO", None), ("GRPO", 40), ("GRPO", 500), ("GRPO", 333)]
    row = seed0["runs"]["GRPO"]
    assert row["train_seconds"] == pytest.approx(99.9) and row["off_budget_run"]["steps"] == 500
    assert (tmp_path / "s0" / "GRPO.off_budget").is_dir()
    trained.clear()
    bench.run_seed(1, tmp_path / "s1", found, args, pilots)
    assert trained == [("RFT+GRPO", None), ("GRPO", 333)]  # no pilot, no rerun: the measured rate fits
    trained.clear()
    fresh: dict = {}  # a restarted bench with the same --out: nothing is retrained
    again = bench.run_seed(0, tmp_path / "s0", found, args, fresh)
    assert trained == [] and again["runs"]["GRPO"]["train_seconds"] == pytest.approx(99.9)
    assert fresh["GRPO"]["seconds_per_step"] == pytest.approx(0.3)  # the reused run's own 333 steps
    assert "rerun: 500 steps first took 150.0 s" in "\n".join(bench.render({**_data(), "seeds": [seed0]}))
