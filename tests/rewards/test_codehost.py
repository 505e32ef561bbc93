"""Grader code can neither end, hang nor outlive the command (``rewards/codehost.py``, ``rewards/guards.py``).

Python graders run in a process of their own, in a process group of its own: ``sys.exit``,
``KeyboardInterrupt`` or a crash in their code is a grader error in one line (exit 2); loading them has the
same time limit as grading; the processes they start are gone when the command ends, also when it is killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ark_trainer.cli import main
from tests.rewards.attacks import one_error_line

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "answers.jsonl"
    data.write_text(
        '{"prompt": "hi", "completion": "hello there"}\n{"prompt": "yo", "completion": "ok"}\n',
        encoding="utf-8",
    )
    return data


def _spec(tmp_path: Path, source: str) -> Path:
    spec = tmp_path / "rewards.yaml"
    body = textwrap.indent(textwrap.dedent(source).strip() + "\n", " " * 6)
    spec.write_text(f"graders:\n  - name: p\n    type: python\n    source: |\n{body}", encoding="utf-8")
    return spec


def _score(tmp_path: Path, spec: Path, capsys, timeout: str = "3") -> tuple[int, str, str]:
    argv = [
        "score",
        "--reward_config",
        str(spec),
        "--data_path",
        str(_data(tmp_path)),
        "--reward_timeout",
        timeout,
    ]
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def _gone(pid: int) -> bool:
    """The process has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


ENDINGS_AT_GRADING = [
    "sys.exit(0)",
    "sys.exit('bye')",
    "raise SystemExit(3)",
    "raise KeyboardInterrupt",
    "os._exit(0)",
    "os.kill(os.getpid(), signal.SIGKILL)",
    "os.kill(os.getpid(), signal.SIGINT)",
]


@pytest.mark.parametrize("ending", ENDINGS_AT_GRADING)
def test_grader_code_that_ends_its_process_while_grading_is_one_grader_error(tmp_path, capsys, ending):
    spec = _spec(
        tmp_path, f"import os, signal, sys\ndef grade(sample, item):\n    {ending}\n    return 1.0\n"
    )
    code, out, err = _score(tmp_path, spec, capsys)
    line = one_error_line(err)
    assert code == 2 and out == "", (out, err)
    assert line.startswith(f"error: {spec}:4: python grader 'p' ended its process ("), line


@pytest.mark.parametrize(
    ("ending", "said"),
    [
        ("sys.exit(0)", "the code ended its process while loading (SystemExit: 0)"),
        ("raise KeyboardInterrupt", "the code ended its process while loading (KeyboardInterrupt)"),
        ("os._exit(4)", "the code ended its process while loading (its process exited with code 4)"),
        ("while True:\n    pass", "loading the code took longer than --reward_timeout 2 s; it must finish"),
        (
            "import time\ntime.sleep(600)",
            "loading the code took longer than --reward_timeout 2 s; it must finish",
        ),
    ],
)
def test_grader_code_that_ends_or_hangs_while_loading_is_refused_in_one_line(tmp_path, capsys, ending, said):
    spec = _spec(tmp_path, f"import os, sys\n{ending}\ndef grade(sample, item):\n    return 1.0\n")
    started = time.monotonic()
    code, out, err = _score(tmp_path, spec, capsys, timeout="2")
    assert code == 2 and out == ""
    assert one_error_line(err) == f"error: {spec}:4: source: {said}"
    assert time.monotonic() - started < 30  # the load's limit, not the sleep


