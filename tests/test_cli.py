"""The command line (``cli.py``): ``plan --json`` into a closed pipe ends quietly."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.tiny_runs import SRC


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
