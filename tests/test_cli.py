"""The command line (``cli.py``). User mistakes through the real command line: exit code 2, one line per
problem, no traceback, nothing written; ``plan --json`` into a closed pipe ends quietly; ``status`` prints
what ``heartbeat.json`` says as text, never as terminal commands.

Each test runs ``python -m ark_trainer ...`` in a subprocess with HOME in a temp dir (``test_bad_flag_values``
runs one flag so, and the others through ``main()`` in this process: the same checks, seconds sooner). Every
check here happens before training, so the tiny model below is never loaded into a trainer.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli as cli
from tests.conftest import save_tiny_qwen
from tests.tiny_runs import SRC

PROBLEM_RE = re.compile(r"^error: (?P<path>.+):(?P<line>\d+): (?P<field>[^:]+): (?P<message>.+)$")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny but real Qwen2ForCausalLM + tokenizer folder (safetensors), enough to pass --model_path checks."""
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny_model"))


def assert_user_error(result: subprocess.CompletedProcess) -> list[str]:
    """Exit 2, no traceback, at least one stderr line; returns the stderr lines."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout
    lines = result.stderr.strip().splitlines()
    assert lines
    return lines


def write_jsonl(path: Path, lines: list) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def good_data(tmp_path: Path) -> Path:
    rows = [{"question": f"对话{i}", "label": "辱骂" if i % 2 else "无"} for i in range(10)]
    return write_jsonl(tmp_path / "good.jsonl", rows)


def train_args(model: Path | str, data: Path | str, out: Path | str, *extra: str) -> list[str]:
    return [
        "train",
        "--strategy",
        "RFT+GRPO",
        "--model_path",
        str(model),
        "--data_path",
        str(data),
        "--output_dir",
        str(out),
        "--max_train_steps",
        "3",
        "--batch_size",
        "4",
        "--num_generations",
        "2",
        *extra,
    ]


@pytest.mark.slow
def test_malformed_data_file(tmp_path, model_dir):
    data = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"prompt": "fine"},
            "{broken",
            {"text": "no prompt here"},
            {"prompt": "x", "candidates": "not a list"},
            {"messages": [{"role": "user", "content": "q"}, {"role": "robot", "content": "a"}]},
        ],
    )
    out = tmp_path / "out"
    result = cli(*train_args(model_dir, data, out, "--log_dir", str(tmp_path / "logs")), cwd=tmp_path)
    lines = assert_user_error(result)
    found = []
    for line in lines:
        match = PROBLEM_RE.match(line)
        assert match, f"not 'error: path:line: field: message': {line!r}"
        assert match["path"] == str(data)
        found.append((int(match["line"]), match["field"]))
    assert found == [(2, "json"), (3, "prompt"), (4, "candidates"), (5, "messages[1].role")]
    assert not out.exists(), "a refused run writes nothing"
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_malformed_eval_dataset(tmp_path, model_dir):
    data = good_data(tmp_path)
    bad_eval = write_jsonl(tmp_path / "eval.jsonl", [{"prompt": ""}, {"prompt": "ok"}, "[1]"])
    out = tmp_path / "out"
    lines = assert_user_error(
        cli(*train_args(model_dir, data, out, "--eval_dataset", str(bad_eval)), cwd=tmp_path)
    )
    assert [PROBLEM_RE.match(line)["line"] for line in lines] == ["1", "3"]
    assert not out.exists()


@pytest.mark.slow
def test_non_utf8_data_file(tmp_path, model_dir):
    data = tmp_path / "gbk.jsonl"
    data.write_bytes(json.dumps({"prompt": "问题"}, ensure_ascii=False).encode("gbk") + b"\n")
    lines = assert_user_error(cli(*train_args(model_dir, data, tmp_path / "out"), cwd=tmp_path))
    assert len(lines) == 1 and lines[0].startswith(f"error: {data}:1: ") and "UTF-8" in lines[0]


@pytest.mark.slow
def test_missing_data_file(tmp_path, model_dir):
    lines = assert_user_error(
        cli(*train_args(model_dir, tmp_path / "nope.jsonl", tmp_path / "out"), cwd=tmp_path)
    )
    assert len(lines) == 1 and "--data_path" in lines[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_missing_model_path_folder(tmp_path):
    data = good_data(tmp_path)
    out = tmp_path / "out"
    lines = assert_user_error(cli(*train_args(tmp_path / "no_model", data, out), cwd=tmp_path))
    assert len(lines) == 1
    assert lines[0].startswith("error: --model_path: ") and "no_model" in lines[0]
    assert not out.exists()


@pytest.mark.slow
def test_model_folder_with_pickle_only(tmp_path):
    model = tmp_path / "pickle_model"
    model.mkdir()
    (model / "config.json").write_text("{}", encoding="utf-8")
    (model / "pytorch_model.bin").write_bytes(b"")
    lines = assert_user_error(cli(*train_args(model, good_data(tmp_path), tmp_path / "out"), cwd=tmp_path))
    assert len(lines) == 1 and "--model_path" in lines[0] and "safetensors" in lines[0]


@pytest.mark.slow
def test_missing_reward_model_folder(tmp_path, model_dir):
    out = tmp_path / "out"
    args = train_args(model_dir, good_data(tmp_path), out, "--rm_model_path", str(tmp_path / "no_rm"))
    lines = assert_user_error(cli(*args, cwd=tmp_path))
    assert len(lines) == 1 and lines[0].startswith("error: --rm_model_path: ")
    assert not out.exists()


@pytest.mark.slow
def test_bad_reward_config(tmp_path, model_dir):
    spec = tmp_path / "rewards.yaml"
    spec.write_text(
        "rewards:\n  - name: qc_verdict\n  - name: no_such_reward\n    weight: 1\n", encoding="utf-8"
    )
    out = tmp_path / "out"
    lines = assert_user_error(
        cli(*train_args(model_dir, good_data(tmp_path), out, "--reward_config", str(spec)), cwd=tmp_path)
    )
    assert len(lines) == 1 and lines[0].startswith(f"error: {spec}:3: ")
    assert not out.exists()


def in_process(capfd, monkeypatch, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """What ``cli`` gives, from ``main()`` in this process: the same checks, without a child that imports torch
    and transformers again (~5-10 s each); their noise on stderr is the real process's test to catch."""
    from ark_trainer.cli import main

    monkeypatch.chdir(cwd)
    capfd.readouterr()
    code = main(list(args))
    out, err = capfd.readouterr()
    return subprocess.CompletedProcess(["ark_trainer", *args], code, out, err)


