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
    assert set(figures["cpus"]) == {"AMD EPYC", "Intel Xeon"} and figures["docs"]
    for one in figures["cpus"].values():
        assert set(one["stages"]) == {"base", "rft", "grpo"} and one["measured"]
        assert set(figures["noise"]) == {m for stage in one["stages"].values() for m in stage}
    assert bench.missing_from_docs(figures) == []
    assert bench.main(["--check-docs"]) == 0


def test_each_cpu_is_judged_by_its_own_set(bench):
    figures = bench.load()
    assert bench.cpu_set(figures, "AMD EPYC 9R14 96-Core Processor") == "AMD EPYC"
    assert bench.cpu_set(figures, "Intel Xeon Processor") == "Intel Xeon"
    amd, intel = bench.view(figures, "AMD EPYC 9R14"), bench.view(figures, "Intel Xeon Processor")
    assert amd["stages"] == figures["cpus"]["AMD EPYC"]["stages"] != intel["stages"]
    other = bench.view(figures, "Ampere Altra")
    assert bench.drifts(other, {}) == ["no figures for Ampere Altra yet: --update OUT records this machine's"]


def test_a_figure_the_docs_lack_is_named(bench, tmp_path, capsys):
    figures = bench.load()
    figures["cpus"]["AMD EPYC"]["stages"]["grpo"]["task_accuracy"] = 0.713
    assert bench.percent(0.713) == "71.3%" and bench.percent(1.0) == "100%" and bench.percent(0.3) == "30.0%"
    assert bench.missing_from_docs(figures) == [
        f"{doc}: grpo task_accuracy 71.3% not stated" for doc in figures["docs"]
    ]
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    assert bench.main(["--check-docs", "--figures", str(path)]) == 1
    assert "grpo task_accuracy 71.3%" in capsys.readouterr().err


def test_drift_within_noise_passes_and_beyond_it_fails_naming_the_metric(bench, tmp_path, capsys):
    figures = bench.view(bench.load())  # this machine's set
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


def test_update_rewrites_this_cpus_figures_and_keeps_the_noise(bench, tmp_path, monkeypatch):
    figures = bench.load()
    monkeypatch.setattr(bench, "cpu_model", lambda: "Intel Xeon Processor")
    mine = bench.view(figures)
    out = _run_folder(tmp_path / "run", mine, {("grpo", "task_accuracy"): 10.0})
    path = tmp_path / "figures.json"
    path.write_text(json.dumps(figures))
    monkeypatch.setattr(bench, "stamp", lambda: "2027-01-01, a test machine")
    assert bench.main(["--update", str(out), "--figures", str(path)]) == 0
    new = json.loads(path.read_text())
    assert new["noise"] == figures["noise"] and new["docs"] == figures["docs"]
    assert new["cpus"]["AMD EPYC"] == figures["cpus"]["AMD EPYC"]  # another CPU's set stays
    intel = new["cpus"]["Intel Xeon"]
    assert intel["measured"] == "2027-01-01, a test machine" and intel["n_eval"] == 300
    assert intel["stages"]["grpo"]["task_accuracy"] == pytest.approx(
        mine["stages"]["grpo"]["task_accuracy"] + 0.1
    )
    assert bench.main([str(out), "--figures", str(path)]) == 0
    (out / "eval" / "base.json").unlink()
    assert bench.main(["--update", str(out), "--figures", str(path)]) == 1
    assert json.loads(path.read_text()) == new