def test_an_imported_grader_that_hangs_at_import_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "slow_graders.py").write_text("while True:\n    pass\ndef grade(s, i):\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "rewards.yaml"
    spec.write_text("graders:\n  - name: p\n    type: python\n    function: slow_graders:grade\n")
    code, _, err = _score(tmp_path, spec, capsys, timeout="1.5")
    assert code == 2 and one_error_line(err) == (
        f"error: {spec}:4: function: loading the code took longer than --reward_timeout 1.5 s; it must finish"
    )
    sys.modules.pop("slow_graders", None)


def test_a_grader_that_hangs_on_one_answer_is_skipped_there_and_grades_the_rest(tmp_path, capsys):
    spec = _spec(
        tmp_path,
        """
        def grade(sample, item):
            while "hello" in sample["output_text"]:
                pass
            print("graded", sample["output_text"])  # the code's prints go to stderr, never to stdout
            return 0.5
        """,
    )
    code, out, err = _score(tmp_path, spec, capsys, timeout="1")
    assert code == 0 and "graded ok" in err and "graded" not in out
    assert "p                        1.00       1/2  0.500" in out
    assert "1 answers skipped" in out and "timeout" in out


def test_grader_code_that_prints_keeps_the_json_summary_clean(tmp_path, capsys):
    import json

    spec = _spec(tmp_path, "print('loading')\ndef grade(sample, item):\n    print('hi')\n    return 1.0\n")
    data = _data(tmp_path)
    assert main(["score", "--reward_config", str(spec), "--data_path", str(data), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["n_prompts"] == 2 and "loading" in out.err


SPAWNS = """
import subprocess
def _start(tag):
    child = subprocess.Popen(["sleep", "300"])  # holds the host's stdout and stderr, as a child does
    with open({pids!r}, "a") as fh:
        fh.write(f"{{child.pid}}\\n")
_start("load")
def grade(sample, item):
    _start("grade")
    {then}
    return 1.0
"""


def _command(spec: Path, data: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ark_trainer",
        "score",
        "--reward_config",
        str(spec),
        "--data_path",
        str(data),
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": SRC, "OMP_NUM_THREADS": "1"}


def test_processes_a_grader_starts_end_with_the_command_and_never_hold_its_output(tmp_path):
    pids = tmp_path / "pids"
    spec = _spec(tmp_path, SPAWNS.format(pids=str(pids), then="pass"))
    done = subprocess.run(
        _command(spec, _data(tmp_path)), capture_output=True, text=True, timeout=120, env=_env()
    )
    assert done.returncode == 0 and "scored 2 answers" in done.stdout, done.stderr  # output not held open
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) >= 2
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(p) for p in started), started


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM])
def test_processes_a_grader_starts_end_when_the_command_is_killed(tmp_path, how):
    pids = tmp_path / "pids"
    spec = _spec(tmp_path, SPAWNS.format(pids=str(pids), then="while True:\n        pass"))
    command = subprocess.Popen(_command(spec, _data(tmp_path)), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(pids.read_text().split() if pids.exists() else []) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # loaded, and grading (stuck) with its second child started
        command.send_signal(how)
        command.wait(timeout=30)
    finally:
        command.kill()
    started = [int(p) for p in pids.read_text().split()]
    deadline = time.monotonic() + 10
    while not all(_gone(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(started) >= 2 and all(_gone(p) for p in started), started


def test_a_rule_that_ends_the_process_is_one_grader_error(tmp_path, capsys, monkeypatch):
    (tmp_path / "ending_rules.py").write_text(
        "import sys\ndef bye(prompts, completions, **kw):\n    sys.exit(0)\n"
        "def stop(prompts, completions, **kw):\n    raise KeyboardInterrupt\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for rule in ("bye", "stop"):
        spec = tmp_path / "rewards.yaml"
        spec.write_text(f"graders:\n  - name: r\n    type: rule\n    rule: 'ending_rules:{rule}'\n")
        code, out, err = _score(tmp_path, spec, capsys)
        assert code == 2 and out == ""
        assert one_error_line(err).startswith("error: reward 'r' tried to end the process ("), err
    sys.modules.pop("ending_rules", None)


@pytest.mark.parametrize(
    ("name", "module", "said"),
    [  # a sleep, not a busy loop: the stuck import's thread stays in this test process
        ("rule_sleeps", "import time\ntime.sleep(600)\n", "took longer than --reward_timeout 1.5 s"),
        ("rule_exits", "import sys\nsys.exit(5)\n", "ended the process (SystemExit: 5)"),
        ("rule_stops", "raise KeyboardInterrupt\n", "ended the process (KeyboardInterrupt)"),
    ],
)
def test_a_rule_module_that_hangs_or_ends_at_import_is_refused_in_one_line(
    tmp_path, capsys, monkeypatch, name, module, said
):
    (tmp_path / f"{name}.py").write_text(module + "def r(prompts, completions, **kw):\n    return [1.0]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = tmp_path / "rewards.yaml"
    spec.write_text(f"graders:\n  - name: r\n    type: rule\n    rule: '{name}:r'\n")
    said = f"importing {name!r} {said}"
    try:
        code, out, err = _score(tmp_path, spec, capsys, timeout="1.5")
    finally:
        sys.modules.pop(name, None)
    assert code == 2 and out == "" and one_error_line(err) == f"error: {spec}:4: rule: {said}"


def test_a_forked_copy_of_a_grader_starts_its_own_host(tmp_path):
    from ark_trainer.rewards.spec import load_graders

    spec = _spec(tmp_path, "import os\ndef grade(sample, item):\n    return float(os.getppid() % 1000)\n")
    (grader,) = load_graders(spec, code_timeout=10)
    parent_host = grader.fn.host.proc.pid
    assert grader.fn(["p"], ["a"]) == [float(os.getpid() % 1000)]
    child = os.fork()
    if child == 0:  # the copy grades through a host of its own, never through its parent's pipes
        ok = grader.fn(["p"], ["a"]) == [float(os.getpid() % 1000)] and grader.fn.host.proc.pid != parent_host
        os._exit(0 if ok else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert grader.fn(["p"], ["b"]) == [float(os.getpid() % 1000)] and grader.fn.host.proc.pid == parent_host