@pytest.mark.parametrize(
    ("flags", "flag", "real"),
    [
        (["--batch_size", "0"], "--batch_size", True),  # through the real process; the others through main()
        (["--fp16", "maybe"], "--fp16", False),
        (["--max_train_steps", "abc"], "--max_train_steps", False),
        (["--strategy", "PPO"], "--strategy", False),
        (["--strategy", "RLOO", "--num_generations", "3"], "--num_generations", False),  # RLOO batches groups
    ],
)
def test_bad_flag_values(tmp_path, model_dir, capfd, monkeypatch, flags, flag, real):
    out = tmp_path / "out"  # real model and data: the flag is the only problem (all are reported at once)
    args = train_args(model_dir, good_data(tmp_path), out, *flags)
    lines = assert_user_error(
        cli(*args, cwd=tmp_path) if real else in_process(capfd, monkeypatch, *args, cwd=tmp_path)
    )
    assert len(lines) == 1 and lines[0].startswith(f"error: {flag}")
    assert not out.exists()


def test_missing_required_flags(tmp_path):
    lines = assert_user_error(cli("train", cwd=tmp_path))
    assert {line.split(":")[1].strip() for line in lines} == {"--model_path", "--data_path", "--output_dir"}


def test_unknown_flag(tmp_path):
    result = cli(*train_args("M", "D.jsonl", tmp_path / "out", "--batch_sise", "4"), cwd=tmp_path)
    lines = assert_user_error(result)
    assert len(lines) == 1 and "--batch_sise" in lines[0]


