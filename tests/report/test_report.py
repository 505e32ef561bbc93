"""Tests for ark_trainer.stages.report: a fake run directory in tmp_path, in the schema the pipeline writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.stages.report import build_report

CONFIG = """\
strategy: RFT+GRPO
task_name: 客服质检_agent_training
model_path: /models/base
data_path: /data/qc.jsonl
output_dir: OUT
max_train_steps: 30
rft_steps: 10
batch_size: 8
grpo_learning_rate: 5.0e-06
num_generations: 4
beta: 0.04
"""


def _eval(model: str, reward: float, rates: tuple[float | None, ...], qc: float) -> dict:
    pass_rate, accuracy, compliance, preference = rates
    return {
        "model": model,
        "n": 50,
        "reward_mean": reward,
        "pass_rate": pass_rate,
        "task_accuracy": accuracy,
        "compliance_rate": compliance,
        "preference_alignment": preference,
        "components": {"qc_verdict": qc},
        "examples": [
            {
                "prompt": f"对话 {i}: 客服说 | 你是笨蛋 <b>",
                "completion": f"违规: 辱骂 ```{i}```",
                "reward": 0.5,
            }
            for i in range(5)
        ],
    }


def _events(zero_std: float, finished: bool = True) -> list[dict]:
    t0 = 1_700_000_000.0
    events = [{"event": "run_start", "task_name": "客服质检_agent_training", "strategy": "RFT+GRPO"}]
    for stage, seconds in (("eval_base", 5.0), ("rft_sampling", 30.0), ("rft", 75.0), ("grpo", 3725.0)):
        events += [
            {"event": "stage_start", "stage": stage},
            {"event": "stage_end", "stage": stage, "seconds": seconds},
        ]
    events.append(
        {
            "event": "rft_selection",
            "n_prompts": 100,
            "n_scored": 400,
            "n_selected": 80,
            "n_pairs": 60,
            "mean_best": 0.9,
            "mean_all": 0.4,
            "threshold": 0.7,
        }
    )
    for step in range(1, 11):
        events.append(
            {"event": "metrics", "stage": "rft", "step": step, "loss": 2.0 / step, "learning_rate": 1e-5}
        )
        events.append(
            {
                "event": "metrics",
                "stage": "grpo",
                "step": step,
                "loss": 0.01 * step,
                "reward": 0.3 + 0.03 * step,
                "reward_std": 0.1,
                "kl": 0.001 * step,
                "entropy": 1.5,
                "frac_reward_zero_std": zero_std,
                "clip_ratio/region_mean": 0.0,
                "rewards/qc_verdict/mean": 0.5,
            }
        )
    events.append({"event": "warning", "message": "eval set has only 50 samples"})
    if finished:
        events.append({"event": "run_end", "status": "finished", "seconds": 3900.0})
    for i, event in enumerate(events):
        event.update(ts=t0 + 10 * i, time="2023-11-14T22:13:20")
    return events


def make_run(root: Path, zero_std: float = 0.2, finished: bool = True) -> Path:
    """A complete RFT+GRPO run directory with every file the report reads."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "run.yaml").write_text(CONFIG, encoding="utf-8")
    plan = {"strategy": "RFT+GRPO", "requested": "RFT+GRPO", "reason": "QC needs preference alignment"}
    stages = [
        {"name": "rft", "steps": 10, "learning_rate": 1e-5, "last": False},
        {"name": "grpo", "steps": 20, "learning_rate": 1e-6, "last": True},
    ]
    (root / "plan.json").write_text(json.dumps({**plan, "stages": stages}), encoding="utf-8")
    (root / "data").mkdir()
    split = {
        "n": 200,
        "with_candidates": 150,
        "labels": {"辱骂": 40, "合规": 160},
        "prompt_chars_mean": 321.5,
    }
    held_out = {**split, "n": 50, "with_candidates": 30, "labels": {"辱骂": 10, "合规": 40}}
    stats = {"train": split, "eval": held_out, "eval_source": "held-out split of data_path"}
    (root / "data" / "stats.json").write_text(json.dumps(stats, ensure_ascii=False), encoding="utf-8")
    (root / "eval").mkdir()
    evals = {
        "base": _eval("/models/base", 0.200, (0.40, 0.50, 0.60, 0.44), 0.30),
        "rft": _eval("OUT/rft", 0.350, (0.55, 0.60, 0.70, 0.62), 0.45),
        "grpo": _eval("OUT/model", 0.500, (0.70, 0.75, 0.80, 0.66), 0.60),
    }
    for name, data in evals.items():
        (root / "eval" / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    lines = [json.dumps(e, ensure_ascii=False) for e in _events(zero_std, finished)]
    (root / "events.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(tmp_path / "home" / ".openclaw"))


def test_full_run_report(tmp_path: Path) -> None:
    run = make_run(tmp_path / "out")
    md_path, html_path = build_report(run)
    assert (md_path, html_path) == (run / "report.md", run / "report.html")
    md, page = md_path.read_text(encoding="utf-8"), html_path.read_text(encoding="utf-8")
    assert "客服质检_agent_training" in md and "finished" in md and "1h 05m 00s" in md
    assert "QC needs preference alignment" in md and "RFT steps: 10 / GRPO steps: 20" in md
    assert "held-out split of data_path" in md and "| 辱骂 | 40 (20.0%) | 10 (20.0%) |" in md
    # base, RFT and GRPO values with absolute and relative change vs base
    assert "| preference_alignment | 44.0% | 62.0% (+18.0 pts, +40.9%) | 66.0% (+22.0 pts, +50.0%) |" in md
    assert "| reward_mean | 0.200 | 0.350 (+0.150, +75.0%) | 0.500 (+0.300, +150.0%) |" in md
    assert "components.qc_verdict" in md
    assert "Preference alignment, RFT vs base: 44.0% → 62.0% (+18.0 pts, +40.9%)" in md
    assert "Task accuracy, final (GRPO) vs base: 50.0% → 75.0% (+25.0 pts, +50.0%)" in md
    assert "| n_selected | 80 |" in md and "| grpo | 1h 02m 05s |" in md
    assert "eval set has only 50 samples" in md and "WARNING" not in md
    assert "max_train_steps: 30" in md and "<details><summary>run.yaml</summary>" in md
    assert md.count("Example ") == 3  # up to 3 examples of the final model
    # the HTML has the same numbers, escaped, and is self-contained apart from the run's own plots
    assert "62.0% (+18.0 pts, +40.9%)" in page and "0.500 (+0.300, +150.0%)" in page
    assert "&lt;b&gt;" in page and "<b>" not in page
    assert "<details><summary>run.yaml</summary>" in page and "http" not in page
    for name in ("rft_loss", "grpo_reward", "grpo_kl", "grpo_loss", "grpo_zero_std"):
        png = run / "plots" / f"{name}.png"
        assert png.read_bytes().startswith(b"\x89PNG"), name
        assert f"plots/{name}.png" in md and f'<img src="plots/{name}.png"' in page
    assert not [p for p in run.rglob("*.tmp")]  # atomic writes leave no temp files behind


def test_rebuild_is_idempotent(tmp_path: Path) -> None:
    run = make_run(tmp_path / "out")
    first = build_report(run)[0].read_text(encoding="utf-8")
    assert build_report(run)[0].read_text(encoding="utf-8") == first


def test_zero_variance_warning(tmp_path: Path) -> None:
    md_path, html_path = build_report(make_run(tmp_path / "out", zero_std=0.95))
    md = md_path.read_text(encoding="utf-8")
    assert "WARNING: on average 95.0% of GRPO groups had zero reward variance" in md
    assert 'class="alert"' in html_path.read_text(encoding="utf-8")


def test_running_run(tmp_path: Path) -> None:
    md = build_report(make_run(tmp_path / "out", finished=False))[0].read_text(encoding="utf-8")
    assert "running" in md and "so far" in md


def test_partial_run_only_base_eval(tmp_path: Path) -> None:
    run = tmp_path / "out"
    (run / "eval").mkdir(parents=True)
    (run / "run.yaml").write_text("strategy: GRPO\ntask_name: quick\n", encoding="utf-8")
    base = _eval("/models/base", 0.2, (0.4, 0.5, None, None), 0.3)
    (run / "eval" / "base.json").write_text(json.dumps(base), encoding="utf-8")
    md_path, html_path = build_report(run)
    md = md_path.read_text(encoding="utf-8")
    assert "quick" in md and "GRPO" in md and "| pass_rate | 40.0% |" in md
    assert "| compliance_rate |" not in md and "RFT vs base: not run" in md  # no model measured it
    assert "Not run" in md and "No training metrics logged yet." in md
    assert html_path.is_file() and not (run / "plots").exists()


def test_broken_files_do_not_crash(tmp_path: Path) -> None:
    run = make_run(tmp_path / "out")
    (run / "eval" / "rft.json").write_text("{not json", encoding="utf-8")
    with (run / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"event": "metrics", "stage": "grpo", "ste')  # a line still being written
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "eval/rft.json: unreadable" in md and "1 unreadable line(s) skipped" in md
    assert "| metric | base (n=50) | GRPO (n=50) |" in md


def test_not_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a run directory .no run.yaml.; pass the --output_dir"):
        build_report(tmp_path)


def test_health_says_why_kl_is_missing_when_beta_is_zero(tmp_path):
    from ark_trainer.stages.report import build_report

    (tmp_path / "run.yaml").write_text("beta: 0.0\n", encoding="utf-8")
    event = {"ts": 1.0, "time": "t", "event": "metrics", "stage": "grpo", "step": 1, "reward": 0.5}
    (tmp_path / "events.jsonl").write_text(json.dumps(event) + "\n", encoding="utf-8")
    md, _ = build_report(tmp_path)
    assert "KL not measured" in md.read_text(encoding="utf-8")


def test_the_automatic_choices_have_a_section_with_their_reasons(tmp_path):
    run = make_run(tmp_path / "out")
    assert "Automatic choices" not in build_report(run)[0].read_text(encoding="utf-8")  # none recorded
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    plan["auto_defaults"] = {
        "model": "a real model: 134.5M parameters (model.safetensors)",
        "max_completion_length": {
            "value": 96,
            "reason": "96: 95% of the data's 2000 answers take at most 73",
        },
        "mixed_precision": {"value": "bf16", "reason": "bf16 (autocast over fp32 weights): native bf16"},
    }
    (run / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "## Automatic choices" in md and "Chosen for a real model: 134.5M parameters" in md
    assert "| --max_completion_length | 96 | 96: 95% of the data's 2000 answers take at most 73 |" in md
    assert "| --mixed_precision | bf16 | bf16 (autocast over fp32 weights): native bf16 |" in md


def test_a_demo_toy_run_says_so_and_the_metrics_are_defined(tmp_path):
    run = make_run(tmp_path / "out")
    md = build_report(run)[0].read_text(encoding="utf-8")
    assert "demo toy" not in md  # a model that is not the demo's
    assert (
        "- compliance_rate: the share of answers whose suggested reply keeps all five compliance rules" in md
    )
    assert "- components.NAME: grader NAME's mean score" in md and "a mean, not a share" in md
    plan = json.loads((run / "plan.json").read_text(encoding="utf-8"))
    plan["auto_defaults"] = {"model": "ark-trainer's demo toy model (ARK_DEMO_MODEL.md)", "demo_toy": True}
    (run / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    md = build_report(run)[0].read_text(encoding="utf-8")
    title, note = md.split("\n\n")[:2]
    assert title.startswith("# ark-trainer report") and note.startswith(
        "The base model is ark-trainer's demo toy"
    )
    assert "synthetic" in note and "not what a real model reaches" in note
