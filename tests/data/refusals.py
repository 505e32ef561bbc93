"""Hostile data files and their refusals: each is one ``file:line`` refusal, never a traceback or a silent
reinterpretation. The loader is called directly for each kind of problem (``refusal``); the command line
(``python -m ark_trainer train``, ``train``) for the ones a user meets first, with exit 2, one line and
nothing written.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ark_trainer.base.errors import UserError
from ark_trainer.data.loader import load_jsonl
from tests.conftest import run_cli as cli


def write_lines(path: Path, lines: list) -> Path:
    text = "\n".join(x if isinstance(x, str) else json.dumps(x, ensure_ascii=False) for x in lines) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def refusal(path: Path, flag: str = "--data_path") -> list[str]:
    with pytest.raises(UserError) as exc:
        load_jsonl(path, flag)
    return exc.value.messages


def train(model: Path, data: Path | str, out: Path, *extra: str) -> list[str]:
    """``train`` that must be refused: exit 2, no traceback, nothing under ``out``; returns stderr lines."""
    args = ["train", "--strategy", "RFT+GRPO", "--model_path", str(model), "--data_path", str(data)]
    args += [
        "--output_dir",
        str(out),
        "--max_train_steps",
        "2",
        "--batch_size",
        "2",
        "--num_generations",
        "2",
    ]
    result = cli(*args, *extra, cwd=out.parent)
    assert result.returncode == 2, (result.returncode, result.stdout[-2000:], result.stderr[-2000:])
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists(), "a refused run writes nothing"
    return result.stderr.strip().splitlines()