def test_unknown_command(tmp_path):
    assert_user_error(cli("trian", cwd=tmp_path))


@pytest.mark.slow
def test_train_into_previous_run_folder(tmp_path, model_dir):
    out = tmp_path / "out"
    out.mkdir()
    run_yaml = out / "run.yaml"
    run_yaml.write_text("task_name: earlier\n", encoding="utf-8")
    before = sorted(p.name for p in out.iterdir())
    lines = assert_user_error(cli(*train_args(model_dir, good_data(tmp_path), out), cwd=tmp_path))
    assert len(lines) == 1 and "--output_dir" in lines[0] and "--overwrite_output_dir" in lines[0]
    assert run_yaml.read_text(encoding="utf-8") == "task_name: earlier\n"
    assert sorted(p.name for p in out.iterdir()) == before


def test_config_file_with_unknown_key(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("batch_size: 8\nlearning_rate: 1e-5\n", encoding="utf-8")
    lines = assert_user_error(cli("train", "--config", str(cfg), cwd=tmp_path))
    assert lines == [f"error: {cfg}: learning_rate: unknown key; known keys are the train flags (see --help)"]


def test_report_on_non_run_folder(tmp_path):
    folder = tmp_path / "not_a_run"
    folder.mkdir()
    lines = assert_user_error(cli("report", str(folder), cwd=tmp_path))
    assert len(lines) == 1 and str(folder) in lines[0]
    assert list(folder.iterdir()) == []


def test_status_without_heartbeat(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    lines = assert_user_error(cli("status", str(folder), cwd=tmp_path))
    assert len(lines) == 1 and "heartbeat" in lines[0]


def test_status_on_missing_folder(tmp_path):
    lines = assert_user_error(cli("status", str(tmp_path / "nope"), cwd=tmp_path))
    assert len(lines) == 1


def test_help_exits_zero(tmp_path):
    result = cli("train", "--help", cwd=tmp_path)
    assert result.returncode == 0
    for flag in ("--strategy", "--rft_steps", "--grpo_learning_rate", "--rm_model_path", "--auto_heartbeat"):
        assert flag in result.stdout


def test_plan_json_into_a_closed_pipe_ends_quietly(assets, tmp_path):
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ark_trainer", "plan", "RFT+GRPO 100 steps", "--model_path", "m", "--data_path", "d.jsonl", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path,
    )  # fmt: skip
    proc.stdout.close()  # the reader (`head`) is gone before the first byte is written
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
    assert proc.returncode == 141


ESCAPES = {
    "stage": "\x1b]0;pwned\x07\x1b[2J",
    "detail": "batch\r\x1b[31mFAILED",
    "updated_at": "\u202enoitceles",
    "pid_text": "\x9b31m",
}


@pytest.mark.parametrize("field", list(ESCAPES))
def test_escapes_in_the_heartbeat_are_shown_escaped(tmp_path, capsys, field):
    from ark_trainer.cli import main

    beat = {"state": "finished", "stage": "rft", "step": 1, "total": 2, "pid": os.getpid(),
            "updated_at": "now", "metrics": {"loss\x1b[1m": 0.5, "note": "\x1b[5mblink"}}  # fmt: skip
    beat["pid" if field == "pid_text" else field] = ESCAPES[field]
    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    main(["status", str(tmp_path)])  # a pid that is text is refused: the line shows it escaped too
    out = "".join(capsys.readouterr())
    assert not any(c in out for c in "\x1b\x07\r\x9b\u202e"), repr(out)
    assert "\\x1b" in out or "\\u202e" in out or "\\x9b" in out, out


@pytest.mark.parametrize("beat", [[1, 2], {"state": "running", "pid": "x", "updated_ts": "y"}, "text"])
def test_a_heartbeat_that_is_not_ours_is_one_line(tmp_path, capsys, beat):
    from ark_trainer.cli import main

    (tmp_path / "heartbeat.json").write_text(json.dumps(beat))
    code = main(["status", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "heartbeat" in err, err
