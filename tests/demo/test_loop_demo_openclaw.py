"""``ark-trainer demo --task loop`` with a share of its sessions through the real ``openclaw agent --local``
(slow tier), at the tiny sizes of ``test_loop_demo.py``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ark_trainer.app.demo.loop_run import run_loop_demo
from ark_trainer.services.deploy.policy import OPENCLAW_IDENTITY
from tests.demo.test_loop_demo import TINY, _recorded


@pytest.mark.slow
def test_a_share_of_the_loop_demos_sessions_go_through_the_real_openclaw_cli(openclaw, tmp_path):
    out = tmp_path / "demo"
    fig = run_loop_demo(out, rounds=1, poison_share=0.0, openclaw_share=0.3, sizes=TINY)
    serving = fig["serving"]
    assert serving["openclaw_sessions"] >= 1 and serving["failed"] == 0
    assert serving["openclaw_idle"]["n"] + serving["openclaw_training"]["n"] >= 2  # a session is two turns
    # the agent's turns were recorded from OpenClaw's own requests, in the demo's OpenClaw state
    agent_turns = [t for t in _recorded(out) if "sessionId=demo-" in json.dumps(t, ensure_ascii=False)]
    assert agent_turns and OPENCLAW_IDENTITY in agent_turns[0]["messages"][0]["content"]
    assert str(out / "openclaw") in json.dumps(agent_turns[0], ensure_ascii=False)  # its workspace
    assert not (Path(os.environ["HOME"]) / ".openclaw" / "openclaw.json").exists()
