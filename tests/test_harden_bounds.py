"""Every number a user gives is bounded where it is read: seconds, retries, sizes, seeds, ports, formulas.

The first rounds bounded the counts that multiply memory; the same class held more: a timeout of ``1e300`` s
(``threading`` refuses it: every answer skipped with an ``OverflowError``), a judge retrying ``1e12`` times,
``rm train --lora_r 1000000000`` (a 64 GB allocation), ``demo --n_train 1000000000`` (data generated without
end), ``--seed -1`` (a numpy traceback after the data was written), ``deploy --port 99999`` (an
``OverflowError`` traceback), a ``multi`` formula nested 50,000 deep (a ``MemoryError`` or ``RecursionError``
traceback), an MCP server file of any size, and the loop's own options (``--min_improvement nan`` promoted
every round). Each is now one line naming the flag or the file and line, before anything is written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import refused, tiny_qc_assets, train_argv


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    return tiny_qc_assets(tmp_path_factory.mktemp("bounds_assets"))


# --- seconds ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["reward_timeout", "tool_timeout", "stall_timeout", "heartbeat_interval"])
@pytest.mark.parametrize("value", ["1e12", "1e300"])
def test_train_seconds_are_bounded(assets, tmp_path, capsys, flag, value):
    lines = refused(capsys, train_argv(assets, tmp_path / "out", f"--{flag}", value))
    assert len(lines) == 1 and lines[0].startswith(f"error: --{flag}: must be in "), lines
    assert "1e+06]" in lines[0] and not (tmp_path / "out").exists()


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


JUDGE = (
    "graders:\n  - name: judge\n    type: llm_judge\n    model: m\n    base_url: http://127.0.0.1:9/v1\n"
    "    input: [{{role: user, content: 'score {{{{sample.output_text}}}}'}}]\n    range: [0, 10]\n    {extra}\n"
)


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ("timeout: 1e300", "timeout: expected a number in [0.001, 3600], got 1e+300"),
        ("max_retries: 1000000000000", "max_retries: expected a number in [0, 10], got 1000000000000"),
        ("backoff: 1e300", "backoff: expected a number in [0, 600], got 1e+300"),
        ("concurrency: 1000000000", "concurrency: expected a number in [1, 256], got 1000000000"),
        ("max_tokens: 100000000000", "max_tokens: expected a number in [1, 131072], got 100000000000"),
    ],
)
def test_judge_settings_are_bounded(assets, tmp_path, capsys, extra, says):
    spec = tmp_path / "judge.yaml"
    spec.write_text(JUDGE.format(extra=extra), encoding="utf-8")
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert lines == [f"error: {spec}:8: {says}"], lines


def test_a_regex_timeout_is_bounded(assets, tmp_path, capsys):
    spec = tmp_path / "regex.yaml"
    spec.write_text(
        "graders:\n  - name: r\n    type: regex\n    pattern: 'a+'\n    timeout: 1e300\n", encoding="utf-8"
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert lines == [f"error: {spec}:5: timeout: expected a number in [0.001, 3600], got 1e+300"], lines


# --- sizes, seeds, ports -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--lora_r", "1000000000"], "--lora_r: must be in [0, 4096], got 1000000000"),
        (["--learning_rate", "nan"], "--learning_rate: expected a number > 0, got nan"),
        (["--learning_rate", "inf"], "--learning_rate: expected a number > 0, got inf"),
        (["--num_train_epochs", "nan"], "--num_train_epochs: expected a number > 0 (or give --max_steps)"),
        (["--lora_alpha", "1000000000000"], "--lora_alpha: must be in [1, 2147483647], got 1000000000000"),
    ],
)
def test_rm_train_sizes_and_rates_are_bounded(assets, tmp_path, capsys, flags, says):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "q", "chosen": "a", "rejected": "b"}) + "\n", encoding="utf-8")
    argv = ["rm", "train", "--model_path", str(assets["model"]), "--data_path", str(pairs)]
    lines = refused(capsys, [*argv, "--output_dir", str(tmp_path / "rm"), "--device", "cpu", *flags])
    assert lines == [f"error: {says}"], lines
    assert not (tmp_path / "rm").exists()


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--n_train", "1000000000"], "--n_train: must be in [1, 100000], got 1000000000"),
        (["--n_eval", "1000000000"], "--n_eval: must be in [1, 100000], got 1000000000"),
        (["--seed", "-1"], "--seed: must be in [0, 4294967295], got -1"),
        (["--seed", "99999999999"], "--seed: must be in [0, 4294967295], got 99999999999"),
        (
            ["--max_train_steps", "99999999999"],
            "--max_train_steps: must be in [1, 2147483647], got 99999999999",
        ),
    ],
)
def test_demo_sizes_and_seed_are_bounded(tmp_path, capsys, flags, says):
    lines = refused(capsys, ["demo", "--output_dir", str(tmp_path / "demo"), *flags])
    assert lines == [f"error: {says}"], lines
    assert not (tmp_path / "demo").exists()


@pytest.mark.parametrize("port", ["99999", "-1", "65536"])
def test_a_port_outside_the_tcp_range_is_one_line(assets, tmp_path, capsys, port):
    run = tmp_path / "run"
    run.mkdir()
    (run / "model").symlink_to(assets["model"])
    says = f"error: --port: expected 1..65535 (or leave it out to have a free one picked), got {port}"
    assert refused(capsys, ["deploy", str(run), "--port", port]) == [says]
    assert not (run / "deploy").exists()
    loop = tmp_path / "loop"
    assert refused(
        capsys, ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"]), "--port", port]
    ) == [says]
    assert not loop.exists()


# --- the loop's own options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--min_improvement", "nan"], "--min_improvement: expected a number in [0, 1e+06], got nan"),
        (["--max_regression", "nan"], "--max_regression: expected a number in [0, 1e+06], got nan"),
        (["--max_regression", "-0.1"], "--max_regression: expected a number in [0, 1e+06], got -0.1"),
        (["--poll", "-1"], "--poll: expected a number in (0, 3600], got -1.0"),
        (["--poll", "0"], "--poll: expected a number in (0, 3600], got 0.0"),
        (["--every", "inf"], "--every: expected a number in [0, 1e+06], got inf"),
        (["--min_new_turns", "0"], "--min_new_turns: expected an integer in [1, 2147483647], got 0"),
        (["--heldout_size", "-3"], "--heldout_size: expected an integer in [1, 2147483647], got -3"),
        (["--eval_newest", "-1"], "--eval_newest: expected an integer in [0, 2147483647], got -1"),
        (["--max_rounds", "-2"], "--max_rounds: expected an integer in [0, 2147483647], got -2"),
    ],
)
def test_loop_options_are_checked_before_anything_runs(assets, tmp_path, capsys, flags, says):
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"]), *flags]
    assert refused(capsys, argv) == [f"error: {says}"]
    assert not loop.exists()


def test_a_gate_that_cannot_pass_is_refused_when_the_loop_starts(assets, tmp_path, capsys):
    loop = tmp_path / "loop"
    argv = ["loop", "--output_dir", str(loop), "--model_path", str(assets["model"])]
    argv += ["--eval_dataset", str(assets["train"]), "--min_improvement", "1"]
    lines = refused(capsys, argv)
    assert len(lines) == 1 and lines[0].startswith("error: --min_improvement 1: task_accuracy is a share"), (
        lines
    )
    assert "no round could ever pass the gate" in lines[0]
    assert not loop.exists()


def test_nan_settings_can_never_promote_a_round():
    from ark_trainer.loop.gate import decide

    current = {"task_accuracy": 0.5, "reward_mean": 0.9}
    same, better_but_drifted = dict(current), {"task_accuracy": 0.6, "reward_mean": 0.1}
    assert not decide(current, same, "task_accuracy").promote
    assert not decide(current, better_but_drifted, "task_accuracy").promote
    assert not decide(current, same, "task_accuracy", min_improvement=float("nan")).promote
    assert not decide(current, better_but_drifted, "task_accuracy", max_regression=float("nan")).promote


# --- formulas and MCP files ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "formula",
    ["-" * 50_000 + "a", "a+" * 30_000 + "a", "a**" * 2_000 + "a", "min(a, " * 120 + "a" + ")" * 120],
)
def test_a_formula_too_long_or_too_deep_is_one_line_naming_the_grader(assets, tmp_path, capsys, formula):
    spec = tmp_path / "multi.yaml"
    spec.write_text(
        "graders:\n  - name: m\n    type: multi\n    graders:\n"
        "      a: {type: string_check, reference: x, operation: like}\n"
        f"    calculate_output: '{formula}'\n",
        encoding="utf-8",
    )
    lines = refused(capsys, ["score", "--reward_config", str(spec), "--data_path", str(assets["train"])])
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}:6: calculate_output: "), lines
    assert "too long" in lines[0] or "nests" in lines[0], lines


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        (
            "big.yaml",
            "mcp_servers:\n" + "# pad\n" * 200_000,
            "bytes; a YAML config is at most 1000000 bytes here",
        ),
        ("deep.yaml", "mcp_servers: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than 64 levels"),
        ("deep.json", '{"mcp_servers": ' + "[" * 20_000 + "]" * 20_000 + "}", "nested too deeply"),
        (
            "big.json",
            '{"mcp_servers": {}, "pad": "' + "x" * 2_000_000 + '"}',
            "bytes; an MCP server file is at most",
        ),
    ],
)
def test_an_mcp_server_file_is_bounded(assets, tmp_path, capsys, name, text, says):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    lines = refused(capsys, train_argv(assets, tmp_path / "out", "--env", f"mcp:{path}"))
    assert len(lines) == 1 and says in lines[0], lines
    assert not (tmp_path / "out").exists()
