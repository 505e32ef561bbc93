"""Shared test setup: every test runs with its own HOME, OpenClaw state and Hugging Face cache, offline."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the repository
# a file to append each test's wall and CPU seconds to, for finding the costly ones
CPU_LOG = os.environ.get("ARK_TEST_CPU_LOG")


def _cpu_seconds() -> float:
    """CPU seconds of this process and the children it has waited for (OpenClaw, the CLI, servers)."""
    return sum(
        usage.ru_utime + usage.ru_stime
        for usage in (resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN))
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Under ARK_TEST_CPU_LOG, append ``nodeid<TAB>wall<TAB>cpu`` per test (set-up and tear-down included): on
    2 cores the suite's length is its CPU, so this, not ``--durations``, says what to make cheaper."""
    if not CPU_LOG:
        yield
        return
    wall, cpu = time.monotonic(), _cpu_seconds()
    yield
    with open(CPU_LOG, "a", encoding="utf-8") as log:
        log.write(f"{item.nodeid}\t{time.monotonic() - wall:.2f}\t{_cpu_seconds() - cpu:.2f}\n")


# Long test files that only compute (training, no servers, users or clocks), longest first: they start the
# full run (scripts/test.sh, --dist loadfile: a file per worker, in collection order) instead of ending it,
# where one worker ran the 8-minute control alone while the other had finished. The other files follow in
# pytest-xdist's own order (the most tests first; scripts/test.sh passes --no-loadscope-reorder so that this
# order holds): running every file with slow tests first measured slower (docs/development.md), as the
# loop and OpenClaw runs, driven by the clock (users talking, polls, deadlines), then share the 2 cores.
# Only the order depends on this list: a stale entry costs balance, never a test.
FIRST_FILES = (
    "tests/stages/test_grpo_controls_shuffled.py",
    "tests/e2e/test_models_real.py",
    "tests/demo/test_agent_real.py",
    "tests/stages/test_grpo.py",
    "tests/stages/test_grpo_controls.py",
)


