"""``core/runtime/ticker.py``: a line every few seconds while a silent step runs; ``install`` and ``deploy`` use it;
``scripts/setup.sh`` (``scripts/demo.sh``) does the same in bash (``scripts/ticking.sh``)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from ark_trainer.app.commands import install
from ark_trainer.core.runtime.ticker import ticking
from tests.conftest import ROOT


def test_a_silent_block_gets_a_line_every_interval_and_none_after_it():
    said: list[str] = []
    with ticking(said.append, "loading the model", every=0.05):
        time.sleep(0.28)
    n = len(said)
    assert 3 <= n <= 6 and all(line.startswith("  ... still loading the model (") for line in said)
    time.sleep(0.15)
    assert len(said) == n  # the block has ended: no more lines
    quick: list[str] = []
    with ticking(quick.append, "x", every=5):
        pass
    assert quick == []  # a quick step says nothing


def test_a_failing_block_still_stops_the_ticks():
    said: list[str] = []
    with pytest.raises(RuntimeError), ticking(said.append, "x", every=0.05):
        raise RuntimeError("boom")
    time.sleep(0.12)
    assert said == []


def test_an_install_step_that_runs_long_says_it_is_still_running(monkeypatch, capsys):
    monkeypatch.setattr(install, "INSTALL_TICK_SECONDS", 0.1)
    step = {"argv": [sys.executable, "-c", "import time; time.sleep(0.45)"]}
    install.run_step(step)
    out = capsys.readouterr().out
    assert out.count(f"... still running {install.step_name(step)}") >= 2
    assert (
        install.step_name({"argv": [sys.executable, "-m", "pip", "install", "-r", "r.txt"]}) == "pip install"
    )
    assert install.step_name({"argv": ["npm", "install", "--prefix", "x"]}) == "npm install"


def test_setup_sh_ticks_each_pip_install():
    script = (ROOT / "scripts" / "setup.sh").read_text()
    installs = [line for line in script.splitlines() if "pip install" in line]
    assert installs and all(line.startswith("ticking ") for line in installs)
    assert ". scripts/ticking.sh" in script
    done = subprocess.run(
        ["bash", "-c", ". scripts/ticking.sh; ticking sleep 2.5; echo status $?; ticking false || echo failed"],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "ARK_TICK_SECONDS": "1"}, capture_output=True, text=True,
        timeout=30,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert sum(line.startswith("  ... still installing (") for line in lines) >= 2, done.stdout
    assert "status 0" in lines and lines[-1] == "failed"  # the command's exit status comes through
