"""ark-trainer and the real OpenClaw CLI: doctor, install, skill, deploy → agent → collect → rollback.

OpenClaw comes from ``scripts/setup_openclaw.sh`` (``.tools/``); with ``ARK_REQUIRE_OPENCLAW=1`` (set by
``scripts/test.sh``) a missing CLI fails these tests instead of skipping them. conftest gives every
test its own HOME and OPENCLAW_STATE_DIR.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ark_trainer.cli import main
from ark_trainer.external import openclaw_cli as oc

ROOT = Path(__file__).resolve().parents[2]


def _doctor(capsys) -> tuple[int, dict]:
    code = main(["doctor", "--json"])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_doctor_json_sees_openclaw_and_its_config(openclaw, capsys, isolated_home):
    config = isolated_home / ".openclaw" / "openclaw.json"
    config.parent.mkdir(parents=True)
    config.write_text("// written by the test\n{ gateway: { port: 19001, }, }\n")
    code, doc = _doctor(capsys)
    checks = {c["name"]: c for c in doc["checks"]}
    assert doc["schema"] == "ark-trainer.doctor/1" and code == 0 and doc["ok"] is True
    assert set(checks) == {
        "python", "torch", "cuda", "disk", "libraries", "serving", "openclaw_cli", "openclaw_config",
        "openclaw_config_valid", "openclaw_auth", "openclaw_gateway",
    }  # fmt: skip
    assert all(set(c) == {"name", "status", "detail", "fix"} for c in doc["checks"])
    assert checks["openclaw_cli"]["status"] == "ok" and "OpenClaw 2026" in checks["openclaw_cli"]["detail"]
    assert (
        str(config) in checks["openclaw_config"]["detail"]
        and "OPENCLAW_STATE_DIR" in checks["openclaw_config"]["detail"]
    )
    assert checks["openclaw_config_valid"]["status"] == "ok"
    # a default model without credentials is a warning with a fix, not a failure
    assert checks["openclaw_auth"]["status"] == "warn" and checks["openclaw_auth"]["fix"]
    assert checks["openclaw_gateway"]["status"] == "warn"

    config.write_text('{ "gateway": { "port": "not a port" }, "noSuchKey": 1 }\n')  # schema violation
    code, doc = _doctor(capsys)
    bad = {c["name"]: c for c in doc["checks"]}["openclaw_config_valid"]
    assert code == 1 and doc["ok"] is False and bad["status"] == "fail" and bad["fix"]


def test_doctor_sizes_the_disk_need_from_the_model(tmp_path, monkeypatch):
    from collections import namedtuple

    from ark_trainer.openclaw import doctor

    model = tmp_path / "m"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"\0" * 1000)
    need = doctor.disk_needed(str(model), checkpoints=2)
    assert need == int(1000 * (2 + 12) * 1.1)
    usage = namedtuple("usage", "total used free")
    for free, status in ((need - 1, "fail"), (need + 1, "warn"), (3 * need, "ok")):
        monkeypatch.setattr(doctor.shutil, "disk_usage", lambda _p, f=free: usage(0, 0, f))
        check = doctor.check_disk(str(tmp_path / "out"), str(model))
        assert check.status == status and "needs about" in check.detail
        assert bool(check.fix) == (status != "ok")


def test_install_dry_run_prints_the_exact_commands(capsys):
    assert main(["install", "--dry-run", "--gpu", "--openclaw"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    script = (ROOT / "scripts" / "setup_openclaw.sh").read_text()
    node_pkg = re.search(r"ARK_NODE_PKG:-(\S+)}", script).group(1)
    openclaw_pkg = re.search(r"ARK_OPENCLAW_PKG:-(\S+)}", script).group(1)
    assert (node_pkg, openclaw_pkg) == (oc.NODE_PKG, oc.OPENCLAW_PKG)  # one set of pins
    assert lines[0].endswith(
        "-m pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
    )
    assert lines[1].endswith(f"-m pip install -r {ROOT / 'requirements.txt'}")
    assert lines[3].endswith("-m pip install vllm deepspeed torch==2.13.0")
    assert any(line.startswith("npm install") and line.endswith(node_pkg) for line in lines)
    assert any(" npm install " in line and line.endswith(openclaw_pkg) for line in lines)
    assert main(["install", "--dry-run"]) == 0
    cpu = capsys.readouterr().out
    assert "vllm" not in cpu and "npm" not in cpu and "index-url" not in cpu


@pytest.mark.slow
def test_skill_install_shows_ready_in_openclaw(openclaw, capsys, tmp_path, monkeypatch):
    import yaml

    text = (ROOT / "src/ark_trainer/openclaw/skill/SKILL.md").read_text()
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
