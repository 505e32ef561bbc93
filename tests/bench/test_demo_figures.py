"""bench/demo_figures.py without training: the docs state the figures, and drift is judged by its noise."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "demo_figures.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_demo_figures", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_folder(tmp_path: Path, figures: dict, shift: dict[tuple[str, str], float] | None = None) -> Path:
    """A fake demo run folder whose eval files hold the figures, some moved by ``shift`` (points)."""
    (tmp_path / "eval").mkdir(parents=True)
    for stage, metrics in figures["stages"].items():
        data = {m: v + (shift or {}).get((stage, m), 0.0) / 100 for m, v in metrics.items()}
        (tmp_path / "eval" / f"{stage}.json").write_text(json.dumps({"name": stage, "n": 300, **data}))
    return tmp_path


def test_the_docs_state_every_figure(bench):
    figures = bench.load()
    assert "cpus" not in figures and figures["docs"]  # one set for every CPU
    assert set(figures["stages"]) == {"base", "rft", "grpo"} and figures["measured"]
    assert set(figures["noise"]) == {m for stage in figures["stages"].values() for m in stage}
    assert bench.missing_from_docs(figures) == []
    assert bench.main(["--check-docs"]) == 0


def test_the_kernel_paths_checked_agree_within_the_noise(bench):
    """The set holds for every CPU: the kernel paths tried on one machine gave the same GRPO figure within
    its noise (the base model is shipped, so only RFT and GRPO follow the CPU's kernels)."""
    figures = bench.load()
    paths = {k: v for k, v in figures["kernel_paths"].items() if k != "about"}
    assert len(paths) >= 2
    documented = figures["stages"]["grpo"]["task_accuracy"]
    for path, found in paths.items():
        assert abs(found["grpo_task_accuracy"] - documented) * 100 <= figures["noise"]["task_accuracy"], path


def test_a_figure_the_docs_lack_is_named(bench, tmp_path, capsys):
    figures = bench.load()
    figures["stages"]["grpo"]["task_accuracy"] = 0.713
    assert bench.percent(0.713) == "71.3%" and bench.percent(1.0) == "100%" and bench.percent(0.3) == "30.0%"
    assert bench.missing_from_docs(figures) == [
        f"{doc}: grpo task_accuracy 71.3% not stated" for doc in figures["docs"]
    ]
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    assert bench.main(["--check-docs", "--figures", str(path)]) == 1
    assert "grpo task_accuracy 71.3%" in capsys.readouterr().err


def test_drift_within_noise_passes_and_beyond_it_fails_naming_the_metric(bench, tmp_path, capsys):
    figures = bench.view(bench.load())
    noise = figures["noise"]
    within = {
        ("grpo", "task_accuracy"): -(noise["task_accuracy"] - 0.5),
        ("rft", "preference_alignment"): 2.0,
    }
    out = _run_folder(tmp_path / "within", figures, within)
    assert bench.drifts(figures, bench.read_run(out)) == []
    assert bench.main([str(out)]) == 0

    beyond = {("grpo", "task_accuracy"): -(noise["task_accuracy"] + 1.0), ("base", "compliance_rate"): +10.0}
    out = _run_folder(tmp_path / "beyond", figures, beyond)
    problems = bench.drifts(figures, bench.read_run(out))
    assert [p.split(":")[0] for p in problems] == ["base compliance_rate", "grpo task_accuracy"]
    assert bench.main([str(out)]) == 1
    assert "DRIFT grpo task_accuracy" in capsys.readouterr().err

    (out / "eval" / "rft.json").unlink()
    assert any(
        p.startswith("rft task_accuracy: no figure") for p in bench.drifts(figures, bench.read_run(out))
    )


def test_update_rewrites_the_figures_and_keeps_the_noise(bench, tmp_path, monkeypatch):
    figures = bench.load()
    mine = bench.view(figures)
    out = _run_folder(tmp_path / "run", mine, {("grpo", "task_accuracy"): 10.0})
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    monkeypatch.setattr(bench, "stamp", lambda: "2027-01-01, a test machine")
    assert bench.main(["--update", str(out), "--figures", str(path)]) == 0
    new = json.loads(path.read_text())
    assert new["noise"] == figures["noise"] and new["docs"] == figures["docs"]
    assert new["kernel_paths"] == figures["kernel_paths"]
    assert new["measured"] == "2027-01-01, a test machine" and new["n_eval"] == 300
    assert new["stages"]["grpo"]["task_accuracy"] == pytest.approx(
        mine["stages"]["grpo"]["task_accuracy"] + 0.1
    )
    assert bench.main([str(out), "--figures", str(path)]) == 0
    (out / "eval" / "base.json").unlink()
    assert bench.main(["--update", str(out), "--figures", str(path)]) == 1
    assert json.loads(path.read_text()) == new
