"""Shared test setup: every test runs with its own HOME, OpenClaw state and Hugging Face cache, offline."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch):
    """Point HOME, OPENCLAW_STATE_DIR and HF_HOME at temp dirs so no test reads or writes the user's own."""
    root = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("OPENCLAW_STATE_DIR", str(root / ".openclaw"))
    monkeypatch.setenv("HF_HOME", str(root / ".cache" / "huggingface"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("OPENCLAW_CONFIG_PATH", raising=False)
    return root
