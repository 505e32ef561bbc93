"""The data tests' fixtures: a tiny real model with a small window."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import save_tiny_qwen


@pytest.fixture(scope="module")
def small_window_model(tmp_path_factory) -> Path:
    """A tiny real model whose window is 256 positions (192 prompt tokens with 64 completion tokens)."""
    return save_tiny_qwen(tmp_path_factory.mktemp("tiny_model"), max_position_embeddings=256)
