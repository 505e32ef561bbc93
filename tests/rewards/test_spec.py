"""The grader spec (``rewards/spec.py``): grader weights are finite and at most 1e6 (``1.0e+308`` twice made
every total NaN); ``1.0e308``, which YAML 1.1 reads as text, gets the same clear message.
"""

from __future__ import annotations

import pytest

from ark_trainer.errors import UserError
from tests.conftest import refused, train_argv
from tests.rewards.spec_files import grader_spec

TWO = (
    "  - name: a\n    type: string_check\n    reference: x\n    operation: like\n    weight: {w}\n"
    "  - name: b\n    type: string_check\n    reference: y\n    operation: like\n    weight: {w}\n"
)


@pytest.mark.parametrize(
    ("weight", "says"),
    [
        ("1.0e+308", "weight: expected a number in [0, 1e+06], got 1e+308"),
        ("1.0e308", "weight: expected a number in [0, 1e+06], got 1e+308"),  # text to YAML 1.1
        (".inf", "weight: expected a finite number, got inf"),
        (".nan", "weight: expected a finite number, got nan"),
        ("'lots'", "weight: expected an integer or a number, got 'lots'"),
    ],
)
def test_grader_weights_are_finite_and_bounded(assets, tmp_path, capsys, weight, says):
    spec = grader_spec(tmp_path, TWO.format(w=weight))
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert len(lines) == 2 and all(says in line for line in lines), lines
    assert lines[0].startswith(f"error: {spec}:6: weight")


def test_weights_written_as_yaml_text_still_count(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = grader_spec(tmp_path, TWO.format(w="1e3"))  # YAML 1.1 text, 1000 to a user
    assert [g.weight for g in load_graders(spec)] == [1000.0, 1000.0]


def test_multi_weights_and_reward_weights_are_bounded(assets, tmp_path, capsys):
    spec = grader_spec(
        tmp_path,
        "  - name: m\n    type: multi\n    weights: {a: 1.0e+308, b: 1}\n    graders:\n"
        "      a: {type: string_check, reference: x, operation: like}\n"
        "      b: {type: string_check, reference: y, operation: like}\n",
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert "weights: a: expected a number in [0, 1e+06], got 1e+308" in lines[0]
    for bad in ("qc_verdict=1e308", "qc_verdict=nan", "qc_verdict=inf"):
        lines = refused(capsys, train_argv(assets, tmp_path / "out", "--reward_weights", bad))
        assert any("expected name=weight with a weight in [0, 1e+06]" in line for line in lines), lines


def test_a_plan_still_checks_code_graders_for_shape(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "graders:\n  - name: a\n    type: python\n    source: 'def grade(:'\n"
        "  - name: b\n    type: python\n    function: no_colon\n",
        encoding="utf-8",
    )
    with pytest.raises(UserError) as info:
        load_graders(spec, run_code=False)
    assert [m.split(": ")[1] for m in info.value.messages] == ["source", "function"]
