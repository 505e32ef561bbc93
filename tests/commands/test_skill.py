"""``ark-trainer skill install`` (``app/commands/skill.py``): the skill is put where OpenClaw looks, and the real
OpenClaw CLI lists it as ready once ``ark-trainer`` is on PATH.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ark_trainer.cli import main
from tests.conftest import ROOT


@pytest.mark.slow
def test_skill_install_shows_ready_in_openclaw(openclaw, capsys, tmp_path, monkeypatch):
    import yaml

    text = (ROOT / "src/ark_trainer/services/openclaw/skill/SKILL.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front["name"] == "ark-trainer" and front["metadata"]["openclaw"]["requires"]["bins"] == [
        "ark-trainer"
    ]
    for command in ("doctor", "plan", "run", "status", "report", "deploy OUT", "deploy --rollback"):
        assert f"ark-trainer {command}" in text
    assert main(["skill", "install"]) == 0
    target = Path(os.environ["OPENCLAW_STATE_DIR"]) / "skills" / "ark-trainer" / "SKILL.md"
    assert target.read_text() == text

    def listed() -> dict:
        data = openclaw.run_json(["skills", "list", "--json"], timeout=120)
        return next(s for s in data["skills"] if s["name"] == "ark-trainer")

    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    assert listed()["eligible"] is False and listed()["missing"]["bins"] == ["ark-trainer"]
    shim = bindir / "ark-trainer"
    shim.write_text("#!/bin/sh\nexit 0\n")
    shim.chmod(0o755)
    skill = listed()
    assert skill["eligible"] is True and skill["source"] == "openclaw-managed"
