"""The report's "Through OpenClaw" section (``stages/report/parity.py``): it reads the served policy's file only."""

from __future__ import annotations

from ark_trainer.services.openclaw.parity import gap


def test_the_report_section_reads_the_served_policys_file_only(tmp_path):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.stages.report.parity import parity_blocks, parity_files
    from ark_trainer.stages.report.render import Table, to_markdown

    bare = {"n": 2, "task_accuracy": 1.0, "pass_rate": 1.0, "reward_mean": 0.9}
    result = {**bare, "name": "grpo-openclaw", "bare": bare, "gap": gap(bare, bare)}
    write_json(tmp_path / "eval" / "grpo-openclaw.json", result)
    write_json(tmp_path / "eval" / "grpo-openclaw-as-openclaw.json", {**result, "name": "other"})
    assert [r["name"] for r in parity_files(tmp_path)] == ["grpo-openclaw"]
    blocks = parity_blocks(tmp_path)
    assert any(
        isinstance(b, Table) for b in blocks
    ) and "| task_accuracy | 100.0% | 100.0% | +0.0 | untested: per-prompt outcomes missing |" in to_markdown(
        blocks
    )


def test_the_gap_is_paired_with_the_stages_own_answers(tmp_path):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.stages.report.parity import parity_blocks
    from ark_trainer.stages.report.render import to_markdown

    def answers(right: int, n: int) -> list[dict]:
        return [{"completion": "", "reward": float(i < right), "outcomes": {"task_accuracy": float(i < right)}}
                for i in range(n)]  # fmt: skip

    stage = {"name": "grpo", "n": 40, "task_accuracy": 0.75, "answers": answers(30, 40)}
    bare = {"n": 20, "task_accuracy": 1.0}  # --limit 20: the first 20 prompts, all right bare
    through = {**bare, "task_accuracy": 0.5, "answers": answers(10, 20)}  # 10 of them lost through OpenClaw
    write_json(tmp_path / "eval" / "grpo.json", stage)
    write_json(tmp_path / "eval" / "grpo-openclaw.json", {**through, "name": "grpo-openclaw", "bare": bare})
    row = next(
        line for line in to_markdown(parity_blocks(tmp_path)).splitlines() if "| task_accuracy |" in line
    )
    assert row.startswith("| task_accuracy | 100.0% | 50.0% |") and row.endswith(", p = 0.002 |")
    assert "[\u2212" in row


def test_the_table_and_the_report_say_what_became_of_the_system_prompt(tmp_path):
    from ark_trainer.base.fileio import write_json
    from ark_trainer.services.openclaw.parity import table_lines
    from ark_trainer.stages.report.parity import parity_blocks
    from ark_trainer.stages.report.render import to_markdown

    bare = {"n": 2, "task_accuracy": 1.0}
    note = "the rows' system prompt is lost on 2 of 2 rows: served in shape bare with no system prompt"
    result = {**bare, "name": "base-openclaw", "bare": bare, "gap": gap(bare, bare),
              "system_prompt": {"rows": 2, "kept": 0, "note": note}}  # fmt: skip
    assert table_lines(result)[-1] == f"system prompt: {note}"
    write_json(tmp_path / "eval" / "base-openclaw.json", result)
    assert f"System prompt: {note}." in to_markdown(parity_blocks(tmp_path))
