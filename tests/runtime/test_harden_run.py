"""The run side under bad input: flags, inputs in one pass, the run lock, signals and status, resume, NL output folders.

Refusals are checked through the real ``train`` command (exit 2, one ``error:`` line per problem, no
traceback, nothing written); the lock, signals and resume cases run real training processes on a tiny
model and kill or signal them for real.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.config import field_types
from ark_trainer.fileio import read_jsonl
from ark_trainer.runtime.resume import MARKER
from tests.conftest import refused, save_tiny_qwen, tiny_qc_assets

SRC = str(Path(__file__).resolve().parents[2] / "src")
NUMERIC = sorted(n for n, kind in field_types().items() if kind in (int, float))


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    return tiny_qc_assets(tmp_path_factory.mktemp("harden_assets"))


def base(a: dict, out: Path) -> list[str]:
    return [
        "train",
        "--model_path",
        str(a["model"]),
        "--data_path",
        str(a["train"]),
        "--output_dir",
        str(out),
    ]


def train_flags(a: dict, out: Path, steps: int = 4, **extra) -> list[str]:
    flags = {
        "strategy": "GRPO", "model_path": a["model"], "data_path": a["train"], "output_dir": out,
        "max_train_steps": steps, "batch_size": 4, "num_generations": 2, "max_completion_length": 6,
        "grpo_learning_rate": 1e-2, "logging_steps": 1, "save_steps": 2, "save_total_limit": 2,
        "eval_auto": False, "device": "cpu", "heartbeat_interval": 1, "seed": 7, "min_free_disk_gb": 0,
    }  # fmt: skip
    flags.update(extra)
    return [x for k, v in flags.items() for x in (f"--{k}", str(v))]


def _ctrl_c_as_in_a_terminal() -> None:
    """A suite started in the background (``cmd &`` in a script, nohup) inherits SIGINT ignored, and so
    would the run; the test is about a user's Ctrl-C, so the run gets SIGINT's default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child(args: list[str], fault: str = "", stage: str = "", **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(ARK_FAULT=fault, ARK_FAULT_STAGE=stage, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "ark_trainer", *args],
        env=env,
        text=True,
        preexec_fn=_ctrl_c_as_in_a_terminal,
        **kw,
    )


