"""``--strategy RLOO`` (``stages/rloo/stage.py``): a real TRL run on a tiny model, on the GRPO rewards."""

from __future__ import annotations

from ark_trainer.base.fileio import read_json, read_jsonl
from ark_trainer.cli import main
from tests.stages.short_runs import changed, flags


def test_rloo_trains_on_the_grpo_rewards(assets, tmp_path):
    out = tmp_path / "run"
    assert main(flags(assets, out, "RLOO")) == 0
    assert [s["name"] for s in read_json(out / "plan.json")["stages"]] == ["rloo"]
    metrics = [
        e for e in read_jsonl(out / "events.jsonl") if e["event"] == "metrics" and e.get("stage") == "rloo"
    ]
    assert metrics and all("reward" in m for m in metrics)
    assert any(
        k.startswith("rewards/qc_verdict") for m in metrics for k in m
    )  # each grader logged, as in GRPO
    assert changed(assets["model"], out / "model") and (out / "eval" / "rloo.json").is_file()
    assert (out / "plots" / "rloo_reward.png").is_file()
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Training health (RLOO)" in md and "| reward |" in md and "Training health (GRPO)" not in md
