"""Does the reward grade this data at all (``rewards/applies.py``)? A reward that grades nothing is refused
before anything is written; a judge applies without a request.
"""

from __future__ import annotations

from ark_trainer.cli import main
from ark_trainer.rewards.composite import CompositeReward
from tests.rewards.attacks import closed_port, judge_yaml, one_error_line, train_flags, unlabelled_data


def test_unlabelled_data_with_the_default_qc_reward_is_refused_before_anything_is_written(
    model, tmp_path, capsys
):
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, None)) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "grades nothing" in line and "'qc_verdict'" in line and "qc preset" in line
    assert "llm_judge" in line and "--rm_model_path" in line and "label-free rules" in line
    assert not out.exists()


def test_a_spec_whose_graders_all_need_a_reference_is_refused(model, tmp_path, capsys):
    spec = tmp_path / "ref.yaml"
    spec.write_text(
        "graders:\n  - name: exact\n    type: string_check\n    reference: '{{item.reference}}'\n    operation: eq\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    assert main(train_flags(model, unlabelled_data(tmp_path), out, spec)) == 2
    assert "'exact' is not applicable to any of the 8 rows" in one_error_line(capsys.readouterr().err)
    assert not out.exists()


def test_a_judge_applies_without_a_request(tmp_path):
    from ark_trainer.data.loader import load_jsonl
    from ark_trainer.rewards.applies import check_applies

    reward = CompositeReward.from_spec(judge_yaml(tmp_path, f"http://127.0.0.1:{closed_port()}/v1"))
    assert check_applies(reward, load_jsonl(unlabelled_data(tmp_path)), "--data_path") == ["judge"]