def tree(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")}


# --- 10: every numeric flag, finite and in range ---
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
def test_every_numeric_flag_refuses_non_finite_values(assets, tmp_path, capsys, value):
    out = tmp_path / "run"
    for name in NUMERIC:
        lines = refused(capsys, [*base(assets, out), f"--{name}={value}"])
        assert any(
            line.startswith(f"error: --{name}: ") and "not a finite number" in line for line in lines
        ), (
            name,
            lines,
        )
    assert not out.exists()


def _outside(name: str) -> list[str]:
    """Values just outside the flag's range, below and above."""
    from ark_trainer.config import range_of

    rng, kind = range_of(name), field_types()[name]
    values = []
    if rng.lo is not None:
        values.append(rng.lo if rng.lo_open else rng.lo - (1 if kind is int else 0.5))
    if rng.hi is not None:
        values.append(rng.hi if rng.hi_open else rng.hi + (1 if kind is int else 0.5))
    return [str(v) for v in values]


def test_every_numeric_flag_refuses_values_out_of_its_range(assets, tmp_path, capsys):
    out = tmp_path / "run"
    checked = 0
    for name in NUMERIC:
        for value in _outside(name):
            lines = refused(capsys, [*base(assets, out), f"--{name}={value}"])
            mine = [line for line in lines if line.startswith(f"error: --{name}: ")]
            assert len(mine) == 1, (name, value, lines)
            checked += 1
    assert checked > len(NUMERIC)  # more values than flags: nearly every flag has a bound, many both
    assert not out.exists()


@pytest.mark.parametrize(
    "flag,value,says",
    [
        ("max_train_steps", "1e999", "--max_train_steps: '1e999' is not a finite number; must be in [1, "),
        (
            "grpo_learning_rate",
            "nan",
            "--grpo_learning_rate: 'nan' is not a finite number; must be in (0, 1]",
        ),
        ("save_total_limit", "-3", "--save_total_limit: must be in [0, "),
        ("pass_threshold", "nan", "--pass_threshold: 'nan' is not a finite number"),
        ("rm_weight", "-5", "--rm_weight: must be in [0, 1e+06], got -5.0"),
    ],
)
def test_the_reviews_examples_are_one_line_each(assets, tmp_path, capsys, flag, value, says):
    lines = refused(capsys, [*base(assets, tmp_path / "run"), f"--{flag}", value])
    assert lines == [f"error: {says}" + lines[0][len(says) + 7 :]]


def test_a_yaml_config_with_nan_is_refused_too(assets, tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("beta: .nan\nmax_train_steps: 1e999\n")
    lines = refused(capsys, [*base(assets, tmp_path / "run"), "--config", str(cfg)])
    assert any(line.endswith("beta: nan is not a finite number; must be ≥ 0") for line in lines), lines
    assert any("max_train_steps: '1e999' is not a finite number" in line for line in lines), lines


# --- 15: every input problem in one pass ---
def test_flags_model_and_data_problems_are_reported_together(assets, tmp_path, capsys):
    bad_data = tmp_path / "bad.jsonl"
    bad_data.write_text('{"question": "ok"}\nnot json\n', encoding="utf-8")
    argv = [
        "train", "--model_path", str(tmp_path / "no_model"), "--data_path", str(bad_data),
        "--output_dir", str(tmp_path / "run"), "--max_train_steps", "1e999", "--rm_weight", "-5",
    ]  # fmt: skip
    lines = refused(capsys, argv)
    text = "\n".join(lines)
    assert "--max_train_steps" in text and "--rm_weight" in text
    assert "--model_path: no such folder" in text
    assert f"{bad_data}:2" in text
    assert not (tmp_path / "run").exists()


def test_paths_from_a_config_file_are_checked_with_its_bad_values(tmp_path, capsys):
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"model_path: {tmp_path / 'gone'}\ndata_path: {tmp_path / 'gone.jsonl'}\nbeta: -1\n")
    text = "\n".join(refused(capsys, ["train", "--config", str(cfg), "--output_dir", str(tmp_path / "r")]))
    assert "--beta: must be ≥ 0" in text and "--model_path: no such folder" in text and "--data_path:" in text


def test_model_and_data_problems_are_reported_together_with_valid_flags(assets, tmp_path, capsys):
    bad_data = tmp_path / "bad.jsonl"
    bad_data.write_text("not json\n", encoding="utf-8")
    argv = [
        "train",
        "--model_path",
        str(tmp_path),
        "--data_path",
        str(bad_data),
        "--output_dir",
        str(tmp_path / "r"),
    ]
    text = "\n".join(refused(capsys, argv))
    assert "--model_path:" in text and f"{bad_data}:1" in text


# --- 10: output folder, remote code ---
def test_output_dir_that_is_a_file_is_refused_and_left_alone(assets, tmp_path, capsys):
    target = tmp_path / "out.txt"
    target.write_text("mine")
    lines = refused(capsys, base(assets, target))
    assert any("--output_dir:" in line and "is a file" in line for line in lines)
    assert target.read_text() == "mine"
    lines = refused(capsys, base(assets, target / "run"))
    assert any("--output_dir:" in line and "is a file" in line for line in lines)


def test_output_dir_on_a_read_only_mount_is_refused(assets, tmp_path, capsys):
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mnt)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        lines = refused(capsys, base(assets, mnt / "run"))
        assert any(line.startswith("error: --output_dir: cannot write in") for line in lines), lines
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_model_that_needs_remote_code_is_refused_before_anything_is_written(tmp_path, capsys, assets):
    model = save_tiny_qwen(tmp_path / "remote")
    config = json.loads((model / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}
    (model / "config.json").write_text(json.dumps(config))
    capsys.readouterr()
    out = tmp_path / "run"
    argv = [
        "train",
        "--model_path",
        str(model),
        "--data_path",
        str(assets["train"]),
        "--output_dir",
        str(out),
    ]
    lines = refused(capsys, argv)
    assert (
        len(lines) == 1 and "needs its own Python code" in lines[0] and "--trust_remote_code True" in lines[0]
    )
    assert not out.exists()


# --- 12: output folders derived from a request ---
@pytest.mark.parametrize(
    "name",
    ["..", ".", "...", ".hidden", "a..b", "x" * 300, "-rf", "客服质检_v2", "名字.txt", "\u202e", "con\x00"],
)
def test_a_task_name_becomes_one_safe_folder_name(name):
    from ark_trainer.nl.plan import safe_folder_name

    safe = safe_folder_name(name)
    assert safe and "/" not in safe and "\\" not in safe and ".." not in safe
    assert not safe.startswith((".", "-")) and len(safe) <= 80 and safe.isprintable()
    if name.isidentifier() and len(name) <= 80:
        assert safe == name  # unicode letters are kept as they are


@pytest.mark.parametrize("task", ["..", "...", ".ssh", "..-x", "a" * 300])
def test_run_never_writes_outside_runs_from_a_parsed_task_name(assets, tmp_path, monkeypatch, task):
    from ark_trainer.nl.plan import plan_request

    monkeypatch.chdir(tmp_path)
    plan = plan_request(f"RFT+GRPO, task name {task}, model {assets['model']}, data {assets['train']}")
    out = Path(plan.cfg.output_dir)
    assert out.parent == Path("runs") and out.name not in ("", ".", "..") and not out.name.startswith(".")
    assert len(out.name) <= 80
    assert (tmp_path / out).resolve().parent == (tmp_path / "runs").resolve()


# --- 15: small ones ---
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


def test_status_counts_prompts_not_steps_in_an_evaluation(tmp_path, capsys):
    from ark_trainer.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=True, interval=1)
    monitor.start(task_name="t")
    with monitor.stage("eval_grpo", total=89):
        monitor.progress(89)
        monitor.write_heartbeat()
        assert main(["status", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "prompt 89/89" in out and "step 89/89" not in out
    with monitor.stage("grpo", total=40):
        monitor.progress(12)
        monitor.write_heartbeat()
        assert main(["status", str(tmp_path)]) == 0
    assert "step 12/40" in capsys.readouterr().out
    monitor.finish("finished")


def test_stage_summary_after_a_resume_counts_this_attempts_steps():
    from ark_trainer.runtime.monitor import console_line

    line = console_line("grpo", 30, 30, {"train_runtime": 67.0}, start=10)
    assert line == "grpo: 20 steps (resumed from step 10) in 67.0s"
    assert console_line("grpo", 30, 30, {"train_runtime": 67.0}) == "grpo: 30 steps in 67.0s"


@pytest.mark.parametrize("rate,threshold", [(0.297, 0.3), (0.3049, 0.3), (0.2999, 0.3), (0.6951, 0.7)])
def test_auto_reason_never_prints_equal_numbers_for_different_values(rate, threshold):
    from ark_trainer.stages.probe import ProbeResult, decide

    _, reason = decide(ProbeResult(8, 4, 0.8, rate, 0.2, 0.5, threshold, 0.9))
    shown = reason.split("pass rate ")[1].split(" ")[0]
    limit = reason.split("--auto_min_pass_rate ")[1].split(")")[0].split(",")[0].split(" ")[0]
    assert shown != limit, reason


# --- 7 and 11: a live run holds the folder; signals end it as failed ---
def wait_for(predicate, timeout: float = 240.0) -> None:
    t0 = time.time()
    while not predicate():
        assert time.time() - t0 < timeout, "timed out"
        time.sleep(0.2)


def live_state(out: Path) -> dict:
    try:
        return json.loads((out / "heartbeat.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.mark.slow
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_second_start_is_refused_and_a_signal_ends_the_run_as_failed(assets, tmp_path, sig, code):
    out = tmp_path / "run"
    log = (tmp_path / "first.log").open("w")  # a pipe nobody reads would fill up and block the run
    first = child(["train", *train_flags(assets, out, steps=5000, save_steps=5)], stdout=log, stderr=log)
    live = ("heartbeat.json", "events.jsonl", "logs", "grpo")  # what the live run itself keeps writing
    try:
        # with a checkpoint saved, the same command would "resume" the live run (the reviewed defect)
        wait_for(lambda: (out / "grpo" / "checkpoint-5" / MARKER).is_file())
        before = {k: v for k, v in tree(out).items() if not k.startswith(live)}
        second = child(
            ["train", *train_flags(assets, out, steps=5000, save_steps=5)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _, err = second.communicate(timeout=120)
        finally:
            second.kill()
        assert second.returncode == 2, err
        lines = err.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0] and "in use by a live run" in lines[0], err
        assert {k: v for k, v in tree(out).items() if not k.startswith(live)} == before  # nothing written
        first.send_signal(sig)
        first.wait(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == code, (tmp_path / "first.log").read_text()[-3000:]
    assert main(["status", str(out)]) == 1
    assert read_status_state(out) == "failed"
    events = read_jsonl(out / "events.jsonl")
    assert events[-1]["event"] == "run_end" and events[-1]["status"] == "failed"
    assert any(e["event"] == "error" for e in events)


def read_status_state(out: Path) -> str:
    from ark_trainer.runtime.monitor import read_status

    return read_status(out)[0]


def test_a_stale_lock_of_a_dead_run_is_taken_over(tmp_path):
    from ark_trainer.runtime.runlock import LOCK_NAME, RunLock, check_free

    out = tmp_path / "run"
    out.mkdir()
    (out / LOCK_NAME).write_text(json.dumps({"pid": 2**22 + 12345, "host": "gone", "started_at": "then"}))
    check_free(out)  # nobody holds it: no refusal
    with RunLock(out):
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["pid"] == os.getpid()
    # a lock held by another live process is refused, naming it
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import sys,time; sys.path.insert(0, {SRC!r}); from ark_trainer.runtime.runlock import RunLock; "
         f"l = RunLock(__import__('pathlib').Path({str(out)!r})); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        from ark_trainer.errors import UserError

        with pytest.raises(UserError, match=f"pid {holder.pid} "):
            check_free(out)
        with pytest.raises(UserError, match=f"pid {holder.pid} "):
            RunLock(out)
    finally:
        holder.kill()
        holder.wait()
    with RunLock(out):  # its death released the lock
        pass


def test_a_kill_while_the_report_is_built_does_not_leave_a_finished_run(assets, tmp_path, monkeypatch):
    import ark_trainer.report as report
    from ark_trainer.runtime.monitor import read_status

    out = tmp_path / "run"
    seen = {}
    real = report.build_report

    def spy(run_dir):
        seen["state"] = read_status(run_dir)[0]  # what a SIGKILL now would leave behind
        seen["beat"] = json.loads((Path(run_dir) / "heartbeat.json").read_text())["state"]
        return real(run_dir)

    monkeypatch.setattr(report, "build_report", spy)
    assert main(["train", *train_flags(assets, out, steps=2)]) == 0
    assert seen == {"state": "running", "beat": "running"}
    assert read_status(out)[0] == "finished"


def test_a_full_disk_ends_the_run_as_failed(assets, tmp_path):
    from ark_trainer.runtime.monitor import Monitor

    monitor = Monitor(tmp_path, heartbeat=True, interval=10)
    monitor.start(task_name="t")

    def no_space(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monitor.write_heartbeat = no_space  # what a full disk does to the atomic rewrite (a new temp file)
    monitor.finish("failed")
    assert read_status_state(tmp_path) == "failed"


# --- 9 and 10: resume ---
@pytest.mark.slow
def test_a_kill_after_grpos_final_save_still_evaluates_grpo_on_resume(assets, tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", *train_flags(assets, out, steps=2, eval_auto=True, eval_dataset=assets["eval"])]
    proc = child(
        args, fault="kill_after_stage:2", stage="grpo", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    assert (out / "model" / "model.safetensors").is_file() and not (out / "eval" / "grpo.json").exists()
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
    events = read_jsonl(out / "events.jsonl")
    assert [e["stage"] for e in events if e["event"] == "stage_end" and e["stage"] == "eval_grpo"] == [
        "eval_grpo"
    ]
    assert (out / "eval" / "grpo.json").is_file()
    assert "Final model (GRPO)" in (out / "report.md").read_text()


class _Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.environ.get('ARK_EVIL_MARK', '/tmp/ark-evil-mark')}",))


@pytest.mark.slow
def test_a_poisoned_checkpoint_is_refused_in_one_line_on_resume(assets, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    proc = child(["train", *train_flags(assets, out)], fault="kill_after_step:3", stage="grpo",
                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)  # fmt: skip
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL, err[-3000:]
    ckpt = out / "grpo" / "checkpoint-2"
    mark = tmp_path / "pwned"
    monkeypatch.setenv("ARK_EVIL_MARK", str(mark))
    for name, payload in (("rng_state.pth", pickle.dumps(_Evil())), ("optimizer.pt", b"\x00garbage" * 10)):
        original = (ckpt / name).read_bytes()
        (ckpt / name).write_bytes(payload)
        lines = refused(capsys, ["train", "--output_dir", str(out), "--resume", "True"])
        assert len(lines) == 1 and str(ckpt / name) in lines[0] and "delete the folder" in lines[0], lines
        assert "weights_only=False" not in lines[0] and not mark.exists()
        (ckpt / name).write_bytes(original)
    assert main(["train", "--output_dir", str(out), "--resume", "True"]) == 0
