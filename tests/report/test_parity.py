"""The report's "Through OpenClaw" section (``report/parity.py``): it reads the served policy's file only."""

from __future__ import annotations

from ark_trainer.openclaw.parity import gap


def test_the_report_section_reads_the_served_policys_file_only(tmp_path):
    from ark_trainer.fileio import write_json
    from ark_trainer.report.parity import parity_blocks, parity_files
    from ark_trainer.report.render import Table, to_markdown

    bare = {"n": 2, "task_accuracy": 1.0, "pass_rate": 1.0, "reward_mean": 0.9}
    result = {**bare, "name": "grpo-openclaw", "bare": bare, "gap": gap(bare, bare)}
    write_json(tmp_path / "eval" / "grpo-openclaw.json", result)
    write_json(tmp_path / "eval" / "grpo-openclaw-as-openclaw.json", {**result, "name": "other"})
    assert [r["name"] for r in parity_files(tmp_path)] == ["grpo-openclaw"]
    blocks = parity_blocks(tmp_path)
    assert any(
        isinstance(b, Table) for b in blocks
    ) and "| task_accuracy | 100.0% | 100.0% | +0.0 |" in to_markdown(blocks)
