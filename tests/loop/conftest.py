"""The fixtures of the loop's tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def stranger():
    """A live process that is not the loop's (what a crashed supervisor's pid may belong to later)."""
    import subprocess

    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()
