"""The tiny runs that test modules in different folders share.

- The tiny QC run of ``runtime/test_resume.py``: the module fixture ``assets`` (a tiny model and 12 rows),
  ``flags`` (the train flags of a short run), ``run_child`` (``train`` in a child process, with ``ARK_FAULT``)
  and ``weights`` (a saved model's tensors); reused by the bad-step, fault, dashboard, diagnose, precision
  and tracker tests (``from tests.tiny_runs import assets, flags``).
- The refused and the live ``train`` runs of the ranges, inputs, folders, monitor, run-lock and resume tests:
  ``base`` (``train`` on ``assets`` into a folder), ``train_flags`` (a short GRPO run), ``child`` (``train``
  in a child process that Ctrl-C and SIGTERM end as a user's would) and ``read_status_state``.
- ``TINY_AGENT``: the settings of the agent demo's tiny base model (``demo/test_agent_model.py``,
  ``demo/test_run.py`` and ``e2e/test_agent_demo_e2e.py``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tiny_qc_assets

SRC = str(Path(__file__).resolve().parents[1] / "src")

TINY_AGENT = {
    "hidden_size": 16,
    "num_layers": 1,
    "warmup_steps": 2,
    "n_warmup": 40,
    "vocab_size": 400,
    "batch_size": 8,
}


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    return tiny_qc_assets(tmp_path_factory.mktemp("resume_assets"))


def flags(a: dict, out: Path, strategy: str, steps: int = 4) -> list[str]:
    return [
        "--strategy", strategy, "--model_path", str(a["model"]), "--data_path", str(a["train"]),
        "--output_dir", str(out), "--max_train_steps", str(steps), "--rft_steps", str(steps if strategy != "GRPO" else 0),
        "--batch_size", "4", "--num_generations", "2", "--rft_num_samples", "2", "--max_completion_length", "6",
        "--rft_min_reward", "0", "--rft_learning_rate", "1e-2", "--grpo_learning_rate", "1e-2", "--dpo_learning_rate", "1e-2", "--warmup_ratio", "0.25",
        "--logging_steps", "1", "--save_steps", "2", "--save_total_limit", "2", "--eval_auto", "False",
        "--device", "cpu", "--heartbeat_interval", "1", "--seed", "7",
    ]  # fmt: skip


def run_child(
    args: list[str], fault: str = "", stage: str = "", timeout: float = 300
) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.update(ARK_FAULT=fault, ARK_FAULT_STAGE=stage)
    return subprocess.run(
        [sys.executable, "-m", "ark_trainer", "train", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


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


def read_status_state(out: Path) -> str:
    from ark_trainer.core.runtime.monitor import read_status

    return read_status(out)[0]
