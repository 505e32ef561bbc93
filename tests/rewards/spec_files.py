"""Grader spec files written for a test (``rewards.yaml`` in its folder)."""

from __future__ import annotations

from pathlib import Path


def grader_spec(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "rewards.yaml"
    spec.write_text("graders:\n" + body, encoding="utf-8")
    return spec