def pytest_collection_modifyitems(items):
    """:data:`FIRST_FILES` first, in its order, then the files with the most tests first (pytest-xdist's
    loadfile order); a file's tests stay together and in their order (stable sorts by file)."""
    files = [item.nodeid.split("::", 1)[0] for item in items]
    counts = {path: files.count(path) for path in set(files)}
    rank = {p: (0, FIRST_FILES.index(p)) if p in FIRST_FILES else (1, -counts[p]) for p in counts}
    order = sorted(range(len(items)), key=lambda i: rank[files[i]])
    items[:] = [items[i] for i in order]


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Point HOME, OPENCLAW_STATE_DIR and HF_HOME at temp dirs so no test reads or writes the user's own."""
    root = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(root / ".openclaw"))
    monkeypatch.setenv("HF_HOME", str(root / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENCLAW_CONFIG_PATH", raising=False)
    monkeypatch.setenv("ARK_OPENCLAW_AUTODEPLOY", "0")  # train --openclaw_env True starts no model server
    return root


def save_tiny_qwen(path, model_class: str = "Qwen2ForCausalLM", texts=(), **config):
    """Save a tiny random Qwen2 model (hidden 16, 1 layer) and a tokenizer trained on ``texts`` to ``path``."""
    import transformers
    from transformers import Qwen2Config

    from ark_trainer.app.demo.model import train_tokenizer

    tok = train_tokenizer(
        ["结论：违规 类型：辱骂 回复：抱歉", "hello world 你好", *texts] * 4, vocab_size=300
    )
    settings = {
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "max_position_embeddings": 256,
        **config,
    }
    cfg = Qwen2Config(
        vocab_size=len(tok), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id, **settings
    )
    getattr(transformers, model_class)(cfg).save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture
def openclaw():
    """The real OpenClaw CLI wrapper; skips when the CLI is missing, fails under ARK_REQUIRE_OPENCLAW=1 (CI)."""
    from ark_trainer.base.external import openclaw_cli as oc

    if oc.find_openclaw() is None:
        if os.environ.get("ARK_REQUIRE_OPENCLAW") == "1":
            pytest.fail("OpenClaw CLI not found; run scripts/setup_openclaw.sh (ARK_REQUIRE_OPENCLAW=1)")
        pytest.skip("OpenClaw CLI not installed (scripts/setup_openclaw.sh)")
    return oc


def run_cli(*args: str, cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    """``python -m ark_trainer ARGS`` in a child process, with the isolated HOME and state of this test."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, "-m", "ark_trainer", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


def tiny_qc_assets(root: Path) -> dict[str, Path]:
    """A tiny model and 12 QC rows (``train.jsonl``, the first 2 also as ``eval.jsonl``) for short real runs."""
    from ark_trainer.base.fileio import write_jsonl

    labels = ["无", "辱骂", "未致歉"]
    model = save_tiny_qwen(root / "model")
    rows = [
        {
            "question": f"客服：您好 {i}。顾客：订单{i}不对。",
            "label": labels[i % 3],
            "candidates": ["结论：违规 类型：辱骂"],
        }
        for i in range(12)
    ]
    write_jsonl(root / "train.jsonl", rows)
    write_jsonl(root / "eval.jsonl", rows[:2])
    return {"model": model, "train": root / "train.jsonl", "eval": root / "eval.jsonl", "root": root}


@pytest.fixture(scope="module")
def assets(tmp_path_factory) -> dict[str, Path]:
    """``tiny_qc_assets``, made once per test module (a module that defines its own ``assets`` uses that)."""
    return tiny_qc_assets(tmp_path_factory.mktemp("assets"))


def refused(capsys, argv: list[str]) -> list[str]:
    """Run ``argv`` in-process; assert exit 2 with only one-line ``error:`` messages and no traceback; return
    the lines (the promise for bad input: one line naming the file, field or flag, nothing written)."""
    from ark_trainer.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines and all(line.startswith("error: ") for line in lines), err
    assert "Traceback" not in err
    return lines


def train_argv(a: dict, out: Path, *extra: str) -> list[str]:
    """``train`` on ``tiny_qc_assets`` into ``out``, two steps on CPU, plus ``extra``."""
    return [
        "train", "--model_path", str(a["model"]), "--data_path", str(a["train"]), "--output_dir", str(out),
        "--device", "cpu", "--max_train_steps", "2", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="session")
def smollm2_converted(tmp_path_factory) -> Path:
    """The SmolLM2 GGUF (tests/model_files.py) converted once, as ``train`` converts it into OUT/base_model,
    for every test module of every pytest-xdist worker of this run (under a lock, in the workers' shared
    temp folder): the real-model tests that do not check the conversion copy it with :func:`converted_base`,
    and ``train``/``demo`` reuse it (the same sha256) instead of converting the 98 MB file again."""
    import fcntl

    from ark_trainer.core.models.source import resolve_model
    from tests.model_files import smollm2_gguf

    gguf = smollm2_gguf()
    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    folder = root / "smollm2-converted"
    with open(root / "smollm2-converted.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker converts; the other waits, then finds it done
        resolve_model(str(gguf), convert_dir=folder)  # converts unless the folder already holds this file
    return folder


def converted_base(converted: Path, out: Path) -> Path:
    """``out``, a new run folder of ours holding ``converted`` as its ``base_model`` (a copy: the demo writes
    its chat template there); returns ``out``."""
    import shutil

    from ark_trainer.core.folders import claim_folder

    shutil.copytree(converted, claim_folder(out) / "base_model")
    return out


def resume_check(cfg, out, stages) -> bool:
    """``core/runtime/resume.check_resume`` for the config ``cfg``: its flags and its class, as ``prepare``
    hands them."""
    from ark_trainer.core.runtime.resume import check_resume

    return check_resume(cfg.resume, cfg.flag_items(), type(cfg), out, stages)
