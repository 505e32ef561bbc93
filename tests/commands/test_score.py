"""``ark-trainer score``: a dry run of a grader spec, per-grader distribution, constant-grader warning."""

from __future__ import annotations

import json

import pytest

from ark_trainer.base.fileio import read_jsonl, write_jsonl
from ark_trainer.cli import main
from ark_trainer.rewards.qc import format_answer
from ark_trainer.rewards.scoring import summarise
from tests.conftest import refused, save_tiny_qwen

GOOD = format_answer("辱骂", "非常抱歉给您带来不便，我们会尽快为您处理。")
WRONG = format_answer("无", "不归我管")

SPEC = """\
graders:
  - name: qc_verdict
  - name: apologises
    type: string_check
    reference: "抱歉"
    operation: like
  - name: always_one          # matches any text: constant
    type: regex
    pattern: "."
    weight: 0.5
"""


@pytest.fixture
def files(tmp_path):
    spec = tmp_path / "rewards.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    data = tmp_path / "data.jsonl"
    write_jsonl(
        data,
        [
            {"prompt": "对话一", "label": "辱骂", "completion": GOOD},
            {"prompt": "对话二", "label": "辱骂", "candidates": [GOOD, WRONG]},
            {"prompt": "对话三", "label": "无", "chosen": WRONG, "rejected": GOOD},
            {"prompt": "对话四", "label": "无"},  # nothing to score: skipped and said so
        ],
    )
    return spec, data


def test_score_prints_per_grader_stats_and_flags_the_constant_grader(files, capsys):
    spec, data = files
    assert main(["score", "--reward_config", str(spec), "--data_path", str(data)]) == 0
    out = capsys.readouterr().out
    assert (
        "scored 5 answers to 3 prompts" in out and "1 rows without an answer skipped, first on line 4" in out
    )
    lines = {
        line.split()[0]: line
        for line in out.splitlines()
        if line and not line.startswith(("warning", "scored"))
    }
    assert set(lines) >= {"grader", "qc_verdict", "apologises", "always_one", "total"}
    assert lines["apologises"].split()[1:4] == ["1.00", "5/5", "0.600"]
    assert lines["always_one"].split()[1:7] == ["0.50", "5/5", "1.000", "0.000", "1.000", "1.000"]
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "'always_one'" in warnings[0] and "constant" in warnings[0]


def test_score_json_and_output_file(files, tmp_path, capsys):
    spec, data = files
    scores_file = tmp_path / "scores.jsonl"
    argv = ["score", "--reward_config", str(spec), "--data_path", str(data), "--json"]
    assert main([*argv, "--output_file", str(scores_file)]) == 0
    result = json.loads(capsys.readouterr().out)
    graders = result["graders"]
    assert graders["always_one"]["constant"] is True and graders["apologises"]["constant"] is False
    assert graders["qc_verdict"]["mean"] == pytest.approx((1 + 1 + 0 + 1 + 0) / 5)
    assert sum(graders["apologises"]["histogram"]) == 5 and graders["apologises"]["histogram"][-1] == 3
    assert graders["apologises"]["zero_variance_groups"] == 0 and graders["apologises"]["groups"] == 2
    assert any("always_one" in w for w in result["warnings"])
    records = read_jsonl(scores_file)
    assert [r["line"] for r in records] == [1, 2, 2, 3, 3]
    assert records[0]["scores"]["apologises"] == 1.0 and records[0]["total"] is not None


def test_score_without_answers_or_with_a_bad_spec_is_a_user_error(files, tmp_path, capsys):
    spec, _ = files
    bare = tmp_path / "bare.jsonl"
    write_jsonl(bare, [{"prompt": "q", "label": "无"}])
    assert main(["score", "--reward_config", str(spec), "--data_path", str(bare)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bare}:1: completion: no row holds an answer")
    bad = tmp_path / "bad.yaml"
    bad.write_text("graders:\n  - name: x\n    type: regex\n", encoding="utf-8")
    assert main(["score", "--reward_config", str(bad), "--data_path", str(files[1])]) == 2
    assert capsys.readouterr().err.startswith(f"error: {bad}:2: pattern: missing")


def test_score_generates_with_a_model(tmp_path, capsys):
    model = save_tiny_qwen(tmp_path / "m")
    data = tmp_path / "prompts.jsonl"
    write_jsonl(data, [{"prompt": "你好", "label": "无"}, {"prompt": "hello", "label": "辱骂"}])
    argv = ["score", "--data_path", str(data), "--model_path", str(model), "--num_samples", "3"]
    assert main([*argv, "--max_new_tokens", "6", "--device", "cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reward_config"].endswith("qc.yaml")  # the preset chosen for QC labels
    assert result["graders"]["total"]["n"] == 6 and result["graders"]["total"]["groups"] == 2


def test_summary_flags_flat_groups_and_inapplicable_graders():
    flat = summarise("g", 1.0, [[0.0, 0.0], [1.0, 1.0]])
    assert flat.zero_variance_groups == 2 and "each prompt" in flat.warnings[0]
    assert summarise("n", 1.0, [[None, None]]).warnings[0].startswith("grader 'n' applies to no answer")
    assert summarise("ok", 1.0, [[0.0, 1.0]]).warnings == []


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--reward_timeout", "1e300"], "--reward_timeout: expected a number in [0, 1e+06], got 1e+300"),
        (["--reward_timeout", "nan"], "--reward_timeout: expected a number in [0, 1e+06], got nan"),
        (["--reward_timeout", "-1"], "--reward_timeout: expected a number in [0, 1e+06], got -1.0"),
        (
            ["--temperature", "0", "--num_samples", "4"],
            "--temperature: expected a number > 0 to sample 4 answers",
        ),
        (["--temperature", "-1"], "--temperature: expected a number > 0 to sample 4 answers, got -1.0"),
        (["--temperature", "nan"], "--temperature: expected a number > 0 to sample 4 answers, got nan"),
    ],
)
def test_score_seconds_and_temperature_are_checked(assets, capsys, flags, says):
    argv = ["score", "--data_path", str(assets["train"]), "--model_path", str(assets["model"]), *flags]
    lines = refused(capsys, [*argv, "--device", "cpu"])
    assert len(lines) == 1 and lines[0].startswith(f"error: {says}"), lines


def test_score_counts_have_ranges(assets, capsys):
    base = ["score", "--data_path", str(assets["train"])]
    assert (
        "[1, 256]"
        in refused(capsys, [*base, "--model_path", str(assets["model"]), "--num_samples", "1000000000"])[0]
    )
    assert "[1, 131072]" in refused(capsys, [*base, "--max_new_tokens", "999999999"])[0]
